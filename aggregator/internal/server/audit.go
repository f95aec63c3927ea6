package server

import (
	"github.com/blanket-fl/blanket/aggregator/internal/liveaudit"
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
func (s *Server) watchAudit(r int, rc *roundConfig) {
	k := auditKey{rc.params, s.cfg.ExpectedN}
	s.mu.Lock()
	s.auditOf[r] = k
	s.mu.Unlock()
	s.audit.Watch(rc.proto.Spec, k.n)
}

// Audit returns the live audit's status for round r's configuration (nil
// for a round announced before this process started: its configuration's
// audit, if any, was another process's).
func (s *Server) Audit(r int) *liveaudit.Status {
	s.mu.RLock()
	k, ok := s.auditOf[r]
	s.mu.RUnlock()
	if !ok {
		return nil
	}
	st := s.audit.Status(k.params, k.n)
	return &st
}

// currentAuditLocked is the live audit's status for the configuration the
// next round will be announced with (s.mu may be held: the monitor has its
// own lock and the round configuration is an atomic pointer).
func (s *Server) currentAuditLocked() *liveaudit.Status {
	rc := s.rounds()
	st := s.audit.Status(rc.params, s.cfg.ExpectedN)
	return &st
}
