package pine

import "math/bits"

// The two PINE validity circuits (draft-chen-cfrg-vdaf-pine, Section 4.2
// "The FLP Circuit"; reference poc/vdaf_pine_poc/flp_pine.py): normEqCircuit
// (PineValidNormEquality) checks that the squared norm computed from the
// gradient equals the value of the client's v bits; mainCircuit (PineValid)
// checks the bits, the squared-norm range, the wraparound results and the
// success count. A report is valid only if both accept.

// psAcc feeds consecutive inputs to a ParallelSum gadget call, padding the
// last chunk with zeros (parallel_sum of the reference).
type psAcc struct {
	g   caller
	buf []fp
	n   int
	sum fp
	err error
}

func (a *psAcc) add(xs ...fp) {
	for _, x := range xs {
		a.buf[a.n] = x
		a.n++
		if a.n == len(a.buf) {
			a.flush()
		}
	}
}

func (a *psAcc) flush() {
	if a.err != nil {
		a.n = 0
		return
	}
	y, err := a.g.call(0, a.buf)
	if err != nil {
		a.err = err
	}
	a.sum.AddAssign(&y)
	a.n = 0
}

func (a *psAcc) finish() (fp, error) {
	if a.n > 0 {
		clear(a.buf[a.n:])
		a.flush()
	}
	s := a.sum
	a.sum = fp{}
	return s, a.err
}

func chunks(n, chunk int) int { return (n + chunk - 1) / chunk }

type normEqCircuit struct{ p *Pine }

func (c normEqCircuit) gadgets() []gadget {
	return []gadget{parallelSum{squareGadget{}, c.p.cfg.ChunkLengthNormEquality}}
}
func (c normEqCircuit) gadgetCalls() []int {
	return []int{chunks(c.p.cfg.Dimension, c.p.cfg.ChunkLengthNormEquality)}
}
func (c normEqCircuit) measLen() int      { return c.p.flpMeasLen }
func (c normEqCircuit) jointRandLen() int { return 0 }

func (c normEqCircuit) eval(meas, _ []fp, _ int, g caller) (fp, error) {
	p := c.p
	acc := psAcc{g: g, buf: make([]fp, p.cfg.ChunkLengthNormEquality)}
	for i := range p.cfg.Dimension {
		acc.add(meas[i])
	}
	computed, err := acc.finish()
	if err != nil {
		return fp{}, err
	}
	d := p.cfg.Dimension
	v := fromBits(meas[d : d+p.numBitsSqNorm])
	v.SubAssign(&computed)
	return v, nil
}

type mainCircuit struct{ p *Pine }

func (c mainCircuit) gadgets() []gadget {
	return []gadget{parallelSum{mulGadget{}, c.p.cfg.ChunkLength}}
}
func (c mainCircuit) gadgetCalls() []int {
	ch := c.p.cfg.ChunkLength
	return []int{chunks(c.p.bitCheckedLen, ch) + chunks(c.p.cfg.NumWrChecks, ch)}
}
func (c mainCircuit) measLen() int      { return c.p.flpMeasLen }
func (c mainCircuit) jointRandLen() int { return 3 }

