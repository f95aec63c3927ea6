package privacy

import (
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/shared/internal/check"
)

// Joint secure-summation release: one round that releases, besides the
// noisy sum of the volunteers' updates, the noisy sums of other small
// vectors of the same volunteers (their evaluation counts and survey
// answers, shared/counts), each its own PINE instance with its own L2
// bound and its own per-server discrete Gaussian noise.
//
// Mechanism. Part j (j = 0 the update, j ≥ 1 the count blocks) is an
// integer vector x_{i,j} ∈ Z^{d_j} per accepted report with ‖x_{i,j}‖₂ ≤
// Δ_j (PINE's proof, every accepted report, honest or not); each server
// adds N_Z(0, σ_j²)^{d_j} to part j of its aggregate share. The round
// releases every part's noisy sum (and the exact count of accepted
// reports, as any secure-summation round). Replacing one volunteer's data
// (its participation unchanged) moves part j by an integer vector v_j
// with ‖v_j‖₂ ≤ 2Δ_j, all parts at once.
//
// RDP (derivation in docs/counts.md, "The noise and the charge"). The noise of
// one server is a product of independent one-dimensional discrete
// Gaussians; for an integer shift each coordinate has D_α ≤ α·v²/(2σ²)
// (Canonne, Kamath, Steinke 2020, Prop. 5) and Rényi divergences of
// product distributions add, so the round's replace-one curve is
//
//	α · Σ_j ‖v_j‖²/(2σ_j²) ≤ α · Σ_j (2Δ_j)²/(2σ_j²) = α·(2Δ_eff)²/(2σ_0²)
//
// with Δ_eff = σ_0·√(Σ_j (Δ_j/σ_j)²): the curve of ONE secure-summation
// round with σ = σ_0 and sensitivity Δ_eff. The squared noise-to-signal
// ratios (Δ_j/σ_j)² add, as for Gaussians in general (the
// concatenation is one Gaussian mechanism; scaling part j by σ_0/σ_j, a
// bijection, makes every coordinate's noise σ_0).
//
// Dominating pair. secagg_pair.go's row for one σ dominates N_Z(0, σ²) by
// the continuous N(0, τ²), τ² = σ² − r² (r = 2 when σ ≥ 4), coordinate by
// coordinate, with a mass θ; with per-part σ_j ≥ 4 the same kernel
// applies to every coordinate, so the joint pair is the continuous
// Gaussian with covariance diag(τ_j²) and shift v, whose privacy loss
// depends only on the Mahalanobis norm √(Σ_j ‖v_j‖²/τ_j²) ≤ √(Σ_j
// (2Δ_j/τ_j)²) (rescale each part by τ_0/τ_j: a bijection), plus θ ≤ Σ_j
// d_j·(η(2) + η(σ_j)) ≤ (Σ_j d_j)·(η(2) + η(4)), where η(4) < 1e-136 is
// far inside the 1e-9 relative margin secAggPairRound puts on
// d·(η(2) + η(σ_0)) (η(2) ≈ 1e-34). So one round with σ = σ_0,
// sensitivity Δ' = τ_0·√(Σ_j (Δ_j/τ_j)²) and D = Σ_j d_j is dominated
// by the pair row's pair as well.
//
// SecAggJoint returns max(Δ_eff, Δ') (≥ both): a Release with
// SecAggSigma = σ_0, SecAggSensitivity = that value and D = Σ_j d_j is
// charged by every secure-summation row of the accountant (replace-one
// RDP, dominating pair; the add/remove row stays not applicable) at
// least what the joint release costs. Nothing in the existing rows
// changes: the ledger charges the joint round through the Release it
// already knows.

// SecAggPart is one part of a joint secure-summation release: the
// per-server discrete Gaussian σ, the L2 bound Δ of one accepted report's
// part (add/remove; replace-one moves it by 2Δ) and its dimension, all in
// that part's integer units.
type SecAggPart struct {
	Sigma       float64 `json:"sigma"`
	Sensitivity float64 `json:"sensitivity"`
	D           int     `json:"d"`
}

// secAggJointMinSigma is the smallest σ of a part: r = 2 smoothing for
// every coordinate (see the comment above).
const secAggJointMinSigma = 4

func (p SecAggPart) validate(j int) error {
	if !(p.Sigma >= secAggJointMinSigma) || !check.Finite(p.Sigma) {
		return fmt.Errorf("%w: joint release part %d: sigma %v must be finite and at least %d", ErrInvalidParameter, j, p.Sigma, secAggJointMinSigma)
	}
	if !(p.Sensitivity > 0) || !check.Finite(p.Sensitivity) {
		return fmt.Errorf("%w: joint release part %d: sensitivity %v must be positive and finite", ErrInvalidParameter, j, p.Sensitivity)
	}
	if p.D < 1 {
		return fmt.Errorf("%w: joint release part %d: dimension %d", ErrInvalidParameter, j, p.D)
	}
	return nil
}

