package pine

import (
	"errors"
	"fmt"
	"math/bits"

	"github.com/cloudflare/circl/vdaf/prio3/arith/fp64"
)

// The fully linear proof (FLP) of draft-irtf-cfrg-vdaf-11, Section 7.3
// ("The FLP of BBCGGI19"), over Field64, for validity circuits with any
// number of gadgets and one output (EVAL_OUTPUT_LEN = 1, the case of both
// PINE circuits: the output is the verifier's v without reduction and the
// query randomness is one element per gadget).
//
// Wire polynomials are interpolated on the powers of alpha_i, the
// P_i-th root of unity gen^(2^32 / P_i) of Field64 (Section 7.3.3), with
// circl's NTT; the gadget polynomial is computed in the evaluation domain
// (the gadget evaluated point-wise on the wire polynomials at
// next_power_of_2(DEGREE*(P-1)+1) roots of unity, then interpolated),
// which yields the same coefficients as evaluating the gadget over the
// polynomial ring.

// gadget is a non-affine sub-circuit (Section 7.3.2).
type gadget interface {
	arity() int
	degree() int
	eval(in []fp) fp
}

// mulGadget is Mul(x, y) = x * y.
type mulGadget struct{}

func (mulGadget) arity() int      { return 2 }
func (mulGadget) degree() int     { return 2 }
func (mulGadget) eval(in []fp) fp { var z fp; z.Mul(&in[0], &in[1]); return z }

// squareGadget is PolyEval([0, 0, 1]), x -> x^2.
type squareGadget struct{}

func (squareGadget) arity() int      { return 1 }
func (squareGadget) degree() int     { return 2 }
func (squareGadget) eval(in []fp) fp { var z fp; z.Sqr(&in[0]); return z }

// parallelSum is ParallelSum(inner, count) of Section 7.4.3: the sum of
// count copies of inner over consecutive slices of the input.
type parallelSum struct {
	inner gadget
	count int
}

func (g parallelSum) arity() int  { return g.inner.arity() * g.count }
func (g parallelSum) degree() int { return g.inner.degree() }
func (g parallelSum) eval(in []fp) fp {
	var out fp
	a := g.inner.arity()
	for i := range g.count {
		y := g.inner.eval(in[i*a : (i+1)*a])
		out.AddAssign(&y)
	}
	return out
}

// caller is how a circuit calls its i-th gadget during prove and query.
type caller interface {
	call(i int, in []fp) (fp, error)
}

// circuit is a validity circuit (Valid of Section 7.3.2) with one output.
type circuit interface {
	gadgets() []gadget
	gadgetCalls() []int
	measLen() int
	jointRandLen() int
	eval(meas, jointRand []fp, numShares int, g caller) (fp, error)
}

var (
	errFlpLength = errors.New("pine: flp: wrong input length")
	errFlpCalls  = errors.New("pine: flp: gadget called a wrong number of times")
	errEvalPoint = errors.New("pine: flp: query randomness is a root of unity")
)

func nextPow2(n int) int {
	if n <= 1 {
		return 1
	}
	return 1 << bits.Len(uint(n-1))
}

// flpParams gives the lengths of Section 7.3.2 for a circuit.
type flpParams struct {
	c                     circuit
	g                     []gadget
	calls                 []int
	p                     []int // P_i
	proveRand, queryRand  int
	proofLen, verifierLen int
}

func newFlp(c circuit) (*flpParams, error) {
	g, calls := c.gadgets(), c.gadgetCalls()
	f := &flpParams{c: c, verifierLen: 1, g: g, calls: calls}
	if len(g) != len(calls) || len(g) == 0 {
		return nil, errors.New("pine: flp: gadgets and gadget calls differ")
	}
	for i := range g {
		p := nextPow2(1 + calls[i])
		// Degree * P must fit the 2^32 roots of unity of Field64.
		if bits.Len(uint(nextPow2(g[i].degree()*(p-1)+1)))-1 > genOrderLog {
			return nil, fmt.Errorf("pine: flp: %d gadget calls exceed Field64's roots of unity", calls[i])
		}
		f.p = append(f.p, p)
		f.proveRand += g[i].arity()
		f.proofLen += g[i].arity() + g[i].degree()*(p-1) + 1
		f.verifierLen += g[i].arity() + 1
	}
	f.queryRand = len(g)
	return f, nil
}

func log2(n int) uint { return uint(bits.Len(uint(n)) - 1) }

