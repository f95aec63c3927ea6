package envelope

import (
	"crypto/subtle"
	"sync"
)

// Fixed-base X25519 for the js/wasm sender: its ephemeral public keys
// (multiples of the base point) and shared secrets (multiples of the
// recipient's key, fixed for a round and in practice for the aggregator's
// lifetime).
//
// The public key of a scalar s is the u-coordinate of s times the base
// point. The Montgomery ladder spends ~2,550 field multiplications on it;
// on the birationally equivalent twisted Edwards curve (Ed25519's,
// -x^2 + y^2 = 1 + d x^2 y^2, u = (1 + y)/(1 - y)) the multiple of the
// fixed base B can use a table of precomputed multiples, as Ed25519 key
// generation does (ref10's ge_scalarmult_base): 64 signed radix-16 digits,
// 64 mixed additions and 4 doublings, ~560 multiplications, plus one
// inversion for u. A table (32 x 8 affine points, 30 KB) costs ~256
// inversions to build (a few milliseconds under js): the base point's on
// first use, a recipient key's once per key (sender.go).
//
// Constant time: a digit selects its table entry by scanning all 8 with
// masks, its sign by a masked swap and negation; the addition and
// doubling formulas (Hisil-Wong-Carter-Dawson, a = -1) are complete on
// this curve (a = -1 is a square and d is not), so there are no
// exceptional cases to branch on. Building a table and mapping a
// recipient key to the Edwards curve handle public data only and run in
// variable time.

// edPoint is a point in extended coordinates: x = X/Z, y = Y/Z, T = XY/Z.
type edPoint struct{ X, Y, Z, T fe }

// edNiels is an affine point as (y + x, y - x, 2dxy), for mixed additions.
type edNiels struct{ YplusX, YminusX, XY2d fe }

// edFixedTable holds the multiples t[i][j] = (j+1) * 16^(2i) * P of a
// fixed point P, for edFixedMul.
type edFixedTable [32][8]edEntry

// newEdFixedTable computes the table of p (public data; variable time is
// fine here).
func newEdFixedTable(p edPoint) *edFixedTable {
	t := new(edFixedTable)
	for i := range t {
		q := p
		n := q.toNiels()
		t[i][0] = n.entry()
		for j := 1; j < 8; j++ {
			edAdd(&q, &q, &p)
			n := q.toNiels()
			t[i][j] = n.entry()
		}
		for range 8 {
			edDouble(&p, &p)
		}
	}
	return t
}

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
	edTable  *edFixedTable // multiples of B
	sqrtM1   fe            // a square root of -1: 2^((p-1)/4)
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

	edTable = newEdFixedTable(edBase)

	// sqrt(-1) = 2^((p-1)/4), (p-1)/4 = 2^253 - 5.
	var two fe
	two[0] = 2
	fePowPublic(&sqrtM1, &two, pMinus1Over4())
}

