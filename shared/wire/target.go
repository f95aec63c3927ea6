package wire

import (
	"fmt"
	"math"
	"strconv"
)

// The privacy target of a run travels beside each announcement, in these
// headers of the aggregator's POST /v1/rounds (docs/protocol.md,
// "Announcing a round"): the relay refuses a secure-summation announcement
// whose target is not the one its own noise ledger composes to, so that
// the two ledgers cannot silently compose at two δ (issue 23).
const (
	TargetEpsilonHeader = "Blanket-Target-Epsilon"
	TargetDeltaHeader   = "Blanket-Target-Delta"
)

// FormatTarget writes a target value so that ParseTarget reads back the
// same float64.
func FormatTarget(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// ParseTarget reads a target value written by FormatTarget: a finite,
// non-negative number.
func ParseTarget(s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("wire: target %q is not a finite non-negative number", s)
	}
	return v, nil
}
