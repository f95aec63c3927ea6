package paper

import (
	"github.com/blanket-fl/blanket/shared/internal/check"
	"github.com/blanket-fl/blanket/shared/privacy"
)

// SAPESUserLevel is APES Proposition 1: S-APES with b-dimension
// post-sparsification is (ε^uc, δ^uc)-DP at user level, composing the
// dimension-level (ε^c, δ^c) over 2b dimensions (replacing a user changes
// at most 2b selected dimensions, as the paper argues) by advanced
// composition:
//
//	ε^uc = ε^c·sqrt(4b·ln(1/δ'^uc)) + 2b·ε^c(e^{ε^c} − 1),  δ^uc = δ'^uc + 2b·δ^c.
//
// The same with b = d/2 is not APES's user-level bound for plain APES,
// which composes over d dimensions: use privacy.AdvancedComposition(ε^c, δ^c, d, δ').
func SAPESUserLevel(epsC, deltaC float64, b int, deltaPrime float64) (epsUC, deltaUC float64, err error) {
	if err := check.Count(privacy.ErrInvalidParameter, "b", b, 1); err != nil {
		return 0, 0, err
	}
	return privacy.AdvancedComposition(epsC, deltaC, 2*b, deltaPrime)
}
