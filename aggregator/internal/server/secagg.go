package server

// The aggregator's side of secure summation that talks to the relay
// (docs/secagg.md): the relay's helper key for the announcements, the σ
// the operator page offers and the request bodies' bounds. The protocol
// steps (chunks, close and charge, aggregate) are package rounds'.

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/blanket-fl/blanket/aggregator/internal/params"
	"github.com/blanket-fl/blanket/aggregator/internal/rounds"
	"github.com/blanket-fl/blanket/shared/wire"
)

// relayKeyState is the relay's helper key, once fetched (its own lock),
// and the σ the operator page offers, computed once.
type relayKeyState struct {
	keyMu    sync.Mutex
	relayPub [32]byte
	haveKey  bool

	sigmaOnce sync.Once
	sigma     float64
	sigmaErr  error
}

// relayKey returns the relay's helper key (docs/secagg.md, "Keys and
// secrets"): GET {relay}/v1/helper-key with the bearer token, 32 raw
// bytes, cached until forgetRelayKey.
func (s *Server) relayKey(ctx context.Context) ([32]byte, error) {
	s.relay.keyMu.Lock()
	defer s.relay.keyMu.Unlock()
	if s.relay.haveKey {
		return s.relay.relayPub, nil
	}
	var k [32]byte
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(s.cfg.RelayURL, "/")+"/v1/helper-key", nil)
	if err != nil {
		return k, fmt.Errorf("server: relay helper key: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+s.cfg.Token)
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return k, fmt.Errorf("server: relay helper key: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 512))
	if err != nil {
		return k, fmt.Errorf("server: relay helper key: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return k, fmt.Errorf("server: relay helper key: relay answered %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	if len(body) != len(k) {
		return k, fmt.Errorf("server: relay helper key of %d bytes, want %d", len(body), len(k))
	}
	copy(k[:], body)
	if k == ([32]byte{}) {
		return k, errors.New("server: relay helper key is all zero")
	}
	s.relay.relayPub, s.relay.haveKey = k, true
	s.log.Info("fetched the relay's helper key", "key", hex.EncodeToString(k[:8]))
	return k, nil
}

// forgetRelayKey drops the cached helper key (the relay refused an
// announcement with "helper key mismatch": it has a new key).
func (s *Server) forgetRelayKey() {
	s.relay.keyMu.Lock()
	s.relay.haveKey = false
	s.relay.keyMu.Unlock()
}

// operatorSigma is the σ the operator page offers secure summation with:
// the current one if the rounds are secure summation, else calibrated to
// the ledger's target over Config.Rounds (params.DefaultSecAggRounds if 0) at
// the current check-in rate, computed once.
func (s *Server) operatorSigma(rc *rounds.RoundConfig) (float64, error) {
	if rc.Params.Protocol == wire.ProtocolSecAgg {
		return rc.Params.Sigma, nil
	}
	cfg := s.cfg
	s.relay.sigmaOnce.Do(func() {
		n := cfg.Rounds
		if n == 0 {
			n = params.DefaultSecAggRounds
		}
		eps, delta := s.ledger.Target()
		s.relay.sigma, s.relay.sigmaErr = params.SecAggSigma(int(rc.Params.D), cfg.ExpectedN, params.Choice{Randomizer: wire.RandomizerLaplace.String(),
			MinBatch: int(rc.Params.MinBatch), CheckIn: rc.Params.CheckInP}, n, eps, delta)
	})
	return s.relay.sigma, s.relay.sigmaErr
}
