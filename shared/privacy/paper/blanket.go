package paper

import (
	"math"

	"github.com/blanket-fl/blanket/shared/internal/check"
	"github.com/blanket-fl/blanket/shared/privacy"
)

// LaplaceBlanketGamma returns the blanket probability γ = e^{−ε/2} of the
// Laplace mechanism with scale 1/ε on inputs in [0, 1] (FLAME, after
// Lemma 1; BBGN'19 Section 5). It is the total mass of inf_x μ_x(y).
func LaplaceBlanketGamma(epsLocal float64) (float64, error) {
	if err := check.Positive(privacy.ErrInvalidParameter, "epsLocal", epsLocal); err != nil {
		return 0, err
	}
	return math.Exp(-epsLocal / 2), nil
}

// Corollary1Condition checks the validity condition of BBGN'19's generic
// amplification corollary (FLAME Corollary 1): ε_l ≤ ln(n/ln(1/δ_c))/2.
//
// The corollary itself, ε_c = O((1 ∧ ε_l)·e^{ε_l}·sqrt(ln(1/δ_c)/n)), is an
// asymptotic statement whose constant the corollary does not give, so no
// number can be computed from it; use BennettEpsilon (the numerical form of
// the same analysis) for a concrete ε_c. FLAME's code asserts this condition
// before applying the Bennett bound, so it is exposed for that use.
func Corollary1Condition(epsLocal float64, n int, delta float64) error {
	if err := check.Positive(privacy.ErrInvalidParameter, "epsLocal", epsLocal); err != nil {
		return err
	}
	if err := check.Count(privacy.ErrInvalidParameter, "n", n, 1); err != nil {
		return err
	}
	if err := check.OpenUnit(privacy.ErrInvalidParameter, "delta", delta); err != nil {
		return err
	}
	lim := math.Log(float64(n)/math.Log(1/delta)) / 2
	if !(epsLocal <= lim) {
		return outside("FLAME Corollary 1 needs eps_l <= ln(n/ln(1/delta))/2 = %.6g, got %.6g", lim, epsLocal)
	}
	return nil
}
