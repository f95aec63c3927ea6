package pine

import (
	"testing"

	"github.com/blanket-fl/blanket/shared/noise"
)

// TestRootsOfUnity: the roots circl's NTT uses are VDAF-11's alpha_i =
// gen^(GEN_ORDER / P) with gen = 7^4294967295 (Section 6.1.3, Table 3).
func TestRootsOfUnity(t *testing.T) {
	gen := pow(fpU(7), 4294967295)
	for l := uint(0); l <= 32; l++ {
		want := pow(gen, uint64(1)<<(32-l))
		var got fp
		got.SetRootOfUnityTwoN(l)
		if !got.IsEqual(&want) {
			t.Fatalf("root of order 2^%d differs from gen^(2^32/2^%d)", l, l)
		}
	}
	if g := pow(gen, 1<<31); g.IsOne() {
		t.Fatal("gen does not have order 2^32")
	}
}

// TestFieldConversions: signed and unsigned round trips, bits.
func TestFieldConversions(t *testing.T) {
	src := noise.NewSeeded(41)
	for range 1000 {
		v := int64(src.Uint64()) >> (1 + src.Uint64()%63) // |v| <= 2^62 < q/2
		z := fpI(v)
		if got := signed(&z); got != v {
			t.Fatalf("signed(fpI(%d)) = %d", v, got)
		}
		u := src.Uint64() % modulus
		z = fpU(u)
		if u64(&z) != u {
			t.Fatalf("u64(fpU(%d))", u)
		}
		b := make([]fp, 40)
		w := u & (1<<40 - 1)
		bitsOf(b, w)
		if r := fromBits(b); u64(&r) != w {
			t.Fatalf("bits round trip of %d", w)
		}
	}
	if z := fpI(-1); u64(&z) != modulus-1 {
		t.Fatal("fpI(-1) is not q-1")
	}
	m := fpU(modulus / 2)
	m1 := fpU(modulus/2 + 1)
	if signed(&m) <= 0 || signed(&m1) >= 0 {
		t.Fatal("the sign boundary is not floor(q/2)")
	}
}
