package envelope

import (
	"encoding/binary"
	"math/bits"
)

// ChaCha20-Poly1305 sealing (RFC 8439, section 2.8) for the js/wasm
// sender: the standard library implements it only inside crypto/hpke and
// crypto/tls, not as an exported AEAD, and the js sender needs it to seal
// with its own X25519 (x25519.go). Only sealing is implemented; every
// message is opened by crypto/hpke, and the tests open this code's output
// with crypto/hpke for every plaintext length from 0 to 300 bytes and check
// the RFC 8439 vectors. Constant time: ChaCha20 is add-rotate-xor;
// Poly1305 uses 64-bit limbs with math/bits carries and a masked final
// reduction, no branch on secret data.

// chachaBlock writes the 64-byte ChaCha20 block for key, counter and nonce
// to out (RFC 8439, section 2.3).
func chachaBlock(out *[64]byte, key *[32]byte, counter uint32, nonce *[12]byte) {
	var s, x [16]uint32
	s[0], s[1], s[2], s[3] = 0x61707865, 0x3320646e, 0x79622d32, 0x6b206574
	for i := range 8 {
		s[4+i] = binary.LittleEndian.Uint32(key[4*i:])
	}
	s[12] = counter
	s[13] = binary.LittleEndian.Uint32(nonce[0:])
	s[14] = binary.LittleEndian.Uint32(nonce[4:])
	s[15] = binary.LittleEndian.Uint32(nonce[8:])
	x = s
	qr := func(a, b, c, d int) {
		x[a] += x[b]
		x[d] = bits.RotateLeft32(x[d]^x[a], 16)
		x[c] += x[d]
		x[b] = bits.RotateLeft32(x[b]^x[c], 12)
		x[a] += x[b]
		x[d] = bits.RotateLeft32(x[d]^x[a], 8)
		x[c] += x[d]
		x[b] = bits.RotateLeft32(x[b]^x[c], 7)
	}
	for range 10 {
		qr(0, 4, 8, 12)
		qr(1, 5, 9, 13)
		qr(2, 6, 10, 14)
		qr(3, 7, 11, 15)
		qr(0, 5, 10, 15)
		qr(1, 6, 11, 12)
		qr(2, 7, 8, 13)
		qr(3, 4, 9, 14)
	}
	for i := range x {
		binary.LittleEndian.PutUint32(out[4*i:], x[i]+s[i])
	}
}

// poly1305 is the Poly1305 state (RFC 8439, section 2.5): the accumulator
// h = h0 + h1*2^64 + h2*2^128 (h2 small), r clamped, s.
type poly1305 struct {
	h0, h1, h2 uint64
	r0, r1     uint64
	s0, s1     uint64
}

func newPoly1305(key *[32]byte) poly1305 {
	return poly1305{
		r0: binary.LittleEndian.Uint64(key[0:]) & 0x0ffffffc0fffffff,
		r1: binary.LittleEndian.Uint64(key[8:]) & 0x0ffffffc0ffffffc,
		s0: binary.LittleEndian.Uint64(key[16:]),
		s1: binary.LittleEndian.Uint64(key[24:]),
	}
}

