package webhpke

import (
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

// Sizes of the suite (RFC 9180, section 7: Nenc, Nk, Nn, Nh; AES-GCM's
// tag).
const (
	// EncSize is the size of the encapsulated key (an X25519 public key).
	EncSize = 32
	// TagSize is the size of the AES-128-GCM tag.
	TagSize = 16
	// Overhead is what a sealed message adds to its plaintext.
	Overhead  = EncSize + TagSize
	keySize   = 16
	nonceSize = 12
	hashSize  = 32
)

const (
	hpkeV1 = "HPKE-v1"
	// suite_id = "KEM" || I2OSP(kem_id, 2) (RFC 9180, section 4.1).
	kemSuiteID = "KEM\x00\x20"
	// suite_id = "HPKE" || kem_id || kdf_id || aead_id (section 5.1).
	hpkeSuiteID = "HPKE\x00\x20\x00\x01\x00\x01"
)

// Errors.
var (
	// ErrUnavailable: the JavaScript environment has no WebCrypto or its
	// WebCrypto has no X25519 (Seal and Open only; SealGo and OpenGo are
	// always available).
	ErrUnavailable = errors.New("webhpke: WebCrypto X25519 is not available")
	// ErrSeal: a primitive failed while sealing (a low-order recipient
	// key, say).
	ErrSeal = errors.New("webhpke: cannot seal")
	// ErrOpen: a message did not open.
	ErrOpen = errors.New("webhpke: cannot open")
)

// primitives are the three operations of the suite that the schedule
// leaves to an implementation: X25519 (RFC 7748) key generation and
// Diffie-Hellman, and AES-128-GCM. webCrypto (the browser's crypto.subtle,
// js only) and goCrypto (crypto/ecdh, crypto/aes, crypto/cipher) implement
// them; everything else (RFC 9180's Encap/Decap key derivation, key
// schedule and nonces, all HKDF-SHA256 through Go's crypto/hkdf) is this
// file, written once for both. Each method does a whole batch, so that
// WebCrypto can run it as one Promise.all.
type primitives interface {
	// encap returns, for each of n messages, the serialized public key
	// of a fresh ephemeral X25519 key pair (skE, pkE) and DH(skE, pkR),
	// 32 bytes (RFC 9180, section 4.1, Encap before ExtractAndExpand). A
	// non-nil fixed (known-answer tests only) replaces the generated
	// pairs. It fails if any DH fails (an all-zero output included).
	encap(pkR *[32]byte, n int, fixed *ephemeral) (encs [][EncSize]byte, dh [][]byte, err error)
	// decap returns DH(skR, pkE) for every serialized pkE of encs (each
	// EncSize bytes), as encap does for the sender.
	decap(skR *[32]byte, encs [][]byte) (dh [][]byte, err error)
	// crypt runs AES-128-GCM, 16-byte tag, over every job (encrypt, or
	// decrypt and authenticate when open), appending the job's output to
	// out[i] (ciphertext || tag, or the plaintext). It fails if any job
	// fails.
	crypt(open bool, jobs []aeadJob, out [][]byte) ([][]byte, error)
}

// aeadJob is one AES-128-GCM operation: key, nonce, additional data (nil:
// empty) and input.
type aeadJob struct {
	key   *[keySize]byte
	nonce [nonceSize]byte
	aad   []byte
	in    []byte
}

// ephemeral is a fixed ephemeral key pair, for the known-answer tests
// only: production seals always generate theirs.
type ephemeral struct{ sk, pk [32]byte }

// context is one message's HPKE context (RFC 9180, section 5.1): the
// encapsulated key, the AEAD key and the base nonce.
type context struct {
	enc   [EncSize]byte
	key   [keySize]byte
	nonce [nonceSize]byte
}

// job returns the AEAD job of sequence number seq over in with aad: the
// context's key and the nonce base_nonce XOR I2OSP(seq, Nn) (RFC 9180,
// section 5.2).
func (c *context) job(seq uint64, aad, in []byte) aeadJob {
	j := aeadJob{key: &c.key, nonce: c.nonce, aad: aad, in: in}
	var sb [8]byte
	binary.BigEndian.PutUint64(sb[:], seq)
	for i := range sb {
		j.nonce[nonceSize-8+i] ^= sb[i]
	}
	return j
}

func clearContexts(ctxs []context) {
	for i := range ctxs {
		clear(ctxs[i].key[:])
		clear(ctxs[i].nonce[:])
	}
}

// maxBatch is the most messages one step of a seal hands the primitives
// at once: a volunteer's 7850 messages go in chunks, which bounds the
// number of live WebCrypto keys and pending promises (and the JavaScript
// memory they hold) at four more waits per chunk.
const maxBatch = 1024

// seal is Seal over p: every pts[i] sealed to pkR under info, each with its
// own encapsulation, base mode, single shot (sequence number 0), empty aad,
// enc || ciphertext || tag appended to out[i]. fixed is for the
// known-answer tests only.
func seal(p primitives, pkR [32]byte, info []byte, pts [][]byte, out [][]byte, fixed *ephemeral) ([][]byte, error) {
	if out == nil {
		out = make([][]byte, len(pts))
	}
	if len(out) != len(pts) {
		return nil, fmt.Errorf("%w: %d outputs for %d plaintexts", ErrSeal, len(out), len(pts))
	}
	for lo := 0; lo < len(pts); lo += maxBatch {
		hi := min(lo+maxBatch, len(pts))
		if err := sealChunk(p, pkR, info, pts[lo:hi], out[lo:hi], fixed); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// sealChunk is seal of at most maxBatch messages.
func sealChunk(p primitives, pkR [32]byte, info []byte, pts [][]byte, out [][]byte, fixed *ephemeral) error {
	ctxs, err := setupSenders(p, pkR, info, len(pts), fixed)
	if err != nil {
		return err
	}
	defer clearContexts(ctxs)
	jobs := make([]aeadJob, len(pts))
	n0 := make([]int, len(pts))
	for i, pt := range pts {
		jobs[i] = ctxs[i].job(0, nil, pt)
		n0[i] = len(out[i])
		out[i] = append(out[i], ctxs[i].enc[:]...)
	}
	if _, err := p.crypt(false, jobs, out); err != nil {
		return fmt.Errorf("%w: encrypt: %w", ErrSeal, err)
	}
	for i := range out {
		if got := len(out[i]) - n0[i]; got != Overhead+len(pts[i]) {
			return fmt.Errorf("%w: message %d: %d bytes", ErrSeal, i, got)
		}
	}
	return nil
}

// setupSenders runs SetupBaseS (RFC 9180, section 5.1.1) n times: Encap
// with a fresh ephemeral key pair each (fixed, for tests, when not nil),
// then the key schedule.
func setupSenders(p primitives, pkR [32]byte, info []byte, n int, fixed *ephemeral) ([]context, error) {
	encs, dh, err := p.encap(&pkR, n, fixed)
	defer clearAll(dh)
	if err != nil {
		return nil, fmt.Errorf("%w: encap: %w", ErrSeal, err)
	}
	if len(encs) != n || len(dh) != n {
		return nil, fmt.Errorf("%w: encap: %d keys, %d secrets for %d messages", ErrSeal, len(encs), len(dh), n)
	}
	ctxs := make([]context, n)
	for i := range ctxs {
		ctxs[i].enc = encs[i]
	}
	if err := schedule(ctxs, dh, &pkR, info); err != nil {
		return nil, fmt.Errorf("%w: key schedule: %w", ErrSeal, err)
	}
	return ctxs, nil
}

// open is Open over p.
func open(p primitives, skR, pkR [32]byte, info []byte, sealed [][]byte) ([][]byte, error) {
	wrap := func(step string, err error) error { return fmt.Errorf("%w: %s: %w", ErrOpen, step, err) }
	encs := make([][]byte, len(sealed))
	for i, c := range sealed {
		if len(c) < Overhead {
			return nil, wrap("length", fmt.Errorf("message %d has %d bytes", i, len(c)))
		}
		encs[i] = c[:EncSize]
	}
	if len(sealed) == 0 {
		return [][]byte{}, nil
	}
	dh, err := p.decap(&skR, encs)
	defer clearAll(dh)
	if err != nil {
		return nil, wrap("decap", err)
	}
	if len(dh) != len(sealed) {
		return nil, wrap("decap", fmt.Errorf("%d secrets for %d messages", len(dh), len(sealed)))
	}
	ctxs := make([]context, len(sealed))
	defer clearContexts(ctxs)
	for i := range ctxs {
		copy(ctxs[i].enc[:], encs[i])
	}
	if err := schedule(ctxs, dh, &pkR, info); err != nil {
		return nil, wrap("key schedule", err)
	}
	jobs := make([]aeadJob, len(sealed))
	out := make([][]byte, len(sealed))
	for i, c := range sealed {
		jobs[i] = ctxs[i].job(0, nil, c[EncSize:])
		out[i] = []byte{}
	}
	out, err = p.crypt(true, jobs, out)
	if err != nil {
		return nil, wrap("decrypt", err)
	}
	return out, nil
}

// schedule completes every ctxs[i], whose enc is set, from its DH output
// dh[i]: DHKEM's ExtractAndExpand (RFC 9180, section 4.1), with
// kem_context = enc || pkR, gives the shared secret, and KeySchedule
// (section 5.1, mode_base, empty psk and psk_id) the AEAD key and base
// nonce. An all-zero DH output (a low-order key) fails (section 7.1.4),
// whatever the primitives checked. The HKDF-SHA256 steps are Go's
// crypto/hkdf for both implementations: in the browser, five HMACs per
// message cost less in wasm than four more WebCrypto calls, each a round
// trip through the browser's crypto thread (docs/protocol.md,
// "Cryptography", measured with WebCrypto's HKDF at commit 3997388).
func schedule(ctxs []context, dh [][]byte, pkR *[32]byte, info []byte) error {
	pskIDHash, err := hkdf.Extract(sha256.New, labeledIKM(hpkeSuiteID, "psk_id_hash", nil), nil)
	if err != nil {
		return err
	}
	infoHash, err := hkdf.Extract(sha256.New, labeledIKM(hpkeSuiteID, "info_hash", info), nil)
	if err != nil {
		return err
	}
	ksContext := make([]byte, 0, 1+2*hashSize)
	ksContext = append(ksContext, 0) // mode_base
	ksContext = append(ksContext, pskIDHash...)
	ksContext = append(ksContext, infoHash...)
	secretIKM := labeledIKM(hpkeSuiteID, "secret", nil)
	keyInfo := string(labeledInfo(hpkeSuiteID, "key", ksContext, keySize))
	nonceInfo := string(labeledInfo(hpkeSuiteID, "base_nonce", ksContext, nonceSize))
	var kemContext [2 * EncSize]byte
	copy(kemContext[EncSize:], pkR[:])
	for i := range ctxs {
		var or byte // constant time: every byte is read
		for _, b := range dh[i] {
			or |= b
		}
		if len(dh[i]) != hashSize || or == 0 {
			return fmt.Errorf("message %d: invalid DH output (low-order key)", i)
		}
		ikm := labeledIKM(kemSuiteID, "eae_prk", dh[i])
		eaePRK, err := hkdf.Extract(sha256.New, ikm, nil)
		clear(ikm)
		if err != nil {
			return err
		}
		copy(kemContext[:EncSize], ctxs[i].enc[:])
		shared, err := hkdf.Expand(sha256.New, eaePRK, string(labeledInfo(kemSuiteID, "shared_secret", kemContext[:], hashSize)), hashSize)
		clear(eaePRK)
		if err != nil {
			return err
		}
		secret, err := hkdf.Extract(sha256.New, secretIKM, shared)
		clear(shared)
		if err != nil {
			return err
		}
		key, err := hkdf.Expand(sha256.New, secret, keyInfo, keySize)
		if err != nil {
			clear(secret)
			return err
		}
		copy(ctxs[i].key[:], key)
		clear(key)
		nonce, err := hkdf.Expand(sha256.New, secret, nonceInfo, nonceSize)
		clear(secret)
		if err != nil {
			return err
		}
		copy(ctxs[i].nonce[:], nonce)
	}
	return nil
}

// labeledIKM is the input of LabeledExtract (RFC 9180, section 4):
// "HPKE-v1" || suite_id || label || ikm.
func labeledIKM(suiteID, label string, ikm []byte) []byte {
	b := make([]byte, 0, len(hpkeV1)+len(suiteID)+len(label)+len(ikm))
	b = append(b, hpkeV1...)
	b = append(b, suiteID...)
	b = append(b, label...)
	return append(b, ikm...)
}

// labeledInfo is the info of LabeledExpand (RFC 9180, section 4):
// I2OSP(L, 2) || "HPKE-v1" || suite_id || label || info.
func labeledInfo(suiteID, label string, info []byte, length int) []byte {
	b := make([]byte, 2, 2+len(hpkeV1)+len(suiteID)+len(label)+len(info))
	binary.BigEndian.PutUint16(b, uint16(length))
	b = append(b, hpkeV1...)
	b = append(b, suiteID...)
	b = append(b, label...)
	return append(b, info...)
}

func clearAll(bs [][]byte) {
	for _, b := range bs {
		clear(b)
	}
}
