//go:build js

package webhpke

import (
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"syscall/js"
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
	// pkcs8X25519 is the PKCS #8 encoding of an X25519 private key before
	// its 32 bytes (RFC 8410, section 7; id-X25519 = 1.3.101.110), the
	// form WebCrypto imports a private key from.
	pkcs8X25519 = "\x30\x2e\x02\x01\x00\x30\x05\x06\x03\x2b\x65\x6e\x04\x22\x04\x20"
)

// Errors.
var (
	// ErrUnavailable: the JavaScript environment has no WebCrypto or its
	// WebCrypto has no X25519.
	ErrUnavailable = errors.New("webhpke: WebCrypto X25519 is not available")
	// ErrSeal: a WebCrypto call failed while sealing (a low-order
	// recipient key, say).
	ErrSeal = errors.New("webhpke: cannot seal")
	// ErrOpen: a message did not open.
	ErrOpen = errors.New("webhpke: cannot open")
)

var probe struct {
	once sync.Once
	err  error
}

// Available reports whether the environment's WebCrypto can run this
// suite: it generates one X25519 key pair and exports its public key, once
// per program (later calls return the first answer). Like every function
// of the package it blocks on promises, so it must not be called from a
// syscall/js callback.
func Available() bool {
	probe.once.Do(func() { probe.err = check() })
	return probe.err == nil
}

func check() error {
	s, err := subtle()
	if err != nil {
		return err
	}
	var p js.Value
	if err := try(func() { p = s.Call("generateKey", x25519Alg(), false, deriveUsage()) }); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	pair, err := await(p)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if err := try(func() { p = s.Call("exportKey", "raw", pair.Get("publicKey")) }); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	raw, err := await(p)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if n := raw.Get("byteLength").Int(); n != EncSize {
		return fmt.Errorf("%w: exported X25519 public key of %d bytes", ErrUnavailable, n)
	}
	return nil
}

