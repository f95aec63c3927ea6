package server

import (
	"context"
	"log/slog"
	"net/http"
	"slices"

	"github.com/blanket-fl/blanket/shared/readiness"
	"github.com/blanket-fl/blanket/web"
)

// readyHandler serves GET /readyz: the main's checks (cfg.Ready: the
// datastore writable, the noise ledger not suspended), the aggregator's
// public key fetched (the join page and the class code need it), and the
// aggregator reachable (GET /api/status, asked as GET /api/round asks it).
func (s *Server) readyHandler() http.Handler {
	return readiness.Handler(append(slices.Clone(s.cfg.Ready),
		readiness.Fact("keys", "the aggregator's public key is not fetched yet", func(context.Context) bool { _, fp := s.currentKey(); return fp != "" }),
		readiness.Fact("aggregator", "unreachable (GET /api/status)", func(ctx context.Context) bool { return s.roundInfo(ctx).Reachable }))...)
}

// roundLog is s.log with the class (the code of the aggregator's key as
// fetched: web.JoinCodeOf) and the round on every line.
func (s *Server) roundLog(num uint64) *slog.Logger {
	return s.log.With("class", s.classCode(), "round", num)
}

// classCode is the class's four-character code (the aggregator key's
// fingerprint's start, web.JoinCodeOf), "" before the key is known.
func (s *Server) classCode() string {
	_, fp := s.currentKey()
	return web.JoinCodeOf(fp)
}
