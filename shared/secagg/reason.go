package secagg

import "fmt"

// Reason classifies the outcome of one report in preparation. Callers
// count rejections by Reason (Counts).
type Reason uint8

const (
	// Accepted: the report passed preparation and is in the sum.
	Accepted Reason = iota
	// RejectWrongLength: the input share does not have the round's exact
	// length.
	RejectWrongLength
	// RejectMalformed: wrong version or kind, or a non-canonical field
	// element.
	RejectMalformed
	// RejectWrongRound: the share is bound to another round.
	RejectWrongRound
	// RejectDuplicateNonce: a report with the same nonce came earlier in
	// the round's batch (the first one is kept).
	RejectDuplicateNonce
	// RejectNonceMismatch: the leader's and the helper's shares at the
	// same position of the batch carry different nonces.
	RejectNonceMismatch
	// RejectJointRand: the public share does not match the input share
	// (a share or the public share was altered after sharding, or the two
	// shares come from different reports).
	RejectJointRand
	// RejectInvalidProof: the FLP validity check failed: the measurement
	// is out of range ([0, 2^Bits) per entry) or the proof is forged.
	RejectInvalidProof
	// RejectInternal: an unexpected error of the Prio3 implementation.
	RejectInternal
	// RejectCountBlock: the update passed but one of the report's count
	// blocks (shared/counts: the evaluation or a survey answer) did not:
	// its proof failed, or a block's share was altered after sharding. The
	// whole report is rejected (one count n for the update and the
	// blocks), and counted once, under this reason.
	RejectCountBlock
	numReasons
)

var reasonNames = [numReasons]string{
	"accepted", "wrong length", "malformed", "wrong round", "duplicate nonce",
	"nonce mismatch", "joint randomness mismatch", "invalid proof", "internal error",
	"invalid count block",
}

func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// Rejection is one rejected report: its position in the batch, its nonce
// when it could be read (zero otherwise), the reason and the underlying
// error.
type Rejection struct {
	Index  int
	Nonce  [nonceSize]byte
	Reason Reason
	Err    error
}

func (r Rejection) Error() string {
	return fmt.Sprintf("secagg: report %d rejected (%v): %v", r.Index, r.Reason, r.Err)
}

func (r Rejection) Unwrap() error { return r.Err }

// Counts returns the number of rejections per reason.
func Counts(rs []Rejection) map[Reason]int {
	m := make(map[Reason]int)
	for _, r := range rs {
		m[r.Reason]++
	}
	return m
}
