package server

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"

	"github.com/blanket-fl/blanket/aggregator/internal/api"
	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/aggregator/internal/classtask"
	"github.com/blanket-fl/blanket/aggregator/internal/dashboard"
	"github.com/blanket-fl/blanket/aggregator/internal/opsview"
	"github.com/blanket-fl/blanket/aggregator/internal/rounds"
	"github.com/blanket-fl/blanket/aggregator/internal/study"
	"github.com/blanket-fl/blanket/shared/readiness"
	"github.com/blanket-fl/blanket/shared/wire"
)

// Handler returns the HTTP API (package api: the relay's /v1/* with the
// bearer token, /api/*, /healthz; package opsview: /metrics, /readyz)
// and the pages (web.go: the dashboard,
// /events, /operator and the browser assets).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	api.Register(mux, s, s.cfg.Token, s.log)
	s.registerWeb(mux)
	mux.HandleFunc("GET /api/task", s.serveTask)
	mux.HandleFunc("GET /api/export", s.serveExport)
	mux.HandleFunc("GET /v1/anchor", s.handleAnchor)  // anchor.go
	mux.HandleFunc("POST /v1/anchor", s.handleAnchor) // anchor.go
	// GET /metrics (Prometheus), /api/metrics and /readyz: the datastore
	// writable, the ledger not suspended (anchor.go), the task loaded.
	opsview.Register(mux, opsview.Source{Status: s.Status, Rounds: s.Rounds, Store: s.db.Stats, Chunks: s.chunks}, readiness.Store(s.db),
		readiness.Ledger("privacy ledger", s.ledger),
		readiness.Fact("task", "no task loaded", func(context.Context) bool { return s.cfg.Task != nil }))
	return mux
}

