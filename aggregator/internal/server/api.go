package server

import (
	"maps"
	"math"
	"net/http"
	"slices"

	"github.com/blanket-fl/blanket/aggregator/internal/api"
	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/shared/wire"
)

// Handler returns the HTTP API (package api: the relay's /v1/* with the
// bearer token, /api/*, /healthz) and the pages (web.go: the dashboard,
// /events, /operator and the browser assets).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	api.Register(mux, s, s.cfg.Token, s.log)
	s.registerWeb(mux)
	return mux
}

// BodyLimits bounds the relay's request bodies for the current round
// configuration: a batch padded to 64 times the announced n_p (the relay
// raises n_p only on overflow), and the largest secure-summation frames
// the round's Quota allows.
func (s *Server) BodyLimits() api.Limits {
	p := s.rounds().params // the operator may replace it between rounds
	l := api.Limits{Batch: int64(wire.BatchSize(p.BatchMessages(p.NP*64), int(p.Width)))}
	l.SecAggBatch, l.SecAggAggregate = s.secaggBodyLimits()
	return l
}

// Status returns the current status. It never waits for the accountant:
// the epsilon spent is the ledger's figure as recorded with the last
// charged round (the round record is committed after its charge), not a
// call into the ledger, whose lock a charge holds while it composes.
func (s *Server) Status() api.Status {
	te, td := s.ledger.Target() // fixed at start: no lock
	newClass := s.newClassRequested()
	s.mu.RLock()
	defer s.mu.RUnlock()
	st := api.Status{Round: s.st.Round, Delta: td, TargetEpsilon: te, TargetDelta: td,
		Fingerprint: s.fp, Running: s.stopped == "", Stopped: s.stopped, Params: s.st.Params,
		Paused: s.paused, ModelResets: len(s.st.ModelResets), NewClassRequested: newClass,
		RejectedBatches: maps.Clone(s.rejected), Audit: s.currentAuditLocked()}
	if s.st.Open != nil {
		st.OpenRound, st.Deadline = s.st.Open.Round, s.st.Open.Deadline
	}
	for _, r := range s.st.History {
		if r.Status == checkpoint.StatusOK {
			st.RoundsOK++
			st.Accuracy, st.Loss = r.Accuracy, r.Loss
		}
		if r.Status == checkpoint.StatusAborted || r.Status == checkpoint.StatusAbandoned {
			st.LastAbort = lastAbort(r, s.st.Params.CheckInP)
		}
		if r.EpsilonTightest != nil {
			st.Epsilon, st.Method = *r.EpsilonTightest, r.Method
		}
	}
	return st
}

// lastAbort describes an aborted or abandoned round (p: the announced
// check-in rate).
func lastAbort(r checkpoint.RoundRecord, p float64) *api.LastAbort {
	if p <= 0 || p > 1 {
		p = 1
	}
	return &api.LastAbort{Round: r.Round, Reason: r.Detail, Received: r.N, Expected: int(math.Round(float64(r.Population) * p)),
		CheckedIn: r.CheckedIn, Timeout: r.Deadline.Sub(r.AnnouncedAt).Seconds()}
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

// ModelView is the JSON of GET /api/model.
func (s *Server) ModelView() api.Model {
	s.mu.RLock()
	round := s.st.Round
	model := slices.Clone(s.st.Model)
	s.mu.RUnlock()
	sh := s.cfg.Test.Shape()
	return api.Model{Round: round, Features: sh.Features, Classes: sh.Classes, Params: model}
}