// SecAggJoint returns the σ, sensitivity and dimension of the single
// secure-summation Release that accounts the joint release of parts
// (parts[0], usually the update, gives σ): sensitivity =
// max(σ_0·√(Σ_j (Δ_j/σ_j)²), τ_0·√(Σ_j (Δ_j/τ_j)²)) with τ_j = √(σ_j² − 4),
// d = Σ_j d_j.
//
// Guarantee: the replace-one RDP curve and the replace-one dominating pair
// of one round with these parameters are upper bounds on those of the
// joint release (one server's noise on every part; replace-one moves part
// j by at most 2Δ_j in L2; CKS'20 Prop. 5 and additivity of Rényi
// divergence over independent coordinates; the Gaussian pair's loss
// depends on the Mahalanobis norm only, Dong-Roth-Su 2022; derivation
// above and in docs/counts.md), so every row the ledger charges for
// that Release bounds the joint round. Every σ_j must be at least 4.
func SecAggJoint(parts []SecAggPart) (sigma, sensitivity float64, d int, err error) {
	if len(parts) == 0 {
		return 0, 0, 0, fmt.Errorf("%w: joint release without parts", ErrInvalidParameter)
	}
	var rdpSum, pairSum float64
	for j, p := range parts {
		if err := p.validate(j); err != nil {
			return 0, 0, 0, err
		}
		if d > math.MaxInt32-p.D {
			return 0, 0, 0, fmt.Errorf("%w: joint release dimension overflows", ErrInvalidParameter)
		}
		d += p.D
		r := p.Sensitivity / p.Sigma
		rdpSum += r * r
		t := p.Sensitivity / secAggJointTau(p.Sigma)
		pairSum += t * t
	}
	s0 := parts[0].Sigma
	sens := max(s0*math.Sqrt(rdpSum), secAggJointTau(s0)*math.Sqrt(pairSum))
	if !check.Finite(sens) || !(sens > 0) {
		return 0, 0, 0, fmt.Errorf("%w: joint sensitivity %v", ErrUncertified, sens)
	}
	return s0, sens, d, nil
}

// secAggJointTau is τ = √(σ² − r²) of secAggPairRound at r = 2 (σ ≥ 4).
func secAggJointTau(sigma float64) float64 { return sigma * math.Sqrt(1-4/(sigma*sigma)) }

// SecAggJointReplaceOneEpsilon is SecAggReplaceOneEpsilon of the joint
// release of parts (SecAggJoint) for `rounds` identical rounds at
// check-in rate q: an upper bound on the replace-one ε at δ, one server's
// noise, the tightest of the ledger's secure-summation rows for the
// equivalent Release.
func SecAggJointReplaceOneEpsilon(parts []SecAggPart, q float64, rounds int, delta float64) (float64, error) {
	sigma, sens, _, err := SecAggJoint(parts)
	if err != nil {
		return 0, err
	}
	return SecAggReplaceOneEpsilon(sigma, sens, q, rounds, delta)
}

// CalibrateSecAggExtra returns the smallest noise multiplier m (to 1e-6
// relative, certified at the returned value) such that giving each extra
// part j the per-server noise σ_j = max(m·Δ_j, 4) keeps the replace-one
// charge of `rounds` identical joint rounds (SecAggJointReplaceOneEpsilon:
// the update with σ = update.Sigma, Δ = update.Sensitivity, plus the
// extra parts) within ε_u + extraEps, where ε_u is the charge of the
// update alone (SecAggReplaceOneEpsilon at the same q, rounds, δ). So a
// task that adds counts to its rounds spends extraEps more than without.
// The charge is non-increasing in every σ_j (each route is: the RDP curve
// and the pair's μ decrease as σ_j grows), hence in m, and bisection
// applies. extra gives each part's Sensitivity and D (Sigma ignored).
//
// It lives in shared/privacy because the value it certifies is the
// ledger's own charge (the same function the accountant evaluates), not
// an estimate of it.
func CalibrateSecAggExtra(update SecAggPart, extra []SecAggPart, q float64, rounds int, delta, extraEps float64) (m float64, sigmas []float64, err error) {
	if err := check.Positive(ErrInvalidParameter, "extra epsilon", extraEps); err != nil {
		return 0, nil, err
	}
	if len(extra) == 0 {
		return 0, nil, fmt.Errorf("%w: no extra parts to calibrate", ErrInvalidParameter)
	}
	base, err := SecAggReplaceOneEpsilon(update.Sigma, update.Sensitivity, q, rounds, delta)
	if err != nil {
		return 0, nil, fmt.Errorf("calibrating the extra parts: the update alone: %w", err)
	}
	target := base + extraEps
	parts := make([]SecAggPart, 1+len(extra))
	parts[0] = update
	with := func(m float64) []float64 {
		s := make([]float64, len(extra))
		for j, p := range extra {
			s[j] = max(m*p.Sensitivity, secAggJointMinSigma)
			parts[1+j] = SecAggPart{Sigma: s[j], Sensitivity: p.Sensitivity, D: p.D}
		}
		return s
	}
	// fits: an error (no certified bound) counts as not fitting, which
	// only pushes m up.
	fits := func(m float64) bool {
		with(m)
		e, err := SecAggJointReplaceOneEpsilon(parts, q, rounds, delta)
		return err == nil && e <= target
	}
	for j, p := range extra {
		if err := (SecAggPart{Sigma: secAggJointMinSigma, Sensitivity: p.Sensitivity, D: p.D}).validate(1 + j); err != nil {
			return 0, nil, err
		}
	}
	// Below mFloor every σ_j is clamped to 4: the charge no longer
	// changes with m.
	var maxSens float64
	for _, p := range extra {
		maxSens = max(maxSens, p.Sensitivity)
	}
	mFloor := secAggJointMinSigma / maxSens
	if fits(mFloor) {
		return mFloor, with(mFloor), nil
	}
	lo, hi := mFloor, max(1, 2*mFloor)
	for !fits(hi) {
		if hi > 1e12 {
			return 0, nil, fmt.Errorf("%w: no noise multiplier up to %g keeps the extra charge within %g", ErrOutsideValidity, hi, extraEps)
		}
		lo, hi = hi, 2*hi
	}
	for hi-lo > 1e-6*hi {
		mid := lo + (hi-lo)/2
		if fits(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, with(hi), nil
}
