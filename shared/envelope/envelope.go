// Package envelope is the public half of the cryptography of Blanket's
// protocol (docs/protocol.md, "Cryptography"): the aggregator's public
// identity (an Ed25519 signing key and an X25519 HPKE key), the
// verification of signatures over announcements, and the sealing of a
// message's values to the aggregator and of secure-summation shares to
// either server. The private halves live with their owners, where no other
// party can link them: the aggregator's key pair (signing, opening values
// and leader shares) in aggregator/internal/sealkey, the relay's helper key
// in relay/internal/helperkey. Tests that must open what they sealed use
// the test-only opener of envelope/envelopetest.
//
// Values are sealed with HPKE (RFC 9180) in base mode, single-shot, with the
// suite DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM (ids 0x0020,
// 0x0001, 0x0001): natively with Go's crypto/hpke, in the browser with its
// WebCrypto (envelope/webhpke; where the browser lacks WebCrypto X25519,
// webhpke's same RFC 9180 schedule over Go's crypto/ecdh and crypto/aes,
// so that the browser module does not link crypto/hpke), see seal.go;
// every message is opened by crypto/hpke.
// AES-128-GCM is the AEAD because it is the one both Go and WebCrypto
// implement (WebCrypto has no ChaCha20-Poly1305). The info string binds a
// ciphertext to its round:
//
//	info = "blanket/v1 values round " || u64be(round)
//
// The plaintext is the values as IEEE-754 binary64, big-endian, in order, so a
// sealed message of w values is exactly SealedLen(w) = 32 + 8w + 16 bytes:
// the 32-byte encapsulated X25519 key, the ciphertext, the 16-byte tag. The
// length depends only on w, never on the values.
//
// Security notes. HPKE base mode gives confidentiality and integrity of the
// values against anyone without the aggregator's X25519 private key (the
// relay included); it does not authenticate the sender, which is intended:
// the aggregator must not learn who sent a message, and the relay seals its
// dummies with the same function. Announcements are authenticated by the
// Ed25519 signature; clients pin the aggregator's Fingerprint.
package envelope

import (
	"crypto/ecdh"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
)

const (
	// EncSize is the size of the HPKE encapsulated key (an X25519 public key).
	EncSize = 32
	// TagSize is the size of the AES-128-GCM authentication tag.
	TagSize = 16
	// Overhead is the size a sealed message adds to its 8*w plaintext bytes:
	// 32 (X25519 enc) + 16 (AES-128-GCM tag).
	Overhead = EncSize + TagSize
	// SignatureSize is the size of an Ed25519 signature.
	SignatureSize = ed25519.SignatureSize

	infoPrefix       = "blanket/v1 values round "
	fingerprintLabel = "blanket/v1 key"
)

// Errors. Every error returned by this package wraps one of these (check
// with errors.Is).
var (
	// ErrOpen: a sealed message did not open (wrong length, wrong round,
	// wrong key, or tampered bytes). The causes are deliberately not told
	// apart beyond the length check.
	ErrOpen = errors.New("envelope: cannot open sealed values")
	// ErrNonFinite: a sealed message opened but carries a NaN or infinite
	// value (the aggregator counts these as rejectedValue, not rejectedOpen).
	ErrNonFinite = errors.New("envelope: non-finite value")
	// ErrKey: a key is malformed.
	ErrKey = errors.New("envelope: invalid key")
	// ErrSeal: sealing failed (invalid recipient key).
	ErrSeal = errors.New("envelope: cannot seal values")
)

// Signer signs announcements: the aggregator's private key
// (aggregator/internal/sealkey) and the test key of envelopetest. Sign
// returns the pure Ed25519 (RFC 8032) signature of msg that Verify checks
// against the signer's PublicKey.
type Signer interface {
	Sign(msg []byte) [64]byte
}

// SealedLen returns the length of a sealed message of the given number of
// values: 8*values + Overhead. It returns -1 for a negative count.
func SealedLen(values int) int {
	if values < 0 {
		return -1
	}
	return 8*values + Overhead
}

// ValuesInfo returns the HPKE info string a round's values are sealed
// under, "blanket/v1 values round " || u64be(round): the one derivation
// SealValues, SealEach and every opener use.
func ValuesInfo(round uint64) []byte {
	b := make([]byte, len(infoPrefix)+8)
	copy(b, infoPrefix)
	binary.BigEndian.PutUint64(b[len(infoPrefix):], round)
	return b
}

// PublicKey is the aggregator's public identity: the Ed25519 key that signs
// announcements and the X25519 key values are sealed to.
type PublicKey struct {
	Sign ed25519.PublicKey
	HPKE [32]byte
}

