package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Outcome is what the aggregator said about one stored frame
// (docs/protocol.md, "Relay-aggregator outcomes"). Every outcome but Retry
// is definitive: the frame is removed from the outbox and never sent
// again.
type Outcome uint8

const (
	// Retry: no definitive answer (network error, 5xx, an unreadable
	// reply): send the identical bytes again after a backoff.
	Retry Outcome = iota
	// Accepted: the aggregator processed the frame now.
	Accepted
	// Duplicate: the aggregator had already processed this frame (a resend
	// whose first answer was lost).
	Duplicate
	// Obsolete: the aggregator has moved on: the round is closed there
	// another way (abandoned, aborted, another batch) or was never open.
	Obsolete
	// Invalid: the aggregator can never take these bytes.
	Invalid
)

var outcomeNames = [...]string{Retry: "retry", Accepted: "accepted", Duplicate: "duplicate", Obsolete: "obsolete", Invalid: "invalid"}

// String returns the outcome's name as used in logs and metrics.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// Final reports whether the outcome ends the frame's delivery.
func (o Outcome) Final() bool { return o != Retry }

// DeliverFunc makes one delivery attempt of a stored frame and returns the
// aggregator's outcome and, for logs, a short reason (never payload
// bytes).
type DeliverFunc func(ctx context.Context, e Entry, frame []byte) (Outcome, string)

// SenderConfig configures a Sender.
type SenderConfig struct {
	Deliver DeliverFunc
	Logger  *slog.Logger
	// RetryMin and RetryMax bound the exponential backoff between attempts
	// of one frame (RetryMin > 0, RetryMax >= RetryMin).
	RetryMin, RetryMax time.Duration
	// OnFinal, if set, is called once per frame with its definitive
	// outcome, after the frame left the outbox.
	OnFinal func(e Entry, o Outcome, why string)
}

// SenderStats counts delivery attempts and definitive outcomes.
type SenderStats struct {
	Attempts uint64            `json:"attempts"`
	Failures uint64            `json:"failures"` // attempts answered Retry
	Outcomes map[string]uint64 `json:"outcomes"` // accepted, duplicate, obsolete, invalid
	Pending  int               `json:"pending"`  // frames being delivered
}

// Sender delivers the outbox's frames to the aggregator: each stored frame
// independently, so a frame the aggregator keeps failing never delays
// another round's (no head-of-line blocking), each with its own
// exponential backoff, resending the identical stored bytes until a
// definitive outcome, then removing it. It is the relay's only retry loop.
type Sender struct {
	ob  Store
	cfg SenderConfig

	attempts, failures atomic.Uint64
	outcomes           [len(outcomeNames)]atomic.Uint64

	mu      sync.Mutex
	ctx     context.Context // set by Run; nil before
	queued  []Entry         // enqueued before Run
	active  map[Entry]bool
	wg      sync.WaitGroup
	stopped bool
}

// NewSender returns a sender for ob's frames; Run starts it.
func NewSender(ob Store, cfg SenderConfig) (*Sender, error) {
	switch {
	case ob == nil:
		return nil, errors.New("outbox: nil outbox")
	case cfg.Deliver == nil:
		return nil, errors.New("outbox: nil deliver function")
	case cfg.Logger == nil:
		return nil, errors.New("outbox: nil logger")
	case cfg.RetryMin <= 0 || cfg.RetryMax < cfg.RetryMin:
		return nil, fmt.Errorf("outbox: retry bounds %v..%v: need 0 < min <= max", cfg.RetryMin, cfg.RetryMax)
	}
	return &Sender{ob: ob, cfg: cfg, active: make(map[Entry]bool)}, nil
}

// Enqueue schedules the stored frame e for delivery. A frame already being
// delivered is not scheduled twice; before Run, frames wait for it.
func (s *Sender) Enqueue(e Entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.active[e] {
		return
	}
	s.active[e] = true
	if s.ctx == nil {
		s.queued = append(s.queued, e)
		return
	}
	s.startLocked(e)
}

func (s *Sender) startLocked(e Entry) {
	ctx := s.ctx
	s.wg.Go(func() { s.deliver(ctx, e) })
}

// Run delivers until ctx is done, then waits for the attempts under way
// to return. Frames without a definitive outcome stay in the outbox for
// the next start.
func (s *Sender) Run(ctx context.Context) {
	s.mu.Lock()
	s.ctx = ctx
	for _, e := range s.queued {
		s.startLocked(e)
	}
	s.queued = nil
	s.mu.Unlock()
	<-ctx.Done()
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.wg.Wait()
}

// Stats returns the counters.
func (s *Sender) Stats() SenderStats {
	st := SenderStats{Attempts: s.attempts.Load(), Failures: s.failures.Load(), Outcomes: make(map[string]uint64, 4)}
	for o := Accepted; int(o) < len(outcomeNames); o++ {
		st.Outcomes[o.String()] = s.outcomes[o].Load()
	}
	s.mu.Lock()
	st.Pending = len(s.active)
	s.mu.Unlock()
	return st
}

func (s *Sender) done(e Entry) {
	s.mu.Lock()
	delete(s.active, e)
	s.mu.Unlock()
}

// deliver is the retry loop of one frame.
func (s *Sender) deliver(ctx context.Context, e Entry) {
	defer s.done(e)
	log := s.cfg.Logger.With("round", e.Round, "kind", string(e.Kind))
	b, err := s.ob.Get(e.Round, e.Kind)
	if err != nil {
		// Nothing to send (removed meanwhile) or unreadable: counted
		// invalid, so it is never retried blindly.
		log.Error("persisted frame unreadable; dropping it", "err", err)
		s.final(log, e, Invalid, err.Error())
		return
	}
	wait := s.cfg.RetryMin
	for attempt := 1; ; attempt++ {
		s.attempts.Add(1)
		out, why := s.cfg.Deliver(ctx, e, b)
		if out.Final() {
			s.final(log, e, out, why)
			return
		}
		if ctx.Err() != nil {
			return
		}
		s.failures.Add(1)
		log.Warn("send to aggregator failed; will resend the same bytes", "attempt", attempt, "reason", why, "retry_in", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, s.cfg.RetryMax)
	}
}

func (s *Sender) final(log *slog.Logger, e Entry, out Outcome, why string) {
	if err := s.ob.Remove(e.Round, e.Kind); err != nil {
		log.Error("cannot remove a delivered frame from the outbox", "outcome", out.String(), "err", err)
	}
	s.outcomes[out].Add(1)
	switch out {
	case Accepted:
		log.Info("delivered", "outcome", out.String())
	case Duplicate:
		log.Info("aggregator already had it; dropped", "outcome", out.String(), "detail", why)
	default:
		log.Warn("aggregator will not take it; dropped", "outcome", out.String(), "detail", why)
	}
	if s.cfg.OnFinal != nil {
		s.cfg.OnFinal(e, out, why)
	}
}
