// Package api is the aggregator's HTTP API (docs/protocol.md): the
// relay-facing endpoints, authenticated by the relay-aggregator bearer
// token and answered with a definitive outcome (Intake), and the public
// JSON under /api. The handlers only authenticate, bound and read bodies
// and encode answers; a Backend (the server) does the work.
package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/aggregator/internal/dashboard"
	"github.com/blanket-fl/blanket/aggregator/internal/liveaudit"
	"github.com/blanket-fl/blanket/aggregator/internal/study"
	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/wire"
)

// Backend is what the API serves.
type Backend interface {
	// BatchIntake, AbortIntake, SecAggChunkIntake, SecAggResumeIntake,
	// SecAggCloseIntake and SecAggAggregateIntake process one
	// authenticated frame; a non-nil error is an internal failure
	// (answered 500: the relay resends).
	BatchIntake(frame []byte) (wire.BatchReply, Intake, error)
	AbortIntake(frame []byte) IntakeAnswer
	// SecAggChunkIntake and SecAggCloseIntake are the streaming
	// secure-summation requests (docs/secagg.md, "Streaming");
	// SecAggResumeIntake asks for a chunk's verdicts again, for a relay
	// that took a round over from its killed owner ("Crash safety").
	SecAggChunkIntake(frame []byte) (SecAggAnswer, error)
	SecAggResumeIntake(frame []byte) (SecAggAnswer, error)
	SecAggCloseIntake(frame []byte) (SecAggAnswer, error)
	SecAggAggregateIntake(frame []byte) IntakeAnswer
	// BodyLimits bounds the request bodies for the current round
	// configuration.
	BodyLimits() Limits
	Status() Status
	Rounds() []checkpoint.RoundRecord
	// Audit is the live privacy audit of round r's configuration (nil if
	// unknown to this process).
	Audit(r int) *liveaudit.Status
	ModelView() Model
	PublicKey() envelope.PublicKey
}

// Limits bound the relay's request bodies.
type Limits struct {
	Batch, SecAggChunk, SecAggAggregate int64
}

// MaxAbortBytes bounds an Abort request body.
const MaxAbortBytes = 1 << 10

// Status is the JSON of GET /api/status.
type Status struct {
	// Round is the last finished round (0 before the first); OpenRound
	// the announced round awaiting its batch (0 if none).
	Round     int       `json:"round"`
	OpenRound int       `json:"open_round"`
	Deadline  time.Time `json:"deadline,omitzero"`
	// Waiting says, in words, what the open round waits for when it is
	// not the volunteers (a charged secure-summation round whose relay
	// does not answer); empty otherwise.
	Waiting  string `json:"waiting,omitempty"`
	RoundsOK int    `json:"rounds_ok"`
	// Accuracy and Loss on the held-out test set after the last ok round.
	Accuracy *float64 `json:"accuracy"`
	Loss     *float64 `json:"loss"`
	// AccuracySource says where Accuracy comes from: "public_holdout"
	// (the task's public test data), "volunteers_private" (no public
	// test data; the rounds count the model's correct and evaluated rows
	// on the volunteers' own devices as noisy secure sums, shared/counts:
	// the dashboard shows that accuracy with its interval, Accuracy stays
	// null) or "none" (neither: accuracy cannot be shown).
	AccuracySource string `json:"accuracy_source"`
	// Task names the task being learned (task.Task.Name) and its title.
	Task      string `json:"task,omitempty"`
	TaskTitle string `json:"task_title,omitempty"`
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
	RejectedBatches map[string]int `json:"rejected_batches,omitempty"`
	Stopped         string         `json:"stopped,omitempty"`
	// Audit is the live privacy audit of the current round configuration
	// (liveaudit: an empirical lower bound on one round's ε next to the
	// per-round charge, or why there is none).
	Audit  *liveaudit.Status `json:"audit,omitempty"`
	Params checkpoint.Params `json:"params"`
	// ServerOptimizer is the server's step of the current configuration's
	// rounds, as announced with them (rounds.Machine.ServerStep): "sgd",
	// or "momentum" (FedAvgM, β ServerMomentum; secure summation only), at
	// learning rate ServerLR.
	ServerOptimizer string  `json:"server_optimizer"`
	ServerMomentum  float64 `json:"server_momentum,omitempty"`
	ServerLR        float64 `json:"server_lr"`
	// LastAbort is the latest round that ended without a model update
	// because the relay aborted it or nothing arrived in time, when no
	// round updated the model since (nil otherwise): why, in numbers and
	// in words, for the dashboard and the terminal.
	LastAbort *Abort `json:"last_abort,omitempty"`
}

