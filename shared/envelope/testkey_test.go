package envelope

import (
	"crypto/ecdh"
	"crypto/hpke"
	"crypto/sha256"
	"fmt"
	"math"
	"testing"
)

// testPriv is this package's own test opener: the aggregator's opener
// (aggregator/internal/sealkey) and envelopetest both import envelope, so
// envelope's internal tests cannot use them. The sealing tests here open
// with it to check the round trip; the opener's own contract (tampering,
// wrong round or key, lengths, non-finite values) is tested against the
// real opener in aggregator/internal/sealkey, which also checks that it and
// envelopetest agree on everything envelope seals.
type testPriv struct {
	hpke hpke.PrivateKey
	pub  PublicKey
}

// testKey derives the X25519 key of seed {n} as sealkey.DeriveKey does
// (the Ed25519 half is unused here and left as the zero key, except its
// public half for the fingerprint and JSON tests: the X25519 public key
// repeated, a valid Ed25519 encoding length).
func testKey(t testing.TB, n byte) *testPriv {
	t.Helper()
	seed := [32]byte{n}
	x := sha256.Sum256(append([]byte("blanket/v1 hpke key"), seed[:]...))
	xk, err := ecdh.X25519().NewPrivateKey(x[:])
	if err != nil {
		t.Fatal(err)
	}
	hk, err := hpke.NewDHKEMPrivateKey(xk)
	if err != nil {
		t.Fatal(err)
	}
	k := &testPriv{hpke: hk}
	copy(k.pub.HPKE[:], xk.PublicKey().Bytes())
	s := sha256.Sum256(append([]byte("blanket/v1 sign key"), seed[:]...))
	k.pub.Sign = s[:]
	return k
}

func (k *testPriv) Public() PublicKey { return k.pub }

// testKDF and testAEAD are the suite's (Suite, which exists natively only:
// these tests also run under js, where envelope links no crypto/hpke).
var testKDF, testAEAD = hpke.HKDFSHA256(), hpke.AES128GCM()

// scalar returns the key's X25519 private scalar.
func (k *testPriv) scalar(t testing.TB) [32]byte {
	t.Helper()
	b, err := k.hpke.Bytes()
	if err != nil || len(b) != 32 {
		t.Fatalf("private key bytes: %d, %v", len(b), err)
	}
	return [32]byte(b)
}

func (k *testPriv) OpenValues(round uint64, sealed []byte, dst []float64) ([]float64, error) {
	if len(sealed) < Overhead || (len(sealed)-Overhead)%8 != 0 {
		return nil, fmt.Errorf("%w: sealed length %d", ErrOpen, len(sealed))
	}
	n := (len(sealed) - Overhead) / 8
	if len(dst) > 0 && len(dst) != n {
		return nil, fmt.Errorf("%w: %d values, want %d", ErrOpen, n, len(dst))
	}
	pt, err := hpke.Open(k.hpke, testKDF, testAEAD, ValuesInfo(round), sealed)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrOpen, err)
	}
	if cap(dst) >= n {
		dst = dst[:n]
	} else {
		dst = make([]float64, n)
	}
	if !DecodeValues(dst, pt) {
		return nil, fmt.Errorf("%w: round %d", ErrNonFinite, round)
	}
	return dst, nil
}

func (k *testPriv) OpenEach(round uint64, sealed [][]byte, dst []float64) ([]float64, []error) {
	n := len(sealed)
	if cap(dst) >= n {
		dst = dst[:n]
	} else {
		dst = make([]float64, n)
	}
	var errs []error
	for i, c := range sealed {
		var err error
		if len(c) != Width1Len {
			err = fmt.Errorf("%w: message %d: length %d", ErrOpen, i, len(c))
		} else {
			_, err = k.OpenValues(round, c, dst[i:i+1])
		}
		if err != nil {
			if errs == nil {
				errs = make([]error, n)
			}
			errs[i], dst[i] = err, math.NaN()
		}
	}
	return dst, errs
}

// openRaw opens a message sealed under info (a share, say) with crypto/hpke.
func openRaw(k *testPriv, info, sealed []byte) ([]byte, error) {
	return hpke.Open(k.hpke, testKDF, testAEAD, info, sealed)
}
