// Package envelopetest provides openers for tests: a stand-in for the
// aggregator's key pair (Key: signs announcements, opens sealed values and
// leader shares) and for the relay's helper key (HelperKey: opens helper
// shares), so that the tests of the relay, the clients and the scripts can
// check what they sealed with shared/envelope, as net/http/httptest
// stands in for a server.
//
// It is for tests only: production code must not import it (the real
// keys are aggregator/internal/sealkey and relay/internal/helperkey, which
// only their owners link), and relay/main_test.go checks with go list
// -deps that neither the relay nor the wasm client links it. The openers
// here are deliberately plain (sequential, no buffer reuse); they use
// envelope's suite and info strings, and aggregator/internal/sealkey's
// tests check that they agree with the aggregator's opener on everything
// envelope seals.
package envelopetest

import (
	"crypto/ecdh"
	"crypto/ed25519"
	"crypto/hpke"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/shared/envelope"
)

// Key is a test aggregator key pair.
type Key struct {
	sign ed25519.PrivateKey
	hpke hpke.PrivateKey
	pub  envelope.PublicKey
}

// DeriveKey returns the test key pair derived from seed exactly as
// aggregator/internal/sealkey.DeriveKey derives the aggregator's: the
// Ed25519 seed is SHA-256("blanket/v1 sign key" || seed), the X25519
// scalar SHA-256("blanket/v1 hpke key" || seed).
func DeriveKey(seed [32]byte) (*Key, error) {
	s := sha256.Sum256(append([]byte("blanket/v1 sign key"), seed[:]...))
	x := sha256.Sum256(append([]byte("blanket/v1 hpke key"), seed[:]...))
	xk, err := ecdh.X25519().NewPrivateKey(x[:])
	if err != nil {
		return nil, fmt.Errorf("%w: x25519 private key: %v", envelope.ErrKey, err)
	}
	hk, err := hpke.NewDHKEMPrivateKey(xk)
	if err != nil {
		return nil, fmt.Errorf("%w: hpke private key: %v", envelope.ErrKey, err)
	}
	sk := ed25519.NewKeyFromSeed(s[:])
	k := &Key{sign: sk, hpke: hk}
	k.pub.Sign = sk.Public().(ed25519.PublicKey)
	copy(k.pub.HPKE[:], xk.PublicKey().Bytes())
	return k, nil
}

// GenerateKey returns a fresh test key pair from crypto/rand.
func GenerateKey() (*Key, error) {
	var seed [32]byte
	if _, err := rand.Read(seed[:]); err != nil {
		return nil, fmt.Errorf("%w: %v", envelope.ErrKey, err)
	}
	return DeriveKey(seed)
}

// Public returns the public half of the key pair.
func (k *Key) Public() envelope.PublicKey {
	return envelope.PublicKey{Sign: append(ed25519.PublicKey(nil), k.pub.Sign...), HPKE: k.pub.HPKE}
}

// Sign signs msg with the Ed25519 key (pure Ed25519, RFC 8032).
func (k *Key) Sign(msg []byte) [64]byte {
	var sig [64]byte
	copy(sig[:], ed25519.Sign(k.sign, msg))
	return sig
}

var _ envelope.Signer = (*Key)(nil)

// OpenValues opens a message sealed by envelope.SealValues (or one of
// envelope.SealEach) for round, as the aggregator's OpenValues does: if
// len(dst) > 0 it is the expected number of values; errors wrap
// envelope.ErrOpen (length, round, key, modified bytes) or
// envelope.ErrNonFinite (opened, but NaN or infinite).
func (k *Key) OpenValues(round uint64, sealed []byte, dst []float64) ([]float64, error) {
	if len(sealed) < envelope.Overhead || (len(sealed)-envelope.Overhead)%8 != 0 {
		return nil, fmt.Errorf("%w: sealed length %d is not %d + 8*n", envelope.ErrOpen, len(sealed), envelope.Overhead)
	}
	n := (len(sealed) - envelope.Overhead) / 8
	if len(dst) > 0 && len(dst) != n {
		return nil, fmt.Errorf("%w: sealed message has %d values, want %d", envelope.ErrOpen, n, len(dst))
	}
	_, kdf, aead := suite()
	pt, err := hpke.Open(k.hpke, kdf, aead, envelope.ValuesInfo(round), sealed)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", envelope.ErrOpen, err)
	}
	if cap(dst) >= n {
		dst = dst[:n]
	} else {
		dst = make([]float64, n)
	}
	if !envelope.DecodeValues(dst, pt) {
		return nil, fmt.Errorf("%w: round %d", envelope.ErrNonFinite, round)
	}
	return dst, nil
}

