package privacy

import (
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/shared/internal/check"
)

// Exact dominating pair of a secure-summation round (replace-one).
//
// The RDP rows of secagg.go lose 8-9% of ε in the conversion from Rényi
// to (ε, δ). This row composes instead a dominating pair (Zhu, Dong, Wang,
// AISTATS 2022, Definition 7: H_γ(M(D)‖M(D')) ≤ H_γ(A‖B) for every γ ≥ 0
// and every pair of neighbours, both orders) whose adaptive composition
// is known in closed form. The derivation (docs/accounting.md, "Secure
// summation: the dominating-pair row") in brief:
//
// Setting. One server's noise Z ~ N_Z(0, σ²)^d (the multivariate discrete
// Gaussian, Canonne, Kamath, Steinke, NeurIPS 2020, Definition 1, per
// coordinate) on an integer sum; replacing one volunteer's data moves the
// sum by an integer vector v with ‖v‖₂ ≤ 2Δ. The privacy loss of
// N_Z(x, σ²)^d against N_Z(x+v, σ²)^d is a function of ⟨z, v⟩ only, but
// the law of ⟨Z, v⟩ depends on v's direction on the lattice, not only on
// ‖v‖₂, so there is no exact 1-D reduction (secagg.go). We use a pair
// that dominates every such v instead:
//
//  1. Smoothing kernel. Fix r ∈ (0, σ) and τ² = σ² − r². The kernel K
//     maps y ∈ R to k ~ N_Z(y, r²), i.e. Pr[k | y] = ρ_r(k−y)/ρ_r(Z−y)
//     with ρ_r(t) = e^{−t²/(2r²)}. It does not depend on the data. For
//     integer x let P̃_x = K(N(x, τ²)), coordinate by coordinate.
//  2. Poisson summation (the Fourier transform of ρ_r is √(2π) r
//     e^{−2π²r²ξ²}): ρ_r(Z−y) = √(2π) r Σ_m e^{−2π²r²m²} e^{2πimy}, so
//     |ρ_r(Z−y)/(√(2π) r) − 1| ≤ η(r) := 2 Σ_{m≥1} e^{−2π²r²m²} for
//     every y, and ρ_σ(Z) ∈ √(2π) σ [1, 1 + η(σ)] (every term ≥ 0 at
//     y = 0). With ∫ φ_τ(y−x) ρ_r(k−y) dy = √(2π) r φ_σ(k−x) (the
//     convolution of two Gaussian densities):
//     P̃_x(k) ≤ φ_σ(k−x)/(1−η(r)) and N_Z(x, σ²)(k) = √(2π) σ
//     φ_σ(k−x)/ρ_σ(Z) ≥ φ_σ(k−x)/(1+η(σ)). So, over d coordinates,
//     N_Z(x, σ²)^d ≥ (1−θ) P̃_x pointwise with
//     1 − θ = ((1−η(r))/(1+η(σ)))^d.
//  3. Mixture. N_Z(x, σ²)^d = (1−θ) P̃_x + θ R_x with R_x a probability
//     distribution (R_x ≥ 0 by step 2, total mass 1). The hockey-stick
//     divergence H_γ(P‖Q) = sup_E P(E) − γQ(E) = ∫ (dP − γ dQ)_+ is
//     jointly convex ((Σλ_i(P_i − γQ_i))_+ ≤ Σλ_i(P_i − γQ_i)_+
//     pointwise) and non-increasing under a Markov kernel K
//     ((KP − γKQ)(E) = ∫ K(E|y)(dP − γdQ)(y) ≤ ∫ (dP − γdQ)_+ since
//     K(E|y) ∈ [0, 1]); the two properties every f-divergence has (Liese
//     and Vajda, IEEE Trans. Inf. Theory 2006). With H_γ(R‖R') ≤ 1, for
//     integer x, x' = x + v:
//     H_γ(N_Z(x)‖N_Z(x')) ≤ (1−θ) H_γ(N(x, τ²I)‖N(x', τ²I)) + θ.
//  4. The continuous Gaussian pair is rotation invariant, so its H_γ is
//     that of N(0, τ²) against N(‖v‖₂, τ²); a smaller shift a ≤ b is the
//     image of shift b under t ↦ (a/b)t + N(0, τ²(1−a²/b²)), so by data
//     processing the worst case is ‖v‖₂ = 2Δ. Hence the pair
//     A = (1−θ) N(0, τ²) + θ·⊥_A, B = (1−θ) N(2Δ, τ²) + θ·⊥_B (⊥_A, ⊥_B
//     two distinct atoms off the real line) has H_γ(A‖B) = (1−θ)
//     H_γ(N(0,τ²)‖N(2Δ,τ²)) + θ and dominates the round, in both orders
//     (reflection t ↦ 2Δ − t swaps A and B).
//  5. Rounds. Products of dominating pairs dominate adaptive compositions
//     (Zhu-Dong-Wang Theorem 10). The product of the Gaussian parts is a
//     Gaussian pair with μ = √(Σ μ_i²), μ_i = 2Δ_i/τ_i (Dong, Roth, Su,
//     JRSS-B 2022, Corollary 2), and on the product of the mixtures the
//     outcomes with an ⊥_A have B-probability 0 and those with an ⊥_B have
//     A-probability 0, so with keep = Π (1−θ_i):
//     δ(ε) = keep · δ_G(μ, ε) + (1 − keep),
//     δ_G the Gaussian's exact curve (Balle and Wang, ICML 2018, Theorem
//     8; pld.GaussianDelta).
//  6. What is released. At q = 1 the count of accepted reports is the
//     constant n and the second server's noise is independent of the
//     data: the release is a post-processing of the sum plus one server's
//     noise. At q < 1, given the sampled set S (the same law in both
//     datasets, the volunteer's coin unchanged) the count is the same and
//     the sums differ by v as above; joint convexity over S gives the same
//     bound. No amplification by the check-in is claimed.
//
// The choice r = min(2, σ/2) makes η(r) ≤ 1.1e-34 for σ ≥ 4 (θ ≤ d·1.1e-34), so θ is
// negligible for any realistic d, and τ/σ = √(1 − 4/σ²) costs nothing at
// the σ of integer fixed-point grids (σ ~ 10^5 units).

