package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/blanket-fl/blanket/relay/internal/round"
	"github.com/blanket-fl/blanket/shared/ledger"
	"github.com/blanket-fl/blanket/shared/wire"
)

// The relay's side of "the relay enforces its own guarantee" and "ledgers
// that anchor each other" (docs/threat-model.md):
//
//   - noiseAdmit: a secure-summation announcement is refused (409,
//     outcome refused) unless its round follows the last noised one and
//     its release (roundspec, from the announced parameters) fits the
//     relay's own target: the relay does not even prepare such a round;
//   - chargeNoise: before helper.Release, the round's release is charged
//     to the noise ledger (fsynced); a refusal releases nothing;
//   - GET /v1/anchor answers the relay's noise-ledger head and the
//     aggregator's ledger head it holds; POST /v1/anchor records the
//     aggregator's head (refused, 409, if it is behind the one held) and
//     checks the relay's head the aggregator holds;
//   - at start the noise ledger is suspended until the aggregator's copy
//     of the relay's head has been fetched and the ledger verified
//     against it (anchorLoop); a ledger behind it stays suspended;
//   - after every charge (and every few seconds) the relay posts its head
//     to the aggregator and records the aggregator's head from the reply.
//
// All of it is off when Config.NoiseLedger is nil (tests of other parts).

const anchorPath = "/v1/anchor"

// errUnchecked suspends the noise ledger until the start check passes.
var errUnchecked = errors.New("the noise ledger is not yet checked against the aggregator's copy of its head")

// noiseAdmit checks a secure-summation announcement against the noise
// ledger (nil: admitted).
func (s *Server) noiseAdmit(a *wire.Announcement) error {
	l := s.cfg.NoiseLedger
	if l == nil || a.Params.Protocol != wire.ProtocolSecAgg {
		return nil
	}
	spec, _, _, err := round.SecAggSpec(a.Params)
	if err != nil {
		return nil // refused as invalid parameters by the round machine
	}
	_, err = l.CanCharge(spec.Release(int(a.Round), int(a.Params.MinBatch), 0))
	return err
}

// chargeNoise charges round num's release (its announced parameters,
// accepted reports) to the noise ledger before its share is noised. A
// relay that has just restarted has not yet checked its ledger against
// the aggregator's copy of its head (anchorLoop): a round it resumes
// waits for that check instead of being refused by it (which lost the
// round though both servers were up); errStopped if ctx ends first.
func (s *Server) chargeNoise(ctx context.Context, num uint64, p wire.Params, accepted int) error {
	l := s.cfg.NoiseLedger
	if l == nil {
		return nil
	}
	select {
	case <-s.anchorChecked:
	case <-ctx.Done():
		return errStopped
	}
	spec, _, _, err := round.SecAggSpec(p)
	if err != nil {
		return err
	}
	if err := l.Charge(spec.Release(int(num), accepted, 0)); err != nil {
		return err
	}
	select {
	case s.anchorNudge <- struct{}{}:
	default:
	}
	return nil
}

func (s *Server) handleAnchor(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	l := s.cfg.NoiseLedger
	if l == nil {
		http.Error(w, "no noise ledger", http.StatusNotFound)
		return
	}
	if r.Method == http.MethodPost {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, wire.AnchorSize))
		if err != nil {
			http.Error(w, "anchor too large", http.StatusRequestEntityTooLarge)
			return
		}
		a, err := wire.ParseAnchor(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := l.RecordPeer(a.Own); err != nil {
			s.log.Error("the aggregator's ledger head went back; refusing to noise", "err", err)
			l.Suspend(err)
			writeOutcome(w, http.StatusConflict, 0, "invalid", err.Error())
			return
		}
		if err := l.Verify(a.Held); err != nil {
			s.log.Error("the noise ledger is behind the head the aggregator holds; refusing to noise", "err", err)
			l.Suspend(err)
		}
	}
	b, err := (&wire.Anchor{Own: l.Head(), Held: l.Peer()}).MarshalBinary()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Write(b)
}

// anchorRequest makes one GET (body nil) or POST of an anchor to the
// aggregator and returns its answer.
func (s *Server) anchorRequest(ctx context.Context, body []byte) (*wire.Anchor, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.SendTimeout)
	defer cancel()
	method := http.MethodGet
	if body != nil {
		method = http.MethodPost
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(s.cfg.Aggregator, "/")+anchorPath, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.cfg.Token)
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &anchorStatus{resp.StatusCode, strings.TrimSpace(string(b))}
	}
	return wire.ParseAnchor(b)
}

type anchorStatus struct {
	code   int
	detail string
}

func (e *anchorStatus) Error() string { return fmt.Sprintf("HTTP %d: %s", e.code, e.detail) }

// CheckAnchor fetches the relay's head as the aggregator holds it and
// verifies the noise ledger against it (ledger.ErrRollback: the
// relay's state was rolled back, refuse), and records the aggregator's
// own head (ledger.ErrRollback: the aggregator's was). Any other
// error: the aggregator could not be asked.
func (s *Server) CheckAnchor(ctx context.Context) error {
	l := s.cfg.NoiseLedger
	if l == nil {
		return nil
	}
	a, err := s.anchorRequest(ctx, nil)
	if err != nil {
		return fmt.Errorf("server: asking the aggregator for the relay's ledger head: %w", err)
	}
	if err := l.Verify(a.Held); err != nil {
		return err
	}
	return l.RecordPeer(a.Own)
}

// anchorLoop suspends the noise ledger until CheckAnchor passes (retrying
// while the aggregator is unreachable; a rollback stays suspended), then
// posts the relay's head whenever it changes (and every AnchorEvery).
func (s *Server) anchorLoop(ctx context.Context) {
	l := s.cfg.NoiseLedger
	if l == nil {
		close(s.anchorChecked)
		return
	}
	wait := s.cfg.RetryMin
	for {
		err := s.CheckAnchor(ctx)
		if err == nil {
			l.Resume()
			close(s.anchorChecked)
			s.log.Info("noise ledger checked against the aggregator's copy of its head", "count", l.Head().Count)
			break
		}
		if errors.Is(err, ledger.ErrRollback) {
			l.Suspend(err)
			close(s.anchorChecked)
			s.log.Error("state rollback detected: the relay refuses to noise any round", "err", err)
			return
		}
		s.log.Warn("cannot check the noise ledger yet; refusing to noise until then", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, s.cfg.RetryMax, 2*time.Second) // a cheap GET; rounds wait for it
	}
	var sent wire.Head
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.anchorNudge:
		case <-tick.C:
		}
		h := l.Head()
		if h == sent {
			continue
		}
		body, err := (&wire.Anchor{Own: h, Held: l.Peer()}).MarshalBinary()
		if err != nil {
			continue
		}
		a, err := s.anchorRequest(ctx, body)
		if err != nil {
			s.log.Warn("cannot post the noise ledger's head to the aggregator; will retry", "err", err)
			continue
		}
		if err := l.RecordPeer(a.Own); err != nil {
			l.Suspend(err)
			s.log.Error("the aggregator's ledger head went back; refusing to noise", "err", err)
			return
		}
		sent = h
	}
}
