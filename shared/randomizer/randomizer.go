// Package randomizer implements the local differential privacy randomizers
// of Blanket: the privacy-blanket randomizer R_{gamma,b} (FLAME Algorithm 1),
// Laplace on [0,1], Clip-Laplace (APES Definition 4) and Gaussian.
//
// Every randomizer takes one scalar x in [0,1], the clipped and normalized
// coordinate x~ = (clip(x, -C, C) + C) / 2C of FLAME Algorithm 2 line 8, and
// returns one real-valued report. Each one also exposes its blanket
// distribution omega, the distribution dummy messages are drawn from when the
// relay pads a dimension (FLAME Algorithm 3).
//
// Constructors and guarantees:
//   - NewRGB(eps, b): R_{gamma,b} of FLAME Algorithm 1 / Balle et al.
//     2019, corrected to the alphabet {0..b} with gamma = (b+1)/(e^eps+b),
//     exactly eps-LDP; affine; see rgbBuckets / rgbBucketsLocal for b.
//   - NewLaplace(eps): x + Lap(1/eps), eps-LDP, blanket Lap(1/2, 1/eps)
//     with weight e^{-eps/2}; affine.
//   - NewClipLaplace(eps, r): APES Definition 4 (truncated Laplace on
//     [1/2-r/2, 1/2+r/2]), exactly eps-LDP (APES Theorem 1); not affine:
//     the analyzer inverts APES eq. (1) with ClipLaplaceCalibrator.
//   - NewGaussian(eps, delta): x + N(0, sigma^2) with the analytic sigma of
//     Balle and Wang 2018 (GaussianSigma), (eps, delta)-LDP; affine.
//
// All noise comes from shared/noise's floating-point-safe samplers, and
// Randomize does not allocate.
package randomizer

import "github.com/blanket-fl/blanket/shared/noise"

// Randomizer is a local randomizer on inputs in [0,1].
type Randomizer interface {
	// Name is a short stable identifier, e.g. "laplace" or "rgb".
	Name() string
	// Epsilon and Delta give the (epsilon, delta)-LDP guarantee of one
	// call to Randomize (delta is 0 for pure epsilon-LDP randomizers).
	Epsilon() float64
	Delta() float64
	// Randomize returns the randomized report of x. Inputs outside [0,1]
	// are clamped to [0,1] first, so the guarantee holds for any input.
	Randomize(x float64, src noise.Source) float64
	// Blanket draws one sample from the blanket distribution omega, used
	// for dummy padding. Its mean equals Expect(1/2), so a dummy adds zero
	// in expectation to the centered sums of the analyzer.
	Blanket(src noise.Source) float64
	// Expect returns E[Randomize(x)] for x in [0,1]; the analyzer inverts
	// it to debias.
	Expect(x float64) float64
}

// Affine is implemented by randomizers whose mean is affine in the input:
// E[Randomize(x)] = Offset + Slope*x with Slope > 0. The FLAME estimator
// (subtract n_p*(Offset+Slope/2) per dimension, divide by Slope) requires
// this.
type Affine interface {
	Randomizer
	Affine() (offset, slope float64)
}

// Compile-time checks of which randomizers are affine.
var (
	_ Affine     = (*RGB)(nil)
	_ Affine     = (*Laplace)(nil)
	_ Affine     = (*Gaussian)(nil)
	_ Randomizer = (*ClipLaplace)(nil)
)
