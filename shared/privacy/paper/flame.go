package paper

import (
	"math"

	"github.com/blanket-fl/blanket/shared/internal/check"
	"github.com/blanket-fl/blanket/shared/privacy"
)

// FLAMETheorem2 is FLAME eq. (4): one dimension, the randomizer R_{γ,b}
// with γ = b/(e^{ε_lk} + b − 1) run by n_s = βn users subsampled by K_r^β,
// no padding:
//
//	ε_cd = ln(1 + β(e^{ε_ck} − 1)),  ε_ck = sqrt(14·ln(2β/δ_cd)(e^{ε_lk} + b − 1)/(n_s − 1)),
//
// (ε_cd, δ_cd)-DP. The paper prints γ = b/(e^{ε_ld + b − 1}); the brackets
// are misplaced (γ must be b/(e^{ε} + b − 1) for R_{γ,b} to be ε-LDP, as in
// Lemma 1 and Theorem 3), and the local budget of a sampled dimension is
// ε_lk = ε_l/k, which eq. (4) itself uses, not ε_ld. Derivation: Lemma 1 at
// δ_ck = δ_cd/β (so ln(2/δ_ck) = ln(2β/δ_cd)), then Lemma 4 with q = β maps
// (ε_ck, δ_ck) to (ε_cd, β·δ_ck = δ_cd). Requires δ_cd < 2β (positive
// logarithm) and Lemma 1's conditions on ε_ck.
func FLAMETheorem2(epsLK float64, b, ns int, beta, deltaCD float64) (epsCD float64, err error) {
	_, epsCD, err = flameDoubleClosedForm(epsLK, b, ns, beta, deltaCD)
	return epsCD, err
}

// FLAMETheorem3 is FLAME eqs. (5)-(6): with dummy padding every dimension
// holds n_p messages, and
//
//	ε_ck = sqrt(14·ln(2β/δ_cd)(e^{ε_lk} + b − 1)/(n_p − 1)),  ε_cd = ln(1 + β(e^{ε_ck} − 1)),
//
// (ε_cd, δ_cd)-DP for one dimension (the theorem's header prints "ε_cd" for
// the per-dimension pair; (5) is the shuffled, (6) the subsampled value).
// Same derivation and conditions as FLAMETheorem2 with n_s replaced by n_p.
func FLAMETheorem3(epsLK float64, b, np int, beta, deltaCD float64) (epsCK, epsCD float64, err error) {
	return flameDoubleClosedForm(epsLK, b, np, beta, deltaCD)
}

func flameDoubleClosedForm(epsLK float64, b, n int, beta, deltaCD float64) (epsCK, epsCD float64, err error) {
	if !check.Finite(beta) || beta <= 0 || beta > 1 {
		return 0, 0, invalid("beta = %v, want 0 < beta <= 1", beta)
	}
	if err := check.OpenUnit(privacy.ErrInvalidParameter, "deltaCD", deltaCD); err != nil {
		return 0, 0, err
	}
	deltaCK := deltaCD / beta
	if deltaCD >= 2*beta || deltaCK >= 1 {
		return 0, 0, outside("FLAME Theorems 2-3 need delta_cd < 2*beta and delta_cd/beta < 1, got delta_cd = %g, beta = %g", deltaCD, beta)
	}
	epsCK, err = privacy.BlanketLemma1(epsLK, b, n, deltaCK)
	if err != nil {
		return 0, 0, err
	}
	epsCD, _, err = privacy.Subsample(epsCK, deltaCK, beta)
	return epsCK, epsCD, err
}

// Corollary2Condition checks the validity condition of FLAME Corollary 2:
// ε_l ≤ d·ln(n/ln((d+1)/δ_c))/2, i.e. Corollary 1's condition for each
// dimension at ε_ld = ε_l/d and δ_cd = δ_c/(d+1). The corollary's value,
// ε_c = O((1 ∧ ε_l/d)·e^{ε_l/d}·ln(d/δ_c)·sqrt(d/n)), is asymptotic with an
// unstated constant and cannot be evaluated; privacy.SSSimple computes the concrete
// bound it summarizes.
func Corollary2Condition(epsLocal float64, d, n int, deltaC float64) error {
	if err := check.Count(privacy.ErrInvalidParameter, "d", d, 1); err != nil {
		return err
	}
	if err := check.OpenUnit(privacy.ErrInvalidParameter, "deltaC", deltaC); err != nil {
		return err
	}
	return Corollary1Condition(epsLocal/float64(d), n, deltaC/float64(d+1))
}

