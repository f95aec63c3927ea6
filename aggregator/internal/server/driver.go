package server

// The round driver: the loop that opens, announces, waits for and abandons
// rounds. Every state transition takes procMu, and commit writes it to
// the checkpoint under mu before the next one.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/api"
	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/aggregator/internal/rounds"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/wire"
)

// Run is the round loop: it announces rounds and waits for each to finish,
// until Config.Rounds ok rounds were run, the budget refuses the next
// round, or ctx is cancelled (all of which return nil; the HTTP API keeps
// answering until the caller shuts it down). It returns an error only for
// a configuration the ledger rejects outright.
func (s *Server) Run(ctx context.Context) error {
	go s.anchorLoop(ctx) // anchor.go
	for {
		if ctx.Err() != nil || !s.waitAnchor(ctx) {
			return nil
		}
		open, err := s.NextRound(time.Now())
		if err != nil {
			return err
		}
		if open == nil {
			if s.WaitResume(ctx) {
				continue // the operator resumed
			}
			return nil // stopped; reason logged and in the status
		}
		if !open.Announced {
			if !s.announce(ctx, open) { // may give the round a later deadline
				continue // abandoned or cancelled
			}
		}
		// The relay may keep the round open past its deadline while
		// reports still arrive, up to its cap (roundspec.CloseCap, from
		// the relay's later opening: never after this one).
		s.waitRound(ctx, open.Round, open.Deadline, roundspec.CloseCap(open.AnnouncedAt, open.Deadline))
	}
}

// announcement builds the signed Announcement frame of an open round; a
// secure-summation round carries the relay's helper key (relayKey), whose
// fetch failing is errRelayKey.
func (s *Server) announcement(ctx context.Context, o checkpoint.Open) ([]byte, error) {
	var model []float64
	s.View(func(st *checkpoint.State, _ rounds.Control) { model = slices.Clone(st.Model) })
	params := s.Current().Params
	a := wire.Announcement{Round: uint64(o.Round), Deadline: o.Deadline, Params: params, HPKEPub: s.pub.HPKE, Model: model}
	if params.Protocol == wire.ProtocolSecAgg {
		k, err := s.relayKey(ctx)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errRelayKey, err)
		}
		a.RelayPub = k
	}
	if err := a.Sign(s.key); err != nil {
		return nil, fmt.Errorf("server: signing announcement: %w", err)
	}
	return a.MarshalBinary()
}

// maxRetimes bounds how often announce gives a round a new deadline while
// the relay is down or not ready (at the default 60 s rounds, an hour).
const maxRetimes = 60

// announce delivers the announcement to the relay, retrying until the
// deadline. It reports whether the round was announced; if the deadline
// passes first the round is abandoned, except while the relay does not
// answer or answers 503 (restarting, warming up so that its volunteers
// reconnect, or its ledger not yet checked): nothing has started for the
// round anywhere, so it gets a new deadline, its full time from now, at
// most maxRetimes times, and o is updated. A round that waited out a
// relay's restart was abandoned for want of a few seconds (issue 25's
// TestRelayKilledMidRound under load); what the round releases and the
// ledger charges do not depend on its deadline.
func (s *Server) announce(ctx context.Context, o *checkpoint.Open) bool {
	var frame []byte
	retimes := 0
	defer s.relayDown.CompareAndSwap(int64(o.Round), 0)
	for attempt := 1; ; attempt++ {
		var err error
		if frame == nil {
			// (Re)built when the relay's helper key had to be fetched again.
			frame, err = s.announcement(ctx, *o)
			if err != nil && !errors.Is(err, errRelayKey) {
				s.log.Error("cannot build announcement", "round", o.Round, "err", err)
				s.Abandon(o.Round, err.Error())
				return false
			}
		}
		if err == nil {
			te, td := s.ledger.Target()
			err = s.post(ctx, "/v1/rounds", frame, wire.TargetEpsilonHeader, wire.FormatTarget(te),
				wire.TargetDeltaHeader, wire.FormatTarget(td))
			if rounds.IsHelperKeyMismatch(err) {
				s.forgetRelayKey()
				frame = nil
			} else if why, ok := rounds.RelayRefusal(err); ok {
				// The relay says no for good (its budget is spent, or it
				// cannot run this configuration): announcing again would
				// only be refused again, every RetryInterval, forever.
				s.Abandon(o.Round, why)
				s.Stop(why)
				return false
			}
		}
		if err == nil {
			s.MarkAnnounced(o.Round)
			if s.relayDown.CompareAndSwap(int64(o.Round), 0) {
				s.publishStatus()
			}
			s.log.Info("round announced", "round", o.Round, "deadline", o.Deadline, "bytes", len(frame))
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		s.log.Warn("announcement not delivered", "round", o.Round, "attempt", attempt, "err", err)
		wait := s.cfg.RetryInterval
		if time.Now().Add(wait).After(o.Deadline) {
			if rounds.RelayNotReady(err) && retimes < maxRetimes && s.Retime(o, time.Now()) {
				retimes++
				frame = nil // the deadline is in the signed bytes
				if errors.As(err, new(*rounds.RelayError)) {
					s.log.Info("the relay is not ready; the round gets a new deadline", "round", o.Round, "deadline", o.Deadline)
				} else if s.relayDown.Swap(int64(o.Round)) != int64(o.Round) {
					s.log.Warn("the round waits for the relay, which does not answer", "round", o.Round)
					s.publishStatus()
				}
				continue
			}
			s.Abandon(o.Round, "announcement not delivered before the deadline: "+err.Error())
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		case <-s.Wake():
			// A batch or abort may have closed the round meanwhile.
			if !s.IsOpen(o.Round) {
				return false
			}
		}
	}
}

// errRelayKey marks an announcement that could not be built because the
// relay's helper key could not be fetched (retried like a delivery).
var errRelayKey = errors.New("server: relay helper key unavailable")

// post sends body to the relay with the bearer token and headers (name,
// value pairs).
func (s *Server) post(ctx context.Context, path string, body []byte, headers ...string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(s.cfg.RelayURL, "/")+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+s.cfg.Token)
	req.Header.Set("Content-Type", "application/octet-stream")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return &rounds.RelayError{Status: resp.Status, Code: resp.StatusCode, Outcome: resp.Header.Get(api.OutcomeHeader),
			Body: strings.TrimSpace(string(msg))}
	}
	return nil
}