// block absorbs one 16-byte block m with its 2^128 bit set when full is 1
// (a message block of 16 bytes, as in the AEAD, whose padded blocks are
// all full), then multiplies by r modulo 2^130 - 5.
func (p *poly1305) block(m []byte, full uint64) {
	var c uint64
	p.h0, c = bits.Add64(p.h0, binary.LittleEndian.Uint64(m[0:8]), 0)
	p.h1, c = bits.Add64(p.h1, binary.LittleEndian.Uint64(m[8:16]), c)
	p.h2 += c + full

	// h * r, h2 < 8 and r0, r1 < 2^60, so h2*r0, h2*r1 fit in 64 bits.
	h0r0hi, h0r0lo := bits.Mul64(p.h0, p.r0)
	h1r0hi, h1r0lo := bits.Mul64(p.h1, p.r0)
	h0r1hi, h0r1lo := bits.Mul64(p.h0, p.r1)
	h1r1hi, h1r1lo := bits.Mul64(p.h1, p.r1)
	h2r0 := p.h2 * p.r0
	h2r1 := p.h2 * p.r1

	// t = t0 + t1*2^64 + t2*2^128 + t3*2^192.
	m1lo, c := bits.Add64(h1r0lo, h0r1lo, 0)
	m1hi, _ := bits.Add64(h1r0hi, h0r1hi, c)
	m2lo, c := bits.Add64(h2r0, h1r1lo, 0)
	m2hi, _ := bits.Add64(0, h1r1hi, c)
	t0 := h0r0lo
	t1, c := bits.Add64(m1lo, h0r0hi, 0)
	t2, c := bits.Add64(m2lo, m1hi, c)
	t3, _ := bits.Add64(h2r1+m2hi, 0, c)

	// Reduce: t = low 130 bits + 2^130 * q, and 2^130 = 5 mod p, so
	// h = low + 4q + q, where 4q = (t2 &^ 3, t3) as a 128-bit number.
	p.h0, p.h1, p.h2 = t0, t1, t2&3
	q0, q1 := t2&^3, t3
	p.h0, c = bits.Add64(p.h0, q0, 0)
	p.h1, c = bits.Add64(p.h1, q1, c)
	p.h2 += c
	q0, q1 = q0>>2|q1<<62, q1>>2
	p.h0, c = bits.Add64(p.h0, q0, 0)
	p.h1, c = bits.Add64(p.h1, q1, c)
	p.h2 += c
}

// sum returns the tag: (h mod p) + s mod 2^128.
func (p *poly1305) sum(out []byte) {
	// h - p = h + 5 - 2^130; if it does not borrow, h >= p: keep h - p.
	t0, b := bits.Sub64(p.h0, 0xfffffffffffffffb, 0)
	t1, b := bits.Sub64(p.h1, 0xffffffffffffffff, b)
	_, b = bits.Sub64(p.h2, 3, b)
	keep := -b // all ones when h < p
	h0 := p.h0&keep | t0&^keep
	h1 := p.h1&keep | t1&^keep
	h0, c := bits.Add64(h0, p.s0, 0)
	h1, _ = bits.Add64(h1, p.s1, c)
	binary.LittleEndian.PutUint64(out[0:], h0)
	binary.LittleEndian.PutUint64(out[8:], h1)
}

// padded absorbs b followed by zeros to a multiple of 16 bytes.
func (p *poly1305) padded(b []byte) {
	for len(b) >= 16 {
		p.block(b[:16], 1)
		b = b[16:]
	}
	if len(b) > 0 {
		var last [16]byte
		copy(last[:], b)
		p.block(last[:], 1)
	}
}

// chachaPolySeal appends to dst the ChaCha20-Poly1305 encryption of
// plaintext under key and nonce with additional data aad, and the 16-byte
// tag (RFC 8439, section 2.8).
func chachaPolySeal(dst []byte, key *[32]byte, nonce *[12]byte, plaintext, aad []byte) []byte {
	var block [64]byte
	chachaBlock(&block, key, 0, nonce)
	mac := newPoly1305((*[32]byte)(block[:32]))

	n := len(dst)
	dst = append(dst, plaintext...)
	ct := dst[n:]
	for off, ctr := 0, uint32(1); off < len(ct); off, ctr = off+64, ctr+1 {
		chachaBlock(&block, key, ctr, nonce)
		for i := 0; i < 64 && off+i < len(ct); i++ {
			ct[off+i] ^= block[i]
		}
	}
	clear(block[:])

	mac.padded(aad)
	mac.padded(ct)
	var lens [16]byte
	binary.LittleEndian.PutUint64(lens[0:], uint64(len(aad)))
	binary.LittleEndian.PutUint64(lens[8:], uint64(len(ct)))
	mac.block(lens[:], 1)
	var tag [TagSize]byte
	mac.sum(tag[:])
	return append(dst, tag[:]...)
}
