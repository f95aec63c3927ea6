package secagg

import (
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/shared/noise"
)

// discreteGaussian samples the discrete Gaussian N_Z(0, sigma^2) over the
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
type discreteGaussian struct {
	s2, s2overT float64
	lap         *noise.DiscreteLaplace
}

func newDiscreteGaussian(sigma float64) (*discreteGaussian, error) {
	if !(sigma >= 1) || sigma > maxSigma {
		return nil, fmt.Errorf("secagg: discrete gaussian sigma=%v outside [1, 2^40]", sigma)
	}
	t := math.Floor(sigma) + 1
	lap, err := noise.NewDiscreteLaplace(1 / t)
	if err != nil {
		return nil, fmt.Errorf("secagg: discrete gaussian proposal: %w", err)
	}
	return &discreteGaussian{s2: sigma * sigma, s2overT: sigma * sigma / t, lap: lap}, nil
}

func (g *discreteGaussian) sample(src noise.Source) int64 {
	for {
		y := g.lap.Sample(src)
		ay := math.Abs(float64(y))
		d := ay - g.s2overT
		if noise.Bernoulli(src, math.Exp(-d*d/(2*g.s2))) {
			return y
		}
	}
}
