package envelope

import (
	"bytes"
	"crypto/ecdh"
	"encoding/hex"
	"errors"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"
)

func mustHex32(t testing.TB, s string) *[32]byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 32 {
		t.Fatalf("bad hex %q", s)
	}
	return (*[32]byte)(b)
}

// RFC 7748, section 5.2: the two single-step vectors and the iterated one
// (1 and 1,000 iterations; the 1,000,000-iteration one is left out).
func TestX25519RFC7748(t *testing.T) {
	vectors := []struct{ k, u, out string }{
		{"a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4",
			"e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c",
			"c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552"},
		{"4b66e9d4d1b4673c5ad22691957d6af5c11b6421e0ea01d42ca4169e7918ba0d",
			"e5210f12786811d3f4b7959d0538ae2c31dbe7106fc03c3efc4cd549c715a493",
			"95cbde9476e8907d7aade45cb4b873f88b595a68799fa152e6f8f7647aac7957"},
	}
	for i, v := range vectors {
		var out [32]byte
		if err := x25519(&out, mustHex32(t, v.k), mustHex32(t, v.u)); err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(out[:]); got != v.out {
			t.Errorf("vector %d: %s, want %s", i, got, v.out)
		}
	}
	k, u := [32]byte{9}, [32]byte{9}
	iterations := map[int]string{
		1:    "422c8e7a6227d7bca1350b3e2bb7279f7897b87bb6854b783c60e80311ae3079",
		1000: "684cf59ba83309552800ef566f2f4d3c1c3887c49360e3875f2eb94d99532c51",
	}
	for i := 1; i <= 1000; i++ {
		var out [32]byte
		if err := x25519(&out, &k, &u); err != nil {
			t.Fatal(err)
		}
		u, k = k, out
		if want, ok := iterations[i]; ok && hex.EncodeToString(k[:]) != want {
			t.Fatalf("after %d iterations: %x, want %s", i, k, want)
		}
	}
}

