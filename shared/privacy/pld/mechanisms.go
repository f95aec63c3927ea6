package pld

import (
	"errors"
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/shared/internal/check"
)

// stdNormalCDF returns Phi(x), accurate in relative terms in the lower tail.
func stdNormalCDF(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }

// tailZ returns z >= 1 with Phi(-z) <= target (bisection on erfc).
func tailZ(target float64) float64 {
	lo, hi := 0.0, 40.0
	for range 100 {
		mid := (lo + hi) / 2
		if stdNormalCDF(-mid) > target {
			lo = mid
		} else {
			hi = mid
		}
	}
	return max(hi, 1)
}

// evalErr is the relative accuracy assumed for math.Erfc and math.Exp
// evaluations in the closed forms below (Go's implementations are within
// a few ulps); it is deliberately generous.
const evalErr = 8 * unitRoundoff

// GaussianDelta returns the exact delta(eps) of the Gaussian mechanism with
// noise N(0, sigma^2) and L2 sensitivity Delta, mu = Delta/sigma (Balle and
// Wang, ICML 2018, Theorem 8):
//
//	delta(eps) = Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu).
//
// It is the same for both directions. k-fold composition equals one
// Gaussian with mu*sqrt(k) (Dong, Roth, Su 2022, Corollary 2).
//
// The second term is formed as exp(eps + log Phi(-mu/2 - eps/mu)), never
// as e^eps times a probability, so it neither overflows (eps above ~709
// nats) nor turns into Inf*0 = NaN; where Phi underflows, log Phi is
// replaced by the lower bound of the Mills ratio, Phi(-t) >=
// t/(t^2+1)·phi(t) (Gordon 1941), which can only raise delta (an upper
// bound). The result is in [0, 1], never NaN for finite mu > 0 and eps.
func GaussianDelta(mu, eps float64) float64 {
	return max(0, stdNormalCDF(mu/2-eps/mu)-math.Exp(eps+logNormalCDFLower(-mu/2-eps/mu)))
}

// logNormalCDFLower returns log Phi(x), or for x < -30 (where erfc nears
// underflow) the Mills-ratio lower bound log(t/(t^2+1)·phi(t)), t = -x.
func logNormalCDFLower(x float64) float64 {
	if x >= -30 {
		return math.Log(stdNormalCDF(x))
	}
	t := -x
	return math.Log(t) - math.Log1p(t*t) - t*t/2 - 0.5*math.Log(2*math.Pi)
}

// Gaussian returns the PLD of the Gaussian mechanism: noise N(0, sigma^2)
// added to a query of L2 sensitivity sensitivity. With mu = sensitivity /
// sigma the privacy loss under P = N(0, sigma^2), Q = N(sensitivity,
// sigma^2) is L ~ N(mu^2/2, mu^2) (Koskela et al. AISTATS 2020, Section
// 6; Dong, Roth, Su 2022). The mechanism is symmetric, so one direction is
// kept. Losses beyond z standard deviations (Phi(-z) <= TailMass/100)
// are truncated pessimistically (upper tail to infinite loss, lower tail
// to the lowest grid point). Guarantee: Delta(eps) >= GaussianDelta(mu,
// eps) for every composition of the result.
func Gaussian(sigma, sensitivity float64, opt Options) (*PLD, error) {
	if err := check.Positive(errInvalid, "sigma", sigma); err != nil {
		return nil, err
	}
	if err := check.Positive(errInvalid, "sensitivity", sensitivity); err != nil {
		return nil, err
	}
	opt, err := opt.validate()
	if err != nil {
		return nil, err
	}
	mu := sensitivity / sigma
	if mu > 30 {
		return nil, fmt.Errorf("pld: sensitivity/sigma = %v too large (max 30)", mu)
	}
	m, s := mu*mu/2, mu
	z := tailZ(opt.TailMass / 100)
	h := opt.Width
	lo := int(math.Floor((m - z*s) / h))
	hi := int(math.Ceil((m + z*s) / h))
	if hi-lo+1 > maxBuckets {
		return nil, fmt.Errorf("pld: Gaussian grid of %d points exceeds %d; use a larger grid width", hi-lo+1, maxBuckets)
	}
	var d *dist
	if opt.Method == ConnectDots {
		n := hi - lo + 1
		vals, errs := make([]float64, n), make([]float64, n)
		for i := range vals {
			eps := float64(lo+i) * h
			// e^eps Phi(.) in log space: at mu = 30 the grid reaches
			// ~705 nats, a hair below where e^eps overflows (see
			// GaussianDelta); no margin is left to rounding.
			t1 := stdNormalCDF(mu/2 - eps/mu)
			t2 := math.Exp(eps + logNormalCDFLower(-mu/2-eps/mu))
			vals[i] = max(0, t1-t2)
			errs[i] = evalErr * (t1 + t2)
		}
		// Abscissae e^{eps - top}: no overflow at the top of the grid.
		d, err = connectDotsShift(lo, h, vals, errs, 1, opt.TailMass, float64(hi)*h)
	} else {
		cdf := func(l float64) float64 { return stdNormalCDF((l - m) / s) }
		sf := func(l float64) float64 { return stdNormalCDF((m - l) / s) }
		d, err = roundUpContinuous(lo, hi, h, cdf, sf, opt.TailMass)
	}
	if err != nil {
		return nil, err
	}
	return &PLD{h: h, tail: opt.TailMass, remove: d}, nil
}

