package randomizer

import (
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/shared/noise"
)

// Gaussian is the Gaussian randomizer R(x) = x + N(0, sigma^2) on inputs
// x in [0,1] (sensitivity 1), the LDP-FL baseline of FLAME's experiments
// ("LDP-FL with Gaussian Mechanism for (eps, delta)-LDP"). sigma is the
// smallest value for which the analytic Gaussian mechanism of Balle and
// Wang, "Improving the Gaussian Mechanism for Differential Privacy:
// Analytical Calibration and Optimal Denoising" (ICML 2018), Theorem 8,
// certifies (eps, delta)-LDP; see GaussianSigma. The noise comes from
// noise.Gaussian (a discrete Gaussian on a power-of-two grid, safe against
// floating-point attacks; its effective sigma is larger by a relative
// 2^-39 at most).
//
// Blanket = R(1/2), mean 1/2 = Expect(1/2), used for dummy padding. (Unlike
// the Laplace case this is a padding convention, not the exact privacy
// blanket min_x p_x.) Mean: E[R(x)] = x (offset 0, slope 1) up to the
// snapping of x to the grid (|bias| <= 2^-40 sigma).
type Gaussian struct {
	eps, delta, sigma float64
	gauss             *noise.Gaussian
}

// NewGaussian returns the (eps, delta)-LDP Gaussian randomizer on [0,1].
// eps must be finite and > 0, delta in (0, 1).
func NewGaussian(eps, delta float64) (*Gaussian, error) {
	sigma, err := GaussianSigma(eps, delta, 1)
	if err != nil {
		return nil, err
	}
	g, err := noise.NewGaussian(sigma, 1)
	if err != nil {
		return nil, fmt.Errorf("randomizer: gaussian: %w", err)
	}
	return &Gaussian{eps: eps, delta: delta, sigma: sigma, gauss: g}, nil
}

// Name returns "gaussian".
func (g *Gaussian) Name() string { return "gaussian" }

// Epsilon returns eps of the (eps, delta)-LDP guarantee.
func (g *Gaussian) Epsilon() float64 { return g.eps }

// Delta returns delta of the (eps, delta)-LDP guarantee.
func (g *Gaussian) Delta() float64 { return g.delta }

// Sigma returns the calibrated standard deviation (before the grid's
// relative 2^-39 inflation).
func (g *Gaussian) Sigma() float64 { return g.sigma }

// Randomize returns clamp(x) + N(0, sigma^2) (grid-exact, see
// noise.Gaussian): (eps, delta)-LDP for any x (NaN treated as 0).
func (g *Gaussian) Randomize(x float64, src noise.Source) float64 {
	return g.gauss.Add(clamp01(x), src)
}

// Blanket draws from R(1/2).
func (g *Gaussian) Blanket(src noise.Source) float64 { return g.gauss.Add(0.5, src) }

// Expect returns E[R(x)] = clamp(x).
func (g *Gaussian) Expect(x float64) float64 { return clamp01(x) }

// Affine returns offset 0 and slope 1.
func (g *Gaussian) Affine() (offset, slope float64) { return 0, 1 }

// Density returns the output density N(y; clamp(x), sigma^2).
func (g *Gaussian) Density(x, y float64) float64 {
	d := (y - clamp01(x)) / g.sigma
	return math.Exp(-d*d/2) / (g.sigma * math.Sqrt(2*math.Pi))
}

// gaussianDelta returns the exact delta of the Gaussian mechanism with
// standard deviation sigma at L2 sensitivity sens for a given eps (Balle
// and Wang 2018, Theorem 8):
//
//	delta = Phi(sens/(2 sigma) - eps sigma/sens) - e^eps Phi(-sens/(2 sigma) - eps sigma/sens).
//
// The second term is evaluated in log space, so large eps neither
// overflows nor returns NaN. Invalid arguments return NaN.
func gaussianDelta(eps, sigma, sens float64) float64 {
	if math.IsNaN(eps) || eps < 0 || math.IsInf(eps, 0) || !(sigma > 0) || math.IsInf(sigma, 0) || !(sens > 0) || math.IsInf(sens, 0) {
		return math.NaN()
	}
	a := sens / (2 * sigma)
	b := eps * sigma / sens
	d := normCDF(a-b) - math.Exp(eps+logNormCDF(-a-b))
	if d < 0 {
		return 0
	}
	return d
}

// GaussianSigma returns the smallest sigma (to a relative 1e-12, rounded
// up) such that the Gaussian mechanism at L2 sensitivity sens is
// (eps, delta)-DP by the analytic calibration of Balle and Wang 2018
// (Theorem 8 / Algorithm 1), found by bisection on gaussianDelta, which is
// strictly decreasing in sigma. Use it for the randomizer (sens 1) and for
// central DP-FL (sens = 2C under replacement, as in FLAME's DP-FL
// baseline). eps and sens must be finite and > 0, delta in (0, 1).
func GaussianSigma(eps, delta, sens float64) (float64, error) {
	if err := checkEpsilon(eps); err != nil {
		return 0, err
	}
	if math.IsNaN(delta) || delta <= 0 || delta >= 1 {
		return 0, fmt.Errorf("randomizer: gaussian delta=%v must be in (0, 1)", delta)
	}
	if math.IsNaN(sens) || math.IsInf(sens, 0) || sens <= 0 {
		return 0, fmt.Errorf("randomizer: gaussian sensitivity=%v must be finite and > 0", sens)
	}
	lo, hi := 0.0, sens
	for gaussianDelta(eps, hi, sens) > delta {
		lo, hi = hi, 2*hi
		if hi > 1e12*sens {
			return 0, fmt.Errorf("randomizer: gaussian sigma for eps=%v delta=%v exceeds 1e12*sensitivity", eps, delta)
		}
	}
	for hi-lo > 1e-12*hi {
		mid := lo + (hi-lo)/2
		if gaussianDelta(eps, mid, sens) > delta {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi, nil
}

// classicGaussianSigma returns the classical calibration
// sigma = sens*sqrt(2 ln(1.25/delta))/eps (Dwork and Roth 2014, Theorem
// A.1), which is only proven for eps < 1 and is looser than GaussianSigma;
// FLAME's DP-FL baseline uses it. Provided for comparison.
func classicGaussianSigma(eps, delta, sens float64) (float64, error) {
	if err := checkEpsilon(eps); err != nil {
		return 0, err
	}
	if math.IsNaN(delta) || delta <= 0 || delta >= 1 {
		return 0, fmt.Errorf("randomizer: gaussian delta=%v must be in (0, 1)", delta)
	}
	if math.IsNaN(sens) || math.IsInf(sens, 0) || sens <= 0 {
		return 0, fmt.Errorf("randomizer: gaussian sensitivity=%v must be finite and > 0", sens)
	}
	return sens * math.Sqrt(2*math.Log(1.25/delta)) / eps, nil
}

// normCDF is the standard normal CDF, accurate in both tails.
func normCDF(x float64) float64 { return math.Erfc(-x/math.Sqrt2) / 2 }

// logNormCDF is ln Phi(x), using the asymptotic expansion of the Mills
// ratio where Phi underflows (x < -37).
func logNormCDF(x float64) float64 {
	if x > -37 {
		return math.Log(normCDF(x))
	}
	// Phi(x) = phi(x)/|x| * (1 - 1/x^2 + 3/x^4 - 15/x^6 + ...)
	x2 := x * x
	series := 1 - 1/x2 + 3/(x2*x2) - 15/(x2*x2*x2)
	return -x2/2 - math.Log(-x) - 0.5*math.Log(2*math.Pi) + math.Log(series)
}
