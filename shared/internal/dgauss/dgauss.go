// Package dgauss is the discrete Gaussian sampler of secure summation,
// shared by shared/secagg (the update's noise) and shared/counts (the
// count blocks' noise), so that both servers' noises of every part of a
// round come from one implementation.
package dgauss

import (
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/shared/noise"
)

// MaxSigma is the largest σ accepted (2^40).
const MaxSigma = 0x1p40

// Sampler samples the discrete Gaussian N_Z(0, sigma^2) over the
// integers, Pr[K = k] ∝ exp(-k^2 / (2 sigma^2)), by Algorithm 3 of
// Canonne, Kamath and Steinke, "The Discrete Gaussian for Differential
// Privacy" (NeurIPS 2020): propose Y from the discrete Laplace with scale
// t = floor(sigma) + 1 (noise.DiscreteLaplace, exact) and accept with
// probability exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2)) (noise.Bernoulli,
// exact for the float64 value). The only inexactness is the <1 ulp
// rounding of exp(), as in noise.Gaussian; about 1.3 proposals per sample.
//
// noise.Gaussian itself releases reals on a grid of step about
// sigma/2^40; the secure sum needs integers, hence this sampler built on
// the same exact primitives.
type Sampler struct {
	s2, s2overT float64
	lap         *noise.DiscreteLaplace
}

// New returns the sampler of N_Z(0, sigma^2), sigma in [1, 2^40].
func New(sigma float64) (*Sampler, error) {
	if !(sigma >= 1) || sigma > MaxSigma {
		return nil, fmt.Errorf("discrete gaussian sigma=%v outside [1, 2^40]", sigma)
	}
	t := math.Floor(sigma) + 1
	lap, err := noise.NewDiscreteLaplace(1 / t)
	if err != nil {
		return nil, fmt.Errorf("discrete gaussian proposal: %w", err)
	}
	return &Sampler{s2: sigma * sigma, s2overT: sigma * sigma / t, lap: lap}, nil
}

// Sample draws one value from src.
func (g *Sampler) Sample(src noise.Source) int64 {
	for {
		y := g.lap.Sample(src)
		ay := math.Abs(float64(y))
		d := ay - g.s2overT
		if noise.Bernoulli(src, math.Exp(-d*d/(2*g.s2))) {
			return y
		}
	}
}

// Noise returns d independent draws of N_Z(0, sigma^2) from src, in
// order (noise.Secure() in production).
func Noise(sigma float64, d int, src noise.Source) ([]int64, error) {
	if d < 0 {
		return nil, fmt.Errorf("%d noise draws", d)
	}
	g, err := New(sigma)
	if err != nil {
		return nil, err
	}
	out := make([]int64, d)
	for i := range out {
		out[i] = g.Sample(src)
	}
	return out, nil
}
