package roundspec

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// DefaultMaxRejectedShare is the largest share of a secure-summation
// round's prepared reports that may fail verification before a server
// refuses to release the round (Floor.MaxRejectedShare's default).
//
// Honest PINE clients are rejected with probability about 2^-101 per
// report (docs/pine.md, soundness and completeness), so a round in which
// most reports "fail" is evidence that the leader is marking honest
// reports invalid to isolate a few (the n − 1 attack, docs/threat-model.md).
// Half is the line: an aggregator that rejects honest reports can shrink
// a round of n prepared reports to no fewer than n/2 in the sum, and
// malicious volunteers must be half the crowd to make a round abort.
const DefaultMaxRejectedShare = 0.5

// Errors of Floor.Check.
var (
	// ErrBelowFloor: fewer accepted reports than the larger of the
	// announced minimum batch and the server's own.
	ErrBelowFloor = errors.New("fewer accepted reports than the minimum batch")
	// ErrTooManyRejected: more than MaxRejectedShare of the prepared
	// reports failed verification.
	ErrTooManyRejected = errors.New("too many reports failed verification")
)

// Floor is a server's own condition for releasing (the relay) or charging
// (the aggregator) a secure-summation round, fixed at the server's start
// from its task and configuration and never lowered by an announcement.
// Both servers check it with Check, so they cannot disagree on what it
// means (TestFloorAgrees in the relay's and the aggregator's tests use
// this one function).
//
// What it buys: the relay's noise makes each round (ε, δ)-DP for a
// replace-one neighbour whatever the batch size (docs/privacy.md,
// "Secure summation"), but the minimum batch is the promise that a
// volunteer's update is only ever seen summed with others'. The relay
// cannot check the leader's verdicts (it holds one share); with Floor it
// refuses to release a round that the leader cut down to fewer than
// MinBatch accepted reports, or in which more than MaxRejectedShare of the
// reports were declared invalid.
type Floor struct {
	// MinBatch is the server's own minimum batch (>= 1). The effective
	// minimum of a round is the larger of it and the announced one.
	MinBatch int
	// MaxRejectedShare is in [0, 1): a round in which rejected >
	// MaxRejectedShare × (accepted + rejected) is refused.
	MaxRejectedShare float64
}

// Validate reports whether f is usable.
func (f Floor) Validate() error {
	if f.MinBatch < 1 {
		return fmt.Errorf("roundspec: minimum batch %d, want >= 1", f.MinBatch)
	}
	if !(f.MaxRejectedShare >= 0 && f.MaxRejectedShare < 1) || math.IsNaN(f.MaxRejectedShare) {
		return fmt.Errorf("roundspec: largest rejected share %v, want in [0, 1)", f.MaxRejectedShare)
	}
	return nil
}

// Check decides a round with announcedMin (the announcement's minimum
// batch), accepted reports in the sum and rejected reports that failed
// verification (every prepared report has its verdict). It returns nil, or
// an error wrapping ErrBelowFloor or ErrTooManyRejected that says the
// counts (counts only: nothing about any report).
func (f Floor) Check(announcedMin, accepted, rejected int) error {
	floor := max(f.MinBatch, announcedMin, 1)
	if accepted < floor {
		return fmt.Errorf("%w: %d accepted, minimum %d", ErrBelowFloor, accepted, floor)
	}
	if total := accepted + rejected; float64(rejected) > f.MaxRejectedShare*float64(total) {
		return fmt.Errorf("%w: %d of %d reports rejected, more than %.0f%%", ErrTooManyRejected, rejected, total, 100*f.MaxRejectedShare)
	}
	return nil
}

// CloseWaitFor is the share of the expected reports (volunteers who
// checked in and can still report) whose arrival lets the relay close a
// round at or past its deadline (relay/internal/round, "Closing a round");
// make run says a round closed short below it.
const CloseWaitFor = 0.95

// CloseCapFactor is how many times its announced length (from its opening
// to its deadline) a round may wait past its deadline for reports that are
// still arriving (relay/internal/round, "Closing a round").
const CloseCapFactor = 2

// CloseCap returns the latest a round opened at opened with the announced
// deadline may stay open: deadline + CloseCapFactor × (deadline − opened).
// The relay closes by it; the aggregator waits for a batch until it (plus
// its grace), from its own earlier announcement time, so it never gives up
// on a round the relay still keeps open.
func CloseCap(opened, deadline time.Time) time.Time {
	return deadline.Add(CloseCapFactor * max(deadline.Sub(opened), 0))
}