// secAggPairMaxDim is the dimension assumed by the entry points that do
// not know d (SecAggReplaceOneEpsilon and the calibration): their results
// hold for every model of at most 2^40 parameters (θ is increasing in d).
const secAggPairMaxDim = 1 << 40

// secAggPairCite cites the dominating-pair row.
const secAggPairCite = "discrete Gaussian N_Z(0,σ²)^d (Canonne-Kamath-Steinke 2020) dominated by (1-θ)·N(0,σ²-r²) + θ·⊥ via a smoothing kernel and Poisson summation (docs/accounting.md); " +
	"dominating pairs (Zhu-Dong-Wang 2022 Def. 7, Thm 10); Gaussian composition (Dong-Roth-Su 2022 Cor. 2); exact Gaussian delta (Balle-Wang ICML'18 Thm 8)"

// thetaSum returns an upper bound on η(s) = 2 Σ_{m≥1} e^{−2π²s²m²}: with
// c = 2π²s² and m² ≥ 1 + 2(m−1), Σ_{m≥1} e^{−cm²} ≤ e^{−c}/(1 − e^{−2c}).
func thetaSum(s float64) float64 {
	c := 2 * math.Pi * math.Pi * s * s
	return 2 * math.Exp(-c) / -math.Expm1(-2*c)
}

// secAggPairRound returns the dominating pair of one secure-summation
// round for replace-one (see the comment above): the Gaussian part's μ =
// 2Δ/τ with τ = √(σ² − r²), r = min(2, σ/2), and ln(1−θ) = d·(ln(1−η(r))
// − ln(1+η(σ))) ≤ 0, both rounded in the pessimistic direction (μ up, ln
// (1−θ) down) by far more than their floating-point error. The pair
// dominates the round for every integer shift of L2 norm at most 2Δ,
// σ = sigma and sensitivity = Δ in integer units, d coordinates, at any
// check-in rate (no amplification claimed).
func secAggPairRound(sigma, sensitivity float64, d int) (mu, logKeep float64, err error) {
	if !(sigma > 0) || !(sensitivity > 0) || math.IsInf(sigma, 0) || math.IsInf(sensitivity, 0) || d < 1 {
		return 0, 0, invalid("secagg pair: sigma %v, sensitivity %v, d %d", sigma, sensitivity, d)
	}
	r := min(2, sigma/2)
	tau := sigma * math.Sqrt(1-(r/sigma)*(r/sigma))
	etaR, etaS := thetaSum(r), thetaSum(sigma)
	if !(etaR < 0.5) {
		return 0, 0, outside("secagg pair: sigma %v too small for the smoothing bound (eta %v)", sigma, etaR)
	}
	logKeep = float64(d) * (math.Log1p(-etaR) - math.Log1p(etaS)) * (1 + 1e-9)
	mu = 2 * sensitivity / tau * (1 + 1e-12)
	if !(mu > 0) || math.IsInf(mu, 0) || math.IsNaN(logKeep) || logKeep > 0 {
		return 0, 0, fmt.Errorf("%w: secagg pair: mu %v, log keep %v", ErrUncertified, mu, logKeep)
	}
	return mu, logKeep, nil
}

