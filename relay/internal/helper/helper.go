// Package helper is the relay's side of one secure-summation round
// (docs/secagg.md) as a transport-free state machine, beside the round
// rules of relay/internal/round: no HTTP, no files, no timers, no
// metrics. The transport (relay/internal/server) feeds it reports as they
// arrive and the aggregator's answers as they come back, and sends what it
// returns.
//
//	Prepare (any goroutine): open one helper share, VDAF PrepInit.
//	Add (in arrival order): the report's 'P' entry; it awaits a verdict.
//	Verdicts: the leader's 'M' entries for the oldest awaiting reports, in
//	          order; each accepted report's output share is folded into
//	          the running aggregate and the report dropped.
//	Release:  once nothing awaits a verdict, and only for a round the
//	          aggregator says it charged with exactly the helper's accepted
//	          count, within the relay's own floor (at least the larger of
//	          the announced and the relay's minimum batch, and no more than
//	          the stated share of reports rejected, roundspec.Floor): the
//	          aggregate share with the relay's noise, once ('A').
//
// The relay never holds more of a report than its 'P' entry and prep
// state between Add and its verdict. With -prep-jobs, a report's prep
// state is made on a replica of the relay and passes, as bytes, through
// the relay's PostgreSQL schema (relay/internal/prepjob), where the
// helper key is too.
package helper

import (
	"errors"
	"fmt"

	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/secagg"
)

// ErrBelowMinBatch: the aggregator answered a round with fewer accepted
// reports than the minimum batch (the larger of the announced one and the
// relay's own); the relay does not noise it. It is roundspec.ErrBelowFloor.
var ErrBelowMinBatch = roundspec.ErrBelowFloor

// ErrTooManyRejected: more than the relay's stated share of the round's
// reports failed the leader's verification; the relay does not noise it.
// It is roundspec.ErrTooManyRejected.
var ErrTooManyRejected = roundspec.ErrTooManyRejected

// ErrCountMismatch: the aggregator's accepted count is not the helper's.
var ErrCountMismatch = errors.New("the aggregator's accepted count differs from the helper's")

// Opener opens a helper share sealed to the relay for a round
// (helperkey.Key.OpenHelperShare).
type Opener func(round uint64, sealed []byte, want int) ([]byte, error)

// Helper is one round's helper state. Prepare is safe for concurrent use;
// the other methods are not.
type Helper struct {
	eng      secagg.Engine
	r        *secagg.Round
	open     Opener
	minBatch int             // the announced minimum batch
	floor    roundspec.Floor // the relay's own, from its start

	awaiting []secagg.Prep // reports sent, in order, awaiting their verdicts
	nonces   map[[16]byte]struct{}
	agg      *secagg.Aggregate
	added    int
	rejected map[secagg.Reason]int
	released bool
}

// New returns the helper of round r (r.ID()) with engine eng (the helper's),
// the announced minimum batch and the relay's own floor (which no
// announcement lowers).
func New(r *secagg.Round, eng secagg.Engine, open Opener, minBatch int, floor roundspec.Floor) (*Helper, error) {
	if r == nil || eng == nil || eng.Leader() || open == nil {
		return nil, errors.New("helper: needs a round, a helper engine and an opener")
	}
	if err := floor.Validate(); err != nil {
		return nil, fmt.Errorf("helper: %w", err)
	}
	return &Helper{eng: eng, r: r, open: open, minBatch: minBatch, floor: floor, agg: eng.NewAggregate(),
		nonces: make(map[[16]byte]struct{}), rejected: make(map[secagg.Reason]int)}, nil
}

// Prepared is one report after Prepare.
type Prepared struct{ p secagg.Prep }

// Prepare opens one sealed helper share and runs PrepInit on it. ok is
// false when the share does not open (another key, round or role, or
// altered bytes): the report is dropped before it reaches the aggregator
// (the caller counts it). It changes nothing in h.
func (h *Helper) Prepare(sealed []byte) (p Prepared, ok bool) {
	pt, err := h.open(h.r.ID(), sealed, h.r.HelperShareSize())
	if err != nil {
		return Prepared{}, false
	}
	return Prepared{h.eng.PrepInit(pt)}, true
}

// PreparedApart is a report another replica of the relay opened and
// prepared (relay/internal/prepjob: the same open and PrepInit as
// Prepare, the preparation carried as bytes and parsed by
// secagg.Round.ParseHelperPrep), to Add like one Prepare returned.
func PreparedApart(p secagg.Prep) Prepared { return Prepared{p} }

// Add appends a prepared report in the order its leader share goes to the
// aggregator and returns its 'P' entry. Duplicate nonces are decided on
// accepted reports only (Verdicts): a report that merely copies a share
// of another, and fails preparation, must not displace it (issue 18).
func (h *Helper) Add(p Prepared) (secagg.Entry, error) {
	if h.released {
		return secagg.Entry{}, fmt.Errorf("helper: report added after the release: %w", secagg.ErrProtocol)
	}
	pr := p.p
	h.added++
	h.awaiting = append(h.awaiting, pr)
	e := pr.Entry
	// The prep share is needed only in the 'P' entry; the state stays.
	h.awaiting[len(h.awaiting)-1].Payload = nil
	return e, nil
}

