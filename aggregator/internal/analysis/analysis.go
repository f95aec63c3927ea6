// Package analysis is the aggregator's analysis of one shuffle-protocol
// batch, as a function of the key, the ledger's charge, the round's
// protocol and the batch's bytes, with no HTTP and no server state:
//
//  1. Check: parse the frame strictly against the round's parameters
//     (wire.ParseBatch: sizes, every dimension exactly n_p, the declared
//     report count possible for the messages, see below) and refuse a
//     sealed message that appears twice. A refused batch is *Rejected,
//     with a reason; nothing is charged or opened.
//  2. Charge: the batch's release (Protocol.Release with the batch's n
//     and n_p) goes to the charge function, the privacy ledger's durable
//     charge. If it fails nothing is opened.
//  3. Open and estimate (Estimate): every message is opened on workers
//     goroutines (Open), inadmissible values replaced by the blanket mean,
//     and the FLAME analyzer debiases the sum into the round's mean update
//     with n = Batch.Reports.
//
// The order is the guarantee: nothing of a batch is decrypted unless the
// ledger recorded its release first (docs/architecture.md, "Where each
// invariant lives"; TestBudgetRefusalDecryptsNothing).
//
// The report count n is the relay's claim; the estimator divides by it.
// wire.ParseBatch refuses every count no honest relay can send: n below
// MinBatch (so never zero), above the check-ins, or n times the messages
// of one report above the batch's messages (for SS-Simple, where every
// report holds every dimension, n > n_p). A malicious relay that inflates
// n within that range scales the update down and is out of scope
// (docs/threat-model.md).
package analysis

import (
	"errors"
	"fmt"

	"github.com/blanket-fl/blanket/aggregator/internal/sealkey"
	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/wire"
)

// Reasons a batch is rejected before its charge.
const (
	// ReasonMalformed: wire.ParseBatch refused the frame (its size, a
	// header field disagreeing with the round, an impossible report
	// count, a dimension not holding exactly n_p messages).
	ReasonMalformed = "malformed"
	// ReasonDuplicateSeal: two messages share an HPKE encapsulation (a
	// replayed report).
	ReasonDuplicateSeal = "duplicate seal"
)

// Rejected is a batch refused before its charge: nothing of it was
// charged or opened.
type Rejected struct {
	Reason string // ReasonMalformed or ReasonDuplicateSeal
	Err    error
}

func (r *Rejected) Error() string { return "batch rejected (" + r.Reason + "): " + r.Err.Error() }
func (r *Rejected) Unwrap() error { return r.Err }

// Check parses frame against the round's parameters and refuses a batch
// whose sealed messages repeat an encapsulation (every honest seal has a
// fresh one: the same one twice is a replayed report the relay let
// through, which would count one volunteer's values twice). Errors are
// *Rejected.
func Check(frame []byte, p wire.Params) (*wire.Batch, error) {
	b, err := wire.ParseBatch(frame, p)
	if err != nil {
		return nil, &Rejected{Reason: ReasonMalformed, Err: err}
	}
	if i, j, dup := DuplicateSealed(b); dup {
		return nil, &Rejected{Reason: ReasonDuplicateSeal, Err: fmt.Errorf("a sealed message appears twice (messages %d and %d)", i, j)}
	}
	return b, nil
}

// DuplicateSealed reports the first pair of messages of b that share an
// HPKE encapsulated key (the first envelope.EncSize bytes of the sealed
// part), if any.
func DuplicateSealed(b *wire.Batch) (first, again int, dup bool) {
	seen := make(map[[envelope.EncSize]byte]int, len(b.Messages))
	for i, m := range b.Messages {
		var k [envelope.EncSize]byte
		copy(k[:], m.Sealed)
		if j, ok := seen[k]; ok {
			return j, i, true
		}
		seen[k] = i
	}
	return 0, 0, false
}

// Result is what Analyze learned of a batch.
type Result struct {
	// Batch is the parsed batch (nil when Check rejected it).
	Batch *wire.Batch
	// Charged: the charge function accepted the batch's release.
	Charged bool
	// Opened: the messages were opened (Counts holds their counts).
	Opened bool
	Counts Counts
	// Update is the debiased mean update of the round (the server
	// learning rate not applied); nil unless Analyze returned nil.
	Update []float64
}

// Analyze checks, charges, opens and estimates one batch of round (see
// the package documentation). Errors: *Rejected (nothing charged or
// opened); charge's error as is (nothing opened; Result.Charged false);
// the estimate's error (Result.Charged true: the budget stays spent, the
// model must not be updated).
//
// Guarantee: charge is called, and must have returned nil, before any
// message is opened; it is called at most once.
func Analyze(key *sealkey.PrivateKey, charge func(privacy.Release) error, proto *Protocol, p wire.Params, round uint64, frame []byte, workers int) (Result, error) {
	b, err := Check(frame, p)
	if err != nil {
		return Result{}, err
	}
	res := Result{Batch: b}
	if err := charge(proto.Release(int(round), int(b.Reports), int(b.NP))); err != nil {
		return res, err
	}
	res.Charged = true
	res.Counts, res.Opened, res.Update, err = Estimate(key, proto, round, b, workers)
	return res, err
}

// Estimate opens a charged batch (Open) and returns its counts, whether
// it was opened, and the debiased mean update with n = b.Reports. The
// caller must have charged b's release: Estimate decrypts.
func Estimate(key *sealkey.PrivateKey, proto *Protocol, round uint64, b *wire.Batch, workers int) (Counts, bool, []float64, error) {
	if proto.Analyzer == nil {
		return Counts{}, false, nil, errors.New("the current protocol is secure summation: no shuffle analyzer")
	}
	mb, counts := Open(key, round, b, proto.Center, proto.Spec.Admissible, workers)
	est, err := proto.Analyzer.Estimate(mb, int(b.Reports))
	if err != nil {
		return counts, true, nil, err
	}
	return counts, true, est, nil
}
