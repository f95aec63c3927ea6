package server

import (
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/analysis"
	"github.com/blanket-fl/blanket/shared/wire"
)

// roundConfig is the configuration of the rounds announced from now on:
// the announced parameters, what they determine (the spec, the analyzer,
// the release the ledger charges: analysis.Protocol), and the two values the
// operator may change with them (the server learning rate and the round
// timeout). It is never modified once built: Reconfigure builds a new one,
// and applyPending swaps it into Server.round atomically between rounds
// (no round open, under procMu), so a batch is always parsed, charged and
// estimated with the configuration its round was announced with.
type roundConfig struct {
	params   wire.Params
	proto    *analysis.Protocol
	serverLR float64
	timeout  time.Duration
}

// newRoundConfig derives a round configuration from validated parameters
// (analysis.NewProtocol: roundspec.New refuses layouts without a privacy
// proof).
func newRoundConfig(p wire.Params, serverLR float64, timeout time.Duration) (*roundConfig, error) {
	ps, err := analysis.NewProtocol(p)
	if err != nil {
		return nil, err
	}
	return &roundConfig{params: p, proto: ps, serverLR: serverLR, timeout: timeout}, nil
}

// rounds returns the current round configuration (lock-free).
func (s *Server) rounds() *roundConfig { return s.round.Load() }