// Fingerprint returns the key's fingerprint as printed for pinning: the first
// 16 bytes of SHA-256("blanket/v1 key" || ed25519Pub || x25519Pub), as 8
// groups of 4 lowercase hex digits separated by '-'. It is stable for a key
// and (up to SHA-256 collisions) different for different keys.
func (p PublicKey) Fingerprint() string {
	h := sha256.New()
	h.Write([]byte(fingerprintLabel))
	h.Write(p.Sign)
	h.Write(p.HPKE[:])
	sum := h.Sum(nil)
	hx := hex.EncodeToString(sum[:16])
	var sb strings.Builder
	sb.Grow(39)
	for i := 0; i < 32; i += 4 {
		if i > 0 {
			sb.WriteByte('-')
		}
		sb.WriteString(hx[i : i+4])
	}
	return sb.String()
}

// Equal reports whether p and q are the same key pair (constant time in the
// key bytes).
func (p PublicKey) Equal(q PublicKey) bool {
	if len(p.Sign) != len(q.Sign) {
		return false
	}
	return subtle.ConstantTimeCompare(p.Sign, q.Sign)&subtle.ConstantTimeCompare(p.HPKE[:], q.HPKE[:]) == 1
}

// Validate checks the key's shape: a 32-byte Ed25519 key and an X25519 key
// that HPKE accepts (crypto/ecdh's X25519 public key: 32 bytes, which is
// all crypto/hpke's DHKEM(X25519) checks).
func (p PublicKey) Validate() error {
	if len(p.Sign) != ed25519.PublicKeySize {
		return fmt.Errorf("%w: ed25519 public key has %d bytes, want %d", ErrKey, len(p.Sign), ed25519.PublicKeySize)
	}
	if _, err := ecdh.X25519().NewPublicKey(p.HPKE[:]); err != nil {
		return fmt.Errorf("%w: x25519 public key: %v", ErrKey, err)
	}
	return nil
}

// ParsePublicKey builds a PublicKey from its two raw encodings (32 bytes
// each) and validates it. The bytes are copied.
func ParsePublicKey(sign, hpkePub []byte) (PublicKey, error) {
	if len(hpkePub) != 32 {
		return PublicKey{}, fmt.Errorf("%w: x25519 public key has %d bytes, want 32", ErrKey, len(hpkePub))
	}
	p := PublicKey{Sign: append(ed25519.PublicKey(nil), sign...)}
	copy(p.HPKE[:], hpkePub)
	if err := p.Validate(); err != nil {
		return PublicKey{}, err
	}
	return p, nil
}

// Verify reports whether sig is pub's valid Ed25519 signature of msg. A
// malformed public key verifies nothing.
func Verify(pub PublicKey, msg []byte, sig [64]byte) bool {
	if len(pub.Sign) != ed25519.PublicKeySize {
		return false
	}
	return ed25519.Verify(pub.Sign, msg, sig[:])
}

// SealValues seals values to the X25519 key hpkePub for the given round. The
// output has exactly SealedLen(len(values)) bytes. Values are encoded as
// they are (including non-finite ones, which the aggregator rejects after
// opening); the relay seals its dummies with this same function. Under
// js/wasm it seals with WebCrypto (seal.go) and blocks until WebCrypto's
// promises settle: call it from a goroutine, not a syscall/js callback.
func SealValues(hpkePub [32]byte, round uint64, values []float64) ([]byte, error) {
	pt := make([]byte, 8*len(values))
	for i, v := range values {
		binary.BigEndian.PutUint64(pt[8*i:], math.Float64bits(v))
	}
	out, err := sealBatch(hpkePub, ValuesInfo(round), [][]byte{pt}, [][]byte{make([]byte, 0, SealedLen(len(values)))})
	if err != nil {
		return nil, err
	}
	if len(out[0]) != SealedLen(len(values)) {
		return nil, fmt.Errorf("%w: sealed length %d, want %d", ErrSeal, len(out[0]), SealedLen(len(values)))
	}
	return out[0], nil
}

// DecodeValues writes the big-endian binary64 values of pt (len >=
// 8*len(dst)), the plaintext of a sealed message, to dst and reports
// whether all are finite; an opener rejects the message (ErrNonFinite)
// when they are not. Branch-free check: a float64 is
// non-finite iff its 11 exponent bits are all ones, and then adding 1 to
// the exponent field carries into bit 63.
func DecodeValues(dst []float64, pt []byte) bool {
	const expMask = 0x7ff0000000000000
	var bad uint64
	for i := range dst {
		// The full slice expression lets the compiler drop the inner
		// bounds checks (measured ~2x faster than pt[8*i:]).
		u := binary.BigEndian.Uint64(pt[8*i : 8*i+8 : 8*i+8])
		bad |= ((u & expMask) + 1<<52) >> 63
		dst[i] = math.Float64frombits(u)
	}
	return bad == 0
}
