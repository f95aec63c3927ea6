package privacy

import (
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/shared/internal/check"
	"github.com/blanket-fl/blanket/shared/privacy/pld"
)

// accountGaussian accounts central Gaussian releases (DP-FL: noise
// N(0, (σ·Δ)²) on a sum of L2 sensitivity Δ, σ = Release.NoiseMultiplier,
// Δ as the ledger records it: FLAME's DP-FL baseline doubles the
// clipping norm for replacement neighbours). Two rows:
//
//   - exact: T Gaussian releases with multipliers σ_r compose to one
//     Gaussian with μ = sqrt(Σ 1/σ_r²) (Dong, Roth, Su 2022, Corollary 2),
//     whose exact δ(ε) is Balle and Wang's (ICML 2018, Theorem 8,
//     pld.GaussianDelta); ε is found by bisection, rounded up;
//   - PLD: pld.Gaussian composed by FFT (a check on the exact row).
//
// Rows are returned only if every release is a central Gaussian one.
func accountGaussian(runs []run, delta float64) []AccountRow {
	invMu2 := 0.0
	for _, u := range runs {
		if u.r.Protocol != ProtocolCentralGaussian {
			return nil
		}
		invMu2 += float64(u.count) / (u.r.NoiseMultiplier * u.r.NoiseMultiplier)
	}
	mu := math.Sqrt(invMu2)
	const cite = "Balle-Wang ICML'18 Thm 8; Dong-Roth-Su 2022 Cor. 2"
	eps, err := gaussianEpsilon(mu, delta)
	rows := []AccountRow{{Bound: makeBound("central Gaussian, exact", cite, eps, delta, err), Family: FamilyCentralGaussian, Amplification: AmplificationNone, Composition: CompositionExact}}

	const pcite = "pld.Gaussian, PLD/FFT composition (Koskela et al. 2020)"
	h := math.Min(1e-3, math.Max(1e-6, mu/1000))
	opt := pld.Options{Width: h, Method: pld.ConnectDots}
	var total *pld.PLD
	for _, u := range runs {
		p, err := pld.Gaussian(u.r.NoiseMultiplier, 1, opt)
		if err == nil && u.count > 1 {
			p, err = p.SelfCompose(u.count)
		}
		if err == nil && total != nil {
			p, err = total.Compose(p)
		}
		if err != nil {
			return append(rows, AccountRow{Bound: makeBound("central Gaussian, PLD", pcite, 0, 0, err), Family: FamilyCentralGaussian, Amplification: AmplificationNone, Composition: CompositionPLD})
		}
		total = p
	}
	pe, err := total.Epsilon(delta)
	if err == nil && math.IsInf(pe, 1) {
		err = outside("delta %g below the PLD's infinite-loss mass", delta)
	}
	return append(rows, AccountRow{Bound: makeBound("central Gaussian, PLD", pcite, pe, delta, err), Family: FamilyCentralGaussian, Amplification: AmplificationNone, Composition: CompositionPLD})
}

// gaussianEpsilon returns the smallest ε ≥ 0 (to 1e-12 relative, rounded
// up) with GaussianDelta(mu, ε) ≤ delta, certified: the returned ε passed
// that check. GaussianDelta is computed in log space (no overflow at any
// ε), and a bracket that cannot be found or a NaN is an error.
func gaussianEpsilon(mu, delta float64) (float64, error) {
	if !(mu > 0) || !check.Finite(mu) {
		return 0, outside("gaussian mu %v is not positive and finite", mu)
	}
	check := func(eps float64) (bool, error) {
		d := pld.GaussianDelta(mu, eps)
		if math.IsNaN(d) {
			return false, fmt.Errorf("%w: gaussian delta(%v) is NaN", ErrUncertified, eps)
		}
		return d <= delta, nil
	}
	if ok, err := check(0); err != nil || ok {
		return 0, err
	}
	lo, hi := 0.0, 1.0
	for {
		ok, err := check(hi)
		if err != nil {
			return 0, err
		}
		if ok {
			break
		}
		if hi > 1e12 {
			return 0, fmt.Errorf("%w: no gaussian epsilon below %g", ErrUncertified, hi)
		}
		lo, hi = hi, 2*hi
	}
	for hi-lo > 1e-12*hi {
		mid := lo + (hi-lo)/2
		ok, err := check(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, nil
}
