package envelope

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"regexp"
	"strings"
	"testing"
)

func testValues(n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = float64(i)/float64(n) - 0.25 + 1e-9*float64(i*i)
	}
	return v
}

func TestSealIsRandomized(t *testing.T) {
	k := testKey(t, 1)
	a, _ := SealValues(k.Public().HPKE, 1, []float64{0.5})
	b, _ := SealValues(k.Public().HPKE, 1, []float64{0.5})
	if bytes.Equal(a, b) {
		t.Fatal("two seals of the same values are identical (encapsulation must be fresh)")
	}
}

func TestSealRejectsBadKey(t *testing.T) {
	// The all-zero X25519 key is a low-order point: the DH output is zero
	// and HPKE must refuse.
	if _, err := SealValues([32]byte{}, 1, []float64{1}); !errors.Is(err, ErrSeal) {
		t.Fatalf("zero key: err = %v, want ErrSeal", err)
	}
}

var fpRE = regexp.MustCompile(`^[0-9a-f]{4}(-[0-9a-f]{4}){7}$`)

func TestFingerprint(t *testing.T) {
	k1, k2 := testKey(t, 1), testKey(t, 2)
	f1, f2 := k1.Public().Fingerprint(), k2.Public().Fingerprint()
	if !fpRE.MatchString(f1) {
		t.Fatalf("fingerprint %q not 8 groups of 4 hex digits", f1)
	}
	if f1 == f2 {
		t.Fatal("different keys, same fingerprint")
	}
	if again := testKey(t, 1).Public().Fingerprint(); again != f1 {
		t.Fatalf("fingerprint not stable: %q vs %q", f1, again)
	}
	// Each half of the identity matters.
	mixed := PublicKey{Sign: k1.Public().Sign, HPKE: k2.Public().HPKE}
	if f := mixed.Fingerprint(); f == f1 || f == f2 {
		t.Fatal("fingerprint ignores one of the keys")
	}
	// The definition, recomputed independently: SHA-256("blanket/v1 key"
	// || ed25519 || x25519), first 16 bytes, hex in groups of 4.
	pub := k1.Public()
	sum := sha256.Sum256(append(append([]byte("blanket/v1 key"), pub.Sign...), pub.HPKE[:]...))
	h := hex.EncodeToString(sum[:16])
	if want := strings.Join([]string{h[0:4], h[4:8], h[8:12], h[12:16], h[16:20], h[20:24], h[24:28], h[28:32]}, "-"); f1 != want {
		t.Fatalf("fingerprint %q, want %q", f1, want)
	}
}

func TestPublicKeyJSON(t *testing.T) {
	pub := testKey(t, 1).Public()
	b, err := json.Marshal(pub)
	if err != nil {
		t.Fatal(err)
	}
	var got PublicKey
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if !got.Equal(pub) {
		t.Fatal("JSON round trip changed the key")
	}
	var m map[string]string
	_ = json.Unmarshal(b, &m)
	if m["fingerprint"] != pub.Fingerprint() || m["sign"] == "" || m["hpke"] == "" {
		t.Fatalf("JSON fields: %s", b)
	}
	other := testKey(t, 2).Public()
	bad := []string{
		`{"sign":"` + m["sign"] + `","hpke":"` + m["hpke"] + `","fingerprint":"` + other.Fingerprint() + `"}`,
		`{"sign":"AAAA","hpke":"` + m["hpke"] + `"}`,
		`{"sign":"` + m["sign"] + `","hpke":"AAAA"}`,
		`{"sign":"***","hpke":"` + m["hpke"] + `"}`,
		`[]`,
	}
	for _, s := range bad {
		if err := json.Unmarshal([]byte(s), &got); !errors.Is(err, ErrKey) {
			t.Errorf("%s: err = %v, want ErrKey", s, err)
		}
	}
	// Without the fingerprint field the keys alone are accepted.
	if err := json.Unmarshal([]byte(`{"sign":"`+m["sign"]+`","hpke":"`+m["hpke"]+`"}`), &got); err != nil || !got.Equal(pub) {
		t.Fatalf("no fingerprint: %v", err)
	}
	if _, err := json.Marshal(PublicKey{}); err == nil {
		t.Fatal("zero public key marshals")
	}
}

func TestParsePublicKey(t *testing.T) {
	pub := testKey(t, 1).Public()
	p, err := ParsePublicKey(pub.Sign, pub.HPKE[:])
	if err != nil || !p.Equal(pub) {
		t.Fatalf("ParsePublicKey: %v", err)
	}
	if _, err := ParsePublicKey(pub.Sign[:31], pub.HPKE[:]); !errors.Is(err, ErrKey) {
		t.Error("short sign key accepted")
	}
	if _, err := ParsePublicKey(pub.Sign, pub.HPKE[:31]); !errors.Is(err, ErrKey) {
		t.Error("short hpke key accepted")
	}
}

func TestSealedLen(t *testing.T) {
	if SealedLen(157) != 157*8+48 || SealedLen(-1) != -1 || Overhead != 48 {
		t.Fatal("SealedLen")
	}
}

// TestDecodeFiniteness checks the branch-free non-finite test on the
// boundary bit patterns.
func TestDecodeFiniteness(t *testing.T) {
	cases := []struct {
		bits   uint64
		finite bool
	}{
		{0, true},
		{1 << 63, true},             // -0
		{0x7fefffffffffffff, true},  // MaxFloat64
		{0xffefffffffffffff, true},  // -MaxFloat64
		{1, true},                   // smallest subnormal
		{0x7ff0000000000000, false}, // +Inf
		{0xfff0000000000000, false}, // -Inf
		{0x7ff8000000000000, false}, // NaN
		{0x7ff0000000000001, false}, // signaling NaN
		{0xffffffffffffffff, false}, // NaN, all ones
		{0x3ff0000000000000, true},  // 1
	}
	for _, c := range cases {
		var pt [16]byte
		binary.BigEndian.PutUint64(pt[0:], math.Float64bits(0.5))
		binary.BigEndian.PutUint64(pt[8:], c.bits)
		dst := make([]float64, 2)
		if got := DecodeValues(dst, pt[:]); got != c.finite {
			t.Errorf("%#016x: finite = %v, want %v", c.bits, got, c.finite)
		}
		if math.Float64bits(dst[1]) != c.bits || dst[0] != 0.5 {
			t.Errorf("%#016x: decoded %#016x", c.bits, math.Float64bits(dst[1]))
		}
	}
}
