// Package helperkey is the private half of the relay's secure-summation
// identity (docs/secagg.md, "Keys and secrets"): the X25519 key pair
// volunteers seal their helper shares to (envelope.SealShare with
// envelope.ShareHelper). It opens helper shares and nothing else: it is
// not an aggregator key, so it cannot sign announcements nor open sealed
// values, which are sealed to another key under another info string.
//
// The package lives under relay/internal so that only the relay links it;
// its public half is a [32]byte the relay publishes, and the opener uses
// envelope's suite and info (envelope.Suite, envelope.ShareInfo).
package helperkey

import (
	"crypto/ecdh"
	"crypto/hpke"
	"crypto/rand"
	"fmt"

	"github.com/blanket-fl/blanket/shared/envelope"
)

// Key is the relay's helper key pair. Obtain one from Generate, Unmarshal
// or LoadOrCreate; it is safe for concurrent use.
type Key struct {
	priv hpke.PrivateKey
	pub  [32]byte
	raw  [32]byte
}

// Generate makes a fresh helper key from crypto/rand.
func Generate() (*Key, error) {
	var seed [32]byte
	if _, err := rand.Read(seed[:]); err != nil {
		return nil, fmt.Errorf("%w: %v", envelope.ErrKey, err)
	}
	return Unmarshal(seed[:])
}

// Unmarshal restores a helper key from its 32-byte X25519 scalar
// (MarshalBinary).
func Unmarshal(b []byte) (*Key, error) {
	if len(b) != 32 {
		return nil, fmt.Errorf("%w: helper key of %d bytes, want 32", envelope.ErrKey, len(b))
	}
	ek, err := ecdh.X25519().NewPrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", envelope.ErrKey, err)
	}
	kem, _, _ := envelope.Suite()
	priv, err := kem.NewPrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", envelope.ErrKey, err)
	}
	h := &Key{priv: priv}
	copy(h.pub[:], ek.PublicKey().Bytes())
	copy(h.raw[:], b)
	return h, nil
}

// MarshalBinary returns the 32-byte X25519 scalar (keep it 0600).
func (h *Key) MarshalBinary() ([]byte, error) { return append([]byte(nil), h.raw[:]...), nil }

// Public returns the X25519 public key volunteers seal helper shares to.
func (h *Key) Public() [32]byte { return h.pub }

// OpenHelperShare opens a helper share sealed to this key for round
// (envelope.SealShare with envelope.ShareHelper); want is the expected
// share size (negative: any). Errors wrap envelope.ErrOpenShare (wrong
// length, round, role, key, or modified bytes).
func (h *Key) OpenHelperShare(round uint64, sealed []byte, want int) ([]byte, error) {
	if want >= 0 && len(sealed) != envelope.ShareSealedLen(want) {
		return nil, fmt.Errorf("%w: %d bytes, want %d", envelope.ErrOpenShare, len(sealed), envelope.ShareSealedLen(want))
	}
	inf, err := envelope.ShareInfo(round, envelope.ShareHelper, [32]byte{}) // the helper's share is not bound to a consent text
	if err != nil {
		return nil, err
	}
	_, kdf, aead := envelope.Suite()
	pt, err := hpke.Open(h.priv, kdf, aead, inf, sealed)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", envelope.ErrOpenShare, err)
	}
	return pt, nil
}
