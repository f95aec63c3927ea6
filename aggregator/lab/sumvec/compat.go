package sumvec

import "github.com/blanket-fl/blanket/shared/secagg"

// The verdicts, rejections and protocol errors are shared/secagg's, so a
// comparison reads both VDAFs' outcomes in one vocabulary.
type (
	// Reason is secagg.Reason.
	Reason = secagg.Reason
	// Rejection is secagg.Rejection.
	Rejection = secagg.Rejection
)

// The reasons (secagg's).
const (
	Accepted             = secagg.Accepted
	RejectWrongLength    = secagg.RejectWrongLength
	RejectMalformed      = secagg.RejectMalformed
	RejectWrongRound     = secagg.RejectWrongRound
	RejectDuplicateNonce = secagg.RejectDuplicateNonce
	RejectNonceMismatch  = secagg.RejectNonceMismatch
	RejectJointRand      = secagg.RejectJointRand
	RejectInvalidProof   = secagg.RejectInvalidProof
	RejectInternal       = secagg.RejectInternal
	numReasons           = secagg.RejectInternal + 1
)

// ErrProtocol and ErrNoiseOverflow are secagg's.
var (
	ErrProtocol      = secagg.ErrProtocol
	ErrNoiseOverflow = secagg.ErrNoiseOverflow
)

// Counts is secagg.Counts.
func Counts(rs []Rejection) map[Reason]int { return secagg.Counts(rs) }