// interp writes into dst (length n) the coefficients of the polynomial of
// degree < n taking values vals[k] at w_n^k (w_n the n-th root of unity).
func interp(dst, vals fp64.Vec, n int) {
	clear(dst)
	dst.InvNTT(vals, uint(n))
	var s fp
	s.InvTwoN(log2(n))
	dst.ScalarMul(&s)
}

// evalAt writes into dst (length n) the values of the polynomial with
// coefficients coef (len <= n) at w_n^k.
func evalAt(dst, coef fp64.Vec, n int) {
	clear(dst)
	dst.NTT(coef, uint(n))
}

// proveCaller records every gadget input (ProveGadget of Section 7.3.3.1).
type proveCaller struct {
	f     *flpParams
	wires [][]fp // wires[i][j*P_i + k]: wire j of gadget i, call k (k=0: seed)
	k     []int
}

func newWires(f *flpParams, ar *arena) ([][]fp, []int) {
	g := f.g
	w := make([][]fp, len(g))
	for i := range g {
		w[i] = ar.get(g[i].arity() * f.p[i])
	}
	return w, make([]int, len(g))
}

func (r *proveCaller) call(i int, in []fp) (fp, error) {
	g := r.f.g[i]
	if len(in) != g.arity() {
		return fp{}, errFlpLength
	}
	r.k[i]++
	k, p := r.k[i], r.f.p[i]
	if k >= p {
		return fp{}, errFlpCalls
	}
	for j := range in {
		r.wires[i][j*p+k] = in[j]
	}
	return g.eval(in), nil
}

// prove is Flp.prove: proof = seed_1 || coeff_1 || ... || seed_H || coeff_H.
func (f *flpParams) prove(meas, proveRand, jointRand []fp) ([]fp, error) {
	if len(meas) != f.c.measLen() || len(proveRand) != f.proveRand || len(jointRand) != f.c.jointRandLen() {
		return nil, errFlpLength
	}
	r := &proveCaller{f: f}
	r.wires, r.k = newWires(f, nil)
	g := f.g
	off := 0
	for i := range g {
		for j := range g[i].arity() {
			r.wires[i][j*f.p[i]] = proveRand[off]
			off++
		}
	}
	if _, err := f.c.eval(meas, jointRand, 1, r); err != nil {
		return nil, err
	}
	proof := make([]fp, 0, f.proofLen)
	for i := range g {
		if r.k[i] != f.calls[i] {
			return nil, errFlpCalls
		}
		p, a, d := f.p[i], g[i].arity(), g[i].degree()
		polyLen := d*(p-1) + 1
		n := nextPow2(polyLen)
		ext := make(fp64.Vec, a*n)
		coef := make(fp64.Vec, p)
		tw := make(fp64.Vec, p)
		cosetVals := make(fp64.Vec, p)
		// Values of each wire polynomial at the n-th roots w_n^(s*k + c)
		// (s = n/p): coset c = 0 is the recorded wire itself; coset c is
		// the size-p NTT of coef_l * w_n^(c*l).
		s := n / p
		var wn fp
		wn.SetRootOfUnityTwoN(log2(n))
		for j := range a {
			wire := r.wires[i][j*p : (j+1)*p]
			proof = append(proof, wire[0])
			e := ext[j*n : (j+1)*n]
			for k := range p {
				e[s*k] = wire[k]
			}
			if s == 1 {
				continue
			}
			interp(coef, wire, p)
			shift := wn
			for c := 1; c < s; c++ {
				pw := fpOne()
				for l := range p {
					tw[l].Mul(&coef[l], &pw)
					pw.MulAssign(&shift)
				}
				evalAt(cosetVals, tw, p)
				for k := range p {
					e[s*k+c] = cosetVals[k]
				}
				shift.MulAssign(&wn)
			}
		}
		vals := make(fp64.Vec, n)
		in := make([]fp, a)
		for m := range n {
			for j := range a {
				in[j] = ext[j*n+m]
			}
			vals[m] = g[i].eval(in)
		}
		gp := make(fp64.Vec, n)
		interp(gp, vals, n)
		proof = append(proof, gp[:polyLen]...)
	}
	return proof, nil
}

// queryCaller records gadget inputs and answers with the gadget
// polynomial of the proof evaluated at alpha_i^k (QueryGadget).
type queryCaller struct {
	proveCaller
	outs [][]fp // outs[i][k] = gadget_poly_i(alpha_i^k)
}

func (r *queryCaller) call(i int, in []fp) (fp, error) {
	g := r.f.g[i]
	if len(in) != g.arity() {
		return fp{}, errFlpLength
	}
	r.k[i]++
	k, p := r.k[i], r.f.p[i]
	if k >= p {
		return fp{}, errFlpCalls
	}
	for j := range in {
		r.wires[i][j*p+k] = in[j]
	}
	return r.outs[i][k], nil
}

