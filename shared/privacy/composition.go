package privacy

import (
	"math"

	"github.com/blanket-fl/blanket/shared/internal/check"
)

// AdvancedComposition returns the guarantee of the t-fold adaptive
// composition of (eps, delta)-DP mechanisms with slack deltaPrime:
//
//	ε' = sqrt(2t·ln(1/δ'))·ε + t·ε·(e^ε − 1),   δ' total = t·δ + δ'.
//
// This is FLAME Lemma 3 and APES Lemma 2 (Dwork, Rothblum and Vadhan 2010;
// Dwork and Roth 2014, Theorem 3.20). It holds for every ε ≥ 0, t ≥ 1,
// δ' ∈ (0,1); it is refused only when the total δ reaches 1.
func AdvancedComposition(eps, delta float64, t int, deltaPrime float64) (epsTotal, deltaTotal float64, err error) {
	if err := check.NonNegative(ErrInvalidParameter, "eps", eps); err != nil {
		return 0, 0, err
	}
	if err := check.DeltaOrZero(ErrInvalidParameter, "delta", delta); err != nil {
		return 0, 0, err
	}
	if err := check.Count(ErrInvalidParameter, "t", t, 1); err != nil {
		return 0, 0, err
	}
	if err := check.OpenUnit(ErrInvalidParameter, "deltaPrime", deltaPrime); err != nil {
		return 0, 0, err
	}
	deltaTotal = float64(t)*delta + deltaPrime
	if deltaTotal >= 1 {
		return 0, 0, outside("t·delta + deltaPrime = %g >= 1 is no guarantee", deltaTotal)
	}
	ft := float64(t)
	epsTotal = math.Sqrt(2*ft*math.Log(1/deltaPrime))*eps + ft*eps*math.Expm1(eps)
	return epsTotal, deltaTotal, nil
}

// composeMin is the composition of FLAME eqs. (2)-(3) and Theorem 4:
// the smaller of basic and advanced composition over t mechanisms, each
// (eps, delta)-DP, using δ' = delta as the advanced-composition slack, and
// reporting the total δ as (t+1)·delta whichever branch is smaller (the
// papers state δ_c = δ_cd(t+1); basic composition alone needs only t·δ_cd,
// so the stated δ is an upper bound in both branches).
func composeMin(eps, delta float64, t int) (epsTotal, deltaTotal float64, err error) {
	adv, deltaTotal, err := AdvancedComposition(eps, delta, t, delta)
	if err != nil {
		return 0, 0, err
	}
	return math.Min(float64(t)*eps, adv), deltaTotal, nil
}

// Subsample returns the guarantee of running an (eps, delta)-DP mechanism
// (with respect to replacing one record) on a uniformly random subset of m
// of the n records, q = m/n:
//
//	(ln(1 + q(e^ε − 1)), q·δ).
//
// FLAME Lemma 4 (Balle, Barthe and Gaboardi 2018, sampling without
// replacement under the substitution relation). q must lie in (0, 1].
func Subsample(eps, delta, q float64) (epsSub, deltaSub float64, err error) {
	if err := check.NonNegative(ErrInvalidParameter, "eps", eps); err != nil {
		return 0, 0, err
	}
	if err := check.DeltaOrZero(ErrInvalidParameter, "delta", delta); err != nil {
		return 0, 0, err
	}
	if !check.Finite(q) || q <= 0 || q > 1 {
		return 0, 0, invalid("q = %v, want 0 < q <= 1", q)
	}
	return math.Log1p(q * math.Expm1(eps)), q * delta, nil
}
