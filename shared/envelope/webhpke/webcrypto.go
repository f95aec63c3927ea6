//go:build js

package webhpke

import (
	"errors"
	"fmt"
	"sync"
	"syscall/js"
)

// pkcs8X25519 is the PKCS #8 encoding of an X25519 private key before its
// 32 bytes (RFC 8410, section 7; id-X25519 = 1.3.101.110), the form
// WebCrypto imports a private key from.
const pkcs8X25519 = "\x30\x2e\x02\x01\x00\x30\x05\x06\x03\x2b\x65\x6e\x04\x22\x04\x20"

var probe struct {
	once sync.Once
	err  error
}

// Available reports whether the environment's WebCrypto can run this
// suite: it generates one X25519 key pair and exports its public key, once
// per program (later calls return the first answer). Like Seal and Open
// it blocks on promises, so it must not be called from a syscall/js
// callback.
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
// number 0), with empty aad: the schedule of schedule.go over WebCrypto's
// X25519 and AES-GCM. It appends enc || ciphertext || tag to out[i] and
// returns out; a nil out allocates. On error nothing is returned; errors
// wrap ErrUnavailable or ErrSeal.
func Seal(pkR [32]byte, info []byte, pts [][]byte, out [][]byte) ([][]byte, error) {
	s, err := subtle()
	if err != nil {
		return nil, err
	}
	return seal(webCrypto{s}, pkR, info, pts, out, nil)
}

// Open opens sealed messages (enc || ciphertext || tag, as Seal makes them)
// with the X25519 key pair (skR, pkR) under info, base mode, single shot,
// empty aad, over WebCrypto, and returns their plaintexts. It fails as a
// whole (ErrOpen) if any message does not open. The volunteer never opens
// anything: Open exists so that tests, in the browser too, can check what
// native code seals.
func Open(skR, pkR [32]byte, info []byte, sealed [][]byte) ([][]byte, error) {
	for i, c := range sealed {
		if len(c) < Overhead {
			return nil, fmt.Errorf("%w: length: message %d has %d bytes", ErrOpen, i, len(c))
		}
	}
	if len(sealed) == 0 {
		return [][]byte{}, nil
	}
	s, err := subtle()
	if err != nil {
		return nil, err
	}
	return open(webCrypto{s}, skR, pkR, info, sealed)
}

// webCrypto is primitives over crypto.subtle: X25519 generateKey,
// exportKey and deriveBits (which rejects an all-zero output), AES-GCM
// importKey (non-extractable) and encrypt or decrypt. Each method runs its
// steps for the whole batch at once (one Promise.all per step), so a
// sealed batch costs four waits (generate, encapsulate, import the AEAD
// keys, encrypt), not four per message.
type webCrypto struct{ s js.Value }

func (w webCrypto) encap(pkR *[32]byte, n int, fixed *ephemeral) ([][EncSize]byte, [][]byte, error) {
	s := w.s
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
		return nil, nil, fmt.Errorf("generate: %w", err)
	}
	keys, err := all(ps)
	if err != nil {
		return nil, nil, fmt.Errorf("generate: %w", err)
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
		return nil, nil, err
	}
	res, err := all(ps)
	if err != nil {
		return nil, nil, err
	}
	encs := make([][EncSize]byte, n)
	dh := make([][]byte, 0, n)
	for i := range encs {
		if fixed != nil {
			encs[i] = fixed.pk
			dh = append(dh, takeSecret(res[i]))
			continue
		}
		dh = append(dh, takeSecret(res[2*i+1]))
		if got := copyBytes(encs[i][:], res[2*i]); got != EncSize {
			return nil, dh, fmt.Errorf("public key of %d bytes", got)
		}
	}
	return encs, dh, nil
}

func (w webCrypto) decap(skR *[32]byte, encs [][]byte) ([][]byte, error) {
	s := w.s
	ps := make([]any, 0, len(encs)+1)
	if err := try(func() {
		ps = append(ps, s.Call("importKey", "pkcs8", u8(append([]byte(pkcs8X25519), skR[:]...)), x25519Alg(), false, deriveUsage()))
		for _, e := range encs {
			ps = append(ps, s.Call("importKey", "raw", u8(e), x25519Alg(), true, js.ValueOf([]any{})))
		}
	}); err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	keys, err := all(ps)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	ps = ps[:0]
	if err := try(func() {
		for _, e := range keys[1:] {
			ps = append(ps, s.Call("deriveBits", js.ValueOf(map[string]any{"name": "X25519", "public": e}), keys[0], 8*hashSize))
		}
	}); err != nil {
		return nil, err
	}
	res, err := all(ps)
	if err != nil {
		return nil, err
	}
	dh := make([][]byte, len(res))
	for i, r := range res {
		dh[i] = takeSecret(r)
	}
	return dh, nil
}

func (w webCrypto) crypt(open bool, jobs []aeadJob, out [][]byte) ([][]byte, error) {
	s := w.s
	op, usage := "encrypt", "encrypt"
	if open {
		op, usage = "decrypt", "decrypt"
	}
	ps := make([]any, len(jobs))
	if err := try(func() {
		for i, j := range jobs {
			ps[i] = s.Call("importKey", "raw", u8(j.key[:]), js.ValueOf("AES-GCM"), false, js.ValueOf([]any{usage}))
		}
	}); err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	keys, err := all(ps)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	if err := try(func() {
		for i, j := range jobs {
			p := map[string]any{"name": "AES-GCM", "iv": u8(j.nonce[:]), "tagLength": 8 * TagSize}
			if len(j.aad) > 0 {
				p["additionalData"] = u8(j.aad)
			}
			ps[i] = s.Call(op, js.ValueOf(p), keys[i], u8(j.in))
		}
	}); err != nil {
		return nil, err
	}
	res, err := all(ps)
	if err != nil {
		return nil, err
	}
	for i, r := range res {
		out[i] = appendBytes(out[i], r)
	}
	return out, nil
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
