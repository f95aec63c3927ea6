package envelope

import (
	"crypto/subtle"
	"errors"
)

// X25519 (RFC 7748, section 5) for the js/wasm sender.
//
// Why it exists. Under GOOS=js GOARCH=wasm the standard library's X25519
// runs its generic field arithmetic, five 51-bit limbs multiplied with
// math/bits.Mul64, which WebAssembly has no instruction for (it is emulated
// with four 32x32-bit products and carries). A seal does two X25519
// multiplications (the ephemeral key and the shared secret), and they were
// ~85% of its time under js: ~9.5x native, where the rest of HPKE is 4-6x.
// This implementation uses ten limbs of 26 and 25 bits (radix 2^25.5, the
// representation of the reference implementation "ref10"), so every
// product is a native 64-bit multiplication of two values below 2^27.
//
// It is used only by the js/wasm sender (see sender.go; the ephemeral
// public key comes from the fixed-base table of edwards.go); natively, and for
// every open, crypto/ecdh is used. It is compiled and tested on every
// platform against crypto/ecdh (random and edge-case scalars and points)
// and the RFC 7748 vectors.
//
// Constant time: the scalar's bits select only through masks (feCSwap);
// every loop has a fixed count; no branch or memory index depends on a
// secret. 64-bit multiplication is a constant-time instruction on the CPUs
// wasm engines target.

// fe is a field element of GF(2^255 - 19): sum of f[i] * 2^ceil(25.5*i),
// limbs of 26 bits (even i) and 25 bits (odd i) when carried. feMul,
// feSquare, feMul121665 and feInvert return carried elements (limbs within
// their width but h[1] < 2^25 + 2^16); feAdd and feSub do not carry, and
// their outputs (limbs below 2^27.6) may be multiplied or squared but not
// added to or subtracted from again (x25519 never does).
//
// Bounds. A product term is at most (2^27.6)^2 = 2^55.2 and the
// coefficients of a limb of feMul or feSquare (1, 2, 19, 38, 76) sum to at
// most 267 < 2^8.07, so every 64-bit accumulator stays below 2^63.3.
type fe [10]uint32

const (
	mask26 = 1<<26 - 1
	mask25 = 1<<25 - 1
)

// feCarry stores h0..h9 (each below 2^62) into h, carried: limbs within
// their width, except h[1] which may exceed 2^25 by less than 2^16.
func feCarry(h *fe, h0, h1, h2, h3, h4, h5, h6, h7, h8, h9 uint64) {
	var c uint64
	c = h0 >> 26
	h0 &= mask26
	h1 += c
	c = h1 >> 25
	h1 &= mask25
	h2 += c
	c = h2 >> 26
	h2 &= mask26
	h3 += c
	c = h3 >> 25
	h3 &= mask25
	h4 += c
	c = h4 >> 26
	h4 &= mask26
	h5 += c
	c = h5 >> 25
	h5 &= mask25
	h6 += c
	c = h6 >> 26
	h6 &= mask26
	h7 += c
	c = h7 >> 25
	h7 &= mask25
	h8 += c
	c = h8 >> 26
	h8 &= mask26
	h9 += c
	c = h9 >> 25
	h9 &= mask25
	h0 += 19 * c
	c = h0 >> 26
	h0 &= mask26
	h1 += c
	h[0], h[1], h[2], h[3], h[4] = uint32(h0), uint32(h1), uint32(h2), uint32(h3), uint32(h4)
	h[5], h[6], h[7], h[8], h[9] = uint32(h5), uint32(h6), uint32(h7), uint32(h8), uint32(h9)
}

// feAdd sets h = f + g without carrying: for carried f and g the limbs
// stay below 2^27 + 2^17, within what feMul and feSquare accept (see
// there).
func feAdd(h, f, g *fe) {
	for i := range h {
		h[i] = f[i] + g[i]
	}
}

// Limbs of 2p, which exceed every carried limb, so f + 2p - g never
// underflows.
const (
	twoP0    = 2 * (1<<26 - 19)
	twoPEven = 2 * (1<<26 - 1)
	twoPOdd  = 2 * (1<<25 - 1)
)

