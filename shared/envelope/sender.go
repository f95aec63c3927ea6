package envelope

import (
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"runtime"
	"sync/atomic"
)

// The js/wasm sender. Under GOOS=js a seal spent ~85% of its time in the two
// X25519 multiplications of crypto/ecdh's generic code (see x25519.go), and
// crypto/hpke takes no other X25519, so under js SealValues and SealEach
// seal with this file's implementation of the same HPKE sender: RFC 9180
// base mode, single shot, DHKEM(X25519, HKDF-SHA256), HKDF-SHA256,
// ChaCha20-Poly1305, the package's info string, empty aad, sequence number
// 0. Its output is the same wire format with the same distribution (a fresh
// uniformly random ephemeral scalar from crypto/rand per message); the
// aggregator opens it with crypto/hpke. Natively the standard library is
// used (its X25519 is assembly there). The tests run this sender on every
// platform and open its output with crypto/hpke.
//
// HKDF and SHA-256 are the standard library's; the per-round part of the
// key schedule (psk_id_hash, info_hash: they depend only on the info
// string) is computed once per sender. Both X25519 multiplications of a
// seal have a fixed base: the ephemeral public key is a multiple of the
// base point, the shared secret a multiple of the recipient's key, so both
// use precomputed tables (edwards.go): the base point's is built once, the
// recipient key's once per key; a recipient key off the curve (on its
// twist, never an aggregator's) falls back to the ladder (x25519.go).
const ownSender = runtime.GOOS == "js"

const (
	hpkeV1 = "HPKE-v1"
	// suite_id = "HPKE" || kem 0x0020 || kdf 0x0001 || aead 0x0003.
	hpkeSuiteID = "HPKE\x00\x20\x00\x01\x00\x03"
	// The KEM's suite_id = "KEM" || 0x0020.
	kemSuiteID = "KEM\x00\x20"
)

// sender is the HPKE base-mode sender for one recipient key and one round.
type sender struct {
	pkR       [32]byte
	round     uint64
	ksContext []byte        // 0x00 || psk_id_hash || info_hash
	dhTab     *edFixedTable // multiples of pkR's Edwards point; nil: ladder
}

// peerTable is the fixed-base table of one recipient key.
type peerTable struct {
	pkR [32]byte
	tab *edFixedTable // nil when pkR has no Edwards point (twist, u = -1)
}

// lastPeer caches the table of the latest recipient key: building it costs
// 256 field inversions (~5 ms under js), once per aggregator key; it then
// makes the shared-secret multiplication about twice as fast as the
// ladder. A table holds only public data and is never modified.
var lastPeer atomic.Pointer[peerTable]

// peerTableFor returns the table of pkR, from the cache when it is the
// latest key.
func peerTableFor(pkR [32]byte) *edFixedTable {
	if c := lastPeer.Load(); c != nil && c.pkR == pkR {
		return c.tab
	}
	c := &peerTable{pkR: pkR}
	if p, ok := edFromMontgomery(&pkR); ok {
		c.tab = newEdFixedTable(p)
	}
	lastPeer.Store(c)
	return c.tab
}

// newSender accepts pkR as crypto/hpke does for X25519 (any 32 bytes; a
// low-order key fails at the first seal), runs the part of the key
// schedule that depends only on the round, and takes pkR's fixed-base
// table (peerTableFor).
func newSender(pkR [32]byte, round uint64) (*sender, error) {
	pskIDHash, err := labeledExtract(hpkeSuiteID, nil, "psk_id_hash", nil)
	if err != nil {
		return nil, err
	}
	infoHash, err := labeledExtract(hpkeSuiteID, nil, "info_hash", ValuesInfo(round))
	if err != nil {
		return nil, err
	}
	ks := make([]byte, 0, 1+len(pskIDHash)+len(infoHash))
	ks = append(ks, 0) // mode_base
	ks = append(ks, pskIDHash...)
	ks = append(ks, infoHash...)
	return &sender{pkR: pkR, round: round, ksContext: ks, dhTab: peerTableFor(pkR)}, nil
}