// x25519 agrees with crypto/ecdh on random scalars with the base point and
// random points (u-coordinates of any 32 bytes: on the curve or its twist,
// top bit set, non-canonical values >= p), and on edge-case inputs.
func TestX25519MatchesCryptoECDH(t *testing.T) {
	n := 2000
	if testing.Short() {
		n = 100
	}
	rng := rand.New(rand.NewPCG(1, 2))
	randBytes := func() (b [32]byte) {
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	check := func(k, u [32]byte) {
		t.Helper()
		priv, err := ecdh.X25519().NewPrivateKey(k[:])
		if err != nil {
			t.Fatal(err)
		}
		var got [32]byte
		gotErr := x25519(&got, &k, &u)
		pub, err := ecdh.X25519().NewPublicKey(u[:])
		if err != nil {
			t.Fatal(err)
		}
		want, wantErr := priv.ECDH(pub)
		if (gotErr != nil) != (wantErr != nil) {
			t.Fatalf("k %x u %x: err %v, crypto/ecdh err %v", k, u, gotErr, wantErr)
		}
		if wantErr == nil && !bytes.Equal(got[:], want) {
			t.Fatalf("k %x u %x: %x, crypto/ecdh %x", k, u, got, want)
		}
		if wantErr != nil && !errors.Is(gotErr, errLowOrder) {
			t.Fatalf("k %x u %x: err %v, want errLowOrder", k, u, gotErr)
		}
	}
	for range n {
		k := randBytes()
		// Public key: against ecdh's PublicKey.
		var pub [32]byte
		if err := x25519Base(&pub, &k); err != nil {
			t.Fatal(err)
		}
		priv, _ := ecdh.X25519().NewPrivateKey(k[:])
		if !bytes.Equal(pub[:], priv.PublicKey().Bytes()) {
			t.Fatalf("base k %x: %x, crypto/ecdh %x", k, pub, priv.PublicKey().Bytes())
		}
		check(k, randBytes())
	}
	// Edge cases: p-1, p, p+1, 2^255-1 (top bit masked: p+18), all ones,
	// 0, 1 (low order: all-zero result), the order-8 points' u.
	p := [32]byte{0xed}
	for i := 1; i < 31; i++ {
		p[i] = 0xff
	}
	p[31] = 0x7f
	pm1, pp1 := p, p
	pm1[0]--
	pp1[0]++
	ones := [32]byte{}
	for i := range ones {
		ones[i] = 0xff
	}
	edges := [][32]byte{pm1, p, pp1, ones, {}, {1}, {9},
		*mustHex32(t, "e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800"),
		*mustHex32(t, "5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157"),
		*mustHex32(t, "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"),
	}
	scalars := [][32]byte{{}, ones, randBytes()}
	for _, k := range scalars {
		for _, u := range edges {
			check(k, u)
		}
	}
}

func BenchmarkX25519(b *testing.B) {
	k, u := [32]byte{1, 2, 3}, [32]byte{9}
	b.Run("own", func(b *testing.B) {
		var out [32]byte
		warmUp(b, func() error { return x25519(&out, &k, &u) })
		for b.Loop() {
			if err := x25519(&out, &k, &u); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("crypto-ecdh", func(b *testing.B) {
		priv, _ := ecdh.X25519().NewPrivateKey(k[:])
		pub, _ := ecdh.X25519().NewPublicKey(u[:])
		warmUp(b, func() error { _, err := priv.ECDH(pub); return err })
		for b.Loop() {
			if _, err := priv.ECDH(pub); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkX25519Pair interleaves x25519 and crypto/ecdh op by op and
// reports their CPU-time ratio (own/ecdh), as BenchmarkSealSenderPair.
func BenchmarkX25519Pair(b *testing.B) {
	k, u := [32]byte{1, 2, 3}, [32]byte{9}
	priv, _ := ecdh.X25519().NewPrivateKey(k[:])
	pub, _ := ecdh.X25519().NewPublicKey(u[:])
	var out [32]byte
	warmUp(b, func() error { return x25519(&out, &k, &u) })
	warmUp(b, func() error { _, err := priv.ECDH(pub); return err })
	lockThread()
	defer unlockThread()
	var own, std time.Duration
	for b.Loop() {
		t0 := cpuNow()
		if err := x25519(&out, &k, &u); err != nil {
			b.Fatal(err)
		}
		t1 := cpuNow()
		if _, err := priv.ECDH(pub); err != nil {
			b.Fatal(err)
		}
		t2 := cpuNow()
		own += t1 - t0
		std += t2 - t1
	}
	b.ReportMetric(float64(own)/float64(std), "own/ecdh")
	b.ReportMetric(float64(own.Nanoseconds())/float64(b.N), "own-cpu-ns/op")
	b.ReportMetric(float64(std.Nanoseconds())/float64(b.N), "ecdh-cpu-ns/op")
}

// feBig returns the integer an fe represents (not reduced).
func feBig(f *fe) *big.Int {
	v := new(big.Int)
	for i := 9; i >= 0; i-- {
		v.Lsh(v, uint(26-i&1)) // shift by the width of limb i
		v.Add(v, big.NewInt(int64(f[i])))
	}
	return v
}

// feMul and feSquare agree with math/big modulo p on the largest limbs
// they may be given (what feSub can produce: a carried limb plus the limb
// of 2p) and on random limbs below that bound, and their output is
// carried; feToBytes is canonical.
func TestFeArithmeticBounds(t *testing.T) {
	p := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))
	// Largest limbs feSub can output: (2^26 + 2^16) + twoPEven etc.; use
	// the largest of all for every limb.
	const maxLimb = 1<<26 + 1<<16 + twoPEven
	rng := rand.New(rand.NewPCG(5, 6))
	elems := []fe{}
	var top fe
	for i := range top {
		top[i] = maxLimb
	}
	elems = append(elems, top, top, fe{})
	for range 300 {
		var f fe
		for i := range f {
			f[i] = uint32(rng.Uint64N(maxLimb + 1))
		}
		elems = append(elems, f)
	}
	carried := func(h *fe) bool {
		for i, l := range h {
			lim := uint32(1) << (26 - i&1)
			if i == 1 {
				lim += 1 << 16
			}
			if l >= lim {
				return false
			}
		}
		return true
	}
	toBytes := func(v *big.Int) [32]byte {
		var b [32]byte
		r := new(big.Int).Mod(v, p).FillBytes(b[:])
		for i := range 16 {
			r[i], r[31-i] = r[31-i], r[i]
		}
		return b
	}
	for i := 1; i < len(elems); i++ {
		f, g := elems[i-1], elems[i]
		var h fe
		feMul(&h, &f, &g)
		want := new(big.Int).Mul(feBig(&f), feBig(&g))
		var got [32]byte
		feToBytes(&got, &h)
		if !carried(&h) || got != toBytes(want) {
			t.Fatalf("feMul(%v, %v) = %v", f, g, h)
		}
		feSquare(&h, &f)
		want.Mul(feBig(&f), feBig(&f))
		feToBytes(&got, &h)
		if !carried(&h) || got != toBytes(want) {
			t.Fatalf("feSquare(%v) = %v", f, h)
		}
		feMul121665(&h, &f)
		want.Mul(feBig(&f), big.NewInt(121665))
		feToBytes(&got, &h)
		if !carried(&h) || got != toBytes(want) {
			t.Fatalf("feMul121665(%v) = %v", f, h)
		}
	}
	// feToBytes of values at and around p, 2^255 - 1 (carried forms).
	for _, v := range []*big.Int{p, new(big.Int).Sub(p, big.NewInt(1)), new(big.Int).Add(p, big.NewInt(18)), big.NewInt(0)} {
		var f fe
		w := new(big.Int).Set(v)
		for i := range f {
			width := uint(26 - i&1)
			f[i] = uint32(new(big.Int).And(w, big.NewInt(1<<width-1)).Int64())
			w.Rsh(w, width)
		}
		var got [32]byte
		feToBytes(&got, &f)
		if got != toBytes(v) {
			t.Fatalf("feToBytes(%v) = %x", v, got)
		}
	}
}