func (c mainCircuit) eval(meas, jr []fp, numShares int, g caller) (fp, error) {
	p := c.p
	d, nb, nw := p.cfg.Dimension, p.numBitsSqNorm, p.numBitsWr
	sharesInv := inv(fpU(uint64(numShares)))
	bitChecked := meas[d : d+p.bitCheckedLen]
	wrResults := meas[d+p.bitCheckedLen:]
	rBit, rWr, rFinal := jr[0], jr[1], jr[2]
	acc := psAcc{g: g, buf: make([]fp, 2*p.cfg.ChunkLength)}

	// Bit checks: sum r^i * b_i * (b_i - 1).
	rp := fpOne()
	var x, y fp
	for i := range bitChecked {
		x.Mul(&rp, &bitChecked[i])
		y.Sub(&bitChecked[i], &sharesInv)
		acc.add(x, y)
		rp.MulAssign(&rBit)
	}
	bitRes, err := acc.finish()
	if err != nil {
		return fp{}, err
	}

	// Wraparound checks ([ROCT23] Figure 2): g_i * (result_i - reported_i)
	// and the success count.
	var count fp
	wrOffset := fpU(p.wrBound - 1)
	wrOffset.MulAssign(&sharesInv)
	rp = fpOne()
	for i := range p.cfg.NumWrChecks {
		base := 2*nb + i*(nw+1)
		reported := fromBits(bitChecked[base : base+nw])
		reported.SubAssign(&wrOffset)
		gi := bitChecked[base+nw]
		x.Sub(&wrResults[i], &reported)
		x.MulAssign(&rp)
		acc.add(x, gi)
		count.AddAssign(&gi)
		rp.MulAssign(&rWr)
	}
	quad, err := acc.finish()
	if err != nil {
		return fp{}, err
	}
	succ := fpU(uint64(p.cfg.NumWrSuccesses))
	succ.MulAssign(&sharesInv)
	count.SubAssign(&succ)

	// Squared-norm range check ([ROCT23] Figure 1): v + u = bound.
	rng := fromBits(bitChecked[:nb])
	u := fromBits(bitChecked[nb : 2*nb])
	rng.AddAssign(&u)
	b := fpU(p.sqNormBound)
	b.MulAssign(&sharesInv)
	rng.SubAssign(&b)

	// bitRes + r*range + r^2*quad + r^3*count.
	out := bitRes
	r := rFinal
	x.Mul(&r, &rng)
	out.AddAssign(&x)
	r.MulAssign(&rFinal)
	x.Mul(&r, &quad)
	out.AddAssign(&x)
	r.MulAssign(&rFinal)
	x.Mul(&r, &count)
	out.AddAssign(&x)
	return out, nil
}

// runWrChecks computes the num_wr_checks dot products of the gradient
// (share) with {-1, 0, 1} vectors drawn two bits at a time from the
// wraparound XOF (draft Section 4.1.3): 00 -> -1, 01 and 10 -> 0, 11 -> 1,
// four entries per byte from the low bits up, a fresh byte for each
// check's first entry.
//
// Implementation: for each pair of entries a table of the 16 possible
// signed sums (one per nibble of the XOF byte) is built once; each check
// then adds one table entry per nibble into a 128-bit accumulator of
// Montgomery representatives (addition commutes with the Montgomery map)
// and reduces once.
func (p *Pine) runWrChecks(dst, grad []fp, x *xof, ar *arena, buf []byte) []byte {
	d := p.cfg.Dimension
	nbytes := (d + 3) / 4
	pairs := 2 * nbytes
	tab := ar.get(16 * pairs)
	signOf := [4]int{0, 1, 1, 2}
	for pr := range pairs {
		var a, b fp
		if k := 2 * pr; k < d {
			a = grad[k]
		}
		if k := 2*pr + 1; k < d {
			b = grad[k]
		}
		var na, nb fp
		na.Sub(&na, &a)
		nb.Sub(&nb, &b)
		sa := [3]fp{na, {}, a}
		sb := [3]fp{nb, {}, b}
		t := tab[16*pr : 16*pr+16]
		for n := range 16 {
			t[n].Add(&sa[signOf[n&3]], &sb[signOf[n>>2]])
		}
	}
	if cap(buf) < nbytes {
		buf = make([]byte, nbytes)
	}
	buf = buf[:nbytes]
	for c := range dst {
		x.read(buf)
		var hi, lo, carry uint64
		for i, b := range buf {
			lo, carry = bits.Add64(lo, tab[32*i+int(b&15)][0], 0)
			hi += carry
			lo, carry = bits.Add64(lo, tab[32*i+16+int(b>>4)][0], 0)
			hi += carry
		}
		dst[c] = fp{bits.Rem64(hi, lo, modulus)}
	}
	return buf
}
