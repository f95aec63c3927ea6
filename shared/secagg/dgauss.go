package secagg

import (
	"fmt"

	"github.com/blanket-fl/blanket/shared/internal/dgauss"
	"github.com/blanket-fl/blanket/shared/noise"
)

// discreteGaussian samples the discrete Gaussian N_Z(0, sigma^2) over the
// integers by Algorithm 3 of Canonne, Kamath and Steinke, "The Discrete
// Gaussian for Differential Privacy" (NeurIPS 2020): shared/internal/dgauss,
// the one sampler of the update's and the count blocks' noise (see
// dgauss.Sampler for the method and its exactness).
type discreteGaussian struct{ s *dgauss.Sampler }

func newDiscreteGaussian(sigma float64) (*discreteGaussian, error) {
	s, err := dgauss.New(sigma)
	if err != nil {
		return nil, fmt.Errorf("secagg: %w", err)
	}
	return &discreteGaussian{s}, nil
}

func (g *discreteGaussian) sample(src noise.Source) int64 { return g.s.Sample(src) }