// Abort says why a round ended without updating the model.
type Abort struct {
	Round int `json:"round"`
	// Status is the round's (checkpoint.StatusAborted or
	// StatusAbandoned) and Reason the record's detail ("below min batch",
	// "relay restart", ...).
	Status string `json:"status"`
	Reason string `json:"reason"`
	// Received is the complete reports the relay had at the deadline,
	// CheckedIn the volunteers that checked in, Expected those connected
	// when the round was announced, MinBatch the reports a round needs.
	Received  int `json:"received"`
	CheckedIn int `json:"checked_in"`
	Expected  int `json:"expected"`
	MinBatch  int `json:"min_batch"`
	// Timeout is the round's time limit in seconds.
	Timeout float64 `json:"timeout"`
	// Message says what happened and Advice what to do, in plain words.
	Message string `json:"message"`
	Advice  string `json:"advice,omitempty"`
}

// RoundRow is one round of GET /api/rounds: its record and the live
// privacy audit of the configuration it was announced with (the audited
// lower bound on one round's ε next to that configuration's per-round
// charge; absent for rounds announced before the aggregator's last start).
type RoundRow struct {
	checkpoint.RoundRecord
	Audit *liveaudit.Status `json:"audit,omitempty"`
}

// Model is the JSON of GET /api/model.
type Model struct {
	Round    int       `json:"round"`
	Features int       `json:"features"`
	Classes  int       `json:"classes"`
	Params   []float64 `json:"params"`
}

// handlers serves a Backend.
type handlers struct {
	b        Backend
	log      *slog.Logger
	tokenSum [32]byte
}

// Register adds the API to mux, the relay-facing endpoints requiring
// token:
//
//	POST /v1/batch   relay, bearer token; body Batch frame, reply BatchReply frame
//	POST /v1/abort   relay, bearer token; body Abort frame, reply IntakeAnswer JSON
//	POST /v1/secagg/chunk     relay, bearer token; body SecAggChunk frame, reply SecAggPrep frame
//	POST /v1/secagg/resume    relay, bearer token; body SecAggResume frame, reply SecAggPrep frame
//	POST /v1/secagg/close     relay, bearer token; body SecAggClose frame, reply SecAggCharged frame
//	POST /v1/secagg/aggregate relay, bearer token; body SecAggAggregate frame, reply IntakeAnswer JSON
//	                 (all: the outcome as status code and OutcomeHeader, see Intake)
//	GET  /api/status current round, accuracy, loss, epsilon spent and target, fingerprint
//	GET  /api/rounds every round: status, accuracy, loss, epsilon by every method, n, n_p, check-in rate
//	GET  /api/key    public keys and fingerprint
//	GET  /api/model  current model parameters
//	GET  /api/task   the public task definition (registered by the server, not here)
//	GET  /healthz    "ok"
func Register(mux *http.ServeMux, b Backend, token string, log *slog.Logger) {
	h := &handlers{b: b, log: log, tokenSum: sha256.Sum256([]byte(token))}
	mux.HandleFunc("POST /v1/batch", h.serveBatch)
	mux.HandleFunc("POST /v1/abort", h.serveAbort)
	mux.HandleFunc("POST /v1/secagg/chunk", h.serveSecAggFrame(func() int64 { return h.b.BodyLimits().SecAggChunk }, h.b.SecAggChunkIntake))
	mux.HandleFunc("POST /v1/secagg/resume", h.serveSecAggFrame(func() int64 { return wire.SecAggResumeSize }, h.b.SecAggResumeIntake))
	mux.HandleFunc("POST /v1/secagg/close", h.serveSecAggFrame(func() int64 { return wire.SecAggCloseSize }, h.b.SecAggCloseIntake))
	mux.HandleFunc("POST /v1/secagg/aggregate", h.serveSecAggAggregate)
	mux.HandleFunc("GET /api/status", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, b.Status()) })
	mux.HandleFunc("GET /api/rounds", func(w http.ResponseWriter, r *http.Request) {
		recs := b.Rounds()
		rows := make([]RoundRow, len(recs))
		for i, r := range recs {
			rows[i] = RoundRow{RoundRecord: r, Audit: b.Audit(r.Round)}
		}
		writeJSON(w, struct {
			Rounds []RoundRow `json:"rounds"`
		}{rows})
	})
	mux.HandleFunc("GET /api/rounds.csv", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if err := study.RoundsCSV(w, b.Rounds()); err != nil {
			log.Warn("rounds.csv", "err", err)
		}
	})
	// The key's own JSON form ({"sign", "hpke", "fingerprint"}), which
	// clients unmarshal and check (the fingerprint must match the keys).
	mux.HandleFunc("GET /api/key", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, b.PublicKey()) })
	mux.HandleFunc("GET /api/model", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, b.ModelView()) })
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
}

