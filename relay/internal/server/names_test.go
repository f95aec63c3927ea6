package server

import "github.com/blanket-fl/blanket/relay/internal/sumrelay"

// The tests' names of the reasons reports are dropped before they reach
// the aggregator, of how a secure-summation round ended, and of a
// volunteer's receipt states (relay/internal/sumrelay).
const (
	DropUnopened     = sumrelay.DropUnopened
	DropLate         = sumrelay.DropLate
	SecAggForwarded  = sumrelay.SecAggForwarded
	SecAggRefused    = sumrelay.SecAggRefused
	SecAggInvalid    = sumrelay.SecAggInvalid
	SecAggObsolete   = sumrelay.SecAggObsolete
	SecAggSuperseded = sumrelay.SecAggSuperseded
	SecAggFailed     = sumrelay.SecAggFailed
	ReceiptPending   = sumrelay.ReceiptPending
	ReceiptIncluded  = sumrelay.ReceiptIncluded
	ReceiptExcluded  = sumrelay.ReceiptExcluded
	ReceiptUnknown   = sumrelay.ReceiptUnknown
)
