package envelope

import (
	"bytes"
	"crypto/ecdh"
	"encoding/hex"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"
)

// The fixed-base multiplication agrees with crypto/ecdh's public keys (and
// with the ladder) on random scalars and edge-case scalars, and with the
// RFC 7748 section 6.1 key pairs.
func TestX25519BaseTable(t *testing.T) {
	for _, v := range []struct{ k, pub string }{
		{"77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a",
			"8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"},
		{"5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb",
			"de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f"},
	} {
		var out [32]byte
		if err := x25519BaseTable(&out, mustHex32(t, v.k)); err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(out[:]); got != v.pub {
			t.Errorf("public key of %s: %s, want %s", v.k, got, v.pub)
		}
	}
	n := 3000
	if testing.Short() {
		n = 200
	}
	rng := rand.New(rand.NewPCG(7, 8))
	scalars := [][32]byte{{}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
	// Scalars whose radix-16 digits are all 8 or all 7 (carries through
	// every digit).
	var eights, sevens [32]byte
	for i := range eights {
		eights[i], sevens[i] = 0x88, 0x77
	}
	scalars = append(scalars, eights, sevens)
	for range n {
		var k [32]byte
		for i := range k {
			k[i] = byte(rng.Uint32())
		}
		scalars = append(scalars, k)
	}
	for _, k := range scalars {
		var got, ladder [32]byte
		if err := x25519BaseTable(&got, &k); err != nil {
			t.Fatal(err)
		}
		priv, err := ecdh.X25519().NewPrivateKey(k[:])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[:], priv.PublicKey().Bytes()) {
			t.Fatalf("k %x: %x, crypto/ecdh %x", k, got, priv.PublicKey().Bytes())
		}
		if err := x25519(&ladder, &k, &basePoint); err != nil || ladder != got {
			t.Fatalf("k %x: table %x, ladder %x (%v)", k, got, ladder, err)
		}
	}
}

// B is on the curve -x^2 + y^2 = 1 + d x^2 y^2.
func TestEdwardsBaseOnCurve(t *testing.T) {
	edOnce.Do(edInit)
	var x2, y2, lhs, rhs, one, d, x2y2 fe
	one[0] = 1
	feSquare(&x2, &edBase.X)
	feSquare(&y2, &edBase.Y)
	feSubC(&lhs, &y2, &x2)
	feMul(&x2y2, &x2, &y2)
	var half fe // d = 2d / 2: multiply 2d by the inverse of 2
	half[0] = 2
	feInvert(&half, &half)
	feMul(&d, &ed2d, &half)
	feMul(&rhs, &d, &x2y2)
	feAddC(&rhs, &rhs, &one)
	var a, b [32]byte
	feToBytes(&a, &lhs)
	feToBytes(&b, &rhs)
	if a != b {
		t.Fatalf("B is not on the curve: %x != %x", a, b)
	}
}

// BenchmarkX25519BasePair interleaves the fixed-base table and the ladder
// for a public key op by op and reports their CPU-time ratio (table/ladder).
func BenchmarkX25519BasePair(b *testing.B) {
	k := [32]byte{1, 2, 3}
	var out [32]byte
	warmUp(b, func() error { return x25519BaseTable(&out, &k) })
	warmUp(b, func() error { return x25519(&out, &k, &basePoint) })
	lockThread()
	defer unlockThread()
	var tab, lad time.Duration
	for b.Loop() {
		t0 := cpuNow()
		if err := x25519BaseTable(&out, &k); err != nil {
			b.Fatal(err)
		}
		t1 := cpuNow()
		if err := x25519(&out, &k, &basePoint); err != nil {
			b.Fatal(err)
		}
		t2 := cpuNow()
		tab += t1 - t0
		lad += t2 - t1
	}
	b.ReportMetric(float64(tab)/float64(lad), "table/ladder")
	b.ReportMetric(float64(tab.Nanoseconds())/float64(b.N), "table-cpu-ns/op")
	b.ReportMetric(float64(lad.Nanoseconds())/float64(b.N), "ladder-cpu-ns/op")
}

// X25519 through a fixed table of the peer's point agrees with crypto/ecdh
// for every u that maps to the Edwards curve (random u: about half; the
// others are on the twist and must be refused), and for the edge cases of
// TestX25519MatchesCryptoECDH.
func TestX25519FixedPeer(t *testing.T) {
	n := 60
	if testing.Short() {
		n = 12
	}
	rng := rand.New(rand.NewPCG(9, 10))
	randBytes := func() (b [32]byte) {
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	us := [][32]byte{testKey(t, 1).Public().HPKE, {}, {1}, {9},
		*mustHex32(t, "e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800"),
		*mustHex32(t, "5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157"),
		*mustHex32(t, "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"), // p - 1 = -1
	}
	for range n {
		us = append(us, randBytes())
	}
	onCurve := 0
	for i, u := range us {
		p, ok := edFromMontgomery(&u)
		if i == 0 && !ok {
			t.Fatal("the aggregator's key does not map to the Edwards curve")
		}
		if i == 6 && ok {
			t.Fatal("u = -1 mapped")
		}
		pub, err := ecdh.X25519().NewPublicKey(u[:])
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			// Must be a twist point: u^3 + A u^2 + u is not a square.
			continue
		}
		onCurve++
		tab := newEdFixedTable(p)
		for range 5 {
			k := randBytes()
			priv, _ := ecdh.X25519().NewPrivateKey(k[:])
			want, wantErr := priv.ECDH(pub)
			var got [32]byte
			gotErr := x25519Fixed(&got, &k, tab)
			if (gotErr != nil) != (wantErr != nil) || (wantErr == nil && !bytes.Equal(got[:], want)) {
				t.Fatalf("u %x k %x: %x (%v), crypto/ecdh %x (%v)", u, k, got, gotErr, want, wantErr)
			}
		}
	}
	if onCurve < 6+n/4 || onCurve > 6+3*n/4 {
		t.Fatalf("%d of %d points mapped, want the edge cases and about half the random ones", onCurve, len(us))
	}
}

// Points refused by edFromMontgomery are exactly those not on the curve:
// u^3 + 486662 u^2 + u is a non-square (Euler's criterion with math/big).
func TestEdFromMontgomeryRefusesOnlyTwist(t *testing.T) {
	p := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))
	exp := new(big.Int).Rsh(new(big.Int).Sub(p, big.NewInt(1)), 1)
	rng := rand.New(rand.NewPCG(11, 12))
	for range 40 {
		var u [32]byte
		for i := range u {
			u[i] = byte(rng.Uint32())
		}
		u[31] &= 0x7f
		be := make([]byte, 32)
		for i := range be {
			be[i] = u[31-i]
		}
		x := new(big.Int).SetBytes(be)
		rhs := new(big.Int).Mul(x, x)
		rhs.Mul(rhs, x)
		rhs.Add(rhs, new(big.Int).Mul(big.NewInt(486662), new(big.Int).Mul(x, x)))
		rhs.Add(rhs, x)
		rhs.Mod(rhs, p)
		square := rhs.Sign() == 0 || new(big.Int).Exp(rhs, exp, p).Cmp(big.NewInt(1)) == 0
		if _, ok := edFromMontgomery(&u); ok != square {
			t.Fatalf("u %x: mapped %v, on the curve %v", u, ok, square)
		}
	}
}
