package pld

import (
	"errors"
	"fmt"
	"math"
	"sort"
)

// maxFiniteLoss caps the finite grid: an outcome whose privacy loss exceeds
// it is treated as having infinite loss (its P-mass goes to inf). This is
// pessimistic and costs at most mass*e^{eps-64} in delta(eps).
const maxFiniteLoss = 64

// pairTolerance is how far from 1 the total of P or of Q may be.
const pairTolerance = 1e-9

// fromPair returns the PLD of a discrete pair of distributions (P, Q) over a
// common finite support, given as probabilities (see FromLogPair for the
// guarantee and the directions).
func fromPair(p, q []float64, opt Options) (*PLD, error) {
	if len(p) != len(q) {
		return nil, fmt.Errorf("pld: P has %d atoms and Q has %d", len(p), len(q))
	}
	lp := make([]float64, len(p))
	lq := make([]float64, len(q))
	for i := range p {
		if math.IsNaN(p[i]) || math.IsNaN(q[i]) || p[i] < 0 || q[i] < 0 || p[i] > 1 || q[i] > 1 {
			return nil, fmt.Errorf("pld: atom %d has probabilities (%v, %v) outside [0, 1]", i, p[i], q[i])
		}
		lp[i], lq[i] = math.Log(p[i]), math.Log(q[i])
	}
	return FromLogPair(lp, lq, opt)
}

