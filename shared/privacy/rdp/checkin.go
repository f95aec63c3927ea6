package rdp

// Shuffled check-in (Liew, Hasegawa, Takahashi): each of n clients checks
// in independently with probability gamma (the effective check-in rate),
// the participants' reports are shuffled, and the untrusted aggregator
// sees the shuffled multiset (Eq. 5). Neighbouring datasets differ by
// replacing one client (replace-one), as in the paper.
//
// Notes on the paper's text (our copy):
//
//   - Lemma 3 (Eq. 4) is garbled and mislabelled. Reconstructed, its
//     expression is eps + log(min_{r in (delta,1)} r^a (r-delta)^{1-a} +
//     (1-r)^a (e^eps - r + delta)^{1-a})/(a-1): the smallest Renyi
//     divergence any pair with hockey-stick divergence delta at e^eps can
//     have (Asoodeh et al. 2021). That is a conversion from RDP to DP
//     (implemented as OptimalEpsilon), not from DP to RDP: with delta = 0 it
//     returns 0 for every eps, yet eps-randomized response has positive
//     Renyi divergence, and for delta > 0 no finite DP-to-RDP bound exists.
//     We replace it by approxDPToRDP (delta-approximate RDP), which is
//     valid, and carry the delta slack through composition.
//   - Theorem 2 (Eq. 7) prints l~ = floor((1-Delta) n gamma/(2 eps0)) + 1 and
//     Upsilon_k with e^{-(k-1)/(8 eps0)}; its source, Lemma 4 (Eq. 9, Girgis
//     et al. CCS 2021), and the appendix use e^{eps0} in both places. We use
//     e^{eps0}.
//   - Theorem 2 bounds the moment of the subsampled shuffle with k
//     participants (where the replaced client takes part with probability
//     k/n) by Lemma 4 evaluated at the check-in rate gamma instead of k/n;
//     for k > n gamma that under-states the subsampling rate, so Eq. 7 is
//     not a proven upper bound as printed (theorem2Bound computes it as printed,
//     for comparison). The tight method (TightCheckIn) has no such issue.

import (
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/shared/internal/check"
	"github.com/blanket-fl/blanket/shared/privacy/amplify"
)

// checkInArgs validates n, gamma, eps0.
func checkInArgs(n int, gamma, eps0 float64) error {
	if n < 1 {
		return fmt.Errorf("%w: number of clients %d < 1", ErrInvalid, n)
	}
	if math.IsNaN(gamma) || gamma <= 0 || gamma > 1 {
		return fmt.Errorf("%w: check-in rate %v outside (0, 1]", ErrInvalid, gamma)
	}
	return check.Positive(ErrInvalid, "eps0", eps0)
}

// binomTerms returns (k, log Pr[Bin(n, p) = k]) over a window around the
// mode and a bound on the omitted mass (geometric tail bounds, each side at
// most tail/2).
func binomTerms(n int, p, tail float64) (ks []int, lw []float64, omitted float64) {
	lpmf := func(k int) float64 {
		if p == 1 {
			if k == n {
				return 0
			}
			return math.Inf(-1)
		}
		return logChoose(float64(n), k) + float64(k)*math.Log(p) + float64(n-k)*math.Log1p(-p)
	}
	mode := int(math.Floor(float64(n+1) * p))
	if mode > n {
		mode = n
	}
	odds := p / (1 - p)
	hi := mode
	for hi < n {
		r := float64(n-hi) / float64(hi+1) * odds
		if r < 1 {
			if b := math.Exp(lpmf(hi)) * r / (1 - r); b <= tail/2 {
				omitted += b
				break
			}
		}
		hi++
	}
	lo := mode
	for lo > 0 {
		r := float64(lo) / float64(n-lo+1) / odds
		if r < 1 {
			if b := math.Exp(lpmf(lo)) * r / (1 - r); b <= tail/2 {
				omitted += b
				break
			}
		}
		lo--
	}
	for k := lo; k <= hi; k++ {
		ks = append(ks, k)
		lw = append(lw, lpmf(k))
	}
	return ks, lw, omitted
}