// Corollary3Condition checks the validity condition of FLAME Corollary 3:
// ε_l ≤ βd·ln(n_p/ln((2β²d + β)/δ_c))/2. Its value (eq. 7) is asymptotic
// (O with an unstated constant) and cannot be evaluated; privacy.SSDouble computes
// the concrete bound it summarizes.
func Corollary3Condition(epsLocal, beta float64, d, np int, deltaC float64) error {
	if err := check.Positive(privacy.ErrInvalidParameter, "epsLocal", epsLocal); err != nil {
		return err
	}
	if !check.Finite(beta) || beta <= 0 || beta > 1 {
		return invalid("beta = %v, want 0 < beta <= 1", beta)
	}
	if err := check.Count(privacy.ErrInvalidParameter, "d", d, 1); err != nil {
		return err
	}
	if err := check.Count(privacy.ErrInvalidParameter, "np", np, 1); err != nil {
		return err
	}
	if err := check.OpenUnit(privacy.ErrInvalidParameter, "deltaC", deltaC); err != nil {
		return err
	}
	fd := float64(d)
	inner := math.Log((2*beta*beta*fd + beta) / deltaC)
	lim := beta * fd * math.Log(float64(np)/inner) / 2
	if !(inner > 0) || !(epsLocal <= lim) {
		return outside("FLAME Corollary 3 needs eps_l <= beta*d*ln(n_p/ln((2beta^2 d+beta)/delta_c))/2 = %.6g, got %.6g", lim, epsLocal)
	}
	return nil
}

// IndexPrivacyNu returns the strongest ν for which reporting l·k indices,
// k of them the true Top-k, gives ν-index privacy (FLAME Definition 3) when
// β = k/d. From Pr[I_j = 1 | K] = 1/l and the two inequalities of
// Definition 3: 1/l ≤ ν·β and 1 − 1/l ≥ (1 − β)/ν, so
//
//	ν = max{1, 1/(l·β), l(1 − β)/(l − 1)},
//
// which inverts FLAME's l ≥ max{1/(νβ), ν/(ν−1+β)} (Algorithm 4 line 1,
// Proposition 2). l must lie in [2, ⌈1/β⌉]: at l = 1 every reported index
// is a Top-k index and no finite ν satisfies the second inequality
// (Proposition 2's "no index privacy"), which is refused.
func IndexPrivacyNu(l int, beta float64) (float64, error) {
	if !check.Finite(beta) || beta <= 0 || beta >= 1 {
		return 0, invalid("beta = %v, want 0 < beta < 1", beta)
	}
	lmax := int(math.Ceil(1 / beta))
	if l < 1 || l > lmax {
		return 0, invalid("l = %d, want 1 <= l <= ceil(1/beta) = %d", l, lmax)
	}
	if l == 1 {
		return 0, outside("l = 1 reveals the Top-k indices: no finite nu (FLAME Proposition 2)")
	}
	fl := float64(l)
	return math.Max(1, math.Max(1/(fl*beta), fl*(1-beta)/(fl-1))), nil
}

// IndexLayers returns the range [lMin, lMax] of l giving ν-index privacy
// (FLAME Algorithm 4 line 1 and Proposition 2):
// l ∈ [max{1/(νβ), ν/(ν−1+β)}, ⌈1/β⌉], rounded up to integers. ν must lie
// in [1, 1/β] (Proposition 2); the range is refused if empty.
func IndexLayers(nu, beta float64) (lMin, lMax int, err error) {
	if !check.Finite(beta) || beta <= 0 || beta >= 1 {
		return 0, 0, invalid("beta = %v, want 0 < beta < 1", beta)
	}
	if !check.Finite(nu) || nu < 1 || nu > 1/beta {
		return 0, 0, outside("FLAME Proposition 2 needs 1 <= nu <= 1/beta = %g, got %v", 1/beta, nu)
	}
	lo := math.Max(1/(nu*beta), nu/(nu-1+beta))
	lMin = int(math.Ceil(lo - 1e-12)) // tolerate rounding of exact integers
	lMax = int(math.Ceil(1 / beta))
	if lMin > lMax {
		return 0, 0, outside("no l satisfies nu = %g at beta = %g", nu, beta)
	}
	return lMin, lMax, nil
}

