package rdp

import (
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/shared/internal/check"
)

// MironovEpsilon converts an RDP curve to (eps, delta)-DP with Mironov
// (2017) Proposition 3: eps = min_alpha eps(alpha) + log(1/delta)/(alpha-1).
// It returns eps and the minimising order. Relation: whatever the curve's.
func MironovEpsilon(c Curve, delta float64) (eps, order float64, err error) {
	if err := c.Validate(); err != nil {
		return 0, 0, err
	}
	if err := check.OpenUnit(ErrInvalid, "delta", delta); err != nil {
		return 0, 0, err
	}
	eps = math.Inf(1)
	for i, a := range c.Orders {
		if v := c.Eps[i] + math.Log(1/delta)/(a-1); v < eps {
			eps, order = v, a
		}
	}
	return eps, order, nil
}

// BalleEpsilon converts an RDP curve to (eps, delta)-DP with the improved
// conversion of Balle, Barthe, Gaboardi, Hsu, Sato (AISTATS 2020, Theorem
// 21) and Canonne, Kamath, Steinke (NeurIPS 2020, Proposition 12):
//
//	eps = min_alpha eps(alpha) + (log(1/delta) + (alpha-1) log(1-1/alpha) - log(alpha)) / (alpha-1),
//
// which is Lemma 2 (Eq. 3) of the shuffled check-in paper (its "1 < delta
// < 0" is a typo for 0 < delta < 1). Never larger than MironovEpsilon
// (the extra terms are <= 0); the result is clipped at 0.
func BalleEpsilon(c Curve, delta float64) (eps, order float64, err error) {
	if err := c.Validate(); err != nil {
		return 0, 0, err
	}
	if err := check.OpenUnit(ErrInvalid, "delta", delta); err != nil {
		return 0, 0, err
	}
	eps = math.Inf(1)
	for i, a := range c.Orders {
		v := c.Eps[i] + (math.Log(1/delta)+(a-1)*math.Log1p(-1/a)-math.Log(a))/(a-1)
		if v < eps {
			eps, order = v, a
		}
	}
	return math.Max(eps, 0), order, nil
}

// binaryDivergence is D_alpha(P_r || Q_r) for the two-point pair
// P_r = (r, 1-r), Q_r = ((r-delta) e^-eps, 1 - (r-delta) e^-eps), whose
// hockey-stick divergence E_{e^eps}(P_r || Q_r) is exactly delta for every
// r in (delta, 1):
//
//	D = eps + log(r^a (r-delta)^(1-a) + (1-r)^a (e^eps - r + delta)^(1-a)) / (a-1).
func binaryDivergence(r, delta, eps, a float64) float64 {
	t1 := a*math.Log(r) + (1-a)*math.Log(r-delta)
	t2 := math.Inf(-1)
	if r < 1 {
		// log(e^eps - r + delta) = eps + log1p((delta - r) e^{-eps}):
		// no overflow of e^eps at large eps.
		t2 = a*math.Log1p(-r) + (1-a)*(eps+math.Log1p((delta-r)*math.Exp(-eps)))
	}
	m := math.Max(t1, t2)
	return eps + (m+math.Log(math.Exp(t1-m)+math.Exp(t2-m)))/(a-1)
}

// minBinaryDivergence is g(eps, delta) = min over r in (delta, 1) of
// binaryDivergence: the smallest Renyi divergence of order a that any pair
// with E_{e^eps} = delta can have. The objective is convex in r
// (x^a y^(1-a) is jointly convex for a > 1 and both arguments are affine in
// r), so golden-section search finds the minimum.
func minBinaryDivergence(delta, eps, a float64) float64 {
	if delta <= 0 {
		return 0 // r -> 0 gives P = Q
	}
	lo, hi := delta, 1.0
	f := func(r float64) float64 { return binaryDivergence(r, delta, eps, a) }
	const g = 0.6180339887498949
	x1 := hi - g*(hi-lo)
	x2 := lo + g*(hi-lo)
	f1, f2 := f(x1), f(x2)
	for i := 0; i < 200 && hi-lo > 1e-15*hi; i++ {
		if f1 <= f2 {
			hi, x2, f2 = x2, x1, f1
			x1 = hi - g*(hi-lo)
			f1 = f(x1)
		} else {
			lo, x1, f1 = x1, x2, f2
			x2 = lo + g*(hi-lo)
			f2 = f(x2)
		}
	}
	v := math.Min(f1, f2)
	if e := f(1); e < v {
		v = e
	}
	return v
}