// FromLogPair returns the pessimistic PLD of a discrete pair (P, Q) given
// as natural log-probabilities (-Inf for zero mass), the representation of
// shared/privacy/amplify's Pair.
//
// Guarantee. If (P, Q) is a dominating pair for the remove direction of a
// mechanism M under add-or-remove-one neighbours (Zhu, Dong, Wang, AISTATS
// 2022, Definition 7: H_{e^eps}(M(D) || M(D')) <= H_{e^eps}(P || Q) for all
// eps and all D' = D minus one user), then (Q, P) dominates the add
// direction (by the identity H_a(Q||P) = 1 - a + a H_{1/a}(P||Q), valid
// for all a > 0 and used by Zhu et al. for the same purpose), and
// M is (eps, Delta(eps))-DP under add-or-remove neighbours, for every
// composition built from the returned PLD. With opt.BothOrdersDominated
// (pairs of the shuffle model, which dominate both orders of replace-one
// neighbours) only P || Q is accounted.
//
// The privacy loss of atom o is L(o) = ln P(o) - ln Q(o); atoms with
// Q(o) = 0 < P(o) have infinite loss and their P-mass is kept separately
// (it is a floor on delta), atoms with P(o) = 0 carry no P-mass. Both P and
// Q must sum to 1 within 1e-9; a P deficit is added to the infinite-loss
// mass. Discretization follows opt.Method.
func FromLogPair(logP, logQ []float64, opt Options) (*PLD, error) {
	opt, err := opt.validate()
	if err != nil {
		return nil, err
	}
	if err := validateLogPair(logP, logQ); err != nil {
		return nil, err
	}
	out := &PLD{h: opt.Width, tail: opt.TailMass}
	build := func(lp, lq []float64) (*dist, error) {
		if opt.Method == ConnectDots {
			return connectDotsPair(lp, lq, opt.Width, opt.TailMass)
		}
		return roundUpPair(lp, lq, opt.Width, opt.TailMass)
	}
	if out.remove, err = build(logP, logQ); err != nil {
		return nil, err
	}
	if !opt.BothOrdersDominated {
		if out.add, err = build(logQ, logP); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func validateLogPair(logP, logQ []float64) error {
	if len(logP) != len(logQ) {
		return fmt.Errorf("pld: P has %d atoms and Q has %d", len(logP), len(logQ))
	}
	if len(logP) == 0 {
		return errors.New("pld: empty pair")
	}
	var sp, sq float64
	for i := range logP {
		a, b := logP[i], logQ[i]
		if math.IsNaN(a) || math.IsNaN(b) || a > 1e-12 || b > 1e-12 || math.IsInf(a, 1) || math.IsInf(b, 1) {
			return fmt.Errorf("pld: atom %d has log-probabilities (%v, %v) outside [-Inf, 0]", i, a, b)
		}
		sp += math.Exp(a)
		sq += math.Exp(b)
	}
	if math.Abs(sp-1) > pairTolerance || math.Abs(sq-1) > pairTolerance {
		return fmt.Errorf("pld: pair masses sum to (%v, %v), want 1", sp, sq)
	}
	return nil
}

// lossSlack bounds the rounding error of ln P - ln Q when the logs carry
// relative error u each: 4u(|ln P| + |ln Q| + 1).
func lossSlack(lp, lq float64) float64 {
	return 4 * unitRoundoff * (math.Abs(lp) + math.Abs(lq) + 1)
}

// roundUpPair moves the P-mass of each atom to grid point
// ceil((L + slack)/h), slack covering the rounding of L, so every grid loss
// is >= the exact loss. The resulting PLD is that of the pair (P', Q')
// with P' = P pushed to the grid and Q' = P' e^{-L'} (plus the missing
// Q-mass on an atom with P' = 0), which dominates (P, Q) because
// E_P[(1 - e^{eps - L})_+] is non-decreasing in L.
func roundUpPair(lp, lq []float64, h, tail float64) (*dist, error) {
	type atom struct {
		idx int
		p   float64
	}
	atoms := make([]atom, 0, len(lp))
	var inf, total float64
	minIdx, maxIdx := math.MaxInt, math.MinInt
	for i := range lp {
		if math.IsInf(lp[i], -1) {
			continue
		}
		p := math.Exp(lp[i])
		total += p
		l := lp[i] - lq[i]
		if math.IsInf(lq[i], -1) || l > maxFiniteLoss {
			inf += p
			continue
		}
		idx := int(math.Ceil((l + lossSlack(lp[i], lq[i])) / h))
		atoms = append(atoms, atom{idx, p})
		minIdx, maxIdx = min(minIdx, idx), max(maxIdx, idx)
	}
	d := &dist{inf: inf}
	if deficit := 1 - total; deficit > 0 {
		d.inf += deficit
	}
	if len(atoms) > 0 {
		// Bound the span: losses further than maxBuckets grid points
		// below the top are raised (pessimistic).
		minIdx = max(minIdx, maxIdx-maxBuckets+1)
		d.offset = minIdx
		sums := make([]kahan, maxIdx-minIdx+1)
		for _, a := range atoms {
			sums[max(a.idx, minIdx)-minIdx].add(a.p)
		}
		d.probs = make([]float64, len(sums))
		for i := range sums {
			d.probs[i] = sums[i].value()
		}
	}
	// Each bucket is a compensated sum of non-negative terms, within 2u
	// of its value plus O(c u^2); in L1 (hence upper-tail norm) at most
	// 4u in total, also covering the exp of the log-probabilities.
	d.errL1 = 4 * unitRoundoff
	d.truncate(tail)
	return d, nil
}

// connectDotsPair evaluates the exact hockey-stick curve of the pair at
// the grid points and builds the connect-the-dots PLD (see connectDots).
func connectDotsPair(lp, lq []float64, h, tail float64) (*dist, error) {
	type atom struct{ l, p, q, slack float64 }
	atoms := make([]atom, 0, len(lp))
	var infP float64
	lmin, lmax := math.Inf(1), math.Inf(-1)
	for i := range lp {
		if math.IsInf(lp[i], -1) {
			continue
		}
		p := math.Exp(lp[i])
		if math.IsInf(lq[i], -1) {
			infP += p
			continue
		}
		a := atom{l: lp[i] - lq[i], p: p, q: math.Exp(lq[i]), slack: lossSlack(lp[i], lq[i])}
		atoms = append(atoms, a)
		lmin, lmax = min(lmin, a.l), max(lmax, a.l)
	}
	if len(atoms) == 0 {
		return &dist{inf: infP, errL1: 4 * unitRoundoff}, nil
	}
	sort.Slice(atoms, func(i, j int) bool { return atoms[i].l > atoms[j].l })
	hi := int(math.Ceil(min(lmax, maxFiniteLoss) / h))
	lo := int(math.Floor(lmin / h))
	lo = max(lo, hi-maxBuckets+1, int(math.Ceil(-maxFiniteLoss/h)))
	// Exact curve: delta(eps) = infP + sum_{L > eps} (P - e^eps Q). Sweep
	// grid points downwards, adding atoms whose loss exceeds the point.
	n := hi - lo + 1
	vals := make([]float64, n)
	errs := make([]float64, n)
	var sp, sq kahan
	j := 0
	for i := n - 1; i >= 0; i-- {
		eps := float64(lo+i) * h
		for j < len(atoms) && atoms[j].l > eps {
			sp.add(atoms[j].p)
			sq.add(atoms[j].q)
			j++
		}
		x := math.Exp(eps)
		a, b := sp.value(), sq.value()
		vals[i] = max(infP+a-x*b, 0)
		// Compensated sums are within 2u of their value (plus O(n u^2)),
		// the products and subtraction add a few u.
		e := 8 * unitRoundoff * (infP + a + x*b)
		// Atoms whose computed loss is within rounding slack of eps may
		// be on the wrong side: each then changes the value by at most
		// P*slack.
		for k := j; k < len(atoms) && atoms[k].l >= eps-atoms[k].slack; k++ {
			e += atoms[k].p * atoms[k].slack
		}
		for k := j - 1; k >= 0 && atoms[k].l <= eps+atoms[k].slack; k-- {
			e += atoms[k].p * atoms[k].slack
		}
		errs[i] = e
	}
	return connectDots(lo, h, vals, errs, 1, tail)
}

// connectDots builds the connect-the-dots PLD (Doroshenko et al., PETS
// 2022, Section 3) from upper bounds y_i = vals[i] + errs[i] >= delta(eps_i)
// of a hockey-stick curve at eps_i = (lo+i)*h, plus delta(-Inf) <= y0.
//
// Derivation. As a function of x = e^eps, delta(x) = H_x(P||Q) is convex
// and non-increasing, and a discrete PLD with masses mu_j at losses l_j
// and mu_inf at +Inf has the piecewise-linear curve
// mu_inf + sum_j mu_j (1 - x e^{-l_j})_+ with breakpoints x_j = e^{l_j}.
// Take the lower convex hull of the points (0, y0), (x_i, y_i): since
// every vertex is >= the convex true curve, each hull segment lies above
// the chord of the true curve, hence above the curve (this also absorbs
// the evaluation errors, which may break convexity of the raw points).
// Cut the hull at its lowest vertex and continue flat (the true curve is
// non-increasing). Matching slopes gives, for hull vertex j with slopes
// -S_{j-1} on its left and -S_j on its right,
//
//	mu_j = x_j (S_{j-1} - S_j) >= 0,   mu_inf = y_last,
//
// and the total mass is the hull's value at x = 0, i.e. y0 = 1. The PLD is
// that of a pair (P', Q') with Q'-mass sum_j mu_j e^{-l_j} = S_0 <= 1,
// whose curve dominates (P, Q) everywhere: it is a dominating pair.
// A final check evaluates the built curve at every grid point and raises
// mu_inf by any floating-point shortfall.
func connectDots(lo int, h float64, vals, errs []float64, y0, tail float64) (*dist, error) {
	return connectDotsShift(lo, h, vals, errs, y0, tail, 0)
}

// connectDotsShift is connectDots with the abscissae x = e^{eps - shift}
// instead of e^eps: scaling x by a constant scales every hull slope by its
// inverse, so the masses mu_j = x_j (S_{j-1} - S_j) and the verification
// are unchanged, while losses far above 709 nats no longer overflow
// (shift = the top grid loss keeps every x in (0, 1]). The grid must not
// span more than ~700 nats below the shift, or x underflows to 0
// (Regrid refuses such ranges).
func connectDotsShift(lo int, h float64, vals, errs []float64, y0, tail, shift float64) (*dist, error) {
	n := len(vals)
	type pt struct {
		x, y float64
		idx  int
	}
	hull := make([]pt, 0, 64)
	hull = append(hull, pt{0, y0, -1})
	cross := func(o, a, b pt) float64 {
		return (a.x-o.x)*(b.y-o.y) - (a.y-o.y)*(b.x-o.x)
	}
	for i := 0; i < n; i++ {
		p := pt{math.Exp(float64(lo+i)*h - shift), min(vals[i]+errs[i], y0), i}
		for len(hull) >= 2 && cross(hull[len(hull)-2], hull[len(hull)-1], p) <= 0 {
			hull = hull[:len(hull)-1]
		}
		hull = append(hull, p)
	}
	// Cut where the hull stops decreasing.
	last := len(hull) - 1
	for j := 0; j+1 < len(hull); j++ {
		if hull[j+1].y >= hull[j].y {
			last = j
			break
		}
	}
	hull = hull[:last+1]
	d := &dist{offset: lo, probs: make([]float64, n)}
	d.inf = hull[last].y
	slope := func(j int) float64 { // -S_j, slope between vertex j and j+1
		if j >= last {
			return 0
		}
		return (hull[j+1].y - hull[j].y) / (hull[j+1].x - hull[j].x)
	}
	for j := 1; j <= last; j++ {
		m := hull[j].x * (slope(j) - slope(j-1))
		if m > 0 {
			d.probs[hull[j].idx] = m
		}
	}
	// Verify: the curve of the built masses at each grid point is >= y_i,
	// and the total mass >= y0; lift inf by any (floating-point) shortfall
	// plus the rounding of the check itself. The check uses compensated
	// (Neumaier) sums, whose error is 2u times the sum plus O(n u^2).
	var a, b kahan
	short := 0.0
	for i := n - 1; i >= 0; i-- {
		x := math.Exp(float64(lo+i)*h - shift)
		av, bv := a.value(), b.value()
		rebuilt := d.inf + av - x*bv
		slack := 8 * unitRoundoff * (d.inf + av + x*bv)
		short = max(short, min(vals[i]+errs[i], y0)-rebuilt+slack)
		a.add(d.probs[i])
		b.add(d.probs[i] / x)
	}
	short = max(short, y0-(d.inf+a.value())+8*unitRoundoff)
	if short > 0 {
		d.inf += short
	}
	d.inf = min(d.inf, 1)
	// The masses are exact for the curve they define and the check above
	// lifted it over the upper bounds y_i; no error remains to carry.
	d.errL1 = 0
	d.truncate(tail)
	return d, nil
}

// kahan is a Neumaier compensated sum.
type kahan struct{ s, c float64 }

func (k *kahan) add(v float64) {
	t := k.s + v
	if math.Abs(k.s) >= math.Abs(v) {
		k.c += (k.s - t) + v
	} else {
		k.c += (v - t) + k.s
	}
	k.s = t
}

func (k *kahan) value() float64 { return k.s + k.c }
