package privacy

import (
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/shared/internal/check"
)

// Amplifier bounds the central ε of shuffling n one-dimensional reports,
// each from an epsLocal-LDP randomizer, at central δ = delta. It is how the
// FLAME accountants (SSSimple, SSDouble) are told which amplification
// analysis to apply per dimension.
type Amplifier interface {
	Name() string
	Citation() string
	Epsilon(epsLocal float64, n int, delta float64) (float64, error)
}

// RGBAmplifier is the closed form of FLAME Lemma 1 (BBGN'19) for the
// randomizer R_{γ,b}; see BlanketLemma1.
type RGBAmplifier struct {
	B int // domain size b of R_{γ,b}
}

// Name implements Amplifier.
func (a RGBAmplifier) Name() string { return fmt.Sprintf("Lemma 1 (R_{γ,%d})", a.B) }

// Citation implements Amplifier.
func (a RGBAmplifier) Citation() string { return "FLAME Lemma 1 / BBGN'19 Theorem 3.1" }

// Epsilon implements Amplifier.
func (a RGBAmplifier) Epsilon(epsLocal float64, n int, delta float64) (float64, error) {
	return BlanketLemma1(epsLocal, a.B, n, delta)
}

// FLAMETheorem1 composes per-dimension (ε_cd, δ_cd)-DP over the d
// dimensions of one user's vector (FLAME Theorem 1, eqs. 2-3):
//
//	ε_c = d·ε_cd ∧ (ε_cd·sqrt(2d·ln(1/δ_cd)) + d·ε_cd(e^{ε_cd} − 1)),
//	δ_c = δ_cd·(d + 1),
//
// basic composition (Lemma 2) or advanced composition (Lemma 3 with
// δ' = δ_cd), whichever is smaller.
func FLAMETheorem1(epsCD, deltaCD float64, d int) (epsC, deltaC float64, err error) {
	if err := check.Positive(ErrInvalidParameter, "epsCD", epsCD); err != nil {
		return 0, 0, err
	}
	if err := check.OpenUnit(ErrInvalidParameter, "deltaCD", deltaCD); err != nil {
		return 0, 0, err
	}
	if err := check.Count(ErrInvalidParameter, "d", d, 1); err != nil {
		return 0, 0, err
	}
	return composeMin(epsCD, deltaCD, d)
}

// FLAMETheorem4 composes per-dimension (ε_cd, δ_cd)-DP of SS-Double/SS-Topk
// over the 2k = 2βd dimensions that replacing one user's vector can change
// (FLAME Theorem 4):
//
//	ε_c = 2βd·ε_cd ∧ (ε_cd·sqrt(4βd·ln(1/δ_cd)) + 2βd·ε_cd(e^{ε_cd} − 1)),
//	δ_c = δ_cd·(2βd + 1).
func FLAMETheorem4(epsCD, deltaCD float64, k int) (epsC, deltaC float64, err error) {
	if err := check.Count(ErrInvalidParameter, "k", k, 1); err != nil {
		return 0, 0, err
	}
	if err := check.Positive(ErrInvalidParameter, "epsCD", epsCD); err != nil {
		return 0, 0, err
	}
	if err := check.OpenUnit(ErrInvalidParameter, "deltaCD", deltaCD); err != nil {
		return 0, 0, err
	}
	return composeMin(epsCD, deltaCD, 2*k)
}

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
	if err := check.OpenUnit(ErrInvalidParameter, "deltaCD", deltaCD); err != nil {
		return 0, 0, err
	}
	deltaCK := deltaCD / beta
	if deltaCD >= 2*beta || deltaCK >= 1 {
		return 0, 0, outside("FLAME Theorems 2-3 need delta_cd < 2*beta and delta_cd/beta < 1, got delta_cd = %g, beta = %g", deltaCD, beta)
	}
	epsCK, err = BlanketLemma1(epsLK, b, n, deltaCK)
	if err != nil {
		return 0, 0, err
	}
	epsCD, _, err = Subsample(epsCK, deltaCK, beta)
	return epsCK, epsCD, err
}