// theorem1 evaluates the binomial mixture of check-in Theorem 1 (Eq. 6):
//
//	eps(alpha) <= log( sum_k C(n,k) gamma^k (1-gamma)^{n-k} E_k ) / (alpha-1),
//
// where logMoment(k) = log E_k is (an upper bound on) the order-alpha
// moment E_q[(p/q)^alpha] of the subsampled-without-replacement shuffle
// with k participants (Theorem 1's p_k, q_k), for k = 0..n. The sum is
// taken over a window of k holding all but 1e-15 of the binomial mass; the
// omitted mass is charged at maxLogMoment (an upper bound on every log E_k,
// e.g. (alpha-1) eps0 for eps0-LDP randomizers), so the result is an upper
// bound whenever logMoment is.
func theorem1(n int, gamma, alpha float64, logMoment func(k int) (float64, error), maxLogMoment float64) (float64, error) {
	if n < 1 {
		return 0, fmt.Errorf("%w: number of clients %d < 1", ErrInvalid, n)
	}
	if math.IsNaN(gamma) || gamma <= 0 || gamma > 1 {
		return 0, fmt.Errorf("%w: check-in rate %v outside (0, 1]", ErrInvalid, gamma)
	}
	if math.IsNaN(alpha) || alpha <= 1 || math.IsInf(alpha, 0) {
		return 0, fmt.Errorf("%w: order %v must be finite and > 1", ErrInvalid, alpha)
	}
	if math.IsNaN(maxLogMoment) || maxLogMoment < 0 {
		return 0, fmt.Errorf("%w: maxLogMoment %v", ErrInvalid, maxLogMoment)
	}
	ks, lw, omitted := binomTerms(n, gamma, 1e-15)
	terms := make([]float64, 0, len(ks)+1)
	for i, k := range ks {
		lm, err := logMoment(k)
		if err != nil {
			return 0, err
		}
		if math.IsNaN(lm) {
			return 0, fmt.Errorf("%w: log moment NaN at k=%d", ErrInvalid, k)
		}
		terms = append(terms, lw[i]+lm)
	}
	if omitted > 0 {
		terms = append(terms, math.Log(omitted)+maxLogMoment)
	}
	return math.Max(0, logSumExp(terms)/(alpha-1)), nil
}

// theorem2Bound evaluates the upper bound of check-in Theorem 2 (Eq. 7, with the
// e^{eps0} reading of l~ and Upsilon from Lemma 4/Appendix A.1) at integer
// order lambda >= 2, for a discrete eps0-LDP randomizer:
//
//	M = 1 + 4 C(l,2) g^2 (e^e0-1)^2 (e^{-e0-D^2 n g/2} + e^{-e0}/l~)
//	      + sum_{j=3}^{l} C(l,j) g^j j Gamma(j/2) (2 (e^{2e0}-1)^2/e^{2e0})^{j/2} (e^{-D^2 n g/2} + l~^{-j/2})
//	      + Upsilon_1 e^{-D^2 n g/2} + Upsilon_{L+1},
//	eps(l) <= log(M)/(l-1),
//
// with L = (1-D) n g (the paper assumes it is an integer: we take
// L = floor((1-D) n g) and the Delta that makes it exact, D = 1 - L/(n g)),
// l~ = floor(L/(2 e^e0)) + 1 and Upsilon_k = ((1 + g(e^{2e0}-1)/e^e0)^l - 1
// - l g (e^{2e0}-1)/e^e0) e^{-(k-1)/(8 e^e0)}. Delta in (0, 1) is the
// Chernoff parameter (Remark 1 uses 1/2). Computed in log-space. See the
// file comment for why this is "as printed" rather than a proven bound.
func theorem2Bound(n int, gamma, eps0 float64, lambda int, delta float64) (float64, error) {
	return theorem2(n, gamma, eps0, lambda, delta, false)
}

