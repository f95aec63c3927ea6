package envelope

import (
	"crypto/ecdh"
	"crypto/hpke"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
)

// Secure summation seals each volunteer's two input shares, one to each
// server: the leader's (the aggregator's X25519 key) and the helper's (the
// relay's). The HPKE info binds a sealed share to its round and its role,
//
//	info = "blanket/v1 secagg leader round " || u64be(round)   (or "helper")
//
// so a share cannot be replayed into another round, nor handed to the other
// server (it would not open under the other key anyway), nor opened as a
// sealed value (different info).

// ShareRole names the server a share is sealed to.
type ShareRole uint8

// Share roles.
const (
	ShareLeader ShareRole = 1 // the aggregator
	ShareHelper ShareRole = 2 // the relay
)

func (r ShareRole) label() (string, error) {
	switch r {
	case ShareLeader:
		return "leader", nil
	case ShareHelper:
		return "helper", nil
	}
	return "", fmt.Errorf("envelope: unknown share role %d", r)
}

func shareInfo(round uint64, role ShareRole) ([]byte, error) {
	l, err := role.label()
	if err != nil {
		return nil, err
	}
	b := []byte("blanket/v1 secagg " + l + " round ")
	return binary.BigEndian.AppendUint64(b, round), nil
}

// ShareSealedLen is the size of a sealed share of n bytes: n + Overhead.
func ShareSealedLen(n int) int { return n + Overhead }

// ErrOpenShare: a sealed share did not open (wrong length, round, role,
// key, or modified bytes).
var ErrOpenShare = errors.New("envelope: cannot open sealed share")

// SealShare seals one input share to the X25519 key pub for round and role;
// the output has ShareSealedLen(len(share)) bytes.
func SealShare(pub [32]byte, round uint64, role ShareRole, share []byte) ([]byte, error) {
	inf, err := shareInfo(round, role)
	if err != nil {
		return nil, err
	}
	pk, err := kem.NewPublicKey(pub[:])
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSeal, err)
	}
	out, err := hpke.Seal(pk, kdf, aead, inf, share)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSeal, err)
	}
	return out, nil
}

func openShare(k hpke.PrivateKey, round uint64, role ShareRole, sealed []byte, want int) ([]byte, error) {
	if want >= 0 && len(sealed) != ShareSealedLen(want) {
		return nil, fmt.Errorf("%w: %d bytes, want %d", ErrOpenShare, len(sealed), ShareSealedLen(want))
	}
	inf, err := shareInfo(round, role)
	if err != nil {
		return nil, err
	}
	pt, err := hpke.Open(k, kdf, aead, inf, sealed)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrOpenShare, err)
	}
	return pt, nil
}

// OpenLeaderShare opens a leader share sealed to the aggregator's key for
// round; want is the expected share size (negative: any).
func (k *PrivateKey) OpenLeaderShare(round uint64, sealed []byte, want int) ([]byte, error) {
	return openShare(k.hpke, round, ShareLeader, sealed, want)
}

// HelperKey is the relay's X25519 key pair for secure summation: it opens
// helper shares and nothing else (it is not an aggregator key: it cannot
// sign announcements nor open sealed values, which are sealed to another key
// under another info).
type HelperKey struct {
	priv hpke.PrivateKey
	pub  [32]byte
	raw  [32]byte
}

// GenerateHelperKey makes a fresh helper key from crypto/rand.
func GenerateHelperKey() (*HelperKey, error) {
	var seed [32]byte
	if _, err := rand.Read(seed[:]); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKey, err)
	}
	return UnmarshalHelperKey(seed[:])
}

// UnmarshalHelperKey restores a helper key from its 32-byte X25519 scalar
// (MarshalBinary).
func UnmarshalHelperKey(b []byte) (*HelperKey, error) {
	if len(b) != 32 {
		return nil, fmt.Errorf("%w: helper key of %d bytes, want 32", ErrKey, len(b))
	}
	ek, err := ecdh.X25519().NewPrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKey, err)
	}
	priv, err := kem.NewPrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKey, err)
	}
	h := &HelperKey{priv: priv}
	copy(h.pub[:], ek.PublicKey().Bytes())
	copy(h.raw[:], b)
	return h, nil
}

// MarshalBinary returns the 32-byte X25519 scalar (keep it 0600).
func (h *HelperKey) MarshalBinary() ([]byte, error) { return append([]byte(nil), h.raw[:]...), nil }

// Public returns the X25519 public key volunteers seal helper shares to.
func (h *HelperKey) Public() [32]byte { return h.pub }

// OpenHelperShare opens a helper share sealed to this key for round; want
// is the expected share size (negative: any).
func (h *HelperKey) OpenHelperShare(round uint64, sealed []byte, want int) ([]byte, error) {
	return openShare(h.priv, round, ShareHelper, sealed, want)
}
