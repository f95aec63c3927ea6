package rdp

import (
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/shared/internal/check"
	"github.com/blanket-fl/blanket/shared/privacy/amplify"
)

// GaussianRDP returns the RDP of the Gaussian mechanism with noise standard
// deviation sigma and L2 sensitivity sens: eps(alpha) = alpha sens^2 /
// (2 sigma^2) (Mironov 2017, Proposition 7), exact for every alpha > 1.
// The relation is whatever sens is measured under (for replace-one with
// inputs in a ball of radius C, sens = 2C; see the check-in paper's remark
// on Federated DP-SGD).
func GaussianRDP(sigma, sens float64, orders []float64) (Curve, error) {
	if err := check.Positive(ErrInvalid, "sigma", sigma); err != nil {
		return Curve{}, err
	}
	if err := check.Positive(ErrInvalid, "sensitivity", sens); err != nil {
		return Curve{}, err
	}
	return fromFunc(orders, func(a float64) (float64, error) { return a * sens * sens / (2 * sigma * sigma), nil })
}

// PairRDP returns D_alpha(P || Q) of a discrete dominating pair at each
// order, computed exactly over its atoms in log-space:
// D_alpha = log(sum_i exp(alpha LogP_i + (1-alpha) LogQ_i)) / (alpha-1).
// An atom with P > 0 = Q makes the value +Inf. Because an amplify.Pair
// dominates the mechanism for hockey-stick divergences of every order
// gamma >= 0 (Blackwell dominance), it dominates every Renyi divergence, so
// the result is an RDP curve of the mechanism (for its Relation) provided
// the pair dominates both orders of neighbours (true for all amplify clone
// pairs, which are symmetric; for an asymmetric pair take the maximum with
// PairRDP(p.Swap())).
func PairRDP(p *amplify.Pair, orders []float64) (Curve, error) {
	if err := p.Validate(); err != nil {
		return Curve{}, fmt.Errorf("rdp: %w", err)
	}
	if err := validateOrders(orders); err != nil {
		return Curve{}, err
	}
	inf := false
	var lp, lq []float64
	for i, v := range p.LogP {
		if math.IsInf(v, -1) {
			continue
		}
		if math.IsInf(p.LogQ[i], -1) {
			inf = true
			break
		}
		lp = append(lp, v)
		lq = append(lq, p.LogQ[i])
	}
	c := Curve{Orders: append([]float64(nil), orders...), Eps: make([]float64, len(orders))}
	terms := make([]float64, len(lp))
	for k, a := range orders {
		if inf {
			c.Eps[k] = math.Inf(1)
			continue
		}
		for i := range lp {
			terms[i] = a*lp[i] + (1-a)*lq[i]
		}
		c.Eps[k] = math.Max(0, logSumExp(terms)/(a-1))
	}
	return c, nil
}

// SampledGaussianRDP returns the RDP of the Poisson-subsampled Gaussian
// mechanism (sampling rate q, noise sigma, sensitivity sens) under
// add/remove neighbours at integer orders, exactly (Mironov, Talwar, Zhang
// 2019, "Renyi differential privacy of the sampled Gaussian mechanism",
// Section 3.3):
//
//	eps(alpha) = log( sum_{k=0}^{alpha} C(alpha,k) (1-q)^{alpha-k} q^k exp((k^2-k) sens^2/(2 sigma^2)) ) / (alpha-1).
func SampledGaussianRDP(q, sigma, sens float64, orders []float64) (Curve, error) {
	if err := check.Probability(ErrInvalid, "sampling rate", q); err != nil {
		return Curve{}, err
	}
	if err := check.Positive(ErrInvalid, "sigma", sigma); err != nil {
		return Curve{}, err
	}
	if err := check.Positive(ErrInvalid, "sensitivity", sens); err != nil {
		return Curve{}, err
	}
	z := sigma / sens
	return fromFunc(orders, func(a float64) (float64, error) {
		ai, err := integerOrder(a)
		if err != nil {
			return 0, err
		}
		if q == 0 {
			return 0, nil
		}
		terms := make([]float64, 0, ai+1)
		for k := 0; k <= ai; k++ {
			t := logChoose(float64(ai), k) + float64(k*k-k)/(2*z*z)
			if ai-k > 0 {
				t += float64(ai-k) * math.Log1p(-q)
			}
			if k > 0 {
				t += float64(k) * math.Log(q)
			}
			if q == 1 && ai-k > 0 {
				continue
			}
			terms = append(terms, t)
		}
		return math.Max(0, logSumExp(terms)/(a-1)), nil
	})
}

