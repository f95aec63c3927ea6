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

// Local Gaussian row. A shuffle round with the Gaussian randomizer
// (x + N(0, σ0²) per perturbed coordinate, x ∈ [0, 1]) is (ε0, δ0)-LDP per
// coordinate, and no shuffle bound of this package covers δ0 > 0; the
// local row's basic composition then spends δ_l every round, so after
// δ/δ_l rounds nothing certifies the target δ. For SS-Simple and SS-Double
// the perturbed index set does not depend on the data (all d; a uniform
// k-subset, the same in neighbouring datasets since only the volunteer's
// update is replaced), so a report is the Gaussian mechanism on c
// coordinates with L2 sensitivity √c, which is μ-GDP with μ = √c/σ0 (Dong,
// Roth, Su 2022, Theorem 2.7). Everything the aggregator sees of a round is
// a post-processing of the reports (clamping, padding with data-independent
// dummies, shuffling), one of which depends on the target, so the round is
// μ-GDP for replacing one volunteer; rounds compose adaptively to
// μ = √(Σ μ_r²) (Corollary 2), and its exact δ(ε) is Balle and Wang's
// (ICML 2018, Theorem 8). No amplification is claimed. SS-Topk's index
// sets are the volunteers' top-k, data-dependent, so the row does not
// cover it.

// localGaussCite cites the local Gaussian row.
const localGaussCite = "Gaussian mechanism on the perturbed coordinates (L2 sensitivity √c), μ-GDP composition (Dong-Roth-Su 2022 Thm 2.7, Cor. 2), exact δ(ε) (Balle-Wang ICML'18 Thm 8)"

// localGaussMethod names the local Gaussian row.
const localGaussMethod = "local model (no shuffler), Gaussian randomizer, exact"

// localGaussMu2 returns μ_r² of one round of r for the local Gaussian row,
// and false when the row does not cover r.
func localGaussMu2(r Release) (float64, bool, error) {
	if r.Randomizer != RandomizerGaussian || !(r.Delta0 > 0) {
		return 0, false, nil
	}
	var c int
	switch r.Protocol {
	case ProtocolSSSimple:
		c = r.D
	case ProtocolSSDouble:
		c = r.K
	default:
		return 0, false, nil
	}
	mu0, err := gaussianMuBound(r.Eps0, r.Delta0)
	if err != nil {
		return 0, true, err
	}
	return float64(c) * mu0 * mu0, true, nil
}

// gaussianMuBound returns an upper bound on 1/σ0 for the randomizer's σ0
// at (eps0, delta0): σ0 is calibrated (randomizer.GaussianSigma, Balle-Wang
// Theorem 8) so that GaussianDelta(1/σ0, eps0) <= delta0, and GaussianDelta
// increases in μ, so 1/σ0 is at most the least μ with GaussianDelta(μ,
// eps0) > delta0; the bisection returns such a μ (its upper end), raised
// by a relative 1e-9 against rounding differences between the two
// implementations (TestLocalGaussianMuCoversRandomizer).
func gaussianMuBound(eps0, delta0 float64) (float64, error) {
	if !(eps0 > 0) || !check.Finite(eps0) || !(delta0 > 0 && delta0 < 1) {
		return 0, outside("gaussian randomizer (eps0 %v, delta0 %v)", eps0, delta0)
	}
	over := func(mu float64) (bool, error) {
		d := pld.GaussianDelta(mu, eps0)
		if math.IsNaN(d) {
			return false, fmt.Errorf("%w: gaussian delta(mu %v, eps %v) is NaN", ErrUncertified, mu, eps0)
		}
		return d > delta0, nil
	}
	lo, hi := 0.0, 1.0
	for {
		ok, err := over(hi)
		if err != nil {
			return 0, err
		}
		if ok {
			break
		}
		if hi > 1e12 {
			return 0, fmt.Errorf("%w: no gaussian mu bound below %g", ErrUncertified, hi)
		}
		lo, hi = hi, 2*hi
	}
	for hi-lo > 1e-12*hi {
		mid := lo + (hi-lo)/2
		ok, err := over(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi * (1 + 1e-9), nil
}

// localGauss accumulates the local Gaussian row: μ² so far, and whether
// every release is covered (na: the first that is not; err: a failure).
type localGauss struct {
	mu2 float64
	na  bool
	err error
}

// add composes count rounds of r.
func (g localGauss) add(r Release, count int) localGauss {
	if g.na || g.err != nil {
		return g
	}
	m, ok, err := localGaussMu2(r)
	switch {
	case !ok:
		g.na = true
	case err != nil:
		g.err = err
	default:
		g.mu2 += float64(count) * m
	}
	return g
}

// rows is the local Gaussian row, or nil when some release is not covered.
func (g localGauss) rows(delta float64) []AccountRow {
	if g.na {
		return nil
	}
	eps, err := 0.0, g.err
	if err == nil {
		eps, err = gaussianEpsilon(math.Sqrt(g.mu2), delta)
	}
	return []AccountRow{{Bound: makeBound(localGaussMethod, localGaussCite, eps, delta, err), Family: FamilyLocal,
		Amplification: AmplificationNone, Composition: CompositionExact}}
}

// accountLocalGaussian is the local Gaussian row of runs (nil unless every
// release is an SS-Simple or SS-Double round with the Gaussian randomizer).
func accountLocalGaussian(runs []run, delta float64) []AccountRow {
	var g localGauss
	for _, u := range runs {
		g = g.add(u.r, u.count)
	}
	if len(runs) == 0 {
		return nil
	}
	return g.rows(delta)
}