// Corollary2Condition checks the validity condition of FLAME Corollary 2:
// ε_l ≤ d·ln(n/ln((d+1)/δ_c))/2, i.e. Corollary 1's condition for each
// dimension at ε_ld = ε_l/d and δ_cd = δ_c/(d+1). The corollary's value,
// ε_c = O((1 ∧ ε_l/d)·e^{ε_l/d}·ln(d/δ_c)·sqrt(d/n)), is asymptotic with an
// unstated constant and cannot be evaluated; SSSimple computes the concrete
// bound it summarizes.
func Corollary2Condition(epsLocal float64, d, n int, deltaC float64) error {
	if err := check.Count(ErrInvalidParameter, "d", d, 1); err != nil {
		return err
	}
	if err := check.OpenUnit(ErrInvalidParameter, "deltaC", deltaC); err != nil {
		return err
	}
	return Corollary1Condition(epsLocal/float64(d), n, deltaC/float64(d+1))
}

// Corollary3Condition checks the validity condition of FLAME Corollary 3:
// ε_l ≤ βd·ln(n_p/ln((2β²d + β)/δ_c))/2. Its value (eq. 7) is asymptotic
// (O with an unstated constant) and cannot be evaluated; SSDouble computes
// the concrete bound it summarizes.
func Corollary3Condition(epsLocal, beta float64, d, np int, deltaC float64) error {
	if err := check.Positive(ErrInvalidParameter, "epsLocal", epsLocal); err != nil {
		return err
	}
	if !check.Finite(beta) || beta <= 0 || beta > 1 {
		return invalid("beta = %v, want 0 < beta <= 1", beta)
	}
	if err := check.Count(ErrInvalidParameter, "d", d, 1); err != nil {
		return err
	}
	if err := check.Count(ErrInvalidParameter, "np", np, 1); err != nil {
		return err
	}
	if err := check.OpenUnit(ErrInvalidParameter, "deltaC", deltaC); err != nil {
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

// FLAMEConfig describes one FLAME round: n users each holding a
// d-dimensional update, perturbing k of its dimensions with the local
// budget ε_l/k each; the shuffler pads every dimension to n_p messages
// (SS-Double/SS-Topk). For SS-Simple k = d and n_p is unused.
type FLAMEConfig struct {
	EpsLocal float64 // ε_l, the vector-level local budget of one round
	D        int     // model dimension d
	K        int     // dimensions each user perturbs (k = βd); K = D for SS-Simple
	N        int     // users in the round, n
	NPad     int     // padded messages per dimension, n_p (SS-Double/SS-Topk)
	DeltaC   float64 // target central δ_c of the round
}

// Validate checks the configuration's parameters (not the bounds'
// validity conditions, which each bound checks).
func (c FLAMEConfig) Validate() error {
	if err := check.Positive(ErrInvalidParameter, "EpsLocal", c.EpsLocal); err != nil {
		return err
	}
	if err := check.Count(ErrInvalidParameter, "D", c.D, 1); err != nil {
		return err
	}
	if c.K < 1 || c.K > c.D {
		return invalid("K = %d, want 1 <= K <= D = %d", c.K, c.D)
	}
	if err := check.Count(ErrInvalidParameter, "N", c.N, 2); err != nil {
		return err
	}
	if c.K < c.D && c.NPad < 2 {
		return invalid("NPad = %d, want >= 2 for SS-Double/SS-Topk", c.NPad)
	}
	return check.OpenUnit(ErrInvalidParameter, "DeltaC", c.DeltaC)
}

// Beta returns the sampling rate β = k/d.
func (c FLAMEConfig) Beta() float64 { return float64(c.K) / float64(c.D) }

// SSSimple returns the central guarantee of one SS-Simple round (FLAME
// Theorem 1): each of the d dimensions is randomized at ε_ld = ε_l/d and
// shuffled among n reports; amp bounds the per-dimension ε_cd at
// δ_cd = δ_c/(d+1), capped at ε_ld (the shuffled reports are ε_ld-LDP
// whatever the amplification analysis says), and the d dimensions are
// composed by FLAMETheorem1. The result is (ε_c, δ_c)-DP for replacing one
// user's vector. Only cfg.K == cfg.D is accepted.
func SSSimple(cfg FLAMEConfig, amp Amplifier) (Bound, error) {
	method := "FLAME SS-Simple, " + ampName(amp)
	cite := "FLAME Theorem 1"
	if amp != nil {
		cite += " + " + amp.Citation()
	}
	eps, delta, err := ssSimple(cfg, amp)
	return makeBound(method, cite, eps, delta, err), err
}

func ssSimple(cfg FLAMEConfig, amp Amplifier) (float64, float64, error) {
	if err := cfg.Validate(); err != nil {
		return 0, 0, err
	}
	if amp == nil {
		return 0, 0, invalid("nil Amplifier")
	}
	if cfg.K != cfg.D {
		return 0, 0, invalid("SS-Simple perturbs every dimension: K = %d, want D = %d", cfg.K, cfg.D)
	}
	epsLD := cfg.EpsLocal / float64(cfg.D)
	deltaCD := cfg.DeltaC / float64(cfg.D+1)
	epsCD, err := amp.Epsilon(epsLD, cfg.N, deltaCD)
	if err != nil {
		return 0, 0, fmt.Errorf("per-dimension amplification: %w", err)
	}
	return FLAMETheorem1(math.Min(epsCD, epsLD), deltaCD, cfg.D)
}

// SSDouble returns the central guarantee of one SS-Double round, which
// SS-Topk shares given the same n_p (FLAME Theorems 3-4 and the paragraph
// after Proposition 2): each user perturbs k = βd dimensions at
// ε_lk = ε_l/k; every dimension is padded to n_p messages; per dimension,
// amp bounds the shuffled ε_ck at δ_ck = δ_cd/β (capped at ε_lk), Lemma 4
// (Subsample) gives ε_cd = ln(1 + β(e^{ε_ck} − 1)) at δ_cd, and
// FLAMETheorem4 composes over 2k dimensions with δ_cd = δ_c/(2k+1). With
// amp = RGBAmplifier this is exactly eqs. (5)-(6).
func SSDouble(cfg FLAMEConfig, amp Amplifier) (Bound, error) {
	method := "FLAME SS-Double/SS-Topk, " + ampName(amp)
	cite := "FLAME Theorems 3-4, Lemma 4"
	if amp != nil {
		cite += " + " + amp.Citation()
	}
	eps, delta, err := ssDouble(cfg, amp, true)
	return makeBound(method, cite, eps, delta, err), err
}

// SSDoubleShuffleOnly is SSDouble without the subsampling amplification
// (Lemma 4): per dimension ε_cd is amp's bound at δ_cd for n_p reports.
// FLAME reports this as "ε_c = 20.53 if we only count the amplification
// from shuffling" for SS-Topk; it is valid but looser than SSDouble.
func SSDoubleShuffleOnly(cfg FLAMEConfig, amp Amplifier) (Bound, error) {
	method := "FLAME SS-Double/SS-Topk shuffling only, " + ampName(amp)
	cite := "FLAME Theorem 4 (no Lemma 4)"
	if amp != nil {
		cite += " + " + amp.Citation()
	}
	eps, delta, err := ssDouble(cfg, amp, false)
	return makeBound(method, cite, eps, delta, err), err
}

func ssDouble(cfg FLAMEConfig, amp Amplifier, subsample bool) (float64, float64, error) {
	if err := cfg.Validate(); err != nil {
		return 0, 0, err
	}
	if amp == nil {
		return 0, 0, invalid("nil Amplifier")
	}
	beta := cfg.Beta()
	epsLK := cfg.EpsLocal / float64(cfg.K)
	deltaCD := cfg.DeltaC / float64(2*cfg.K+1)
	var epsCD float64
	if subsample {
		deltaCK := deltaCD / beta
		if deltaCK >= 1 || deltaCD >= 2*beta {
			return 0, 0, outside("FLAME Theorem 3 needs delta_cd < 2*beta and delta_cd/beta < 1, got delta_cd = %g, beta = %g", deltaCD, beta)
		}
		epsCK, err := amp.Epsilon(epsLK, cfg.NPad, deltaCK)
		if err != nil {
			return 0, 0, fmt.Errorf("per-dimension amplification: %w", err)
		}
		epsCD, _, err = Subsample(math.Min(epsCK, epsLK), deltaCK, beta)
		if err != nil {
			return 0, 0, err
		}
	} else {
		e, err := amp.Epsilon(epsLK, cfg.NPad, deltaCD)
		if err != nil {
			return 0, 0, fmt.Errorf("per-dimension amplification: %w", err)
		}
		epsCD = math.Min(e, epsLK)
	}
	return FLAMETheorem4(epsCD, deltaCD, cfg.K)
}

func ampName(a Amplifier) string {
	if a == nil {
		return "<nil amplifier>"
	}
	return a.Name()
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
	if err := check.Count(ErrInvalidParameter, "np", np, 1); err != nil {
		return 0, 0, err
	}
	if err := check.Count(ErrInvalidParameter, "n", n, 1); err != nil {
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
