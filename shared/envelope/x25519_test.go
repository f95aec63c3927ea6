package envelope

import (
	"bytes"
	"crypto/ecdh"
	"encoding/hex"
	"errors"
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
// reports their time ratio (own/ecdh), which load drift on a shared
// machine hits alike.
func BenchmarkX25519Pair(b *testing.B) {
	k, u := [32]byte{1, 2, 3}, [32]byte{9}
	priv, _ := ecdh.X25519().NewPrivateKey(k[:])
	pub, _ := ecdh.X25519().NewPublicKey(u[:])
	var out [32]byte
	warmUp(b, func() error { return x25519(&out, &k, &u) })
	warmUp(b, func() error { _, err := priv.ECDH(pub); return err })
	var own, std time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := x25519(&out, &k, &u); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := priv.ECDH(pub); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		own += t1.Sub(t0)
		std += t2.Sub(t1)
	}
	b.ReportMetric(float64(own)/float64(std), "own/ecdh")
	b.ReportMetric(float64(own.Nanoseconds())/float64(b.N), "own-ns/op")
	b.ReportMetric(float64(std.Nanoseconds())/float64(b.N), "ecdh-ns/op")
}
