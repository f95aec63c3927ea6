// Package sealkey is the private half of the aggregator's identity
// (docs/protocol.md, "Cryptography"): its Ed25519 signing key and X25519
// HPKE key, which sign announcements, open the values volunteers and the
// relay seal with shared/envelope (SealValues, SealEach) and open the
// leader shares of secure summation (SealShare with envelope.ShareLeader).
//
// The package lives under aggregator/internal so that no other party can
// link it: the relay and the wasm client import shared/envelope, the
// public half, and a test (relay/main_test.go) checks with go list -deps
// that neither binary links this package. Every opener uses envelope's
// suite (envelope.Suite) and info strings (envelope.ValuesInfo,
// envelope.ShareInfo), so a message opens here exactly when it was sealed
// by envelope for that round (and a leader share, under the consent hash
// of the aggregator's task).
//
// Security notes. HPKE base mode gives confidentiality and integrity of
// the values against anyone without the X25519 private key (the relay
// included); it does not authenticate the sender, which is intended: the
// aggregator must not learn who sent a message.
package sealkey

import (
	"crypto/ecdh"
	"crypto/ed25519"
	"crypto/hpke"
	"crypto/rand"
	"crypto/sha256"
	"fmt"

	"github.com/blanket-fl/blanket/shared/envelope"
)

// PrivateKeySize is the length of PrivateKey.MarshalBinary's output: a
// version byte (1), the 32-byte Ed25519 seed, the 32-byte X25519 scalar.
const PrivateKeySize = 1 + ed25519.SeedSize + 32

const privateKeyV1 = 1

// GenerateKey returns a new aggregator key pair from crypto/rand.
func GenerateKey() (*PrivateKey, error) {
	_, sk, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("%w: generate ed25519: %v", envelope.ErrKey, err)
	}
	xk, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("%w: generate x25519: %v", envelope.ErrKey, err)
	}
	return newPrivateKey(sk.Seed(), xk.Bytes())
}

// DeriveKey returns the key pair derived deterministically from seed:
// the Ed25519 seed is SHA-256("blanket/v1 sign key" || seed) and the X25519
// scalar SHA-256("blanket/v1 hpke key" || seed). It is for tests,
// reproducible fixtures and the audit's fixed key; production keys come
// from GenerateKey. envelopetest.DeriveKey derives the same key pair.
func DeriveKey(seed [32]byte) (*PrivateKey, error) {
	s := sha256.Sum256(append([]byte("blanket/v1 sign key"), seed[:]...))
	x := sha256.Sum256(append([]byte("blanket/v1 hpke key"), seed[:]...))
	return newPrivateKey(s[:], x[:])
}

// PrivateKey is the aggregator's secret key pair. Its zero value is not
// usable; obtain one from GenerateKey, DeriveKey, UnmarshalPrivateKey or
// LoadOrCreateKey. It is safe for concurrent use (never modified after
// construction).
type PrivateKey struct {
	sign ed25519.PrivateKey
	x    []byte // X25519 scalar as given (for MarshalBinary)
	hpke hpke.PrivateKey
	pub  envelope.PublicKey
}

func newPrivateKey(seed, x25519 []byte) (*PrivateKey, error) {
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("%w: ed25519 seed has %d bytes, want %d", envelope.ErrKey, len(seed), ed25519.SeedSize)
	}
	xk, err := ecdh.X25519().NewPrivateKey(x25519)
	if err != nil {
		return nil, fmt.Errorf("%w: x25519 private key: %v", envelope.ErrKey, err)
	}
	hk, err := hpke.NewDHKEMPrivateKey(xk)
	if err != nil {
		return nil, fmt.Errorf("%w: hpke private key: %v", envelope.ErrKey, err)
	}
	sk := ed25519.NewKeyFromSeed(seed)
	k := &PrivateKey{sign: sk, x: append([]byte(nil), x25519...), hpke: hk}
	k.pub.Sign = sk.Public().(ed25519.PublicKey)
	copy(k.pub.HPKE[:], xk.PublicKey().Bytes())
	return k, nil
}

// Public returns the public half of the key pair.
func (k *PrivateKey) Public() envelope.PublicKey {
	return envelope.PublicKey{Sign: append(ed25519.PublicKey(nil), k.pub.Sign...), HPKE: k.pub.HPKE}
}

// MarshalBinary encodes the key pair as PrivateKeySize bytes: version 1, the
// Ed25519 seed (32), the X25519 scalar (32). The output is secret.
func (k *PrivateKey) MarshalBinary() ([]byte, error) {
	if k == nil || k.sign == nil {
		return nil, fmt.Errorf("%w: uninitialized private key", envelope.ErrKey)
	}
	b := make([]byte, 0, PrivateKeySize)
	b = append(b, privateKeyV1)
	b = append(b, k.sign.Seed()...)
	b = append(b, k.x...)
	return b, nil
}

// UnmarshalPrivateKey decodes the output of MarshalBinary.
func UnmarshalPrivateKey(b []byte) (*PrivateKey, error) {
	if len(b) != PrivateKeySize {
		return nil, fmt.Errorf("%w: private key has %d bytes, want %d", envelope.ErrKey, len(b), PrivateKeySize)
	}
	if b[0] != privateKeyV1 {
		return nil, fmt.Errorf("%w: private key version %d, want %d", envelope.ErrKey, b[0], privateKeyV1)
	}
	return newPrivateKey(b[1:1+ed25519.SeedSize], b[1+ed25519.SeedSize:])
}

// Sign signs msg with the Ed25519 key (pure Ed25519, RFC 8032); it is the
// envelope.Signer of announcements (wire.Announcement.Sign), checked by
// envelope.Verify.
func (k *PrivateKey) Sign(msg []byte) [64]byte {
	var sig [64]byte
	copy(sig[:], ed25519.Sign(k.sign, msg))
	return sig
}

var _ envelope.Signer = (*PrivateKey)(nil)
