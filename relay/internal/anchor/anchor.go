// Package anchor is the relay's side of "the relay enforces its own
// guarantee" and "ledgers that anchor each other" (docs/threat-model.md),
// apart from HTTP serving (relay/internal/server answers GET and POST
// /v1/anchor with the same ledger):
//
//   - Admit: a secure-summation announcement is refused unless its round
//     follows the last noised one and its release (roundspec, from the
//     announced parameters) fits the relay's own target: the relay does
//     not even prepare such a round;
//   - Charge: before helper.Release, the round's release is charged to
//     the noise ledger (fsynced); a refusal releases nothing;
//   - at start the noise ledger is suspended until the aggregator's copy
//     of the relay's head has been fetched and the ledger verified
//     against it (Loop); a ledger behind it stays suspended;
//   - after every charge (and every few seconds) the relay posts its head
//     to the aggregator and records the aggregator's head from the reply.
//
// All of it is off when the ledger is nil (tests of other parts).
package anchor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/blanket-fl/blanket/relay/internal/aggclient"
	"github.com/blanket-fl/blanket/relay/internal/round"
	"github.com/blanket-fl/blanket/shared/ledger"
	"github.com/blanket-fl/blanket/shared/wire"
)

// ErrUnchecked suspends the noise ledger until the start check passes.
var ErrUnchecked = errors.New("the noise ledger is not yet checked against the aggregator's copy of its head")

// ErrStopped: the relay stopped before the start check answered.
var ErrStopped = aggclient.ErrStopped

// Exchange makes one GET (body nil) or POST of an anchor to the
// aggregator and returns its answer (aggclient.Client.Anchor).
type Exchange func(ctx context.Context, body []byte) (*wire.Anchor, error)

// Anchor holds the noise ledger's start check and its head's posting.
type Anchor struct {
	l                  *ledger.Ledger // nil: everything is off
	ask                Exchange
	log                *slog.Logger
	retryMin, retryMax time.Duration
	every              time.Duration
	nudge              chan struct{} // wakes Loop after a charge
	checked            chan struct{} // closed once the start check has an answer
}

// New returns the anchor of ledger l (nil: off), suspended until Loop
// checks it. retryMin and retryMax bound the start check's backoff.
func New(l *ledger.Ledger, ask Exchange, log *slog.Logger, retryMin, retryMax time.Duration) *Anchor {
	a := &Anchor{l: l, ask: ask, log: log, retryMin: retryMin, retryMax: retryMax, every: 5 * time.Second,
		nudge: make(chan struct{}, 1), checked: make(chan struct{})}
	if l != nil {
		l.Suspend(ErrUnchecked)
	}
	return a
}

// Ledger returns the noise ledger (nil: none).
func (a *Anchor) Ledger() *ledger.Ledger { return a.l }

// Admit checks a secure-summation announcement against the noise ledger
// (nil: admitted): ledger.ErrBudgetExhausted when its release, at the
// announced minimum batch, does not fit the relay's target (the ledger's
// accountant: docs/privacy.md), ErrUnchecked before the start check.
func (a *Anchor) Admit(ann *wire.Announcement) error {
	if a.l == nil || ann.Params.Protocol != wire.ProtocolSecAgg {
		return nil
	}
	spec, _, _, err := round.SecAggSpec(ann.Params)
	if err != nil {
		return nil // refused as invalid parameters by the round machine
	}
	_, err = a.l.CanCharge(spec.Release(int(ann.Round), int(ann.Params.MinBatch), 0))
	return err
}

// Charge charges round num's release (its announced parameters p, its
// accepted reports) to the noise ledger before its share is noised. A
// relay that has just restarted has not yet checked its ledger against
// the aggregator's copy of its head (Loop): a round it resumes waits for
// that check instead of being refused by it (which lost the round though
// both servers were up); ErrStopped if ctx ends first.
func (a *Anchor) Charge(ctx context.Context, num uint64, p wire.Params, accepted int) error {
	if a.l == nil {
		return nil
	}
	select {
	case <-a.checked:
	case <-ctx.Done():
		return ErrStopped
	}
	spec, _, _, err := round.SecAggSpec(p)
	if err != nil {
		return err
	}
	if err := a.l.Charge(spec.Release(int(num), accepted, 0)); err != nil {
		return err
	}
	select {
	case a.nudge <- struct{}{}:
	default:
	}
	return nil
}

// Check fetches the relay's head as the aggregator holds it and verifies
// the noise ledger against it (ledger.ErrRollback: the relay's state was
// rolled back, refuse), and records the aggregator's own head
// (ledger.ErrRollback: the aggregator's was). Any other error: the
// aggregator could not be asked.
func (a *Anchor) Check(ctx context.Context) error {
	if a.l == nil {
		return nil
	}
	ans, err := a.ask(ctx, nil)
	if err != nil {
		return fmt.Errorf("anchor: asking the aggregator for the relay's ledger head: %w", err)
	}
	if err := a.l.Verify(ans.Held); err != nil {
		return err
	}
	return a.l.RecordPeer(ans.Own)
}

// Loop keeps the noise ledger suspended until Check passes (retrying
// while the aggregator is unreachable; a rollback stays suspended), then
// posts the relay's head whenever it changes (and every few seconds),
// until ctx ends.
func (a *Anchor) Loop(ctx context.Context) {
	l := a.l
	if l == nil {
		close(a.checked)
		return
	}
	wait := a.retryMin
	for {
		err := a.Check(ctx)
		if err == nil {
			l.Resume()
			close(a.checked)
			a.log.Info("noise ledger checked against the aggregator's copy of its head", "count", l.Head().Count)
			break
		}
		if errors.Is(err, ledger.ErrRollback) {
			l.Suspend(err)
			close(a.checked)
			a.log.Error("state rollback detected: the relay refuses to noise any round", "err", err)
			return
		}
		a.log.Warn("cannot check the noise ledger yet; refusing to noise until then", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, a.retryMax, 2*time.Second) // a cheap GET; rounds wait for it
	}
	var sent wire.Head
	tick := time.NewTicker(a.every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.nudge:
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
		ans, err := a.ask(ctx, body)
		if err != nil {
			a.log.Warn("cannot post the noise ledger's head to the aggregator; will retry", "err", err)
			continue
		}
		if err := l.RecordPeer(ans.Own); err != nil {
			l.Suspend(err)
			a.log.Error("the aggregator's ledger head went back; refusing to noise", "err", err)
			return
		}
		sent = h
	}
}