// feSub sets h = f - g without carrying, as f + 2p - g limb by limb; g
// must be carried (each limb at most the corresponding limb of 2p), f
// carried; the limbs stay below 2^27.6.
func feSub(h, f, g *fe) {
	h[0] = f[0] + twoP0 - g[0]
	for i := 1; i < 10; i += 2 {
		h[i] = f[i] + twoPOdd - g[i]
		if i+1 < 10 {
			h[i+1] = f[i+1] + twoPEven - g[i+1]
		}
	}
}

// feMul121665 sets h = 121665 * f, (A - 2)/4 for Curve25519.
func feMul121665(h, f *fe) {
	const a24 = 121665
	feCarry(h,
		a24*uint64(f[0]), a24*uint64(f[1]), a24*uint64(f[2]), a24*uint64(f[3]), a24*uint64(f[4]),
		a24*uint64(f[5]), a24*uint64(f[6]), a24*uint64(f[7]), a24*uint64(f[8]), a24*uint64(f[9]))
}

// feCSwap swaps f and g when b == 1 and leaves them when b == 0, in
// constant time.
func feCSwap(f, g *fe, b uint32) {
	m := -b
	for i := range f {
		t := m & (f[i] ^ g[i])
		f[i] ^= t
		g[i] ^= t
	}
}

// feFromBytes sets h to the little-endian 255-bit number in b, ignoring
// the top bit of b[31] (RFC 7748 masks it); values >= p are accepted and
// reduced by the arithmetic.
func feFromBytes(h *fe, b *[32]byte) {
	var acc uint64
	n, j := 0, 0
	for i := range h {
		w := 26 - i&1
		for n < w {
			acc |= uint64(b[j]) << n
			j++
			n += 8
		}
		h[i] = uint32(acc & (1<<w - 1))
		acc >>= w
		n -= w
	}
}

// feToBytes writes the canonical (fully reduced) little-endian encoding of
// h to b.
func feToBytes(b *[32]byte, h *fe) {
	var l [10]uint64
	for i := range h {
		l[i] = uint64(h[i])
	}
	// q = 1 iff h >= p, i.e. h + 19 >= 2^255 (h < 2p as h is carried):
	// the carry out of bit 255 of h + 19.
	q := uint64(19)
	for i := range l {
		q = (l[i] + q) >> (26 - i&1)
	}
	// h + 19q, dropping bit 255, is h - pq.
	l[0] += 19 * q
	for i := 0; i < 9; i++ {
		w := 26 - i&1
		l[i+1] += l[i] >> w
		l[i] &= 1<<w - 1
	}
	l[9] &= mask25
	var acc uint64
	n, j := 0, 0
	for i := range l {
		acc |= l[i] << n
		n += 26 - i&1
		for n >= 8 && j < 32 {
			b[j] = byte(acc)
			acc >>= 8
			n -= 8
			j++
		}
	}
	b[31] = byte(acc)
}

// feInvert sets out = z^(p-2) = z^-1 (0 for z = 0), by the addition chain
// of ref10.
func feInvert(out, z *fe) {
	var t0, t1, t2, t3 fe
	sq := func(h, f *fe, n int) {
		feSquare(h, f)
		for i := 1; i < n; i++ {
			feSquare(h, h)
		}
	}
	sq(&t0, z, 1)        // z^2
	sq(&t1, &t0, 2)      // z^8
	feMul(&t1, z, &t1)   // z^9
	feMul(&t0, &t0, &t1) // z^11
	sq(&t2, &t0, 1)      // z^22
	feMul(&t1, &t1, &t2) // z^(2^5-1)
	sq(&t2, &t1, 5)      //
	feMul(&t1, &t2, &t1) // z^(2^10-1)
	sq(&t2, &t1, 10)     //
	feMul(&t2, &t2, &t1) // z^(2^20-1)
	sq(&t3, &t2, 20)     //
	feMul(&t2, &t3, &t2) // z^(2^40-1)
	sq(&t2, &t2, 10)     //
	feMul(&t1, &t2, &t1) // z^(2^50-1)
	sq(&t2, &t1, 50)     //
	feMul(&t2, &t2, &t1) // z^(2^100-1)
	sq(&t3, &t2, 100)    //
	feMul(&t2, &t3, &t2) // z^(2^200-1)
	sq(&t2, &t2, 50)     //
	feMul(&t1, &t2, &t1) // z^(2^250-1)
	sq(&t1, &t1, 5)      // z^(2^255-32)
	feMul(out, &t1, &t0) // z^(2^255-21)
}

