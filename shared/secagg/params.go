package secagg

import (
	"errors"
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/shared/counts"
	"github.com/blanket-fl/blanket/shared/pine"
)

// maxTailProbability bounds, for every accepted Params, the probability
// that the noise of one round takes an unsharded value out of
// (-2^62, 2^62) (minNoiseOffset, Validate). When
// that happens Unshard returns ErrNoiseOverflow; nothing wraps silently.
const maxTailProbability = 0x1p-40

// maxDim and maxReports keep every integer in the package within int64
// with a large margin.
const (
	maxDim     = 1 << 20
	maxReports = 1 << 24
	maxSigma   = 0x1p40
	// maxTotal bounds the largest unsharded value in absolute value: far
	// inside Field64's signed range (-q/2, q/2], q ~ 2^64, so sums never
	// wrap the field.
	maxTotal = 1 << 62
)

// Params are the public parameters of one secure-summation round (PINE,
// draft-chen-cfrg-vdaf-pine over Field64; NewPineParams). All parties
// must use identical Params (they belong in the round spec).
//
// Units: the model update x (float64, length Dim) is clipped to L2 norm
// Clip and encoded on PINE's fixed-point grid, q = round(Scale * clip(x))
// (round half to even); "integer units" are the units of q. The noisy sum,
// Sigma and Sensitivity are in integer units; Result.Mean is back in
// model units.
type Params struct {
	// NormBound is PINE's L2NormBound in fixed-point units:
	// pine.ForBlanket(Dim, Clip).Sensitivity(), the bound the proof puts
	// on the L2 norm of every accepted report, rounding included.
	NormBound uint64
	// Dim is the length d of the update (7850 for MNIST softmax
	// regression).
	Dim int
	// Clip is the L2 clipping norm C of the float update.
	Clip float64
	// Scale is the number of integer units per model unit,
	// 2^NumFracBits of pine.ForBlanket(Dim, Clip).
	Scale float64
	// Sigma is the standard-deviation parameter, in integer units, of
	// the discrete Gaussian N_Z(0, Sigma^2) that EACH server adds to each
	// coordinate of its aggregate share. Alone, one server's noise makes
	// the released sum rho-zCDP with rho = Sensitivity()^2/(2 Sigma^2)
	// for the add/remove-one-volunteer relation (Canonne, Kamath and
	// Steinke 2020, arXiv:2004.00010, Thm. 4 per coordinate, summed over
	// the independent coordinates; see AddNoise). 0 is accepted
	// only so that tests can check exact recovery; AddNoise refuses it.
	Sigma float64
	// MaxReports is the largest number of reports one round may
	// aggregate; the field-overflow check uses it.
	MaxReports int
	// Counts are the round's count blocks (nil: none; WithCounts):
	// proven, summed and noised next to the update (counts.go).
	Counts *counts.Spec
	// CountSigmas is, per block, the σ of the discrete Gaussian each
	// server adds to every coordinate of the block (the block's
	// fixed-point units; counts.Aggregate.AddNoise): all at least 4, or
	// all 0 exactly when Sigma is 0 (the noise-free tests).
	CountSigmas []float64
}

// WithCounts returns p with the count blocks s, each server adding
// N_Z(0, sigmas[i]²) to every coordinate of block i, validated.
func (p Params) WithCounts(s *counts.Spec, sigmas []float64) (Params, error) {
	if s == nil {
		return Params{}, fmt.Errorf("secagg: nil count spec: %w", errParams)
	}
	p.Counts, p.CountSigmas = s, append([]float64(nil), sigmas...)
	if err := p.Validate(); err != nil {
		return Params{}, err
	}
	return p, nil
}

// NewPineParams returns the PINE parameters Blanket uses for an update of
// length dim clipped to L2 norm clip (model units), per-server noise
// sigma (fixed-point units; 0 for noise-free tests) and at most
// maxReports reports per round: pine.ForBlanket(dim, clip) (Scale =
// 2^NumFracBits with clip*Scale in [2^15, 2^16); NormBound = its
// L2NormBound, the bound on every accepted report's norm, rounding
// included). No offset is needed: Field64 sums decode as signed integers
// in (-q/2, q/2] and Validate keeps every honest value far inside.
func NewPineParams(dim int, clip float64, sigma float64, maxReports int) (Params, error) {
	if dim < 1 || dim > maxDim {
		return Params{}, fmt.Errorf("secagg: dim=%d outside [1, %d]", dim, maxDim)
	}
	pn, err := pine.ForBlanket(dim, clip)
	if err != nil {
		return Params{}, fmt.Errorf("secagg: %w", err)
	}
	p := Params{
		NormBound: pn.Config().L2NormBound,
		Dim:       dim, Clip: clip, Scale: pn.Scale(), Sigma: sigma, MaxReports: maxReports,
	}
	if err := p.Validate(); err != nil {
		return Params{}, err
	}
	return p, nil
}