// subtle returns globalThis.crypto.subtle (absent outside a secure
// context).
func subtle() (s js.Value, err error) {
	err = try(func() {
		c := js.Global().Get("crypto")
		if c.Truthy() {
			s = c.Get("subtle")
		}
	})
	if err == nil && !s.Truthy() {
		err = errors.New("no crypto.subtle")
	}
	if err != nil {
		return js.Value{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return s, nil
}

// Seal seals every pts[i] to the X25519 public key pkR under info, each
// with its own fresh encapsulation (a new ephemeral key pair from
// WebCrypto's generateKey), in RFC 9180 base mode, single shot (sequence
// number 0), with empty aad. It appends enc || ciphertext || tag to out[i]
// and returns out; a nil out allocates. On error nothing is returned;
// errors wrap ErrUnavailable or ErrSeal.
func Seal(pkR [32]byte, info []byte, pts [][]byte, out [][]byte) ([][]byte, error) {
	return seal(pkR, info, pts, out, nil)
}

// ephemeral is a fixed ephemeral key pair, for the known-answer tests
// only: production seals always generate theirs.
type ephemeral struct{ sk, pk [32]byte }

func seal(pkR [32]byte, info []byte, pts [][]byte, out [][]byte, fixed *ephemeral) ([][]byte, error) {
	if out == nil {
		out = make([][]byte, len(pts))
	}
	if len(out) != len(pts) {
		return nil, fmt.Errorf("%w: %d outputs for %d plaintexts", ErrSeal, len(out), len(pts))
	}
	if len(pts) == 0 {
		return out, nil
	}
	s, err := subtle()
	if err != nil {
		return nil, err
	}
	for lo := 0; lo < len(pts); lo += maxBatch {
		hi := min(lo+maxBatch, len(pts))
		if err := sealChunk(s, pkR, info, pts[lo:hi], out[lo:hi], fixed); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// maxBatch is the most messages one step of a seal hands WebCrypto at
// once: a volunteer's 7850 messages go in chunks, which bounds the number
// of live WebCrypto keys and pending promises (and the JavaScript memory
// they hold) at four more waits per chunk.
const maxBatch = 1024

// sealChunk is seal of at most maxBatch messages.
func sealChunk(s js.Value, pkR [32]byte, info []byte, pts [][]byte, out [][]byte, fixed *ephemeral) error {
	ctxs, err := setupSenders(s, pkR, info, len(pts), fixed)
	if err != nil {
		return err
	}
	ps := make([]any, len(pts))
	if err := try(func() {
		for i, pt := range pts {
			ps[i] = aesGCM(s, "encrypt", &ctxs[i], 0, nil, pt)
		}
	}); err != nil {
		return fmt.Errorf("%w: %w", ErrSeal, err)
	}
	cts, err := all(ps)
	if err != nil {
		return fmt.Errorf("%w: encrypt: %w", ErrSeal, err)
	}
	for i, ct := range cts {
		n0 := len(out[i])
		out[i] = append(out[i], ctxs[i].enc[:]...)
		out[i] = appendBytes(out[i], ct)
		if got := len(out[i]) - n0; got != Overhead+len(pts[i]) {
			return fmt.Errorf("%w: message %d: %d bytes", ErrSeal, i, got)
		}
	}
	return nil
}

// context is one message's HPKE context (RFC 9180, section 5.1): the
// encapsulated key, the AEAD key (a non-extractable WebCrypto key) and the
// base nonce.
type context struct {
	enc   [32]byte
	key   js.Value
	nonce [nonceSize]byte
}

// setupSenders runs SetupBaseS (RFC 9180, section 5.1.1) n times: Encap
// with a fresh ephemeral key pair each (fixed, for tests, when not nil),
// then the key schedule.
func setupSenders(s js.Value, pkR [32]byte, info []byte, n int, fixed *ephemeral) ([]context, error) {
	wrap := func(step string, err error) error { return fmt.Errorf("%w: %s: %w", ErrSeal, step, err) }
	// Step 1: the recipient key and the ephemeral key pairs.
	ps := make([]any, 0, n+1)
	if err := try(func() {
		ps = append(ps, s.Call("importKey", "raw", u8(pkR[:]), x25519Alg(), true, js.ValueOf([]any{})))
		for range n {
			if fixed != nil {
				ps = append(ps, s.Call("importKey", "pkcs8", u8(append([]byte(pkcs8X25519), fixed.sk[:]...)), x25519Alg(), false, deriveUsage()))
			} else {
				ps = append(ps, s.Call("generateKey", x25519Alg(), false, deriveUsage()))
			}
		}
	}); err != nil {
		return nil, wrap("generate", err)
	}
	keys, err := all(ps)
	if err != nil {
		return nil, wrap("generate", err)
	}
	pub := keys[0]
	// Step 2: DH(skE, pkR) and, for generated pairs, SerializePublicKey(pkE).
	ps = ps[:0]
	if err := try(func() {
		alg := js.ValueOf(map[string]any{"name": "X25519", "public": pub})
		for _, k := range keys[1:] {
			sk := k
			if fixed == nil {
				sk = k.Get("privateKey")
				ps = append(ps, s.Call("exportKey", "raw", k.Get("publicKey")))
			}
			ps = append(ps, s.Call("deriveBits", alg, sk, 8*hashSize))
		}
	}); err != nil {
		return nil, wrap("encap", err)
	}
	res, err := all(ps)
	if err != nil {
		return nil, wrap("encap", err)
	}
	ctxs := make([]context, n)
	dh := make([][]byte, n)
	for i := range ctxs {
		if fixed != nil {
			ctxs[i].enc = fixed.pk
			dh[i] = takeSecret(res[i])
			continue
		}
		if got := copyBytes(ctxs[i].enc[:], res[2*i]); got != EncSize {
			return nil, wrap("encap", fmt.Errorf("public key of %d bytes", got))
		}
		dh[i] = takeSecret(res[2*i+1])
	}
	defer func() {
		for _, d := range dh {
			clear(d)
		}
	}()
	if err := schedule(s, ctxs, dh, &pkR, info, "encrypt"); err != nil {
		return nil, wrap("key schedule", err)
	}
	return ctxs, nil
}

// schedule completes every ctxs[i] whose enc is set from its DH output
// dh[i]: DHKEM's ExtractAndExpand (RFC 9180, section 4.1), with kem_context
// = enc || pkR, gives the shared secret, and KeySchedule (section 5.1,
// mode_base, empty psk and psk_id) the AEAD key and base nonce, which
// becomes a non-extractable WebCrypto AES-GCM key for usage ("encrypt" or
// "decrypt"). The HKDF-SHA256 steps are Go's crypto/hkdf: five HMACs per
// message cost less in wasm than four more WebCrypto calls, each a round
// trip through the browser's crypto thread (docs/protocol.md,
// "Cryptography", measured with WebCrypto's HKDF at commit 3997388).
func schedule(s js.Value, ctxs []context, dh [][]byte, pkR *[32]byte, info []byte, usage string) error {
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
	keys := make([][]byte, len(ctxs))
	defer func() {
		for _, k := range keys {
			clear(k)
		}
	}()
	for i := range ctxs {
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
		if keys[i], err = hkdf.Expand(sha256.New, secret, keyInfo, keySize); err != nil {
			return err
		}
		nonce, err := hkdf.Expand(sha256.New, secret, nonceInfo, nonceSize)
		clear(secret)
		if err != nil {
			return err
		}
		copy(ctxs[i].nonce[:], nonce)
	}
	ps := make([]any, len(ctxs))
	if err := try(func() {
		for i := range ctxs {
			ps[i] = s.Call("importKey", "raw", u8(keys[i]), js.ValueOf("AES-GCM"), false, js.ValueOf([]any{usage}))
		}
	}); err != nil {
		return err
	}
	aeadKeys, err := all(ps)
	if err != nil {
		return err
	}
	for i := range ctxs {
		ctxs[i].key = aeadKeys[i]
	}
	return nil
}

// aesGCM returns the promise of encrypting (or decrypting) in with the
// context's key and the nonce of sequence number seq (RFC 9180, section
// 5.2: base_nonce XOR I2OSP(seq, Nn)).
func aesGCM(s js.Value, op string, c *context, seq uint64, aad, in []byte) js.Value {
	nonce := c.nonce
	var sb [8]byte
	binary.BigEndian.PutUint64(sb[:], seq)
	for i := range sb {
		nonce[nonceSize-8+i] ^= sb[i]
	}
	p := map[string]any{"name": "AES-GCM", "iv": u8(nonce[:]), "tagLength": 8 * TagSize}
	if len(aad) > 0 {
		p["additionalData"] = u8(aad)
	}
	return s.Call(op, js.ValueOf(p), c.key, u8(in))
}

// Open opens sealed messages (enc || ciphertext || tag, as Seal makes them)
// with the X25519 key pair (skR, pkR) under info, base mode, single shot,
// empty aad, and returns their plaintexts. It fails as a whole (ErrOpen)
// if any message does not open. The volunteer never opens anything: Open
// exists so that tests, in the browser too, can check what native code
// seals.
func Open(skR, pkR [32]byte, info []byte, sealed [][]byte) ([][]byte, error) {
	if len(sealed) == 0 {
		return [][]byte{}, nil
	}
	wrap := func(step string, err error) error { return fmt.Errorf("%w: %s: %w", ErrOpen, step, err) }
	for i, c := range sealed {
		if len(c) < Overhead {
			return nil, wrap("length", fmt.Errorf("message %d has %d bytes", i, len(c)))
		}
	}
	s, err := subtle()
	if err != nil {
		return nil, err
	}
	n := len(sealed)
	ps := make([]any, 0, n+1)
	if err := try(func() {
		ps = append(ps, s.Call("importKey", "pkcs8", u8(append([]byte(pkcs8X25519), skR[:]...)), x25519Alg(), false, deriveUsage()))
		for _, c := range sealed {
			ps = append(ps, s.Call("importKey", "raw", u8(c[:EncSize]), x25519Alg(), true, js.ValueOf([]any{})))
		}
	}); err != nil {
		return nil, wrap("import", err)
	}
	keys, err := all(ps)
	if err != nil {
		return nil, wrap("import", err)
	}
	ps = ps[:0]
	if err := try(func() {
		for _, e := range keys[1:] {
			ps = append(ps, s.Call("deriveBits", js.ValueOf(map[string]any{"name": "X25519", "public": e}), keys[0], 8*hashSize))
		}
	}); err != nil {
		return nil, wrap("decap", err)
	}
	res, err := all(ps)
	if err != nil {
		return nil, wrap("decap", err)
	}
	ctxs := make([]context, n)
	dh := make([][]byte, n)
	for i := range ctxs {
		copy(ctxs[i].enc[:], sealed[i][:EncSize])
		dh[i] = takeSecret(res[i])
	}
	defer func() {
		for _, d := range dh {
			clear(d)
		}
	}()
	if err := schedule(s, ctxs, dh, &pkR, info, "decrypt"); err != nil {
		return nil, wrap("key schedule", err)
	}
	ps = ps[:0]
	if err := try(func() {
		for i, c := range sealed {
			ps = append(ps, aesGCM(s, "decrypt", &ctxs[i], 0, nil, c[EncSize:]))
		}
	}); err != nil {
		return nil, wrap("decrypt", err)
	}
	pts, err := all(ps)
	if err != nil {
		return nil, wrap("decrypt", err)
	}
	out := make([][]byte, n)
	for i, p := range pts {
		out[i] = appendBytes([]byte{}, p)
	}
	return out, nil
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

func x25519Alg() js.Value   { return js.ValueOf(map[string]any{"name": "X25519"}) }
func deriveUsage() js.Value { return js.ValueOf([]any{"deriveBits"}) }

// u8 returns a new Uint8Array holding a copy of b.
func u8(b []byte) js.Value {
	u := js.Global().Get("Uint8Array").New(len(b))
	js.CopyBytesToJS(u, b)
	return u
}

// copyBytes copies the ArrayBuffer buf into dst and returns buf's length.
func copyBytes(dst []byte, buf js.Value) int {
	u := js.Global().Get("Uint8Array").New(buf)
	js.CopyBytesToGo(dst, u)
	return u.Length()
}

// appendBytes appends the contents of the ArrayBuffer buf to dst.
func appendBytes(dst []byte, buf js.Value) []byte {
	u := js.Global().Get("Uint8Array").New(buf)
	n := len(dst)
	dst = append(dst, make([]byte, u.Length())...)
	js.CopyBytesToGo(dst[n:], u)
	return dst
}

// takeSecret copies the ArrayBuffer buf into a new slice and zeroes buf.
func takeSecret(buf js.Value) []byte {
	u := js.Global().Get("Uint8Array").New(buf)
	b := make([]byte, u.Length())
	js.CopyBytesToGo(b, u)
	u.Call("fill", 0)
	return b
}

// try runs f, turning a panic (a JavaScript exception thrown by a
// syscall/js call, or a panic of f) into an error.
func try(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if je, ok := r.(js.Error); ok {
				err = je
				return
			}
			err = fmt.Errorf("%v", r)
		}
	}()
	f()
	return nil
}

// await blocks until the promise p settles (from a goroutine, never from
// a syscall/js callback).
func await(p js.Value) (js.Value, error) {
	type result struct {
		v   js.Value
		err error
	}
	ch := make(chan result, 1)
	onOK := js.FuncOf(func(_ js.Value, args []js.Value) any {
		v := js.Undefined()
		if len(args) > 0 {
			v = args[0]
		}
		ch <- result{v: v}
		return nil
	})
	onErr := js.FuncOf(func(_ js.Value, args []js.Value) any {
		msg := "promise rejected"
		if len(args) > 0 {
			_ = try(func() { msg = args[0].Call("toString").String() })
		}
		ch <- result{err: errors.New(msg)}
		return nil
	})
	defer onOK.Release()
	defer onErr.Release()
	if err := try(func() { p.Call("then", onOK, onErr) }); err != nil {
		return js.Value{}, err
	}
	r := <-ch
	return r.v, r.err
}

// all awaits every promise of ps at once (Promise.all) and returns their
// values in order; it fails with the first rejection.
func all(ps []any) (vs []js.Value, err error) {
	var p js.Value
	if err := try(func() { p = js.Global().Get("Promise").Call("all", js.ValueOf(ps)) }); err != nil {
		return nil, err
	}
	arr, err := await(p)
	if err != nil {
		return nil, err
	}
	err = try(func() {
		if n := arr.Length(); n != len(ps) {
			panic(fmt.Sprintf("Promise.all gave %d values for %d promises", n, len(ps)))
		}
		vs = make([]js.Value, len(ps))
		for i := range vs {
			vs[i] = arr.Index(i)
		}
	})
	return vs, err
}
