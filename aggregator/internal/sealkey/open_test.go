package sealkey

import (
	"bytes"
	"crypto/ecdh"
	"crypto/hpke"
	"errors"
	"math"
	"testing"

	"github.com/blanket-fl/blanket/shared/envelope"
)

func testKey(t testing.TB, n byte) *PrivateKey {
	t.Helper()
	k, err := DeriveKey([32]byte{n})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func testValues(n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = float64(i)/float64(n) - 0.25 + 1e-9*float64(i*i)
	}
	return v
}

func TestSealOpenRoundTrip(t *testing.T) {
	k := testKey(t, 1)
	for _, n := range []int{0, 1, 3, 157, 7850} {
		vals := testValues(n)
		vals = append(vals, math.Copysign(0, -1), math.SmallestNonzeroFloat64, math.MaxFloat64)[:n]
		sealed, err := envelope.SealValues(k.Public().HPKE, 7, vals)
		if err != nil {
			t.Fatal(err)
		}
		if len(sealed) != envelope.SealedLen(n) || envelope.SealedLen(n) != 8*n+envelope.Overhead {
			t.Fatalf("n=%d: sealed %d bytes, envelope.SealedLen %d", n, len(sealed), envelope.SealedLen(n))
		}
		// nil dst: any length; allocated result.
		got, err := k.OpenValues(7, sealed, nil)
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if len(got) != n {
			t.Fatalf("n=%d: got %d values", n, len(got))
		}
		for i := range vals {
			if math.Float64bits(got[i]) != math.Float64bits(vals[i]) {
				t.Fatalf("n=%d: value %d = %v, want %v", n, i, got[i], vals[i])
			}
		}
		// A dst of the right length is filled in place.
		if n > 0 {
			dst := make([]float64, n)
			got2, err := k.OpenValues(7, sealed, dst)
			if err != nil {
				t.Fatal(err)
			}
			if &got2[0] != &dst[0] {
				t.Fatalf("n=%d: OpenValues did not reuse dst", n)
			}
			// dst[:0] with capacity is reused too.
			got3, err := k.OpenValues(7, sealed, dst[:0])
			if err != nil || &got3[0] != &dst[0] || len(got3) != n {
				t.Fatalf("n=%d: dst[:0] not reused (err %v)", n, err)
			}
		}
	}
}

func TestOpenRejectsTampering(t *testing.T) {
	k := testKey(t, 1)
	sealed, err := envelope.SealValues(k.Public().HPKE, 3, testValues(5))
	if err != nil {
		t.Fatal(err)
	}
	// Every byte: enc [0,32), ciphertext [32, 72), tag [72, 88).
	for i := range sealed {
		for _, mask := range []byte{0x01, 0x80} {
			c := bytes.Clone(sealed)
			c[i] ^= mask
			if _, err := k.OpenValues(3, c, nil); !errors.Is(err, envelope.ErrOpen) {
				t.Fatalf("byte %d ^ %#x: err = %v, want envelope.ErrOpen", i, mask, err)
			}
		}
	}
	if _, err := k.OpenValues(3, sealed, nil); err != nil {
		t.Fatalf("original no longer opens: %v", err)
	}
}

func TestOpenRejectsWrongRoundKeyLength(t *testing.T) {
	k, other := testKey(t, 1), testKey(t, 2)
	sealed, err := envelope.SealValues(k.Public().HPKE, 10, testValues(4))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []uint64{0, 9, 11, 10 + 1<<32, math.MaxUint64} {
		if _, err := k.OpenValues(r, sealed, nil); !errors.Is(err, envelope.ErrOpen) {
			t.Errorf("round %d: err = %v, want envelope.ErrOpen", r, err)
		}
	}
	if _, err := other.OpenValues(10, sealed, nil); !errors.Is(err, envelope.ErrOpen) {
		t.Errorf("wrong key: err = %v, want envelope.ErrOpen", err)
	}
	cases := map[string][]byte{
		"empty":       nil,
		"short":       sealed[:envelope.Overhead-1],
		"truncated":   sealed[:len(sealed)-1],
		"not 8-multi": append(bytes.Clone(sealed), 0),
		"extra value": append(bytes.Clone(sealed), make([]byte, 8)...),
	}
	for name, c := range cases {
		if _, err := k.OpenValues(10, c, nil); !errors.Is(err, envelope.ErrOpen) {
			t.Errorf("%s: err = %v, want envelope.ErrOpen", name, err)
		}
	}
	// Expected count from len(dst).
	if _, err := k.OpenValues(10, sealed, make([]float64, 3)); !errors.Is(err, envelope.ErrOpen) {
		t.Errorf("dst of length 3 for 4 values: err = %v, want envelope.ErrOpen", err)
	}
}