// secAggPairEpsilon returns the smallest ε (to 1e-12 relative, rounded up)
// with keep·δ_G(μ, ε) + (1 − keep) ≤ delta, keep = e^{logKeep}, μ =
// √mu2: the composed dominating pair's exact ε(δ) (step 5 above). The
// Gaussian's δ is evaluated in floating point with an absolute error far
// below 1e-9·delta, which the target leaves as margin.
func secAggPairEpsilon(mu2, logKeep, delta float64) (float64, error) {
	theta := -math.Expm1(logKeep)
	if !(theta < delta) {
		return 0, outside("secagg pair: smoothing mass %g is not below delta %g", theta, delta)
	}
	target := (delta - theta) / (1 - theta) * (1 - 1e-9)
	return gaussianEpsilon(math.Sqrt(mu2), target)
}

// secAggPairRow is the dominating-pair row for composed rounds whose
// squared μ sum to mu2 and ln(1−θ) to logKeep (err: a round could not be
// accounted; the row is then invalid).
func secAggPairRow(mu2, logKeep float64, err error, rounds int, delta float64) AccountRow {
	method := "exact Gaussian dominating pair, discrete Gaussian secure aggregation (replace-one)"
	if rounds > 1 {
		method += ", composed over rounds"
	}
	var eps float64
	if err == nil {
		eps, err = secAggPairEpsilon(mu2, logKeep, delta)
	}
	return AccountRow{Bound: makeBound(method, secAggPairCite, eps, delta, err),
		Family: FamilySecAggDGauss, Amplification: AmplificationNone, Composition: CompositionExact}
}

// secAggPairRuns is the dominating-pair row of runs (all secure
// aggregation), each round at its own σ, Δ and d = Release.D.
func secAggPairRuns(runs []run, delta float64) AccountRow {
	var mu2, logKeep float64
	var err error
	for _, u := range runs {
		var mu, lk float64
		if mu, lk, err = secAggPairRound(u.r.SecAggSigma, u.r.SecAggSensitivity, u.r.D); err != nil {
			break
		}
		mu2 += float64(u.count) * mu * mu
		logKeep += float64(u.count) * lk
	}
	return secAggPairRow(mu2, logKeep, err, totalRounds(runs), delta)
}

// secAggPairReplaceOne is the dominating-pair ε of `rounds` identical
// rounds for d ≤ secAggPairMaxDim (SecAggReplaceOneEpsilon's second route).
func secAggPairReplaceOne(sigma, sensitivity float64, rounds int, delta float64) (float64, error) {
	mu, lk, err := secAggPairRound(sigma, sensitivity, secAggPairMaxDim)
	if err != nil {
		return 0, err
	}
	return secAggPairEpsilon(float64(rounds)*mu*mu, float64(rounds)*lk, delta)
}

// addSecAggPair composes count rounds of r onto a dominating-pair slot.
func (sl *slot) addSecAggPair(r Release, count int) error {
	if r.Protocol != ProtocolSecAgg {
		return outside("round %d is not a secure-aggregation release", r.Round)
	}
	mu, lk, err := secAggPairRound(r.SecAggSigma, r.SecAggSensitivity, r.D)
	if err != nil {
		return err
	}
	sl.invMu2 += float64(count) * mu * mu
	sl.logKeep += float64(count) * lk
	return nil
}

// SecAggPairReplaceOneEpsilon is the exact Gaussian dominating pair row
// alone for `rounds` identical secure-summation rounds: an upper bound on
// the replace-one ε at δ of one server's discrete Gaussian with σ and
// sensitivity Δ (the sum's L2 bound), for any model dimension up to
// 2^40 and any check-in rate (it claims no amplification by the check-in
// coin; the proof is in this file's doc and docs/accounting.md §4). It
// takes microseconds, where the RDP row that SecAggReplaceOneEpsilon also
// evaluates takes tens of milliseconds: at a check-in rate of 1, where the
// RDP row cannot be smaller by more than its conversion slack, it is what a
// volunteer's own device shows every round (shared/client).
func SecAggPairReplaceOneEpsilon(sigma, sensitivity float64, rounds int, delta float64) (float64, error) {
	if err := check.Count(ErrInvalidParameter, "rounds", rounds, 1); err != nil {
		return 0, err
	}
	if err := check.OpenUnit(ErrInvalidParameter, "delta", delta); err != nil {
		return 0, err
	}
	if !(sigma > 0) || !(sensitivity > 0) || math.IsInf(sigma, 0) || math.IsInf(sensitivity, 0) {
		return 0, fmt.Errorf("%w: sigma %v, sensitivity %v", ErrInvalidParameter, sigma, sensitivity)
	}
	return secAggPairReplaceOne(sigma, sensitivity, rounds, delta)
}