func integerOrder(a float64) (int, error) {
	if a != math.Floor(a) || a < 2 || a > 1e6 {
		return 0, fmt.Errorf("%w: order %v must be an integer in [2, 1e6] for this bound", ErrInvalid, a)
	}
	return int(a), nil
}

// wbkSubsampled returns the RDP of a mechanism run on a subsample drawn
// without replacement at rate gamma = m/n, under replace-one neighbours, at
// integer orders (Wang, Balle, Kasiviswanathan, AISTATS 2019, "Subsampled
// Renyi differential privacy and analytical moments accountant", Theorem
// 9):
//
//	eps'(a) <= log(1 + gamma^2 C(a,2) min{4(e^{eps(2)}-1), e^{eps(2)} min{2, (e^{eps(inf)}-1)^2}}
//	               + sum_{j=3}^{a} gamma^j C(a,j) e^{(j-1) eps(j)} min{2, (e^{eps(inf)}-1)^j}) / (a-1).
//
// base(j) is the base mechanism's RDP at integer order j (replace-one) and
// epsInf its pure-DP bound (+Inf if none). This is the subsampling step of
// the check-in paper's Approach 1 ("Theorem 9 of [38]").
func wbkSubsampled(gamma float64, base func(j int) (float64, error), epsInf float64, orders []float64) (Curve, error) {
	if err := check.Probability(ErrInvalid, "sampling rate", gamma); err != nil {
		return Curve{}, err
	}
	if math.IsNaN(epsInf) || epsInf < 0 {
		return Curve{}, fmt.Errorf("%w: eps(inf) = %v", ErrInvalid, epsInf)
	}
	// log min{2, (e^{epsInf}-1)^j}
	logMinTerm := func(j int) float64 {
		if math.IsInf(epsInf, 1) {
			return math.Ln2
		}
		return math.Min(math.Ln2, float64(j)*math.Log(math.Expm1(epsInf)))
	}
	return fromFunc(orders, func(a float64) (float64, error) {
		ai, err := integerOrder(a)
		if err != nil {
			return 0, err
		}
		if gamma == 0 {
			return 0, nil
		}
		e2, err := base(2)
		if err != nil {
			return 0, err
		}
		lg := math.Log(gamma)
		second := math.Min(math.Log(4)+math.Log(math.Expm1(e2)), e2+logMinTerm(2))
		terms := []float64{0, 2*lg + logChoose(float64(ai), 2) + second}
		for j := 3; j <= ai; j++ {
			ej, err := base(j)
			if err != nil {
				return 0, err
			}
			terms = append(terms, float64(j)*lg+logChoose(float64(ai), j)+float64(j-1)*ej+logMinTerm(j))
		}
		return math.Max(0, logSumExp(terms)/(a-1)), nil
	})
}

// PoissonSubsampled returns the RDP of a mechanism run on a Poisson
// subsample (each record kept independently with probability q) under
// add/remove neighbours, at integer orders (Zhu and Wang, ICML 2019,
// "Poisson subsampled Renyi differential privacy", Theorem 6):
//
//	eps'(a) <= log( (1-q)^{a-1} (a q - q + 1) + C(a,2) q^2 (1-q)^{a-2} e^{eps(2)}
//	                + 3 sum_{l=3}^{a} C(a,l) (1-q)^{a-l} q^l e^{(l-1) eps(l)} ) / (a-1),
//
// with base(j) the base mechanism's add/remove RDP. Used for the check-in
// rate p and for SS-Double's coordinate sampling k/d.
func PoissonSubsampled(q float64, base func(j int) (float64, error), orders []float64) (Curve, error) {
	if err := check.Probability(ErrInvalid, "sampling rate", q); err != nil {
		return Curve{}, err
	}
	return fromFunc(orders, func(a float64) (float64, error) {
		ai, err := integerOrder(a)
		if err != nil {
			return 0, err
		}
		if q == 0 {
			return 0, nil
		}
		if q == 1 {
			return base(ai)
		}
		l1q, lq := math.Log1p(-q), math.Log(q)
		e2, err := base(2)
		if err != nil {
			return 0, err
		}
		fa := float64(ai)
		terms := []float64{
			(fa-1)*l1q + math.Log(fa*q-q+1),
			logChoose(fa, 2) + 2*lq + (fa-2)*l1q + e2,
		}
		for l := 3; l <= ai; l++ {
			el, err := base(l)
			if err != nil {
				return 0, err
			}
			terms = append(terms, math.Log(3)+logChoose(fa, l)+float64(ai-l)*l1q+float64(l)*lq+float64(l-1)*el)
		}
		return math.Max(0, logSumExp(terms)/(a-1)), nil
	})
}

