package envelope

import (
	"crypto/subtle"
	"sync"
)

// Fixed-base X25519 for the js/wasm sender's ephemeral keys.
//
// The public key of a scalar s is the u-coordinate of s times the base
// point. The Montgomery ladder spends ~2,550 field multiplications on it;
// on the birationally equivalent twisted Edwards curve (Ed25519's,
// -x^2 + y^2 = 1 + d x^2 y^2, u = (1 + y)/(1 - y)) the multiple of the
// fixed base B can use a table of precomputed multiples, as Ed25519 key
// generation does (ref10's ge_scalarmult_base): 64 signed radix-16 digits,
// 64 mixed additions and 4 doublings, ~560 multiplications, plus one
// inversion for u. The table (32 x 8 affine points, 30 KB) is computed on
// first use (~256 inversions, a few milliseconds under js).
//
// Constant time: a digit selects its table entry by scanning all 8 with
// masks (feCMove), its sign by a masked negation; the addition formulas
// are complete on the prime-order subgroup (every point added is a
// multiple of B or the identity), so there are no exceptional cases to
// branch on.

// edPoint is a point in extended coordinates: x = X/Z, y = Y/Z, T = XY/Z.
type edPoint struct{ X, Y, Z, T fe }

// edNiels is an affine point as (y + x, y - x, 2dxy), for mixed additions.
type edNiels struct{ YplusX, YminusX, XY2d fe }

// edEntry is an edNiels flattened for the constant-time table scan (one
// tight loop over 30 limbs per entry).
type edEntry [30]uint32

func (n *edNiels) entry() (e edEntry) {
	copy(e[0:10], n.YplusX[:])
	copy(e[10:20], n.YminusX[:])
	copy(e[20:30], n.XY2d[:])
	return e
}

// feCarryIn carries h in place (for results of feAdd/feSub that must be
// added to or subtracted from again).
func feCarryIn(h *fe) {
	feCarry(h, uint64(h[0]), uint64(h[1]), uint64(h[2]), uint64(h[3]), uint64(h[4]),
		uint64(h[5]), uint64(h[6]), uint64(h[7]), uint64(h[8]), uint64(h[9]))
}

// feCMove sets f = g when b == 1 and leaves f when b == 0, in constant time.
func feCMove(f, g *fe, b uint32) {
	m := -b
	for i := range f {
		f[i] ^= m & (f[i] ^ g[i])
	}
}

// feAddC and feSubC are feAdd and feSub followed by a carry.
func feAddC(h, f, g *fe) { feAdd(h, f, g); feCarryIn(h) }
func feSubC(h, f, g *fe) { feSub(h, f, g); feCarryIn(h) }

// edMixedAdd sets r = p + q (add-2008-hwcd-3 with a = -1, Z2 = 1).
func edMixedAdd(r, p *edPoint, q *edNiels) {
	var a, b, c, d, e, f, g, h, t fe
	feSub(&t, &p.Y, &p.X)
	feMul(&a, &t, &q.YminusX)
	feAdd(&t, &p.Y, &p.X)
	feMul(&b, &t, &q.YplusX)
	feMul(&c, &p.T, &q.XY2d)
	feAddC(&d, &p.Z, &p.Z)
	feSub(&e, &b, &a)
	feSub(&f, &d, &c)
	feAdd(&g, &d, &c)
	feAdd(&h, &b, &a)
	feMul(&r.X, &e, &f)
	feMul(&r.Y, &g, &h)
	feMul(&r.T, &e, &h)
	feMul(&r.Z, &f, &g)
}

// edAdd sets r = p + q for extended q (add-2008-hwcd-3, a = -1, k = 2d).
func edAdd(r, p, q *edPoint) {
	var a, b, c, d, e, f, g, h, t, u fe
	feSub(&t, &p.Y, &p.X)
	feSub(&u, &q.Y, &q.X)
	feMul(&a, &t, &u)
	feAdd(&t, &p.Y, &p.X)
	feAdd(&u, &q.Y, &q.X)
	feMul(&b, &t, &u)
	feMul(&c, &p.T, &q.T)
	feMul(&c, &c, &ed2d)
	feMul(&d, &p.Z, &q.Z)
	feAddC(&d, &d, &d)
	feSub(&e, &b, &a)
	feSub(&f, &d, &c)
	feAdd(&g, &d, &c)
	feAdd(&h, &b, &a)
	feMul(&r.X, &e, &f)
	feMul(&r.Y, &g, &h)
	feMul(&r.T, &e, &h)
	feMul(&r.Z, &f, &g)
}

// edDouble sets r = 2p (dbl-2008-hwcd, a = -1).
func edDouble(r, p *edPoint) {
	var a, b, c, e, f, g, h, t, zero fe
	feSquare(&a, &p.X)
	feSquare(&b, &p.Y)
	feSquare(&c, &p.Z)
	feAddC(&c, &c, &c)
	feAdd(&t, &p.X, &p.Y)
	feSquare(&e, &t)
	feSubC(&e, &e, &a)
	feSub(&e, &e, &b)  // E = (X+Y)^2 - A - B
	feSubC(&g, &b, &a) // G = D + B = B - A
	feSub(&f, &g, &c)  // F = G - C
	feSubC(&h, &zero, &a)
	feSub(&h, &h, &b) // H = D - B = -A - B
	feMul(&r.X, &e, &f)
	feMul(&r.Y, &g, &h)
	feMul(&r.T, &e, &h)
	feMul(&r.Z, &f, &g)
}