// serveTask is GET /api/task: the public task definition (title, consent
// text, features with their declared ranges or categories, label, model,
// suggested privacy parameters) as JSON, without the operator's file
// paths; 404 when the server was given no task.
func (s *Server) serveTask(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Task == nil {
		http.NotFound(w, r)
		return
	}
	b, _, err := study.PublicTask(s.cfg.Task)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

// Export is the JSON of GET /api/export (classtask.Export).
type Export = classtask.Export

// serveExport is GET /api/export (Export), served as a download
// (blanket-model-TASK-roundN.json); 404 when the server was given no
// task. Everything in it is already public: the task definition (GET
// /api/task) and the model (GET /api/model).
func (s *Server) serveExport(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Task == nil {
		http.NotFound(w, r)
		return
	}
	st, m, rc := s.Status(), s.ModelView(), s.Current()
	e, err := classtask.NewExport(s.cfg.Task, m.Round, m.Params)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	e.RoundsOK, e.AccuracySource = st.RoundsOK, st.AccuracySource
	if st.AccuracySource == "public_holdout" {
		e.Accuracy = st.Accuracy
	}
	*e.Study = study.Record{TaskSHA256: e.Study.TaskSHA256, WasmSHA256: s.cfg.Web.Wasm.SHA256(), AggregatorKey: st.Fingerprint,
		Software: study.Build(), Epsilon: st.Epsilon, Delta: st.Delta, Method: st.Method, TargetEpsilon: st.TargetEpsilon,
		TargetDelta: st.TargetDelta, Protocol: checkpoint.ParamsOf(rc.Params), ServerLR: rc.ServerLR, Rounds: st.Round, RoundsOK: st.RoundsOK, Consent: study.ConsentOf(s.cfg.Task)}
	b, err := json.MarshalIndent(e, "", " ")
	if err != nil {
		http.Error(w, "export: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Access-Control-Allow-Origin", "*")
	if r.URL.Query().Get("download") != "" {
		h.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="blanket-model-%s-round%d.json"`, e.Task.Name, m.Round))
	}
	w.Write(append(b, '\n'))
}

// BodyLimits bounds the relay's request bodies for the current round
// configuration: a batch padded to 64 times the announced n_p (the relay
// raises n_p only on overflow), and the largest secure-summation frames
// the round's Quota allows.
func (s *Server) BodyLimits() api.Limits {
	p := s.Current().Params // the operator may replace it between rounds
	l := api.Limits{Batch: int64(wire.BatchSize(p.BatchMessages(p.NP*64), int(p.Width)))}
	l.SecAggChunk, l.SecAggAggregate = s.Current().SecAggBodyLimits()
	return l
}

// Status returns the current status. It never waits for the accountant:
// the epsilon spent is the ledger's figure as recorded with the last
// charged round (the round record is committed after its charge), not a
// call into the ledger, whose lock a charge holds while it composes.
func (s *Server) Status() api.Status {
	te, td := s.ledger.Target() // fixed at start: no lock
	newClass := s.newClassRequested()
	var st api.Status
	s.View(func(cs *checkpoint.State, c rounds.Control) {
		st = api.Status{Round: cs.Round, Delta: td, TargetEpsilon: te, TargetDelta: td,
			Fingerprint: s.fp, Running: c.Stopped == "", Stopped: c.Stopped, Params: cs.Params,
			Paused: c.Paused, ModelResets: len(cs.ModelResets), NewClassRequested: newClass,
			RejectedBatches: maps.Clone(c.Rejected), Audit: s.currentAudit(),
			AccuracySource: s.accuracySource()}
		if s.cfg.Task != nil {
			st.Task, st.TaskTitle = s.cfg.Task.Name, s.cfg.Task.Title
		}
		if cs.Open != nil {
			st.OpenRound, st.Deadline = cs.Open.Round, cs.Open.Deadline
			if s.relayDown.Load() == int64(cs.Open.Round) {
				st.Waiting = RelayDownWaiting
			}
		}
		for _, r := range cs.History {
			if r.Status == checkpoint.StatusOK {
				st.RoundsOK++
				st.Accuracy, st.Loss = r.Accuracy, r.Loss
			}
			if r.EpsilonTightest != nil {
				st.Epsilon, st.Method = *r.EpsilonTightest, r.Method
			}
		}
		if r, ok := dashboard.LastAbort(cs.History); ok {
			st.LastAbort = api.AbortView(r, int(s.Current().Params.MinBatch), s.cfg.Web.Simulated)
		}
	})
	opt, lr := s.ServerStep(s.Current())
	st.ServerOptimizer, st.ServerMomentum, st.ServerLR = opt.Kind, opt.Beta, lr
	return st
}

// RelayDownWaiting is api.Status.Waiting while the open round waits for a
// relay that does not answer (waitRound).
const RelayDownWaiting = "waits for the relay, which does not answer: the round goes on when it is back"

// accuracySource is api.Status.AccuracySource: "public_holdout" when
// there is a test set, "volunteers_private" when the rounds count a
// private evaluation, "none" otherwise (dashboard.AccuracySource).
func (s *Server) accuracySource() string {
	return dashboard.AccuracySource(s.cfg.Test.Len() > 0, s.Current().Params)
}

// Rounds returns a copy of the round history.
func (s *Server) Rounds() (h []checkpoint.RoundRecord) {
	s.View(func(st *checkpoint.State, _ rounds.Control) { h = slices.Clone(st.History) })
	return h
}

// Model returns a copy of the current model parameters.
func (s *Server) Model() (m []float64) {
	s.View(func(st *checkpoint.State, _ rounds.Control) { m = slices.Clone(st.Model) })
	return m
}

// ModelView is the JSON of GET /api/model.
func (s *Server) ModelView() api.Model {
	var v api.Model
	s.View(func(st *checkpoint.State, _ rounds.Control) { v.Round, v.Params = st.Round, slices.Clone(st.Model) })
	sh := s.cfg.Test.Shape()
	v.Features, v.Classes = sh.Features, sh.Classes
	return v
}