// waitRound waits until the round is closed (batch or abort), or abandons
// it at deadline (the round's close cap) + BatchGrace, or, for a charged secure-summation round,
// BatchGrace after its batch was answered (then it is lost).
//
// Both graces count only while the relay answers /healthz. A relay that
// is down cannot have closed the round the way it will when it is back:
// it persists what it owes before acknowledging (a batch, a close, its
// noised share) and resends it, or aborts a round it had open (docs/
// secagg.md, "Crash safety"; docs/protocol.md); and no other round could
// run without it anyway. So while it does not answer the round waits, the
// dashboard says why (api.Status.Waiting), and the grace starts again when
// it is back; only a relay that is up and silent for the grace closes the
// round without it.
func (s *Server) waitRound(ctx context.Context, round int, deadline, closeCap time.Time) {
	fireAt := deadline.Add(s.cfg.BatchGrace)
	timer := time.NewTimer(time.Until(fireAt))
	defer timer.Stop()
	reset := func(t time.Time) { fireAt = t; timer.Reset(time.Until(t)) }
	probe := min(5*time.Second, s.cfg.BatchGrace)
	relayWasDown := false
	defer s.relayDown.CompareAndSwap(int64(round), 0)
	for s.IsOpen(round) {
		select {
		case <-ctx.Done():
			return
		case <-s.Wake(): // a charge before the deadline: its grace ends first, and a relay down then must be seen
			if u := s.PendingUntil(round); !u.IsZero() && u.Before(fireAt) {
				reset(u)
			}
		case <-timer.C:
			e, until := s.Expire(round, time.Now(), closeCap, relayWasDown, func() bool { return s.relayUp(ctx) })
			switch e {
			case rounds.ExpiryWait:
				reset(until)
			case rounds.ExpiryProbe:
				if !relayWasDown {
					s.log.Warn("the round waits for the relay, which does not answer", "round", round, "charged", !s.PendingUntil(round).IsZero())
					s.relayDown.Store(int64(round))
					s.publishStatus()
				}
				relayWasDown = true
				reset(time.Now().Add(probe))
			case rounds.ExpiryRegrace:
				relayWasDown = false
				s.relayDown.Store(0)
				s.publishStatus()
				s.log.Info("the relay is back; the round waits for it once more", "round", round, "grace", s.cfg.BatchGrace)
				reset(until)
			case rounds.ExpiryAbandon:
				s.Abandon(round, fmt.Sprintf("no batch or abort within %v after the deadline", s.cfg.BatchGrace))
				return
			}
		}
	}
}

// relayUp reports whether the relay answers GET /healthz with 2xx within
// five seconds.
func (s *Server) relayUp(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(s.cfg.RelayURL, "/")+"/healthz", nil)
	if err != nil {
		return false
	}
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 512))
	return resp.StatusCode/100 == 2
}
