package server

import (
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/shared/wire"
)

// OutcomeHeader names the outcome (Intake) of a batch or an abort.
const OutcomeHeader = "Blanket-Outcome"

// maxAbortBytes bounds an Abort request body.
const maxAbortBytes = 1 << 10

// maxBatchBytes bounds a Batch request body: the frame of a batch padded
// to 64 times the announced n_p (the relay raises n_p only on overflow).
func (s *Server) maxBatchBytes() int64 {
	s.mu.RLock()
	p := s.rounds().params // the operator may replace it between rounds
	s.mu.RUnlock()
	return int64(wire.BatchSize(p.BatchMessages(p.NP*64), int(p.Width)))
}

// Handler returns the HTTP API:
//
//	POST /v1/batch   relay, bearer token; body Batch frame, reply BatchReply frame
//	POST /v1/abort   relay, bearer token; body Abort frame, reply IntakeAnswer JSON
//	POST /v1/secagg/batch     relay, bearer token; body SecAggBatch frame, reply SecAggPrep frame
//	POST /v1/secagg/aggregate relay, bearer token; body SecAggAggregate frame, reply IntakeAnswer JSON
//	                 (all: the outcome as status code and OutcomeHeader, see Intake)
//	GET  /api/status current round, accuracy, loss, epsilon spent and target, fingerprint
//	GET  /api/rounds every round: status, accuracy, loss, epsilon by every method, n, n_p, check-in rate
//	GET  /api/key    public keys and fingerprint
//	GET  /api/model  current model parameters
//	GET  /healthz    "ok"
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/batch", s.serveBatch)
	mux.HandleFunc("POST /v1/abort", s.serveAbort)
	mux.HandleFunc("POST /v1/secagg/batch", s.serveSecAggBatch)
	mux.HandleFunc("POST /v1/secagg/aggregate", s.serveSecAggAggregate)
	mux.HandleFunc("GET /api/status", s.serveStatus)
	mux.HandleFunc("GET /api/rounds", s.serveRounds)
	mux.HandleFunc("GET /api/key", s.serveKey)
	mux.HandleFunc("GET /api/model", s.serveModel)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	s.registerWeb(mux) // the dashboard, /events, /operator and the browser assets (web.go)
	return mux
}

func (s *Server) readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, bool) {
	if !s.authorized(r) {
		s.log.Warn("unauthorized request", "path", r.URL.Path, "remote", r.RemoteAddr)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
		} else {
			http.Error(w, "reading body: "+err.Error(), http.StatusBadRequest)
		}
		return nil, false
	}
	return body, true
}