func TestOpenNonFinite(t *testing.T) {
	k := testKey(t, 1)
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		sealed, err := envelope.SealValues(k.Public().HPKE, 1, []float64{0.5, v})
		if err != nil {
			t.Fatal(err)
		}
		_, err = k.OpenValues(1, sealed, nil)
		if !errors.Is(err, envelope.ErrNonFinite) || errors.Is(err, envelope.ErrOpen) {
			t.Errorf("%v: err = %v, want envelope.ErrNonFinite and not envelope.ErrOpen", v, err)
		}
	}
}

func TestSignVerify(t *testing.T) {
	k, other := testKey(t, 1), testKey(t, 2)
	msg := []byte("announcement bytes: round 1, model ...")
	sig := k.Sign(msg)
	if !envelope.Verify(k.Public(), msg, sig) {
		t.Fatal("valid signature rejected")
	}
	if envelope.Verify(other.Public(), msg, sig) {
		t.Fatal("signature verified under another key")
	}
	for i := range msg {
		m := bytes.Clone(msg)
		m[i] ^= 1
		if envelope.Verify(k.Public(), m, sig) {
			t.Fatalf("message byte %d flipped: still verifies", i)
		}
	}
	for i := range sig {
		s := sig
		s[i] ^= 1
		if envelope.Verify(k.Public(), msg, s) {
			t.Fatalf("signature byte %d flipped: still verifies", i)
		}
	}
	if envelope.Verify(envelope.PublicKey{}, msg, sig) {
		t.Fatal("zero public key verifies")
	}
}

func TestKeyMarshalRoundTrip(t *testing.T) {
	k, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	b, err := k.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != PrivateKeySize {
		t.Fatalf("marshal: %d bytes", len(b))
	}
	k2, err := UnmarshalPrivateKey(b)
	if err != nil {
		t.Fatal(err)
	}
	if !k2.Public().Equal(k.Public()) {
		t.Fatal("public key changed across marshal")
	}
	sealed, _ := envelope.SealValues(k.Public().HPKE, 5, []float64{1, 2})
	if v, err := k2.OpenValues(5, sealed, nil); err != nil || v[1] != 2 {
		t.Fatalf("unmarshaled key does not open: %v %v", v, err)
	}
	if !envelope.Verify(k.Public(), []byte("x"), k2.Sign([]byte("x"))) {
		t.Fatal("unmarshaled key signs differently")
	}
	for _, bad := range [][]byte{nil, b[:PrivateKeySize-1], append(bytes.Clone(b), 0), append([]byte{2}, b[1:]...)} {
		if _, err := UnmarshalPrivateKey(bad); !errors.Is(err, envelope.ErrKey) {
			t.Errorf("bad key %x: err = %v", bad, err)
		}
	}
	var zero PrivateKey
	if _, err := zero.MarshalBinary(); !errors.Is(err, envelope.ErrKey) {
		t.Errorf("zero key marshals: %v", err)
	}
	k3, _ := GenerateKey()
	if k3.Public().Equal(k.Public()) {
		t.Fatal("two generated keys are equal")
	}
}

// TestInteropRawHPKE checks the suite and info against crypto/hpke used
// directly, as a non-Go implementation following docs/protocol.md would.
func TestInteropRawHPKE(t *testing.T) {
	k := testKey(t, 1)
	pub := k.Public()
	pk, err := hpke.DHKEM(ecdh.X25519()).NewPublicKey(pub.HPKE[:])
	if err != nil {
		t.Fatal(err)
	}
	info := append([]byte("blanket/v1 values round "), 0, 0, 0, 0, 0, 0, 0x01, 0x02)
	pt := []byte{0x3f, 0xf0, 0, 0, 0, 0, 0, 0} // 1.0 big-endian
	ct, err := hpke.Seal(pk, hpke.HKDFSHA256(), hpke.AES128GCM(), info, pt)
	if err != nil {
		t.Fatal(err)
	}
	v, err := k.OpenValues(0x0102, ct, nil)
	if err != nil || len(v) != 1 || v[0] != 1 {
		t.Fatalf("raw HPKE ciphertext: %v %v", v, err)
	}
	// And envelope.SealValues output opens with raw HPKE.
	sealed, _ := envelope.SealValues(pub.HPKE, 0x0102, []float64{1})
	out, err := hpke.Open(k.hpke, hpke.HKDFSHA256(), hpke.AES128GCM(), info, sealed)
	if err != nil || !bytes.Equal(out, pt) {
		t.Fatalf("raw HPKE open of envelope.SealValues: %x %v", out, err)
	}
}