// edSelect sets t to b * 16^(2*pos) * P, P the table's point, for a digit b in [-8, 8], in
// constant time (the identity (1, 1, 0) for b = 0).
func edSelect(t *edNiels, tab *edFixedTable, pos int, b int8) {
	neg := uint32(uint8(b) >> 7)                 // 1 if b < 0
	abs := uint32(int32(b) * (1 - 2*int32(neg))) // |b|
	var acc edEntry
	acc[0], acc[10] = 1, 1 // the identity: y + x = y - x = 1, 2dxy = 0
	for j := range uint32(8) {
		m := -uint32(subtle.ConstantTimeEq(int32(abs), int32(j+1)))
		e := &tab[pos][j]
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
	return x25519Fixed(out, scalar, edTable)
}

// x25519Fixed sets out = X25519(scalar, u(P)) for the point P of tab: the
// u-coordinate (1 + y)/(1 - y) of clamp(scalar) * P; errLowOrder for an
// all-zero result.
func x25519Fixed(out, scalar *[32]byte, tab *edFixedTable) error {
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
		edSelect(&t, tab, i/2, digits[i])
		edMixedAdd(&h, &h, &t)
	}
	for range 4 {
		edDouble(&h, &h)
	}
	for i := 0; i < 64; i += 2 {
		edSelect(&t, tab, i/2, digits[i])
		edMixedAdd(&h, &h, &t)
	}
	clear(digits[:])
	// u = (1 + y)/(1 - y) = (Z + Y)/(Z - Y); 0 for the identity.
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

// fePowPublic sets out = b^e for a public exponent e (little-endian bytes),
// by square-and-multiply: variable time, for public values only.
func fePowPublic(out, b *fe, e []byte) {
	var r fe
	r[0] = 1
	base := *b
	for i := len(e)*8 - 1; i >= 0; i-- {
		feSquare(&r, &r)
		if e[i/8]>>(i%8)&1 == 1 {
			feMul(&r, &r, &base)
		}
	}
	*out = r
}

// pMinus1Over4 returns (p-1)/4 = 2^253 - 5, little-endian.
func pMinus1Over4() []byte {
	e := make([]byte, 32)
	for i := range e {
		e[i] = 0xff
	}
	e[0] = 0xfb
	e[31] = 0x1f
	return e
}

// pMinus5Over8 returns (p-5)/8 = 2^252 - 3, little-endian.
func pMinus5Over8() []byte {
	e := make([]byte, 32)
	for i := range e {
		e[i] = 0xff
	}
	e[0] = 0xfd
	e[31] = 0x0f
	return e
}

// feEqual reports whether f and g are the same field element (public
// values only: variable time).
func feEqual(f, g *fe) bool {
	var a, b [32]byte
	feToBytes(&a, f)
	feToBytes(&b, g)
	return a == b
}

// edFromMontgomery returns an Edwards point P whose Montgomery
// u-coordinate (1 + y)/(1 - y) is u (top bit ignored, as X25519 does), and
// false when there is none (u = -1, or u on the quadratic twist): then only
// the ladder computes X25519 with u. Which of the two points (x, y) and
// (-x, y) is returned does not matter: they have the same u, and so do
// all their multiples. u is public; this runs in variable time.
func edFromMontgomery(u *[32]byte) (edPoint, bool) {
	edOnce.Do(edInit)
	var p edPoint
	var fu, one, num, den fe
	feFromBytes(&fu, u)
	one[0] = 1
	// y = (u - 1)/(u + 1).
	feSubC(&num, &fu, &one)
	feAddC(&den, &fu, &one)
	var zero fe
	if feEqual(&den, &zero) {
		return p, false
	}
	feInvert(&den, &den)
	feMul(&p.Y, &num, &den)
	// x^2 = (y^2 - 1)/(d y^2 + 1) = a/b.
	var y2, a, b, d fe
	feSquare(&y2, &p.Y)
	feSubC(&a, &y2, &one)
	var half fe
	half[0] = 2
	feInvert(&half, &half)
	feMul(&d, &ed2d, &half)
	feMul(&b, &d, &y2)
	feAddC(&b, &b, &one)
	// x = a b^3 (a b^7)^((p-5)/8), then fix by sqrt(-1) or fail.
	var b3, b7, t, x fe
	feSquare(&t, &b)
	feMul(&b3, &t, &b)
	feSquare(&t, &b3)
	feMul(&b7, &t, &b)
	feMul(&t, &a, &b7)
	fePowPublic(&t, &t, pMinus5Over8())
	feMul(&x, &a, &b3)
	feMul(&x, &x, &t)
	var chk, negA fe
	feSquare(&chk, &x)
	feMul(&chk, &chk, &b)
	feSubC(&negA, &zero, &a)
	switch {
	case feEqual(&chk, &a):
	case feEqual(&chk, &negA):
		feMul(&x, &x, &sqrtM1)
	default:
		return p, false
	}
	p.X = x
	p.Z[0] = 1
	feMul(&p.T, &p.X, &p.Y)
	return p, true
}
