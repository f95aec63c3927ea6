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

// flameTheorem1 composes per-dimension (ε_cd, δ_cd)-DP over the d
// dimensions of one user's vector (FLAME Theorem 1, eqs. 2-3):
//
//	ε_c = d·ε_cd ∧ (ε_cd·sqrt(2d·ln(1/δ_cd)) + d·ε_cd(e^{ε_cd} − 1)),
//	δ_c = δ_cd·(d + 1),
//
// basic composition (Lemma 2) or advanced composition (Lemma 3 with
// δ' = δ_cd), whichever is smaller.
func flameTheorem1(epsCD, deltaCD float64, d int) (epsC, deltaC float64, err error) {
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
// composed by flameTheorem1. The result is (ε_c, δ_c)-DP for replacing one
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
	return flameTheorem1(math.Min(epsCD, epsLD), deltaCD, cfg.D)
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