// OpenEach opens width-1 messages one after the other, with the contract
// of the aggregator's OpenEach: errs is nil when all opened to finite
// values, otherwise errs[i] tells why message i failed and vals[i] is NaN.
func (k *Key) OpenEach(round uint64, sealed [][]byte) (vals []float64, errs []error) {
	vals = make([]float64, len(sealed))
	for i, c := range sealed {
		var v []float64
		var err error
		if len(c) != envelope.Width1Len {
			err = fmt.Errorf("%w: message %d: length %d, want %d", envelope.ErrOpen, i, len(c), envelope.Width1Len)
		} else {
			v, err = k.OpenValues(round, c, nil)
		}
		if err != nil {
			if errs == nil {
				errs = make([]error, len(sealed))
			}
			errs[i], vals[i] = err, math.NaN()
			continue
		}
		vals[i] = v[0]
	}
	return vals, errs
}

// OpenLeaderShare opens a leader share sealed to this key for round under
// the consent hash consent (envelope.ShareInfo); want is the expected
// share size (negative: any). Errors wrap envelope.ErrOpenShare.
func (k *Key) OpenLeaderShare(round uint64, consent [32]byte, sealed []byte, want int) ([]byte, error) {
	return openShare(k.hpke, round, envelope.ShareLeader, consent, sealed, want)
}

// HelperKey is a test stand-in for the relay's helper key: it opens helper
// shares.
type HelperKey struct {
	priv hpke.PrivateKey
	pub  [32]byte
}

// UnmarshalHelperKey makes a helper key from a 32-byte X25519 scalar (the
// relay's key file format).
func UnmarshalHelperKey(b []byte) (*HelperKey, error) {
	if len(b) != 32 {
		return nil, fmt.Errorf("%w: helper key of %d bytes, want 32", envelope.ErrKey, len(b))
	}
	kem, _, _ := suite()
	priv, err := kem.NewPrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", envelope.ErrKey, err)
	}
	h := &HelperKey{priv: priv}
	copy(h.pub[:], priv.PublicKey().Bytes())
	return h, nil
}

// GenerateHelperKey makes a fresh helper key from crypto/rand.
func GenerateHelperKey() (*HelperKey, error) {
	var seed [32]byte
	if _, err := rand.Read(seed[:]); err != nil {
		return nil, fmt.Errorf("%w: %v", envelope.ErrKey, err)
	}
	return UnmarshalHelperKey(seed[:])
}

// Public returns the X25519 public key helper shares are sealed to.
func (h *HelperKey) Public() [32]byte { return h.pub }

// OpenHelperShare opens a helper share sealed to this key for round; want
// is the expected share size (negative: any).
func (h *HelperKey) OpenHelperShare(round uint64, sealed []byte, want int) ([]byte, error) {
	return openShare(h.priv, round, envelope.ShareHelper, [32]byte{}, sealed, want)
}

func openShare(k hpke.PrivateKey, round uint64, role envelope.ShareRole, consent [32]byte, sealed []byte, want int) ([]byte, error) {
	if want >= 0 && len(sealed) != envelope.ShareSealedLen(want) {
		return nil, fmt.Errorf("%w: %d bytes, want %d", envelope.ErrOpenShare, len(sealed), envelope.ShareSealedLen(want))
	}
	inf, err := envelope.ShareInfo(round, role, consent)
	if err != nil {
		return nil, err
	}
	_, kdf, aead := suite()
	pt, err := hpke.Open(k, kdf, aead, inf, sealed)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", envelope.ErrOpenShare, err)
	}
	return pt, nil
}

// suite is the HPKE suite envelope seals with, DHKEM(X25519, HKDF-SHA256),
// HKDF-SHA256, AES-128-GCM. It is spelled out here rather than taken from
// envelope.Suite, which exists only natively (under js envelope does not
// link crypto/hpke; these openers run in js test binaries too);
// TestSuiteIsEnvelopes checks that the two agree.
func suite() (hpke.KEM, hpke.KDF, hpke.AEAD) {
	return hpke.DHKEM(ecdh.X25519()), hpke.HKDFSHA256(), hpke.AES128GCM()
}