// theorem2 with literal = true uses Eq. 7 exactly as printed (2 eps0 and
// 8 eps0 where Lemma 4 has 2e^eps0 and 8e^eps0); tests report both.
func theorem2(n int, gamma, eps0 float64, lambda int, delta float64, literal bool) (float64, error) {
	if err := checkInArgs(n, gamma, eps0); err != nil {
		return 0, err
	}
	if lambda < 2 {
		return 0, fmt.Errorf("%w: Theorem 2 needs an integer order >= 2, got %d", ErrInvalid, lambda)
	}
	if math.IsNaN(delta) || delta <= 0 || delta >= 1 {
		return 0, fmt.Errorf("%w: Chernoff Delta %v outside (0, 1)", ErrInvalid, delta)
	}
	ng := float64(n) * gamma
	L := math.Floor((1 - delta) * ng)
	if L < 1 {
		return 0, fmt.Errorf("%w: Theorem 2 needs (1-Delta) n gamma >= 1, got %v", ErrInvalid, (1-delta)*ng)
	}
	d := 1 - L/ng
	ee := math.Exp(eps0)
	ed := ee // the e^{eps0} of l~ and Upsilon
	if literal {
		ed = eps0
	}
	lt := math.Floor(L/(2*ed)) + 1
	chern := -d * d * ng / 2 // log of e^{-D^2 n gamma/2}
	l := float64(lambda)
	lg := math.Log(gamma)
	terms := []float64{0}
	// 4 C(l,2) g^2 (e^e0-1)^2 (e^{-e0+chern} + e^{-e0}/lt)
	base2 := math.Log(4) + logChoose(l, 2) + 2*lg + 2*math.Log(math.Expm1(eps0)) - eps0
	terms = append(terms, base2+chern, base2-math.Log(lt))
	// j-terms
	lc := math.Log(2) + 2*math.Log(math.Expm1(2*eps0)) - 2*eps0
	for j := 3; j <= lambda; j++ {
		fj := float64(j)
		lgam, _ := math.Lgamma(fj / 2)
		t := logChoose(l, j) + fj*lg + math.Log(fj) + lgam + fj/2*lc
		terms = append(terms, t+chern, t-fj/2*math.Log(lt))
	}
	// Upsilon terms: U = (1+x)^l - 1 - l x, x = g (e^{2e0}-1)/e^e0 >= 0.
	x := gamma * math.Expm1(2*eps0) / ee
	logU := logBinomExcess(l, x)
	if !math.IsInf(logU, -1) {
		terms = append(terms, logU+chern, logU-L/(8*ed))
	}
	return math.Max(0, logSumExp(terms)/(l-1)), nil
}

// logBinomExcess returns log((1+x)^l - 1 - l x) for x >= 0, l >= 2, without
// cancellation: (1+x)^l - 1 - l x = sum_{j>=2} C(l,j) x^j.
func logBinomExcess(l, x float64) float64 {
	if x <= 0 {
		return math.Inf(-1)
	}
	if x > 1e-3 {
		v := math.Expm1(l*math.Log1p(x)) - l*x
		if v > 1e-8*math.Expm1(l*math.Log1p(x)) {
			return math.Log(v)
		}
	}
	var t []float64
	for j := 2; j <= int(l); j++ {
		t = append(t, logChoose(l, j)+float64(j)*math.Log(x))
	}
	return logSumExp(t)
}

// Theorem2Curve evaluates theorem2Bound at integer orders.
func Theorem2Curve(n int, gamma, eps0 float64, orders []float64, delta float64) (Curve, error) {
	return fromFunc(orders, func(a float64) (float64, error) {
		ai, err := integerOrder(a)
		if err != nil {
			return 0, err
		}
		return theorem2Bound(n, gamma, eps0, ai, delta)
	})
}