// toNiels returns p in affine niels form.
func (p *edPoint) toNiels() edNiels {
	var zInv, x, y, xy fe
	var n edNiels
	feInvert(&zInv, &p.Z)
	feMul(&x, &p.X, &zInv)
	feMul(&y, &p.Y, &zInv)
	feAddC(&n.YplusX, &y, &x)
	feSubC(&n.YminusX, &y, &x)
	feMul(&xy, &x, &y)
	feMul(&n.XY2d, &xy, &ed2d)
	return n
}

var (
	ed2d     fe // 2d, d = -121665/121666
	edBase   edPoint
	edTable  [32][8]edEntry // edTable[i][j] = (j+1) * 16^(2i) * B
	edOnce   sync.Once
	edBaseXY = [2][32]byte{
		// x and y of B (RFC 8032, section 5.1), little-endian.
		{0x1a, 0xd5, 0x25, 0x8f, 0x60, 0x2d, 0x56, 0xc9, 0xb2, 0xa7, 0x25, 0x95, 0x60, 0xc7, 0x2c, 0x69,
			0x5c, 0xdc, 0xd6, 0xfd, 0x31, 0xe2, 0xa4, 0xc0, 0xfe, 0x53, 0x6e, 0xcd, 0xd3, 0x36, 0x69, 0x21},
		{0x58, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66,
			0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66},
	}
)

// edInit computes 2d and the table of multiples of B.
func edInit() {
	var num, den, d, zero fe
	num[0] = 121665
	feSubC(&num, &zero, &num) // -121665
	den[0] = 121666
	feInvert(&den, &den)
	feMul(&d, &num, &den)
	feAddC(&ed2d, &d, &d)

	feFromBytes(&edBase.X, &edBaseXY[0])
	feFromBytes(&edBase.Y, &edBaseXY[1])
	edBase.Z[0] = 1
	feMul(&edBase.T, &edBase.X, &edBase.Y)

	p := edBase // 16^(2i) * B
	for i := range edTable {
		q := p
		n := q.toNiels()
		edTable[i][0] = n.entry()
		for j := 1; j < 8; j++ {
			edAdd(&q, &q, &p)
			n := q.toNiels()
			edTable[i][j] = n.entry()
		}
		for range 8 {
			edDouble(&p, &p)
		}
	}
}

// edSelect sets t to b * 16^(2*pos) * B for a digit b in [-8, 8], in
// constant time (the identity (1, 1, 0) for b = 0).
func edSelect(t *edNiels, pos int, b int8) {
	neg := uint32(uint8(b) >> 7)                 // 1 if b < 0
	abs := uint32(int32(b) * (1 - 2*int32(neg))) // |b|
	var acc edEntry
	acc[0], acc[10] = 1, 1 // the identity: y + x = y - x = 1, 2dxy = 0
	for j := range uint32(8) {
		m := -uint32(subtle.ConstantTimeEq(int32(abs), int32(j+1)))
		e := &edTable[pos][j]
		for k := range acc {
			acc[k] ^= m & (acc[k] ^ e[k])
		}
	}
	copy(t.YplusX[:], acc[0:10])
	copy(t.YminusX[:], acc[10:20])
	copy(t.XY2d[:], acc[20:30])
	// -(x, y) = (-x, y): swap y+x and y-x, negate 2dxy.
	feCSwap(&t.YplusX, &t.YminusX, neg)
	var zero, n fe
	feSubC(&n, &zero, &t.XY2d)
	feCMove(&t.XY2d, &n, neg)
}

// x25519BaseTable sets out = X25519(scalar, 9) by the fixed-base Edwards
// multiplication; it returns errLowOrder for an all-zero result, as
// x25519 does (never for a clamped scalar in practice).
func x25519BaseTable(out, scalar *[32]byte) error {
	edOnce.Do(edInit)
	e := *scalar
	e[0] &= 248
	e[31] &= 127
	e[31] |= 64
	var digits [64]int8
	for i := range 32 {
		digits[2*i] = int8(e[i] & 15)
		digits[2*i+1] = int8(e[i] >> 4)
	}
	clear(e[:])
	// Signed digits in [-8, 8).
	var carry int8
	for i := range 63 {
		digits[i] += carry
		carry = (digits[i] + 8) >> 4
		digits[i] -= carry << 4
	}
	digits[63] += carry

	var h edPoint
	h.Y[0], h.Z[0] = 1, 1
	var t edNiels
	for i := 1; i < 64; i += 2 {
		edSelect(&t, i/2, digits[i])
		edMixedAdd(&h, &h, &t)
	}
	for range 4 {
		edDouble(&h, &h)
	}
	for i := 0; i < 64; i += 2 {
		edSelect(&t, i/2, digits[i])
		edMixedAdd(&h, &h, &t)
	}
	clear(digits[:])
	// u = (1 + y)/(1 - y) = (Z + Y)/(Z - Y).
	var n, d fe
	feAdd(&n, &h.Z, &h.Y)
	feSub(&d, &h.Z, &h.Y)
	feInvert(&d, &d)
	feMul(&n, &n, &d)
	feToBytes(out, &n)
	var zero [32]byte
	if subtle.ConstantTimeCompare(out[:], zero[:]) == 1 {
		return errLowOrder
	}
	return nil
}