// Verdicts applies the leader's 'M' entries to the oldest reports
// awaiting them, in order: an accepted one is finished (PrepNext), folded
// into the running aggregate and dropped. An entry that contradicts the
// helper (more entries than reports, another nonce, accepting a report
// the helper rejected or a nonce already accepted this round, a prep
// message that does not match) is a protocol violation: nothing of the
// message is applied.
func (h *Helper) Verdicts(m []secagg.Entry) error {
	if len(m) > len(h.awaiting) {
		return fmt.Errorf("helper: %d verdicts for %d reports: %w", len(m), len(h.awaiting), secagg.ErrProtocol)
	}
	outs := make([]secagg.OutShare, len(m))
	fresh := make(map[[16]byte]struct{}, len(m))
	for i, e := range m {
		out, err := h.eng.Next(h.awaiting[i], e)
		if err != nil {
			return fmt.Errorf("helper: verdict %d: %w", i, err)
		}
		if out != nil {
			_, old := h.nonces[e.Nonce]
			_, now := fresh[e.Nonce]
			if old || now {
				return fmt.Errorf("helper: the leader accepted nonce %x twice: %w", e.Nonce, secagg.ErrProtocol)
			}
			fresh[e.Nonce] = struct{}{}
		}
		outs[i] = out
	}
	for i, e := range m {
		if outs[i] != nil {
			if err := h.agg.Fold(outs[i]); err != nil {
				return err
			}
			h.nonces[e.Nonce] = struct{}{}
		} else {
			h.rejected[e.Reason]++
		}
		h.awaiting[i] = secagg.Prep{}
	}
	h.awaiting = h.awaiting[len(m):]
	return nil
}

// MarshalAggregate encodes the running aggregate (the exact, un-noised
// partial sum and its count) for the relay's state directory, so that a
// restart after the aggregator's charge can still release the round
// (Restore). It never leaves the relay.
func (h *Helper) MarshalAggregate() ([]byte, error) { return h.agg.MarshalBinary() }

// Restore returns a helper whose every report has its verdict, from
// MarshalAggregate's bytes and the number of reports it had added (the
// persisted close's count): what a restarted relay needs to Release.
func Restore(r *secagg.Round, eng secagg.Engine, open Opener, minBatch int, floor roundspec.Floor, aggregate []byte, added int) (*Helper, error) {
	h, err := New(r, eng, open, minBatch, floor)
	if err != nil {
		return nil, err
	}
	if h.agg, err = r.ParseAggregate(aggregate); err != nil {
		return nil, err
	}
	if added < h.agg.Count() {
		return nil, fmt.Errorf("helper: %d reports added, %d in the aggregate: %w", added, h.agg.Count(), secagg.ErrProtocol)
	}
	h.added = added
	return h, nil
}

// CheckFloor applies the relay's floor (roundspec.Floor.Check) to the
// reports whose verdicts are in: the accepted ones and those the leader
// rejected. The relay calls it before posting its close, so that a round
// the aggregator cut down is aborted before anything is charged, and
// Release calls it again.
func (h *Helper) CheckFloor() error {
	return h.floor.Check(h.minBatch, h.agg.Count(), h.added-len(h.awaiting)-h.agg.Count())
}

// Awaiting returns how many added reports await their verdict.
func (h *Helper) Awaiting() int { return len(h.awaiting) }

// Added returns how many reports were added.
func (h *Helper) Added() int { return h.added }

// Accepted returns how many reports are in the running aggregate.
func (h *Helper) Accepted() int { return h.agg.Count() }

// Rejected returns the reports the leader's verdicts rejected, by reason.
func (h *Helper) Rejected() map[secagg.Reason]int {
	m := make(map[secagg.Reason]int, len(h.rejected))
	for k, v := range h.rejected {
		m[k] = v
	}
	return m
}

// Release returns the helper's noised aggregate share ('A' message) for a
// round the aggregator charged with leaderAccepted reports, once. It
// refuses (and releases nothing) while reports await verdicts, when
// leaderAccepted is not the helper's count (ErrCountMismatch), when it is
// below the larger of the announced and the relay's minimum batch
// (ErrBelowMinBatch), or when more than the relay's stated share of the
// reports were rejected (ErrTooManyRejected): an aggregator that marks
// honest reports invalid to isolate a few must not get a sum of them.
//
// Guarantee: the share leaves with the relay's discrete Gaussian noise
// (secagg.AggregateShare.AddNoise: rho-zCDP with rho = Δ²/(2σ²) by this
// server's noise alone; src is noise.Secure() in production), and at
// most once, so the aggregator cannot average two noises away.
func (h *Helper) Release(leaderAccepted int, src noise.Source) ([]byte, error) {
	if h.released {
		return nil, fmt.Errorf("helper: aggregate share already released: %w", secagg.ErrProtocol)
	}
	if len(h.awaiting) > 0 {
		return nil, fmt.Errorf("helper: %d reports await their verdicts: %w", len(h.awaiting), secagg.ErrProtocol)
	}
	n := h.agg.Count()
	if leaderAccepted != n {
		return nil, fmt.Errorf("%w: aggregator %d, helper %d", ErrCountMismatch, leaderAccepted, n)
	}
	if err := h.CheckFloor(); err != nil {
		return nil, err
	}
	h.released = true
	share, err := h.agg.Share()
	if err != nil {
		return nil, err
	}
	if err := share.AddNoise(src); err != nil {
		return nil, err
	}
	return share.MarshalBinary()
}
