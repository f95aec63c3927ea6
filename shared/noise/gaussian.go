package noise

import (
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/shared/internal/check"
)

// Gaussian is a floating-point-attack-safe sampler for the Gaussian
// mechanism x + N(0, sigma^2) with a given L2 sensitivity.
//
// Like Laplace it works on a power-of-two grid of step g with
// sigma/2^40 <= g < sigma/2^39: the input is snapped to the grid and a
// discrete Gaussian integer K, Pr[K=k] ∝ exp(-k^2 / (2 s^2)), is added as
// K*g, so the output support is the grid, independent of the input. K is
// drawn with Algorithm 3 of Canonne, Kamath and Steinke, "The Discrete
// Gaussian for Differential Privacy" (NeurIPS 2020): propose Y from the
// discrete Laplace with scale t = floor(s)+1 (our exact twoSidedGeometric
// sampler) and accept with probability exp(-(|Y| - s^2/t)^2 / (2 s^2))
// (exact Bernoulli of the float64 value); about 1.3 proposals per sample.
//
// Guarantee: snapping can stretch the distance between two inputs from
// sensitivity to at most sensitivity+g, i.e. to an integer number of grid
// steps D = floor(sensitivity/g)+1. The grid standard deviation is
// therefore set to s = (sigma/sensitivity)*D, so s/D = sigma/sensitivity:
// the discrete Gaussian mechanism at integer sensitivity D with the same
// noise-to-sensitivity ratio as the continuous one. Canonne et al. show it
// satisfies the same concentrated DP, (D/s)^2/2-zCDP (their Theorem 4),
// and its exact (epsilon, delta) curve (their Theorem 7) converges to the
// continuous Balle–Wang curve as D grows: the relative difference in
// delta decays like 1/D^2 (below 2/D^2 for D = 16..256 in randomizer's
// TestDiscreteGaussianDeltaMatchesContinuous), so at D >= 2^39/(sigma/
// sensitivity) it is negligible (< 2^-68 for sigma/sensitivity <= 2^4).
// The effective standard deviation EffectiveSigma() = g*s
// exceeds sigma by a relative factor D*g/sensitivity - 1 <= g/sensitivity
// < 2^-39 * sigma/sensitivity. The rounding of exp() changes each
// probability by a relative 2^-50 at most.
//
// A Gaussian is immutable and safe for concurrent use (each goroutine
// needs its own Source).
type Gaussian struct {
	sigma, sensitivity float64
	gran               float64
	s, s2, s2overT     float64 // grid sigma, its square, s^2/t
	g                  geom    // discrete Laplace with lambda = 1/t
}

// NewGaussian returns a Gaussian sampler with standard deviation sigma
// (before the tiny inflation described above) for inputs at L2
// distance at most sensitivity. Both must be finite and > 0, with
// sigma/sensitivity in [2^-20, 2^40] and sigma in [2^-900, 2^900].
func NewGaussian(sigma, sensitivity float64) (*Gaussian, error) {
	if err := check.Positive(errInvalid, "sigma", sigma); err != nil {
		return nil, err
	}
	if err := check.Positive(errInvalid, "sensitivity", sensitivity); err != nil {
		return nil, err
	}
	ratio := sigma / sensitivity
	if sigma < 0x1p-900 || sigma > 0x1p900 || !(ratio >= 0x1p-20 && ratio <= 0x1p40) {
		return nil, fmt.Errorf("noise: gaussian sigma=%v sensitivity=%v out of range", sigma, sensitivity)
	}
	gran := ceilPow2(sigma / granularityParam)
	d := math.Floor(sensitivity/gran) + 1
	s := ratio * d
	t := math.Floor(s) + 1
	g, err := newGeom(1/t, true)
	if err != nil {
		return nil, fmt.Errorf("noise: gaussian proposal: %w", err)
	}
	return &Gaussian{sigma: sigma, sensitivity: sensitivity, gran: gran, s: s, s2: s * s, s2overT: s * s / t, g: g}, nil
}

// Sigma returns the nominal standard deviation passed to NewGaussian.
func (n *Gaussian) Sigma() float64 { return n.sigma }

// EffectiveSigma returns the standard deviation of the grid noise, g*s
// (sigma inflated by a relative 2^-39 * sigma/sensitivity at
// most).
func (n *Gaussian) EffectiveSigma() float64 { return n.gran * n.s }

// Granularity returns the grid step g (a power of two).
func (n *Gaussian) Granularity() float64 { return n.gran }

// Snap returns the multiple of Granularity() nearest to x: the mean of
// Add(x, s).
func (n *Gaussian) Snap(x float64) float64 { return math.Round(x/n.gran) * n.gran }

// sampleInt draws the discrete Gaussian integer K.
func (n *Gaussian) sampleInt(src Source) int64 {
	for {
		y := n.g.twoSided(src)
		ay := float64(y)
		if ay < 0 {
			ay = -ay
		}
		d := ay - n.s2overT
		if acceptExp(src, d*d/(2*n.s2)) {
			return y
		}
	}
}

// Noise returns one noise value K*g (mean 0, standard deviation
// EffectiveSigma()).
func (n *Gaussian) Noise(src Source) float64 { return float64(n.sampleInt(src)) * n.gran }

// Add returns Snap(x) + K*g, the Gaussian-mechanism release of x (see
// Gaussian). x must be finite; NaN and infinities are returned unchanged.
func (n *Gaussian) Add(x float64, src Source) float64 {
	return n.Snap(x) + float64(n.sampleInt(src))*n.gran
}
