package mechanism

import (
	"fmt"
	"math"
)

// Index privacy of SS-Topk (FLAME Definition 3). With beta = k/d, a client
// that reports l*k indices of which k are its true top-k gives the relay the
// posterior Pr[I_j = 1 | j reported] = 1/l. Definition 3 asks
//
//	1/l     <= nu * beta             (posterior of "top" at most nu times the prior)
//	1 - 1/l >= (1 - beta) / nu       (posterior of "non-top" at least prior/nu)
//
// i.e. l >= 1/(nu*beta) and l >= nu/(nu-1+beta), the bound of FLAME
// Algorithm 4 line 1. The reported indices must be distinct, so
// l <= floor(d/k). (The paper's upper end ceil(1/beta) exceeds floor(d/k)
// when k does not divide d, where k*l distinct indices do not exist.)
//
// For l >= 2 with l*beta <= 1 the second condition is implied by the first:
// it reads nu >= (1-beta)*l/(l-1), and with u = l*beta <= 1,
// (1-beta)*l/(l-1) <= 1/(l*beta)  <=>  l(1-u) + u^2 >= 1, which holds since
// l(1-u) + u^2 >= 2(1-u) + u^2 = 1 + (1-u)^2. So the smallest nu an l
// allows is max{1, 1/(l*beta)} (the form of FLAME Theorem 5). For l = 1 the
// second condition fails for every finite nu (a non-top posterior of 0);
// Proposition 2 calls this "no index privacy" and assigns nu = 1/beta.

const topkTol = 1e-9

func checkTopkDims(d, k int) error {
	if d < 2 || k < 1 || k >= d {
		return fmt.Errorf("mechanism: ss-topk needs d >= 2 and 1 <= k < d, got d=%d k=%d", d, k)
	}
	return nil
}

// TopkL returns the smallest number of groups l that gives nu-index privacy
// (FLAME Proposition 2 and Algorithm 4 line 1):
// l = ceil(max{1/(nu*beta), nu/(nu-1+beta)}) with beta = k/d. Valid for
// 1 <= nu <= d/k (Proposition 2's range). It fails when that l exceeds
// floor(d/k), which happens for nu close to 1 when k does not divide d
// (nu = 1 needs l = d/k exactly); topkMinNu(d, k, d/k) is then the
// strongest index privacy available.
func TopkL(nu float64, d, k int) (int, error) {
	if err := checkTopkDims(d, k); err != nil {
		return 0, err
	}
	df, kf := float64(d), float64(k)
	if math.IsNaN(nu) || nu < 1 || nu > df/kf*(1+topkTol) {
		return 0, fmt.Errorf("mechanism: index privacy nu must lie in [1, d/k=%v], got %v", df/kf, nu)
	}
	a := df / (nu * kf)              // 1/(nu*beta)
	b := nu * df / (nu*df - df + kf) // nu/(nu-1+beta); denominator >= k > 0
	l := int(math.Ceil(math.Max(a, b) - topkTol))
	if l < 1 {
		l = 1
	}
	if l > d/k {
		minNu, _ := topkMinNu(d, k, d/k)
		return 0, fmt.Errorf("mechanism: nu=%v needs l=%d groups but at most floor(d/k)=%d fit; the strongest index privacy available is nu=%v", nu, l, d/k, minNu)
	}
	return l, nil
}

// topkMinNu returns the strongest (smallest) index privacy nu that l groups
// give: max{1, d/(l*k)} for l >= 2 and d/k for l = 1 (no index privacy;
// see the derivation above). It requires 1 <= l <= floor(d/k).
func topkMinNu(d, k, l int) (float64, error) {
	if err := checkTopkDims(d, k); err != nil {
		return 0, err
	}
	if l < 1 || l > d/k {
		return 0, fmt.Errorf("mechanism: l must lie in [1, floor(d/k)=%d], got %d", d/k, l)
	}
	return math.Max(1, float64(d)/(float64(l)*float64(k))), nil
}

// TopkNu implements FLAME Theorem 5: given n clients and padding size n_p,
// the largest usable l and the strongest index privacy nu it allows.
// Padding needs room for the real entries, sum_j n_j = n*k*l <= d*n_p, so
// l <= n_p/(n*beta); with distinct indices l <= floor(d/k). Then
// nu = max{1, 1/(l*beta)}.
//
// The extracted paper text prints floor(n_p/epsilon_lk); that is a
// garbling: the reading floor(n_p/(n*beta)) reproduces the paper's own
// example (d = 7850, k = 157, n/n_p = 3 gives l = 16, nu = 3.125) and
// follows from the padding constraint above. The constraint is on the
// average count only; a popular dimension can still exceed n_p (see
// OverflowPolicy).
func TopkNu(n, np, d, k int) (nu float64, l int, err error) {
	if err := checkTopkDims(d, k); err != nil {
		return 0, 0, err
	}
	if n < 1 || np < 1 {
		return 0, 0, fmt.Errorf("mechanism: n and n_p must be >= 1, got n=%d n_p=%d", n, np)
	}
	l = int(math.Floor(float64(np)*float64(d)/(float64(n)*float64(k)) + topkTol))
	l = min(l, d/k)
	if l < 1 {
		return 0, 0, fmt.Errorf("mechanism: n_p=%d cannot hold even one group per client: need n_p >= n*k/d = %v", np, float64(n)*float64(k)/float64(d))
	}
	nu, err = topkMinNu(d, k, l)
	return nu, l, err
}