// StrongestIndexPrivacy is FLAME Theorem 5: with padding size n_p, n users
// and β = k/d, a user can report at most l = ⌊n_p/(nβ)⌋ (capped at ⌈1/β⌉)
// index groups without the expected per-dimension count n·l·β exceeding
// the n_p padded slots, so the strongest index privacy is
// ν = max{1, 1/(l·β)}. (The extracted paper prints the denominator as
// ⌊n_p/ε_lk⌋·β and the slides as ⌊n_p/m_s^β⌋·β; reading m_s^β = nβ, the
// expected number of users sampling a dimension, is what reproduces the
// paper's ν = 3.125, l = 16 at n_p = 333, n = 1000, β = 1/50.) The returned ν also
// honours the second inequality of Definition 3 (IndexPrivacyNu), which
// the printed formula omits and which only binds for very small l.
// Refused when l < 2 (no index privacy).
func StrongestIndexPrivacy(np, n int, beta float64) (nu float64, l int, err error) {
	if err := check.Count(privacy.ErrInvalidParameter, "np", np, 1); err != nil {
		return 0, 0, err
	}
	if err := check.Count(privacy.ErrInvalidParameter, "n", n, 1); err != nil {
		return 0, 0, err
	}
	if !check.Finite(beta) || beta <= 0 || beta >= 1 {
		return 0, 0, invalid("beta = %v, want 0 < beta < 1", beta)
	}
	l = int(math.Floor(float64(np)/(float64(n)*beta) + 1e-12))
	if lmax := int(math.Ceil(1 / beta)); l > lmax {
		l = lmax
	}
	if l < 2 {
		return 0, l, outside("n_p = %d leaves room for l = %d < 2 index groups: no index privacy (FLAME Theorem 5)", np, l)
	}
	nu, err = IndexPrivacyNu(l, beta)
	return nu, l, err
}

// CompareFLAME lists, side by side, every applicable central bound for one
// FLAME round described by cfg: SS-Simple (Theorem 1) when cfg.K == cfg.D,
// otherwise SS-Double/SS-Topk with and without subsampling amplification
// (Theorems 3-4), each with the corrected Bennett bound for the Laplace
// randomizer and for a generic ε-LDP randomizer; when b ≥ 2 also the
// closed form of Lemma 1 and the Bennett bound for R_{γ,b}; and the
// local-model baseline (ε_l, 0) that holds without any shuffler. Rows whose
// conditions fail are included with Valid = false and the reason.
func CompareFLAME(cfg privacy.FLAMEConfig, b int) []privacy.Bound {
	amps := []privacy.Amplifier{privacy.BennettAmplifier{Mech: privacy.LaplaceMechanism()}, privacy.BennettAmplifier{Mech: privacy.GenericMechanism()}}
	if b >= 2 {
		rr, _ := privacy.RRMechanism(b) // b >= 2 cannot fail
		amps = append(amps, privacy.RGBAmplifier{B: b}, privacy.BennettAmplifier{Mech: rr})
	}
	var out []privacy.Bound
	if cfg.K == cfg.D {
		for _, a := range amps {
			bd, _ := privacy.SSSimple(cfg, a)
			out = append(out, bd)
		}
	} else {
		for _, a := range amps {
			bd, _ := privacy.SSDouble(cfg, a)
			out = append(out, bd)
		}
		bd, _ := privacy.SSDoubleShuffleOnly(cfg, amps[0])
		out = append(out, bd)
	}
	err := cfg.Validate()
	out = append(out, makeBound("local model (no shuffler)", "FLAME Definition 2, post-processing", cfg.EpsLocal, 0, err))
	return out
}