var errLowOrder = errors.New("x25519: low-order point (all-zero shared secret)")

// x25519 sets out = X25519(scalar, point): the u-coordinate of the clamped
// scalar times the point with u-coordinate point (RFC 7748, section 5,
// the Montgomery ladder). It returns errLowOrder when the result is all
// zeros (point of small order), as crypto/ecdh does.
func x25519(out, scalar, point *[32]byte) error {
	e := *scalar
	e[0] &= 248
	e[31] &= 127
	e[31] |= 64
	var x1, x2, z2, x3, z3, a, aa, b, bb, ee, c, d, da, cb fe
	feFromBytes(&x1, point)
	x2[0] = 1
	x3 = x1
	z3[0] = 1
	var swap uint32
	for pos := 254; pos >= 0; pos-- {
		bit := uint32(e[pos>>3]>>(pos&7)) & 1
		swap ^= bit
		feCSwap(&x2, &x3, swap)
		feCSwap(&z2, &z3, swap)
		swap = bit
		feAdd(&a, &x2, &z2)
		feSquare(&aa, &a)
		feSub(&b, &x2, &z2)
		feSquare(&bb, &b)
		feSub(&ee, &aa, &bb)
		feAdd(&c, &x3, &z3)
		feSub(&d, &x3, &z3)
		feMul(&da, &d, &a)
		feMul(&cb, &c, &b)
		feAdd(&x3, &da, &cb)
		feSquare(&x3, &x3)
		feSub(&z3, &da, &cb)
		feSquare(&z3, &z3)
		feMul(&z3, &z3, &x1)
		feMul(&x2, &aa, &bb)
		feMul121665(&z2, &ee)
		feAdd(&z2, &z2, &aa)
		feMul(&z2, &z2, &ee)
	}
	feCSwap(&x2, &x3, swap)
	feCSwap(&z2, &z3, swap)
	feInvert(&z2, &z2)
	feMul(&x2, &x2, &z2)
	feToBytes(out, &x2)
	var zero [32]byte
	if subtle.ConstantTimeCompare(out[:], zero[:]) == 1 {
		return errLowOrder
	}
	return nil
}

// x25519Base sets out = X25519(scalar, 9), the public key of scalar, by
// the fixed-base table (edwards.go; ~2x faster than the ladder under js).
func x25519Base(out, scalar *[32]byte) error {
	return x25519BaseTable(out, scalar)
}

var basePoint = [32]byte{9}

// feMul sets h = f*g mod p (inputs: limbs below 2^27.6; output carried).
func feMul(h, f, g *fe) {
	f0 := uint64(f[0])
	f1 := uint64(f[1])
	f2 := uint64(f[2])
	f3 := uint64(f[3])
	f4 := uint64(f[4])
	f5 := uint64(f[5])
	f6 := uint64(f[6])
	f7 := uint64(f[7])
	f8 := uint64(f[8])
	f9 := uint64(f[9])
	g0 := uint64(g[0])
	g1 := uint64(g[1])
	g2 := uint64(g[2])
	g3 := uint64(g[3])
	g4 := uint64(g[4])
	g5 := uint64(g[5])
	g6 := uint64(g[6])
	g7 := uint64(g[7])
	g8 := uint64(g[8])
	g9 := uint64(g[9])
	g1_19 := 19 * g1
	g2_19 := 19 * g2
	g3_19 := 19 * g3
	g4_19 := 19 * g4
	g5_19 := 19 * g5
	g6_19 := 19 * g6
	g7_19 := 19 * g7
	g8_19 := 19 * g8
	g9_19 := 19 * g9
	f1_2 := 2 * f1
	f3_2 := 2 * f3
	f5_2 := 2 * f5
	f7_2 := 2 * f7
	f9_2 := 2 * f9
	h0 := f0*g0 + f1_2*g9_19 + f2*g8_19 + f3_2*g7_19 + f4*g6_19 + f5_2*g5_19 + f6*g4_19 + f7_2*g3_19 + f8*g2_19 + f9_2*g1_19
	h1 := f0*g1 + f1*g0 + f2*g9_19 + f3*g8_19 + f4*g7_19 + f5*g6_19 + f6*g5_19 + f7*g4_19 + f8*g3_19 + f9*g2_19
	h2 := f0*g2 + f1_2*g1 + f2*g0 + f3_2*g9_19 + f4*g8_19 + f5_2*g7_19 + f6*g6_19 + f7_2*g5_19 + f8*g4_19 + f9_2*g3_19
	h3 := f0*g3 + f1*g2 + f2*g1 + f3*g0 + f4*g9_19 + f5*g8_19 + f6*g7_19 + f7*g6_19 + f8*g5_19 + f9*g4_19
	h4 := f0*g4 + f1_2*g3 + f2*g2 + f3_2*g1 + f4*g0 + f5_2*g9_19 + f6*g8_19 + f7_2*g7_19 + f8*g6_19 + f9_2*g5_19
	h5 := f0*g5 + f1*g4 + f2*g3 + f3*g2 + f4*g1 + f5*g0 + f6*g9_19 + f7*g8_19 + f8*g7_19 + f9*g6_19
	h6 := f0*g6 + f1_2*g5 + f2*g4 + f3_2*g3 + f4*g2 + f5_2*g1 + f6*g0 + f7_2*g9_19 + f8*g8_19 + f9_2*g7_19
	h7 := f0*g7 + f1*g6 + f2*g5 + f3*g4 + f4*g3 + f5*g2 + f6*g1 + f7*g0 + f8*g9_19 + f9*g8_19
	h8 := f0*g8 + f1_2*g7 + f2*g6 + f3_2*g5 + f4*g4 + f5_2*g3 + f6*g2 + f7_2*g1 + f8*g0 + f9_2*g9_19
	h9 := f0*g9 + f1*g8 + f2*g7 + f3*g6 + f4*g5 + f5*g4 + f6*g3 + f7*g2 + f8*g1 + f9*g0
	feCarry(h, h0, h1, h2, h3, h4, h5, h6, h7, h8, h9)
}

