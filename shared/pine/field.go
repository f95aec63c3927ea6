package pine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"

	"github.com/cloudflare/circl/vdaf/prio3/arith/fp64"
)

// Field64 of draft-irtf-cfrg-vdaf-11, Section 6.1: q = 2^32 * (2^32 - 1) + 1,
// elements encoded as 8 little-endian bytes. Arithmetic is circl's fp64
// (Montgomery form); the helpers below are the only conversions to and from
// integers and bytes.

const (
	modulus     = uint64(0xffffffff00000001)
	elemSize    = 8
	genOrderLog = 32 // GEN_ORDER = 2^32
)

type fp = fp64.Fp

var errFieldOverflow = errors.New("field element not below the modulus")

// fpU returns v mod q as a field element.
func fpU(v uint64) fp {
	if v >= modulus {
		v -= modulus
	}
	var z fp
	_ = z.SetUint64(v) // v < modulus: cannot fail
	return z
}

// fpI returns v mod q for a signed v.
func fpI(v int64) fp {
	if v >= 0 {
		return fpU(uint64(v))
	}
	// -v may be 2^63, still below q.
	z := fpU(uint64(-(v + 1)) + 1)
	var r fp
	r.Sub(&r, &z)
	return r
}

// u64 returns the canonical integer of z, in [0, q).
func u64(z *fp) uint64 {
	v, _ := z.GetUint64() // fp64 never returns an error here
	return v
}

// signed returns the representative of z in (-q/2, q/2], as VDAF's
// decode_float_from_field does: values above floor(q/2) are negative.
func signed(z *fp) int64 {
	v := u64(z)
	if v > modulus/2 {
		return -int64(modulus - v)
	}
	return int64(v)
}

func fpOne() fp { var z fp; z.SetOne(); return z }

// appendVec appends the little-endian encoding of v (encode_vec).
func appendVec(dst []byte, v []fp) []byte {
	for i := range v {
		dst = binary.LittleEndian.AppendUint64(dst, u64(&v[i]))
	}
	return dst
}

// decodeVec parses len(dst) field elements from b (decode_vec), rejecting
// a wrong length or a non-canonical element.
func decodeVec(dst []fp, b []byte) error {
	if len(b) != elemSize*len(dst) {
		return fmt.Errorf("pine: %d bytes for %d field elements", len(b), len(dst))
	}
	for i := range dst {
		x := binary.LittleEndian.Uint64(b[elemSize*i:])
		if x >= modulus {
			return fmt.Errorf("pine: element %d: %w", i, errFieldOverflow)
		}
		_ = dst[i].SetUint64(x)
	}
	return nil
}

// bitsOf writes the n low bits of val as field elements 0/1, LSB first
// (encode_into_bit_vector).
func bitsOf(dst []fp, val uint64) {
	one := fpOne()
	for l := range dst {
		if l < 64 && (val>>uint(l))&1 == 1 {
			dst[l] = one
		} else {
			dst[l] = fp{}
		}
	}
}

// fromBits returns sum 2^l * v[l] (decode_from_bit_vector); len(v) < 64.
func fromBits(v []fp) fp {
	var acc fp
	for l := len(v) - 1; l >= 0; l-- {
		acc.Add(&acc, &acc)
		acc.AddAssign(&v[l])
	}
	return acc
}

// pow returns x^e.
func pow(x fp, e uint64) fp {
	r := fpOne()
	for e > 0 {
		if e&1 == 1 {
			r.MulAssign(&x)
		}
		x.Sqr(&x)
		e >>= 1
	}
	return r
}

// inv returns x^-1 (x != 0).
func inv(x fp) fp { var z fp; z.Inv(&x); return z }

func mul64(a, b uint64) (hi, lo uint64)     { return bits.Mul64(a, b) }
func add64(a, b uint64) (sum, carry uint64) { return bits.Add64(a, b, 0) }
