package paper

import (
	"github.com/blanket-fl/blanket/shared/internal/check"
	"github.com/blanket-fl/blanket/shared/privacy"
)

// BasicComposition returns the guarantee of the t-fold adaptive composition
// of (eps, delta)-DP mechanisms: (t·eps, t·delta).
//
// FLAME Lemma 2 states it for pure ε-DP; the (tε, tδ) form for approximate
// DP is the standard basic composition theorem (Dwork and Roth 2014,
// Theorem 3.16).
func BasicComposition(eps, delta float64, t int) (epsTotal, deltaTotal float64, err error) {
	if err := check.NonNegative(privacy.ErrInvalidParameter, "eps", eps); err != nil {
		return 0, 0, err
	}
	if err := check.DeltaOrZero(privacy.ErrInvalidParameter, "delta", delta); err != nil {
		return 0, 0, err
	}
	if err := check.Count(privacy.ErrInvalidParameter, "t", t, 1); err != nil {
		return 0, 0, err
	}
	deltaTotal = float64(t) * delta
	if deltaTotal >= 1 {
		return 0, 0, outside("t·delta = %g >= 1 is no guarantee", deltaTotal)
	}
	return float64(t) * eps, deltaTotal, nil
}