// authorized checks the bearer token in constant time (of the digests, so
// the token's length does not leak either).
func (h *handlers) authorized(r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return false
	}
	sum := sha256.Sum256([]byte(tok))
	return subtle.ConstantTimeCompare(sum[:], h.tokenSum[:]) == 1
}

func (h *handlers) readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, bool) {
	if !h.authorized(r) {
		h.log.Warn("unauthorized request", "path", r.URL.Path, "remote", r.RemoteAddr)
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

func (h *handlers) serveBatch(w http.ResponseWriter, r *http.Request) {
	body, ok := h.readBody(w, r, h.b.BodyLimits().Batch)
	if !ok {
		return
	}
	reply, intake, err := h.b.BatchIntake(body)
	if err != nil {
		h.log.Error("batch not processed", "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set(OutcomeHeader, string(intake))
	if reply.Round == 0 {
		// Not a batch frame at all, or round 0: no reply frame exists.
		http.Error(w, "invalid batch frame", HTTPStatus(intake))
		return
	}
	frame, merr := reply.MarshalBinary()
	if merr != nil {
		h.log.Error("encoding batch reply", "err", merr)
		w.Header().Del(OutcomeHeader)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(HTTPStatus(intake))
	w.Write(frame)
}

func (h *handlers) serveAbort(w http.ResponseWriter, r *http.Request) {
	body, ok := h.readBody(w, r, MaxAbortBytes)
	if !ok {
		return
	}
	writeIntake(w, h.b.AbortIntake(body))
}

// serveSecAggFrame serves a secure-summation request whose answer is a
// frame (SecAggPrep, SecAggCharged), or the JSON IntakeAnswer without one.
func (h *handlers) serveSecAggFrame(limit func() int64, intake func([]byte) (SecAggAnswer, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, ok := h.readBody(w, r, limit())
		if !ok {
			return
		}
		ans, err := intake(body)
		if err != nil {
			h.log.Error("secagg request not processed", "path", r.URL.Path, "err", err)
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
		w.Header().Set(OutcomeHeader, string(ans.Outcome))
		if ans.Frame == nil {
			writeIntake(w, ans.Answer)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(HTTPStatus(ans.Outcome))
		w.Write(ans.Frame)
	}
}

func (h *handlers) serveSecAggAggregate(w http.ResponseWriter, r *http.Request) {
	body, ok := h.readBody(w, r, h.b.BodyLimits().SecAggAggregate)
	if !ok {
		return
	}
	writeIntake(w, h.b.SecAggAggregateIntake(body))
}

// writeIntake answers with the outcome as status code and header and the
// JSON IntakeAnswer.
func writeIntake(w http.ResponseWriter, ans IntakeAnswer) {
	w.Header().Set(OutcomeHeader, string(ans.Outcome))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(HTTPStatus(ans.Outcome))
	json.NewEncoder(w).Encode(ans)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	enc.Encode(v)
}

// Metrics is GET /metrics: the aggregator's operational counters as JSON
// (today its datastore's: commits, fsyncs, bytes written, compactions,
// log size). They count work, never a value a volunteer sent.
func Metrics(store func() datastore.Stats) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := store()
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, map[string]any{"datastore": map[string]int64{
			"commits": st.Commits, "fsyncs": st.Fsyncs, "bytes_written": st.BytesWritten,
			"compactions": st.Compactions, "log_size": st.LogSize}})
	})
}

// AbortView is the last_abort of /api/status for record r, with the words
// of dashboard.ExplainAbort (minBatch: the round's; simulated:
// how many volunteers make run simulates).
func AbortView(r checkpoint.RoundRecord, minBatch, simulated int) *Abort {
	a := dashboard.AbortFacts{Round: r.Round, Status: r.Status, Reason: r.Detail, Received: r.N, CheckedIn: r.CheckedIn,
		Expected: r.Population, MinBatch: minBatch, Simulated: simulated}
	if !r.Deadline.IsZero() && r.Deadline.After(r.AnnouncedAt) {
		a.Timeout = r.Deadline.Sub(r.AnnouncedAt)
	}
	msg, advice := dashboard.ExplainAbort(a)
	return &Abort{Round: a.Round, Status: a.Status, Reason: a.Reason, Received: a.Received, CheckedIn: a.CheckedIn,
		Expected: a.Expected, MinBatch: a.MinBatch, Timeout: a.Timeout.Seconds(), Message: msg, Advice: advice}
}