// minNoiseOffset returns the smallest o with d*exp(-o^2/sigma^2) <=
// maxTailProbability, 0 for sigma = 0: per coordinate the two servers'
// noise N1 + N2 is 2 Sigma^2-subgaussian (the discrete Gaussian is
// Sigma^2-subgaussian, E[exp(tK)] <= exp(t^2 Sigma^2/2), Canonne, Kamath
// and Steinke 2020), so Pr[|N1 + N2| > 2o] <= 2 exp(-o^2/Sigma^2) and a
// union bound over the d coordinates gives the bound Validate uses.
func minNoiseOffset(sigma float64, dim int) uint64 {
	if !(sigma > 0) || dim < 1 || sigma > maxSigma {
		return 0
	}
	o := math.Ceil(sigma * math.Sqrt(math.Log(float64(dim))-math.Log(maxTailProbability)))
	for o > 0 && tailProb(sigma, dim, o-1) <= maxTailProbability {
		o--
	}
	for tailProb(sigma, dim, o) > maxTailProbability {
		o++
	}
	return uint64(o)
}

func tailProb(sigma float64, dim int, o float64) float64 {
	return float64(dim) * math.Exp(-o*o/(sigma*sigma))
}

// ClipUnits returns c = Scale*Clip, the clipping norm in integer units.
func (p Params) ClipUnits() float64 { return p.Scale * p.Clip }

// Sensitivity returns Δ = NormBound, the L2 sensitivity in integer units
// of the sum of accepted reports under the add/remove-one-volunteer
// relation: PINE's proof bounds the L2 norm of EVERY accepted report,
// honest or not, by NormBound, including the client's rounding to the
// fixed-point grid (pine.Pine.Sensitivity; docs/secagg.md, "Sensitivity
// and noise"). Under replace-one the sensitivity is 2Δ. The count of
// accepted reports is released too and is not protected by this noise
// (the relay knows who connected).
func (p Params) Sensitivity() float64 { return float64(p.NormBound) }

var errParams = errors.New("invalid parameters")

// Validate checks the parameters: they must be exactly NewPineParams'
// derivation (Scale and NormBound from pine.ForBlanket(Dim, Clip)), and
// the largest value a sum can take must stay below
// 2^62 (far inside Field64's signed range (-q/2, q/2], q ~ 2^64): every
// accepted report has |x_i| <= ||x||_2 <= NormBound, so
// MaxReports*NormBound + 2*minNoiseOffset(Sigma, Dim) (both servers'
// noise, exceeded with probability at most 2^-40, see minNoiseOffset) must
// be below 2^62.
func (p Params) Validate() error {
	switch {
	case p.Dim < 1 || p.Dim > maxDim:
		return fmt.Errorf("secagg: dim=%d outside [1, %d]: %w", p.Dim, maxDim, errParams)
	case !(p.Clip > 0) || math.IsInf(p.Clip, 0):
		return fmt.Errorf("secagg: clip=%v must be finite and > 0: %w", p.Clip, errParams)
	case !(p.Sigma >= 0) || p.Sigma > maxSigma:
		return fmt.Errorf("secagg: sigma=%v outside [0, 2^40]: %w", p.Sigma, errParams)
	case p.Sigma > 0 && p.Sigma < 1:
		return fmt.Errorf("secagg: sigma=%v below one integer unit: %w", p.Sigma, errParams)
	case p.MaxReports < 1 || p.MaxReports > maxReports:
		return fmt.Errorf("secagg: max reports %d outside [1, %d]: %w", p.MaxReports, maxReports, errParams)
	}
	pn, err := pine.ForBlanket(p.Dim, p.Clip)
	if err != nil {
		return fmt.Errorf("secagg: %w: %w", err, errParams)
	}
	if p.Scale != pn.Scale() || p.NormBound != pn.Config().L2NormBound {
		return fmt.Errorf("secagg: scale %v and norm bound %d differ from PINE's %v and %d: %w",
			p.Scale, p.NormBound, pn.Scale(), pn.Config().L2NormBound, errParams)
	}
	if uint64(p.MaxReports)*p.NormBound+2*minNoiseOffset(p.Sigma, p.Dim) >= maxTotal {
		return fmt.Errorf("secagg: max reports %d x norm bound %d + noise reaches 2^62: %w", p.MaxReports, p.NormBound, errParams)
	}
	return p.validateCounts()
}

// validateCounts checks the count blocks: one σ per block, each in [4,
// 2^40] (or all 0 when Sigma is 0), and, as for the update, every block's
// sum plus both servers' noise stays below 2^62 (|y_j| <= ‖y‖ <= B_i on
// every accepted report).
func (p Params) validateCounts() error {
	if p.Counts == nil {
		if len(p.CountSigmas) != 0 {
			return fmt.Errorf("secagg: %d count sigmas without count blocks: %w", len(p.CountSigmas), errParams)
		}
		return nil
	}
	bs := p.Counts.Blocks()
	if len(p.CountSigmas) != len(bs) {
		return fmt.Errorf("secagg: %d count sigmas for %d blocks: %w", len(p.CountSigmas), len(bs), errParams)
	}
	for i, b := range bs {
		s := p.CountSigmas[i]
		switch {
		case p.Sigma == 0 && s != 0:
			return fmt.Errorf("secagg: count block %d: sigma %v in a noise-free round: %w", i, s, errParams)
		case p.Sigma > 0 && !(s >= 4 && s <= maxSigma):
			return fmt.Errorf("secagg: count block %d: sigma %v outside [4, 2^40]: %w", i, s, errParams)
		}
		if uint64(p.MaxReports)*uint64(b.Sensitivity())+2*minNoiseOffset(s, b.Dim()) >= maxTotal {
			return fmt.Errorf("secagg: count block %d: max reports %d x bound %v + noise reaches 2^62: %w", i, p.MaxReports, b.Sensitivity(), errParams)
		}
	}
	return nil
}
