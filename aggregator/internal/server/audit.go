package server

import (
	"github.com/blanket-fl/blanket/aggregator/internal/liveaudit"
	"github.com/blanket-fl/blanket/aggregator/internal/rounds"
	"github.com/blanket-fl/blanket/shared/wire"
)

// auditKey is the configuration a round was announced with, as the live
// audit knows it: the announced parameters at the expected report count.
type auditKey struct {
	params wire.Params
	n      int
}

// watchAudit records round r's configuration and has the monitor audit it
// (a no-op when it already did, or when off; secure summation is audited
// too: audit.LowerBoundSecAgg).
func (s *Server) watchAudit(r int, rc *rounds.RoundConfig) {
	k := auditKey{rc.Params, s.cfg.ExpectedN}
	s.auditMu.Lock()
	s.auditOf[r] = k
	s.auditMu.Unlock()
	s.audit.Watch(rc.Proto.Spec, k.n)
}

// Audit returns the live audit's status for round r's configuration (nil
// for a round announced before this process started: its configuration's
// audit, if any, was another process's).
func (s *Server) Audit(r int) *liveaudit.Status {
	s.auditMu.Lock()
	k, ok := s.auditOf[r]
	s.auditMu.Unlock()
	if !ok {
		return nil
	}
	st := s.audit.Status(k.params, k.n)
	return &st
}

// currentAudit is the live audit's status for the configuration the next
// round will be announced with (the state's lock may be held: the monitor
// has its own lock and the round configuration is an atomic pointer).
func (s *Server) currentAudit() *liveaudit.Status {
	rc := s.Current()
	st := s.audit.Status(rc.Params, s.cfg.ExpectedN)
	return &st
}