// theorem3 evaluates the lower bound of check-in Theorem 3 (Eq. 8) at
// integer order lambda >= 2 (binary randomized response is the witness):
//
//	eps(l) >= log(1 + (1 - e^{-D^2 n g/(2+D)}) C(l,2) g^2 (e^e0-1)^2 / ((1+D) n g e^e0)) / (l-1),
//
// Delta in (0, 1]. It is a lower bound on the RDP of shuffled check-in with
// the worst eps0-LDP randomizer, so any valid upper bound must be above it.
func theorem3(n int, gamma, eps0 float64, lambda int, delta float64) (float64, error) {
	if err := checkInArgs(n, gamma, eps0); err != nil {
		return 0, err
	}
	if lambda < 2 {
		return 0, fmt.Errorf("%w: Theorem 3 needs an integer order >= 2, got %d", ErrInvalid, lambda)
	}
	if math.IsNaN(delta) || delta <= 0 || delta > 1 {
		return 0, fmt.Errorf("%w: Chernoff Delta %v outside (0, 1]", ErrInvalid, delta)
	}
	ng := float64(n) * gamma
	l := float64(lambda)
	c := -math.Expm1(-delta*delta*ng/(2+delta)) * l * (l - 1) / 2 * gamma * gamma *
		math.Expm1(eps0) * math.Expm1(eps0) / ((1 + delta) * ng * math.Exp(eps0))
	return math.Log1p(c) / (l - 1), nil
}

// theorem3Curve evaluates theorem3 at integer orders.
func theorem3Curve(n int, gamma, eps0 float64, orders []float64, delta float64) (Curve, error) {
	return fromFunc(orders, func(a float64) (float64, error) {
		ai, err := integerOrder(a)
		if err != nil {
			return 0, err
		}
		return theorem3(n, gamma, eps0, ai, delta)
	})
}

// checkInPair returns the dominating pair of one round of shuffled
// check-in with an eps0-LDP randomizer. A client that does not check in is
// equivalent to one reporting a fixed "absent" symbol (the shuffler's
// output size reveals the number of absentees anyway), so a round is the
// standard shuffle of n users running the randomizer "absent w.p. 1-gamma,
// else R(x)". That randomizer has variation-ratio parameters
// (p, beta, q) = (e^eps0, gamma (e^eps0-1)/(e^eps0+1), e^eps0)
// (amplify.VariationRatio.Subsampled), so the (corrected) variation-ratio
// pair of package amplify dominates it: clone probability 2 gamma/(e^eps0+1)
// and the replaced client "present" with probability gamma.
// Guarantee: replace-one, every hockey-stick and Renyi divergence.
func checkInPair(n int, gamma, eps0 float64, opt amplify.PairOptions) (*amplify.Pair, error) {
	if err := checkInArgs(n, gamma, eps0); err != nil {
		return nil, err
	}
	v, err := amplify.GenericVR(eps0)
	if err != nil {
		return nil, err
	}
	if v, err = v.Subsampled(gamma); err != nil {
		return nil, err
	}
	return amplify.VariationRatioPair(n, v, opt)
}

// TightCheckIn returns the RDP curve of one round of shuffled check-in
// with an eps0-LDP randomizer, computed exactly from checkInPair
// (PairRDP). Compose with Curve.Scale over rounds.
func TightCheckIn(n int, gamma, eps0 float64, orders []float64) (Curve, error) {
	p, err := checkInPair(n, gamma, eps0, amplify.PairOptions{})
	if err != nil {
		return Curve{}, err
	}
	return PairRDP(p, orders)
}

// ShuffleDP gives an (eps, delta)-DP guarantee (replace-one) of the
// shuffle of k participants' reports, for k >= 1.
type ShuffleDP func(k int) (eps, delta float64, err error)