// PairRDPBinned is a fast upper bound on PairRDP for pairs with many
// atoms: the losses l_i = LogP_i - LogQ_i are binned on a uniform grid of
// `bins` cells over their range, and in each cell [lo, hi] the convex
// function e^{alpha l} is bounded by its chord,
//
//	e^{alpha l} <= ((hi-l) e^{alpha lo} + (l-lo) e^{alpha hi}) / (hi-lo),
//
// so sum_i Q_i e^{alpha l_i} = sum_i P_i^alpha Q_i^{1-alpha} is bounded by
// sum over cells of A e^{alpha lo} + B e^{alpha hi}, with A and B the
// Q-masses of the cell weighted by the chord coefficients. The result is
// never below PairRDP (up to rounding) and exceeds it by at most
// log(1 + (alpha s)^2/8)/(alpha-1) for cell width s (the chord error of
// e^{alpha l} on a cell, relative). Cost: one exponential per atom plus
// bins*len(orders), instead of atoms*len(orders). bins must be >= 1.
func PairRDPBinned(p *amplify.Pair, orders []float64, bins int) (Curve, error) {
	if bins < 1 {
		return Curve{}, fmt.Errorf("%w: bins %d < 1", ErrInvalid, bins)
	}
	if err := p.Validate(); err != nil {
		return Curve{}, fmt.Errorf("rdp: %w", err)
	}
	if err := validateOrders(orders); err != nil {
		return Curve{}, err
	}
	c := Curve{Orders: append([]float64(nil), orders...), Eps: make([]float64, len(orders))}
	lmin, lmax := math.Inf(1), math.Inf(-1)
	for i, v := range p.LogP {
		if math.IsInf(v, -1) {
			continue
		}
		if math.IsInf(p.LogQ[i], -1) {
			for k := range c.Eps {
				c.Eps[k] = math.Inf(1)
			}
			return c, nil
		}
		l := v - p.LogQ[i]
		lmin, lmax = math.Min(lmin, l), math.Max(lmax, l)
	}
	if math.IsInf(lmin, 1) {
		return c, nil // P has no mass: every divergence is 0 (clipped)
	}
	s := (lmax - lmin) / float64(bins)
	if !(s > 0) {
		bins, s = 1, 0
	}
	// Streaming log-sum-exp per cell for the two chord weights.
	type acc struct{ m, sum float64 }
	add := func(a *acc, x float64) {
		switch {
		case math.IsInf(x, -1):
		case a.sum == 0:
			a.m, a.sum = x, 1
		case x <= a.m:
			a.sum += math.Exp(x - a.m)
		default:
			a.sum = a.sum*math.Exp(a.m-x) + 1
			a.m = x
		}
	}
	A := make([]acc, bins)
	B := make([]acc, bins)
	for i, v := range p.LogP {
		if math.IsInf(v, -1) {
			continue
		}
		lq := p.LogQ[i]
		l := v - lq
		if s == 0 {
			add(&A[0], lq)
			continue
		}
		b := int((l - lmin) / s)
		b = max(0, min(b, bins-1))
		lo := lmin + float64(b)*s
		wb := math.Min(1, math.Max(0, (l-lo)/s))
		if wb < 1 {
			add(&A[b], lq+math.Log1p(-wb))
		}
		if wb > 0 {
			add(&B[b], lq+math.Log(wb))
		}
	}
	// Non-empty cell ends: log-mass and loss.
	var logMass, loss []float64
	for b := 0; b < bins; b++ {
		lo := lmin + float64(b)*s
		if A[b].sum > 0 {
			logMass, loss = append(logMass, A[b].m+math.Log(A[b].sum)), append(loss, lo)
		}
		if B[b].sum > 0 {
			logMass, loss = append(logMass, B[b].m+math.Log(B[b].sum)), append(loss, lo+s)
		}
	}
	terms := make([]float64, len(loss))
	for k, a := range orders {
		for j := range terms {
			terms[j] = logMass[j] + a*loss[j]
		}
		c.Eps[k] = math.Max(0, logSumExp(terms)/(a-1))
	}
	return c, nil
}