// roundUpContinuous discretizes a continuous privacy loss with CDF cdf and
// survival function sf (under P) pessimistically: the mass of (l-h, l] goes
// to l for grid points l in (lo*h, hi*h], all mass <= lo*h to lo*h and all
// mass > hi*h to +Inf. Bucket masses are differences of cdf in the lower
// half and of sf in the upper half (no cancellation). Error in the
// upper-tail norm: every tail sum of the computed masses telescopes to at
// most three cdf/sf evaluations (relative error evalErr each, values <= 1)
// plus the roundings u*m_i of the subtractions (summing to <= u), so
// errL1 = 3*evalErr + 2u; clamping a negative difference (possible only
// from those roundings) stays within that.
func roundUpContinuous(lo, hi int, h float64, cdf, sf func(float64) float64, tail float64) (*dist, error) {
	n := hi - lo + 1
	d := &dist{offset: lo, probs: make([]float64, n)}
	prevL := float64(lo) * h
	prevF, prevS := cdf(prevL), sf(prevL)
	d.probs[0] = prevF
	for i := 1; i < n; i++ {
		l := float64(lo+i) * h
		f, s := cdf(l), sf(l)
		var mass float64
		if f <= 0.5 {
			mass = f - prevF
		} else {
			mass = prevS - s
		}
		d.probs[i] = max(mass, 0)
		prevF, prevS = f, s
	}
	d.inf = prevS
	d.errL1 = 3*evalErr + 2*unitRoundoff
	d.truncate(tail)
	return d, nil
}

// laplaceDelta returns the exact delta(eps) of the Laplace mechanism with
// scale b and L1 sensitivity Delta, a = Delta/b: 0 for eps >= a,
// 1 - e^{(eps-a)/2} for |eps| < a, 1 - e^eps for eps <= -a. (For
// 0 <= eps < a the set {L > eps} is a half-line; eps < 0 follows from the
// symmetry H_x(P||Q) = 1 - x + x H_{1/x}(P||Q) of this symmetric pair.)
func laplaceDelta(a, eps float64) float64 {
	switch {
	case eps >= a:
		return 0
	case eps <= -a:
		return -math.Expm1(eps)
	default:
		return -math.Expm1((eps - a) / 2)
	}
}

// laplace returns the PLD of the Laplace mechanism: noise Lap(scale) added
// to a query of L1 sensitivity sensitivity, a = sensitivity/scale. The
// privacy loss under P = Lap(0, b), Q = Lap(Delta, b) is a on o <= 0 (mass
// 1/2), -a on o >= Delta (mass e^{-a}/2) and (Delta - 2o)/b in between, so
// its CDF is F(l) = e^{-(a-l)/2}/2 on [-a, a) and 1 from a on. Symmetric:
// one direction is kept. Guarantee: Delta(eps) >= laplaceDelta(a, eps)
// for every composition of the result (pure a-DP for one use).
func laplace(scale, sensitivity float64, opt Options) (*PLD, error) {
	if err := check.Positive(errInvalid, "scale", scale); err != nil {
		return nil, err
	}
	if err := check.Positive(errInvalid, "sensitivity", sensitivity); err != nil {
		return nil, err
	}
	opt, err := opt.validate()
	if err != nil {
		return nil, err
	}
	a := sensitivity / scale
	if a > maxFiniteLoss {
		return nil, fmt.Errorf("pld: sensitivity/scale = %v too large (max %v)", a, maxFiniteLoss)
	}
	h := opt.Width
	var d *dist
	if opt.Method == ConnectDots {
		lo := int(math.Floor(-a / h))
		hi := int(math.Ceil(a / h))
		n := hi - lo + 1
		if n > maxBuckets {
			return nil, fmt.Errorf("pld: Laplace grid of %d points exceeds %d", n, maxBuckets)
		}
		vals, errs := make([]float64, n), make([]float64, n)
		for i := range vals {
			eps := float64(lo+i) * h
			vals[i] = laplaceDelta(a, eps)
			errs[i] = evalErr
		}
		d, err = connectDots(lo, h, vals, errs, 1, opt.TailMass)
	} else {
		lo := int(math.Ceil(-a / h)) // lo*h >= -a: the point mass lands on lo
		hi := int(math.Ceil(a / h))
		if hi-lo+1 > maxBuckets {
			return nil, fmt.Errorf("pld: Laplace grid of %d points exceeds %d", hi-lo+1, maxBuckets)
		}
		cdf := func(l float64) float64 {
			switch {
			case l < -a:
				return 0
			case l >= a:
				return 1
			default:
				return 0.5 * math.Exp(-(a-l)/2)
			}
		}
		sf := func(l float64) float64 { return 1 - cdf(l) }
		d, err = roundUpContinuous(lo, hi, h, cdf, sf, opt.TailMass)
	}
	if err != nil {
		return nil, err
	}
	return &PLD{h: h, tail: opt.TailMass, remove: d}, nil
}