func horner(c []fp, t *fp) fp {
	var acc fp
	for i := len(c) - 1; i >= 0; i-- {
		acc.MulAssign(t)
		acc.AddAssign(&c[i])
	}
	return acc
}

// query is Flp.query on shares of the measurement and proof; the verifier
// share is [v] || x_1 || [y_1] || ... || x_H || [y_H].
func (f *flpParams) query(meas, proof, queryRand, jointRand []fp, numShares int, ar *arena) ([]fp, error) {
	if len(meas) != f.c.measLen() || len(proof) != f.proofLen || len(queryRand) != f.queryRand || len(jointRand) != f.c.jointRandLen() {
		return nil, errFlpLength
	}
	g := f.g
	r := &queryCaller{proveCaller: proveCaller{f: f}}
	r.wires, r.k = newWires(f, ar)
	r.outs = make([][]fp, len(g))
	polys := make([][]fp, len(g))
	off := 0
	for i := range g {
		p, a := f.p[i], g[i].arity()
		for j := range a {
			r.wires[i][j*p] = proof[off]
			off++
		}
		polyLen := g[i].degree()*(p-1) + 1
		polys[i] = proof[off : off+polyLen]
		off += polyLen
		// Values at the P-th roots: reduce modulo x^P - 1, then NTT.
		red := fp64.Vec(ar.get(p))
		for m := range polys[i] {
			red[m%p].AddAssign(&polys[i][m])
		}
		r.outs[i] = ar.get(p)
		evalAt(r.outs[i], red, p)
	}
	v, err := f.c.eval(meas, jointRand, numShares, r)
	if err != nil {
		return nil, err
	}
	out := make([]fp, 0, f.verifierLen)
	out = append(out, v)
	for i := range g {
		if r.k[i] != f.calls[i] {
			return nil, errFlpCalls
		}
		p, a := f.p[i], g[i].arity()
		t := queryRand[i]
		if tp := pow(t, uint64(p)); tp.IsOne() {
			return nil, errEvalPoint
		}
		w := baryWeights(t, p, r.k[i]+1, ar)
		for j := range a {
			wire := r.wires[i][j*p : j*p+len(w)]
			var acc, m fp
			for k := range w {
				m.Mul(&wire[k], &w[k])
				acc.AddAssign(&m)
			}
			out = append(out, acc)
		}
		out = append(out, horner(polys[i], &t))
	}
	return out, nil
}

// decide is Flp.decide on the combined verifier message.
func (f *flpParams) decide(verifier []fp) bool {
	if len(verifier) != f.verifierLen {
		return false
	}
	if !verifier[0].IsZero() {
		return false
	}
	off := 1
	for _, g := range f.g {
		x := verifier[off : off+g.arity()]
		off += g.arity()
		z := g.eval(x)
		if !z.IsEqual(&verifier[off]) {
			return false
		}
		off++
	}
	return true
}

// baryWeights returns the first n Lagrange basis values L_k(t) for the
// nodes alpha^k, k < p, alpha the p-th root of unity (t^p != 1):
// L_k(t) = (t^p - 1) alpha^k / (p (t - alpha^k)). The wire polynomial at t
// is then sum_k wire[k] L_k(t) (only the first calls+1 wire values are
// non-zero), which equals interpolating and evaluating.
func baryWeights(t fp, p, n int, ar *arena) []fp {
	var alpha fp
	alpha.SetRootOfUnityTwoN(log2(p))
	c := pow(t, uint64(p))
	one := fpOne()
	c.SubAssign(&one)
	var pinv fp
	pinv.InvTwoN(log2(p))
	c.MulAssign(&pinv)
	w := ar.get(n)
	ak := ar.get(n)
	prefix := ar.get(n)
	acc := fpOne()
	a := fpOne()
	for k := range n {
		ak[k] = a
		w[k].Sub(&t, &a) // t - alpha^k, non-zero since t^p != 1
		prefix[k] = acc
		acc.MulAssign(&w[k])
		a.MulAssign(&alpha)
	}
	accInv := inv(acc)
	for k := n - 1; k >= 0; k-- {
		var dinv fp
		dinv.Mul(&accInv, &prefix[k]) // 1/(t - alpha^k)
		accInv.MulAssign(&w[k])
		w[k].Mul(&dinv, &ak[k])
		w[k].MulAssign(&c)
	}
	return w
}