func (s *Server) serveBatch(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r, s.maxBatchBytes())
	if !ok {
		return
	}
	reply, intake, err := s.BatchIntake(body)
	if err != nil {
		s.log.Error("batch not processed", "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set(OutcomeHeader, string(intake))
	if reply.Round == 0 {
		// Not a batch frame at all, or round 0: no reply frame exists.
		http.Error(w, "invalid batch frame", intake.HTTPStatus())
		return
	}
	frame, merr := reply.MarshalBinary()
	if merr != nil {
		s.log.Error("encoding batch reply", "err", merr)
		w.Header().Del(OutcomeHeader)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(intake.HTTPStatus())
	w.Write(frame)
}

func (s *Server) serveAbort(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r, maxAbortBytes)
	if !ok {
		return
	}
	ans := s.AbortIntake(body)
	w.Header().Set(OutcomeHeader, string(ans.Outcome))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(ans.Outcome.HTTPStatus())
	json.NewEncoder(w).Encode(ans)
}

// Status is the JSON of GET /api/status.
type Status struct {
	// Round is the last finished round (0 before the first); OpenRound
	// the announced round awaiting its batch (0 if none).
	Round     int       `json:"round"`
	OpenRound int       `json:"open_round"`
	Deadline  time.Time `json:"deadline,omitzero"`
	RoundsOK  int       `json:"rounds_ok"`
	// Accuracy and Loss on the held-out test set after the last ok round.
	Accuracy *float64 `json:"accuracy"`
	Loss     *float64 `json:"loss"`
	// Epsilon is the ledger's spent epsilon at TargetDelta (the tightest
	// valid method without caveat, named by Method).
	Epsilon       float64 `json:"epsilon"`
	Delta         float64 `json:"delta"`
	Method        string  `json:"method"`
	TargetEpsilon float64 `json:"target_epsilon"`
	TargetDelta   float64 `json:"target_delta"`
	Fingerprint   string  `json:"fingerprint"`
	Running       bool    `json:"running"`
	// Paused: the operator paused the announcements; ModelResets counts
	// the operator's model resets (the ledger is never reset).
	Paused      bool `json:"paused"`
	ModelResets int  `json:"model_resets"`
	// NewClassRequested: the operator asked for a new class; the
	// supervisor (make run) restarts the aggregator with a fresh ledger.
	NewClassRequested bool `json:"new_class_requested,omitempty"`
	// RejectedBatches counts the batches rejected as invalid since the
	// start, by reason (malformed, duplicate seal, invalid release, ...).
	RejectedBatches map[string]int    `json:"rejected_batches,omitempty"`
	Stopped         string            `json:"stopped,omitempty"`
	Params          checkpoint.Params `json:"params"`
}

// Status returns the current status. It never waits for the accountant:
// the epsilon spent is the ledger's figure as recorded with the last
// charged round (the round record is committed after its charge), not a
// call into the ledger, whose lock a charge holds while it composes.
func (s *Server) Status() Status {
	te, td := s.ledger.Target() // fixed at start: no lock
	newClass := s.newClassRequested()
	s.mu.RLock()
	defer s.mu.RUnlock()
	st := Status{Round: s.st.Round, Delta: td, TargetEpsilon: te, TargetDelta: td,
		Fingerprint: s.fp, Running: s.stopped == "", Stopped: s.stopped, Params: s.st.Params,
		Paused: s.paused, ModelResets: len(s.st.ModelResets), NewClassRequested: newClass,
		RejectedBatches: maps.Clone(s.rejected)}
	if s.st.Open != nil {
		st.OpenRound, st.Deadline = s.st.Open.Round, s.st.Open.Deadline
	}
	for _, r := range s.st.History {
		if r.Status == checkpoint.StatusOK {
			st.RoundsOK++
			st.Accuracy, st.Loss = r.Accuracy, r.Loss
		}
		if r.EpsilonTightest != nil {
			st.Epsilon, st.Method = *r.EpsilonTightest, r.Method
		}
	}
	return st
}

// Rounds returns a copy of the round history.
func (s *Server) Rounds() []checkpoint.RoundRecord {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.st.History)
}

// Model returns a copy of the current model parameters.
func (s *Server) Model() []float64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.st.Model)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	enc.Encode(v)
}

func (s *Server) serveStatus(w http.ResponseWriter, r *http.Request) { writeJSON(w, s.Status()) }

func (s *Server) serveRounds(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, struct {
		Rounds []checkpoint.RoundRecord `json:"rounds"`
	}{s.Rounds()})
}

func (s *Server) serveKey(w http.ResponseWriter, r *http.Request) {
	// The key's own JSON form ({"sign", "hpke", "fingerprint"}), which
	// clients unmarshal and check (the fingerprint must match the keys).
	writeJSON(w, s.pub)
}

func (s *Server) serveModel(w http.ResponseWriter, r *http.Request) {
	s.mu.RLock()
	round := s.st.Round
	model := slices.Clone(s.st.Model)
	s.mu.RUnlock()
	sh := s.cfg.Test.Shape()
	writeJSON(w, struct {
		Round    int       `json:"round"`
		Features int       `json:"features"`
		Classes  int       `json:"classes"`
		Params   []float64 `json:"params"`
	}{round, sh.Features, sh.Classes, model})
}
