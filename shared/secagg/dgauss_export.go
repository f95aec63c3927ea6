package secagg

import (
	"fmt"

	"github.com/blanket-fl/blanket/shared/noise"
)

// DiscreteGaussianNoise returns d independent draws of the discrete
// Gaussian N_Z(0, sigma^2) from src, in coordinate order: exactly the
// values K that AggregateShare.AddNoise adds (before its public offset) on
// the same stream, by the same sampler (Canonne, Kamath and Steinke 2020,
// Algorithm 3; see discreteGaussian). Each vector of draws, added to an
// integer sum of L2 sensitivity Delta, makes it Delta^2/(2 sigma^2)-zCDP
// under add/remove of one summand (CKS'20 Thm. 4, as at AddNoise). It
// exists for callers that add the noise to another integer aggregate (the
// experiment runner's simulations). sigma must be in [1, 2^40]; noise.Secure()
// in production.
func DiscreteGaussianNoise(sigma float64, d int, src noise.Source) ([]int64, error) {
	if d < 0 {
		return nil, fmt.Errorf("secagg: %d noise draws", d)
	}
	g, err := newDiscreteGaussian(sigma)
	if err != nil {
		return nil, err
	}
	out := make([]int64, d)
	for i := range out {
		out[i] = g.sample(src)
	}
	return out, nil
}
