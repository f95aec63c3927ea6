package pine

import (
	"errors"
	"fmt"
)

// Reason classifies why preparation rejected a report.
type Reason uint8

const (
	// RejectInternal: an unexpected error (also the Reason of an error
	// that is not a *RejectError).
	RejectInternal Reason = iota
	// RejectMalformed: a message has the wrong length or a field element
	// is not canonical.
	RejectMalformed
	// RejectNormEquality: the norm-equality proof failed: the squared norm
	// the client claims is not the squared norm of its gradient (mod q).
	RejectNormEquality
	// RejectInvalidProof: the main PINE proof failed: a claimed bit is not
	// a bit, the claimed squared norm is out of [0, sq_norm_bound], a
	// wraparound result or success bit is false, or the number of
	// successes differs from num_wr_successes; or a proof or share was
	// forged or altered (the two shares then disagree).
	RejectInvalidProof
	// RejectJointRand: the joint randomness seeds of the prep message
	// differ from the ones this aggregator derived (the public share does
	// not match the input shares).
	RejectJointRand
	// RejectEvalPoint: the query randomness hit a root of unity
	// (probability below 2^-55 per report; VDAF-11 Section 7.3.3.2).
	RejectEvalPoint
	numReasons
)

var reasonNames = [numReasons]string{
	"internal error", "malformed", "norm equality failed", "invalid proof",
	"joint randomness mismatch", "bad evaluation point",
}

func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// RejectError is the error of a rejected report.
type RejectError struct {
	Reason Reason
	Err    error
}

func (e *RejectError) Error() string { return fmt.Sprintf("pine: rejected (%v): %v", e.Reason, e.Err) }
func (e *RejectError) Unwrap() error { return e.Err }

func reject(r Reason, err error) error { return &RejectError{Reason: r, Err: err} }

// ReasonOf returns the Reason of err (RejectInternal if err is not a
// *RejectError).
func ReasonOf(err error) Reason {
	var re *RejectError
	if errors.As(err, &re) {
		return re.Reason
	}
	return RejectInternal
}