// pureShuffleDP returns the exact FMT'23 numerical shuffle guarantee of
// amplify (valid for every eps0-LDP randomizer) at the given delta. The
// returned function memoises its results and is not safe for concurrent
// use.
func pureShuffleDP(eps0, delta float64) (ShuffleDP, error) {
	if err := check.Positive(ErrInvalid, "eps0", eps0); err != nil {
		return nil, err
	}
	if err := check.OpenUnit(ErrInvalid, "delta", delta); err != nil {
		return nil, err
	}
	type res struct{ e float64 }
	cache := map[int]res{}
	return func(k int) (float64, float64, error) {
		// The FMT'23 pair for k+1 users is a post-processing of the one for
		// k users (one more potential clone), so eps is non-increasing in k
		// and the value at k rounded down to a multiple of 16 is valid for
		// k; this cuts the cost 16-fold.
		if k > 16 {
			k -= k % 16
		}
		if r, ok := cache[k]; ok {
			return r.e, delta, nil
		}
		m, err := amplify.FMT23(k, eps0)
		if err != nil {
			return 0, 0, err
		}
		e, err := m.Epsilon(delta)
		if err != nil {
			return 0, 0, err
		}
		cache[k] = res{e}
		return e, delta, nil
	}, nil
}

// noAmplificationDP returns (eps0, delta0) for every k: the shuffle is a
// post-processing of the replaced client's own (eps0, delta0)-LDP report.
// This is the fallback of the check-in paper's footnote 3.
func noAmplificationDP(eps0, delta0 float64) (ShuffleDP, error) {
	if err := check.Positive(ErrInvalid, "eps0", eps0); err != nil {
		return nil, err
	}
	if math.IsNaN(delta0) || delta0 < 0 || delta0 >= 1 {
		return nil, fmt.Errorf("%w: delta0 %v outside [0, 1)", ErrInvalid, delta0)
	}
	return func(int) (float64, float64, error) { return eps0, delta0, nil }, nil
}

// FMT21ApproxShuffleDP is the shuffle guarantee the check-in paper uses
// for (eps0, delta0)-LDP randomizers ("Theorem 3.8 given by [21]",
// Feldman-McMillan-Talwar FOCS'21): when eps0 <= log(k/(16 log(2/delta)))
// the shuffle of k reports is (eps, delta + (e^eps + 1)(1 + e^{-eps0}/2) k
// delta0)-DP with eps the Theorem 3.1 closed form
// (amplify.FMT21ClosedForm); otherwise no amplification, (eps0, delta0)
// (footnote 3). CAUTION: the delta term is reproduced from our reading of
// FMT'21 Theorem 3.8, which we could not check against the paper's text in
// this environment; verify it before relying on it in production.
func FMT21ApproxShuffleDP(eps0, delta0, delta float64) (ShuffleDP, error) {
	if err := check.Positive(ErrInvalid, "eps0", eps0); err != nil {
		return nil, err
	}
	if math.IsNaN(delta0) || delta0 < 0 || delta0 >= 1 {
		return nil, fmt.Errorf("%w: delta0 %v outside [0, 1)", ErrInvalid, delta0)
	}
	if err := check.OpenUnit(ErrInvalid, "delta", delta); err != nil {
		return nil, err
	}
	return func(k int) (float64, float64, error) {
		e, err := amplify.FMT21ClosedForm(k, eps0, delta)
		if err != nil {
			return eps0, delta0, nil
		}
		d := delta + (math.Exp(e)+1)*(1+math.Exp(-eps0)/2)*float64(k)*delta0
		if d >= 1 || e >= eps0 {
			return eps0, delta0, nil
		}
		return e, d, nil
	}, nil
}

// checkInApprox combines per-k approximate RDP guarantees with the
// Theorem 1 mixture. For each k in the binomial window, perK(k) gives the
// log-moments at the orders and the slack delta_k of the subsampled
// shuffle with k participants. The round's laws are sum_k w_k[(1-d_k)P1_k
// + d_k P2_k] (plus the omitted k, counted as slack), i.e. (1-D) P1 + D P2
// with D = sum_k w_k d_k + omitted and P1 the normalised mixture of the
// good parts; by joint convexity of the moment, log E[P1/Q1]^a <=
// log(sum_k w_k (1-d_k) E_k / (1-D)).
func checkInApprox(n int, gamma float64, orders []float64, perK func(k int) ([]float64, float64, error)) (ApproxCurve, error) {
	if err := validateOrders(orders); err != nil {
		return ApproxCurve{}, err
	}
	ks, lw, omitted := binomTerms(n, gamma, 1e-15)
	terms := make([][]float64, len(orders))
	D := omitted
	for i, k := range ks {
		lm, dk, err := perK(k)
		if err != nil {
			return ApproxCurve{}, err
		}
		w := math.Exp(lw[i])
		D += w * dk
		for j := range orders {
			terms[j] = append(terms[j], lw[i]+math.Log1p(-dk)+lm[j])
		}
	}
	if D >= 1 {
		return ApproxCurve{}, fmt.Errorf("%w: accumulated slack %v >= 1", ErrInvalid, D)
	}
	c := Curve{Orders: append([]float64(nil), orders...), Eps: make([]float64, len(orders))}
	for j, a := range orders {
		c.Eps[j] = math.Max(0, (logSumExp(terms[j])-math.Log1p(-D))/(a-1))
	}
	return ApproxCurve{Curve: c, Delta: D}, nil
}