// optimalEpsilonOrder returns the smallest eps with
// minBinaryDivergence(delta, eps, a) >= rho: any mechanism with
// D_a <= rho is then (eps, delta)-DP. Bisection on [0, Mironov bound].
func optimalEpsilonOrder(rho, a, delta float64) float64 {
	if math.IsInf(rho, 1) {
		return math.Inf(1)
	}
	hi := rho + math.Log(1/delta)/(a-1)
	if minBinaryDivergence(delta, 0, a) >= rho {
		return 0
	}
	lo := 0.0
	for i := 0; i < 80 && hi-lo > 1e-12*math.Max(hi, 1); i++ {
		mid := (lo + hi) / 2
		if minBinaryDivergence(delta, mid, a) >= rho {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// OptimalEpsilon converts an RDP curve to (eps, delta)-DP with the optimal
// single-order conversion of Asoodeh, Liao, Calmon, Kosut, Sankar ("Three
// variants of differential privacy: lossless conversion and applications",
// IEEE JSAIT 2021), minimised over the curve's orders.
//
// Derivation. Let the mechanism have D_a(P||Q) <= rho and hockey-stick
// divergence delta' = E_{e^eps}(P||Q). The test T = 1{P > e^eps Q} maps
// (P, Q) to a two-point pair with the same E_{e^eps} and (data processing)
// D_a <= rho. Every two-point pair with E_{e^eps} = delta' and only the
// first point contributing is P_r = (r, 1-r), Q_r = ((r-delta')e^-eps, ...)
// for some r in (delta', 1) (the second point cannot contribute as well:
// that would need 1 > e^eps). Hence rho >= g(eps, delta') := min_r
// D_a(P_r||Q_r), and g increases in delta' and in eps. So if g(eps, delta)
// >= rho then delta' <= delta. This is the formula printed (without the
// leading eps, the log and 1/(a-1)) as Eq. 4 of the check-in paper.
//
// It is never worse than BalleEpsilon (up to the 1e-12 bisection
// tolerance). Cost: about 10^4 evaluations per order.
func OptimalEpsilon(c Curve, delta float64) (eps, order float64, err error) {
	if err := c.Validate(); err != nil {
		return 0, 0, err
	}
	if err := check.OpenUnit(ErrInvalid, "delta", delta); err != nil {
		return 0, 0, err
	}
	// Restrict the expensive search to orders whose Balle bound is within
	// reach: OptimalEpsilon at an order is >= eps(a) - ... we simply skip
	// orders whose Mironov lower estimate eps(a) alone already exceeds the
	// best found.
	eps = math.Inf(1)
	for i, a := range c.Orders {
		if c.Eps[i] >= eps {
			continue
		}
		if v := optimalEpsilonOrder(c.Eps[i], a, delta); v < eps {
			eps, order = v, a
		}
	}
	return eps, order, nil
}

// optimalDelta returns the smallest delta the optimal single-order
// conversion certifies at eps: min over orders of sup{delta : g(eps, delta)
// <= rho} (see OptimalEpsilon), by bisection on delta.
func optimalDelta(c Curve, eps float64) (float64, error) {
	if err := c.Validate(); err != nil {
		return 0, err
	}
	if math.IsNaN(eps) || eps < 0 || math.IsInf(eps, 0) {
		return 0, fmt.Errorf("%w: eps %v must be finite and >= 0", ErrInvalid, eps)
	}
	best := 1.0
	for i, a := range c.Orders {
		rho := c.Eps[i]
		if math.IsInf(rho, 1) {
			continue
		}
		lo, hi := 0.0, best
		if minBinaryDivergence(hi, eps, a) <= rho {
			continue // cannot improve on best
		}
		for it := 0; it < 100 && hi-lo > 1e-15+1e-12*hi; it++ {
			mid := (lo + hi) / 2
			if minBinaryDivergence(mid, eps, a) <= rho {
				lo = mid
			} else {
				hi = mid
			}
		}
		if hi < best {
			best = hi
		}
	}
	return best, nil
}

// pureDPToRDP returns the exact largest Renyi divergence of order alpha
// between the outputs of an eps-DP mechanism on neighbouring inputs:
//
//	D_alpha <= log((e^{alpha eps} + e^{(1-alpha) eps}) / (1 + e^eps)) / (alpha-1),
//
// attained by binary randomized response (so it is tight); it is below
// min(eps, alpha eps^2/2). This is the optimal eps-DP to RDP conversion
// (Asoodeh et al. 2021; see also Steinke's note "Tight RDP & zCDP bounds
// from pure DP"). Derivation of the maximiser: among pairs with likelihood
// ratio in [e^-eps, e^eps] the moment E_Q[(P/Q)^alpha] is convex in the
// ratio, so it is maximised with ratios only at the extremes, i.e. by RR.
func pureDPToRDP(eps, alpha float64) (float64, error) {
	if !check.Finite(eps) || eps < 0 {
		return 0, fmt.Errorf("%w: eps = %v must be finite and >= 0", ErrInvalid, eps)
	}
	if !check.Finite(alpha) || alpha <= 1 {
		return 0, fmt.Errorf("%w: order %v must be finite and > 1", ErrInvalid, alpha)
	}
	if eps == 0 {
		return 0, nil
	}
	// log(e^{a e} + e^{(1-a) e}) - log(1 + e^e)
	num := alpha*eps + math.Log1p(math.Exp((1-2*alpha)*eps))
	den := eps + math.Log1p(math.Exp(-eps))
	return math.Max(0, (num-den)/(alpha-1)), nil
}

// ApproxCurve is a delta-approximate RDP guarantee: each neighbouring pair
// of output laws can be written P = (1-Delta) P1 + Delta P2,
// Q = (1-Delta) Q1 + Delta Q2 (same weights) with (P1, Q1) satisfying
// Curve. It converts to (eps, delta_conv + Delta)-DP, since
// E_gamma(P||Q) <= (1-Delta) E_gamma(P1||Q1) + Delta.
type ApproxCurve struct {
	Curve
	Delta float64
}

// approxDPToRDP replaces check-in Lemma 3 (see checkin.go): an
// (eps, delta)-DP pair is a post-processing of (eps, delta)-randomized
// response (Kairouz, Oh, Viswanath, "The composition theorem for
// differential privacy", ICML 2015, Section 2), whose laws are
// (1-delta) RR_eps + delta (disjoint flags); hence P = (1-delta) P1 +
// delta P2 with (P1, Q1) eps-DP, so the mechanism is delta-approximately
// (alpha, pureDPToRDP(eps, alpha))-RDP for every order. No finite plain
// RDP bound exists for delta > 0 (P = (delta, 1-delta), Q = (0, 1) is
// (0, delta)-DP with infinite Renyi divergence).
func approxDPToRDP(eps, delta float64, orders []float64) (ApproxCurve, error) {
	if math.IsNaN(delta) || delta < 0 || delta >= 1 {
		return ApproxCurve{}, fmt.Errorf("%w: delta %v outside [0, 1)", ErrInvalid, delta)
	}
	c, err := fromFunc(orders, func(a float64) (float64, error) { return pureDPToRDP(eps, a) })
	if err != nil {
		return ApproxCurve{}, err
	}
	return ApproxCurve{Curve: c, Delta: delta}, nil
}

// ComposeApprox composes delta-approximate RDP guarantees (adaptively): the
// curves add and the good parts have weight prod(1-Delta_i), so the
// composed Delta is 1 - prod(1 - Delta_i) <= sum Delta_i.
func ComposeApprox(cs ...ApproxCurve) (ApproxCurve, error) {
	curves := make([]Curve, len(cs))
	keep := 1.0
	for i, c := range cs {
		curves[i] = c.Curve
		if math.IsNaN(c.Delta) || c.Delta < 0 || c.Delta >= 1 {
			return ApproxCurve{}, fmt.Errorf("%w: approximate delta %v", ErrInvalid, c.Delta)
		}
		keep *= 1 - c.Delta
	}
	sum, err := compose(curves...)
	if err != nil {
		return ApproxCurve{}, err
	}
	return ApproxCurve{Curve: sum, Delta: 1 - keep}, nil
}

// ScaleApprox is the k-fold composition of one ApproxCurve.
func (a ApproxCurve) ScaleApprox(k int) (ApproxCurve, error) {
	c, err := a.Curve.Scale(k)
	if err != nil {
		return ApproxCurve{}, err
	}
	return ApproxCurve{Curve: c, Delta: -math.Expm1(float64(k) * math.Log1p(-a.Delta))}, nil
}

// Epsilon converts with BalleEpsilon at deltaConv and returns (eps, total
// delta = deltaConv + Delta).
func (a ApproxCurve) Epsilon(deltaConv float64) (eps, delta float64, err error) {
	eps, _, err = BalleEpsilon(a.Curve, deltaConv)
	return eps, deltaConv + a.Delta, err
}