// labeledExtract is RFC 9180's LabeledExtract with HKDF-SHA256.
func labeledExtract(suiteID string, salt []byte, label string, ikm []byte) ([]byte, error) {
	in := make([]byte, 0, len(hpkeV1)+len(suiteID)+len(label)+len(ikm))
	in = append(in, hpkeV1...)
	in = append(in, suiteID...)
	in = append(in, label...)
	in = append(in, ikm...)
	return hkdf.Extract(sha256.New, in, salt)
}

// labeledExpand is RFC 9180's LabeledExpand with HKDF-SHA256.
func labeledExpand(suiteID string, prk []byte, label string, infoBytes []byte, length int) ([]byte, error) {
	in := make([]byte, 2, 2+len(hpkeV1)+len(suiteID)+len(label)+len(infoBytes))
	binary.BigEndian.PutUint16(in, uint16(length))
	in = append(in, hpkeV1...)
	in = append(in, suiteID...)
	in = append(in, label...)
	in = append(in, infoBytes...)
	return hkdf.Expand(sha256.New, prk, string(in), length)
}

// seal appends to dst the sealed message of pt with the ephemeral secret
// scalar eph: enc || ChaCha20-Poly1305(key, base_nonce, aad = "", pt).
// eph must be 32 uniformly random bytes used for this message only.
func (s *sender) seal(dst []byte, eph *[32]byte, pt []byte) ([]byte, error) {
	var enc, dh [32]byte
	if err := x25519Base(&enc, eph); err != nil {
		return nil, err
	}
	var err error
	if s.dhTab != nil {
		err = x25519Fixed(&dh, eph, s.dhTab)
	} else {
		err = x25519(&dh, eph, &s.pkR)
	}
	if err != nil {
		return nil, err
	}
	// DHKEM Encap: shared_secret = ExtractAndExpand(dh, enc || pkR).
	eaePRK, err := labeledExtract(kemSuiteID, nil, "eae_prk", dh[:])
	clear(dh[:])
	if err != nil {
		return nil, err
	}
	var kemContext [64]byte
	copy(kemContext[:32], enc[:])
	copy(kemContext[32:], s.pkR[:])
	shared, err := labeledExpand(kemSuiteID, eaePRK, "shared_secret", kemContext[:], 32)
	clear(eaePRK)
	if err != nil {
		return nil, err
	}
	// Key schedule, base mode, empty psk.
	secret, err := labeledExtract(hpkeSuiteID, shared, "secret", nil)
	clear(shared)
	if err != nil {
		return nil, err
	}
	key, err := labeledExpand(hpkeSuiteID, secret, "key", s.ksContext, 32)
	if err != nil {
		return nil, err
	}
	nonce, err := labeledExpand(hpkeSuiteID, secret, "base_nonce", s.ksContext, 12)
	clear(secret)
	if err != nil {
		return nil, err
	}
	dst = append(dst, enc[:]...)
	dst = chachaPolySeal(dst, (*[32]byte)(key), (*[12]byte)(nonce), pt, nil)
	clear(key)
	return dst, nil
}

// ephBatch is how many ephemeral scalars the js sender draws from
// crypto/rand in one read (one crypto.getRandomValues call of 2 KiB
// instead of one call per message).
const ephBatch = 64

// lastSender caches the sender of the latest SealValues call: a client
// seals all of a round's messages to one key and round, and the
// round-dependent key schedule costs two HMAC-SHA256 extracts (~25 µs under
// js). A sender holds only public data and is never modified.
var lastSender atomic.Pointer[sender]

// sealOwn is SealValues with the js sender.
func sealOwn(hpkePub [32]byte, round uint64, pt []byte) ([]byte, error) {
	s := lastSender.Load()
	if s == nil || s.pkR != hpkePub || s.round != round {
		var err error
		if s, err = newSender(hpkePub, round); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrSeal, err)
		}
		lastSender.Store(s)
	}
	var eph [32]byte
	if _, err := rand.Read(eph[:]); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSeal, err)
	}
	out, err := s.seal(make([]byte, 0, EncSize+len(pt)+TagSize), &eph, pt)
	clear(eph[:])
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSeal, err)
	}
	return out, nil
}