// approach1 is the check-in paper's "shuffling conversion" (Section 4.2,
// Table 1, row 1) for a generic randomizer, with Lemma 3 replaced by the
// valid approxDPToRDP: (1) the shuffle of k reports is (eps_k, delta_k)-DP
// by shuffle, hence delta_k-approximately (a, pureDPToRDP(eps_k, a))-RDP;
// (2) the replaced client is among the k participants with probability
// k/n, so the subsampled-without-replacement shuffle has the WBK Theorem 9
// RDP (wbkSubsampled at rate k/n, eps(inf) = eps_k) and slack
// (k/n) delta_k; (3) the Theorem 1 mixture over k (checkInApprox).
// Orders must be integers. Replace-one. Cost O(window * maxOrder^2).
func approach1(n int, gamma float64, orders []float64, shuffle ShuffleDP) (ApproxCurve, error) {
	if err := checkInArgs(n, gamma, 1); err != nil {
		return ApproxCurve{}, err
	}
	for _, a := range orders {
		if _, err := integerOrder(a); err != nil {
			return ApproxCurve{}, err
		}
	}
	return checkInApprox(n, gamma, orders, func(k int) ([]float64, float64, error) {
		lm := make([]float64, len(orders))
		if k == 0 {
			return lm, 0, nil
		}
		e, d, err := shuffle(k)
		if err != nil {
			return nil, 0, err
		}
		rate := float64(k) / float64(n)
		c, err := wbkSubsampled(rate, func(j int) (float64, error) { return pureDPToRDP(e, float64(j)) }, e, orders)
		if err != nil {
			return nil, 0, err
		}
		for j, a := range orders {
			lm[j] = (a - 1) * c.Eps[j]
		}
		return lm, rate * d, nil
	})
}

// Approach2 is the check-in paper's "subsampled shuffling conversion"
// (Section 4.2, Table 1, row 2), with Lemma 3 replaced by approxDPToRDP:
// (1) the shuffle of k reports is (eps_k, delta_k)-DP; (2) subsampling
// without replacement at rate k/n (Balle, Barthe, Gaboardi NeurIPS 2018,
// Theorem 9, replace-one) gives (log(1 + (k/n)(e^{eps_k}-1)), (k/n)
// delta_k)-DP; (3) that is converted to approximate RDP and mixed over k
// (checkInApprox). Any orders > 1. Replace-one.
func Approach2(n int, gamma float64, orders []float64, shuffle ShuffleDP) (ApproxCurve, error) {
	if err := checkInArgs(n, gamma, 1); err != nil {
		return ApproxCurve{}, err
	}
	return checkInApprox(n, gamma, orders, func(k int) ([]float64, float64, error) {
		lm := make([]float64, len(orders))
		if k == 0 {
			return lm, 0, nil
		}
		e, d, err := shuffle(k)
		if err != nil {
			return nil, 0, err
		}
		rate := float64(k) / float64(n)
		e1 := math.Log1p(rate * math.Expm1(e))
		for j, a := range orders {
			r, err := pureDPToRDP(e1, a)
			if err != nil {
				return nil, 0, err
			}
			lm[j] = (a - 1) * r
		}
		return lm, rate * d, nil
	})
}