// feSquare sets h = f*f mod p (input bound as feMul's).
func feSquare(h, f *fe) {
	f0 := uint64(f[0])
	f1 := uint64(f[1])
	f2 := uint64(f[2])
	f3 := uint64(f[3])
	f4 := uint64(f[4])
	f5 := uint64(f[5])
	f6 := uint64(f[6])
	f7 := uint64(f[7])
	f8 := uint64(f[8])
	f9 := uint64(f[9])
	f0_2 := 2 * f0
	f1_2 := 2 * f1
	f2_2 := 2 * f2
	f3_2 := 2 * f3
	f4_2 := 2 * f4
	f5_2 := 2 * f5
	f6_2 := 2 * f6
	f7_2 := 2 * f7
	f8_2 := 2 * f8
	f9_2 := 2 * f9
	f5_19 := 19 * f5
	f6_19 := 19 * f6
	f7_19 := 19 * f7
	f8_19 := 19 * f8
	f9_19 := 19 * f9
	f7_38 := 38 * f7
	f9_38 := 38 * f9
	h0 := f0*f0 + f1_2*f9_38 + f2_2*f8_19 + f3_2*f7_38 + f4_2*f6_19 + f5_2*f5_19
	h1 := f0_2*f1 + f2_2*f9_19 + f3_2*f8_19 + f4_2*f7_19 + f5_2*f6_19
	h2 := f0_2*f2 + f1_2*f1 + f3_2*f9_38 + f4_2*f8_19 + f5_2*f7_38 + f6*f6_19
	h3 := f0_2*f3 + f1_2*f2 + f4_2*f9_19 + f5_2*f8_19 + f6_2*f7_19
	h4 := f0_2*f4 + f1_2*f3_2 + f2*f2 + f5_2*f9_38 + f6_2*f8_19 + f7_2*f7_19
	h5 := f0_2*f5 + f1_2*f4 + f2_2*f3 + f6_2*f9_19 + f7_2*f8_19
	h6 := f0_2*f6 + f1_2*f5_2 + f2_2*f4 + f3_2*f3 + f7_2*f9_38 + f8*f8_19
	h7 := f0_2*f7 + f1_2*f6 + f2_2*f5 + f3_2*f4 + f8_2*f9_19
	h8 := f0_2*f8 + f1_2*f7_2 + f2_2*f6 + f3_2*f5_2 + f4*f4 + f9_2*f9_19
	h9 := f0_2*f9 + f1_2*f8 + f2_2*f7 + f3_2*f6 + f4_2*f5
	feCarry(h, h0, h1, h2, h3, h4, h5, h6, h7, h8, h9)
}