// randomizedResponse returns the PLD of k-ary randomized response with
// local privacy eps0 (Warner 1965; Kairouz, Oh, Viswanath 2016): the true
// value is reported with probability e^eps0/(e^eps0 + k - 1), each other
// value with 1/(e^eps0 + k - 1). The worst pair of inputs x != x' gives
// the pair P = M(x), Q = M(x'), with loss +eps0 on x, -eps0 on x' and 0
// elsewhere; symmetric, so one direction is kept. It is pure eps0-DP for
// one use and Delta is exact up to the grid for compositions.
func randomizedResponse(eps0 float64, k int, opt Options) (*PLD, error) {
	if err := check.Positive(errInvalid, "eps0", eps0); err != nil {
		return nil, err
	}
	if eps0 > maxFiniteLoss {
		return nil, fmt.Errorf("pld: eps0 %v too large (max %v)", eps0, maxFiniteLoss)
	}
	if k < 2 {
		return nil, fmt.Errorf("pld: randomized response needs k >= 2 values, got %d", k)
	}
	// Atoms: x, x', and the k-2 other values merged (loss 0).
	den := math.Log(math.Exp(eps0) + float64(k-1))
	lp := []float64{eps0 - den, -den}
	lq := []float64{-den, eps0 - den}
	if k > 2 {
		rest := math.Log(float64(k-2)) - den
		lp = append(lp, rest)
		lq = append(lq, rest)
	}
	opt.BothOrdersDominated = true
	return FromLogPair(lp, lq, opt)
}

// subsampledGaussian returns the PLD of the Poisson-subsampled Gaussian
// mechanism (each user included independently with probability rate, then
// N(0, sigma^2) noise on a sum of L2 sensitivity sensitivity), the DP-SGD /
// DP-FedAvg round. The Gaussian pair is first replaced by the discrete
// dominating pair of its pessimistic PLD (see dist.logPair: P' = PLD masses,
// Q' = P' e^{-L}), which is then subsampled with subsample: remove
// direction (rate P' + (1-rate) Q', Q'), add direction its swap (Zhu, Dong,
// Wang 2022, subsampling of dominating pairs). Delta is the max over both directions.
func subsampledGaussian(sigma, sensitivity, rate float64, opt Options) (*PLD, error) {
	if math.IsNaN(rate) || rate <= 0 || rate > 1 {
		return nil, fmt.Errorf("pld: sampling rate %v must be in (0, 1]", rate)
	}
	base, err := Gaussian(sigma, sensitivity, opt)
	if err != nil {
		return nil, err
	}
	if rate == 1 {
		return base, nil
	}
	lp, lq := base.remove.logPair(base.h)
	mix, err := SubsampleLog(lp, lq, rate)
	if err != nil {
		return nil, err
	}
	opt.BothOrdersDominated = false
	out, err := FromLogPair(mix, lq, opt)
	if err != nil {
		return nil, fmt.Errorf("pld: subsampled Gaussian: %w", err)
	}
	return out, nil
}

// logPair returns a discrete pair (P', Q') whose PLD is d: atom i has
// P' = probs[i], Q' = probs[i] e^{-L_i}; an atom with P' = inf, Q' = 0;
// and an atom with P' = 0 carrying the remaining Q-mass. When d is the
// pessimistic PLD of a dominating pair, (P', Q') is itself a dominating
// pair for the same direction, so it can be subsampled.
func (d *dist) logPair(h float64) (logP, logQ []float64) {
	logP = make([]float64, 0, len(d.probs)+2)
	logQ = make([]float64, 0, len(d.probs)+2)
	var sq float64
	for i, p := range d.probs {
		if p <= 0 {
			continue
		}
		l := float64(d.offset+i) * h
		lp := math.Log(p)
		logP = append(logP, lp)
		logQ = append(logQ, lp-l)
		sq += math.Exp(lp - l)
	}
	if d.inf > 0 {
		logP = append(logP, math.Log(d.inf))
		logQ = append(logQ, math.Inf(-1))
	}
	if rest := 1 - sq; rest > 0 {
		logP = append(logP, math.Inf(-1))
		logQ = append(logQ, math.Log(rest))
	}
	return logP, logQ
}

// errInvalid is what a mechanism's parameter check wraps.
var errInvalid = errors.New("pld: invalid parameter")
