//go:build js

// Command sealpage is the browser page of scripts/browsertest's
// TestWebCryptoSeal: it seals with shared/envelope as the volunteer's
// client does (WebCrypto, or the Go primitives, webhpke.SealGo, where the
// page has hidden WebCrypto's X25519) and opens with envelope/webhpke.Open (WebCrypto), so
// that the test can open natively what the browser sealed and the reverse.
//
// globalThis.sealtest has, each returning a promise, with bytes as hex:
//
//	backend()                              -> envelope.SealBackend()
//	sealEach(pub, round, values)           -> [sealed]
//	sealShare(pub, round, role, share)     -> sealed
//	open(skR, pkR, info, [sealed])         -> [plaintext]
//
// where values are big-endian binary64 (syscall/js turns a -0 into 0).
package main

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"syscall/js"

	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/envelope/webhpke"
)

func main() {
	obj := js.Global().Get("Object").New()
	def := func(name string, f func(args []js.Value) (any, error)) {
		obj.Set(name, js.FuncOf(func(_ js.Value, args []js.Value) any {
			return promise(func() (any, error) { return f(args) })
		}))
	}
	def("backend", func([]js.Value) (any, error) { return envelope.SealBackend(), nil })
	def("sealEach", sealEach)
	def("sealShare", sealShare)
	def("open", open)
	js.Global().Set("sealtest", obj)
	select {}
}

func key(v js.Value) ([32]byte, error) {
	b, err := hex.DecodeString(v.String())
	if err != nil || len(b) != 32 {
		return [32]byte{}, fmt.Errorf("key %q: want 32 bytes in hex (%v)", v.String(), err)
	}
	return [32]byte(b), nil
}

func hexes(bs [][]byte) []any {
	out := make([]any, len(bs))
	for i, b := range bs {
		out[i] = hex.EncodeToString(b)
	}
	return out
}

func sealEach(args []js.Value) (any, error) {
	if len(args) != 3 {
		return nil, errors.New("sealEach(pub, round, values)")
	}
	pub, err := key(args[0])
	if err != nil {
		return nil, err
	}
	raw, err := hex.DecodeString(args[2].String())
	if err != nil || len(raw)%8 != 0 {
		return nil, fmt.Errorf("values: want 8 bytes each in hex (%v)", err)
	}
	vals := make([]float64, len(raw)/8)
	for i := range vals {
		vals[i] = math.Float64frombits(binary.BigEndian.Uint64(raw[8*i:]))
	}
	sealed, err := envelope.SealEach(pub, uint64(args[1].Int()), vals)
	if err != nil {
		return nil, err
	}
	return hexes(sealed), nil
}

func sealShare(args []js.Value) (any, error) {
	if len(args) != 5 {
		return nil, errors.New("sealShare(pub, round, role, consent, share)")
	}
	pub, err := key(args[0])
	if err != nil {
		return nil, err
	}
	var consent [32]byte // "": none (the helper's share)
	if c := args[3].String(); c != "" {
		if consent, err = key(args[3]); err != nil {
			return nil, fmt.Errorf("consent: %w", err)
		}
	}
	share, err := hex.DecodeString(args[4].String())
	if err != nil {
		return nil, err
	}
	sealed, err := envelope.SealShare(pub, uint64(args[1].Int()), envelope.ShareRole(args[2].Int()), consent, share)
	if err != nil {
		return nil, err
	}
	return hex.EncodeToString(sealed), nil
}

func open(args []js.Value) (any, error) {
	if len(args) != 4 {
		return nil, errors.New("open(skR, pkR, info, sealed)")
	}
	sk, err := key(args[0])
	if err != nil {
		return nil, err
	}
	pk, err := key(args[1])
	if err != nil {
		return nil, err
	}
	info, err := hex.DecodeString(args[2].String())
	if err != nil {
		return nil, err
	}
	sealed := make([][]byte, args[3].Length())
	for i := range sealed {
		if sealed[i], err = hex.DecodeString(args[3].Index(i).String()); err != nil {
			return nil, err
		}
	}
	pts, err := webhpke.Open(sk, pk, info, sealed)
	if err != nil {
		return nil, err
	}
	return hexes(pts), nil
}

// promise runs f on a goroutine of its own (WebCrypto's promises cannot
// settle while a syscall/js callback blocks) and returns a Promise of its
// result.
func promise(f func() (any, error)) js.Value {
	var executor js.Func
	executor = js.FuncOf(func(_ js.Value, args []js.Value) any {
		resolve, reject := args[0], args[1]
		go func() {
			defer executor.Release()
			v, err := f()
			if err != nil {
				reject.Invoke(js.Global().Get("Error").New(err.Error()))
				return
			}
			resolve.Invoke(js.ValueOf(v))
		}()
		return nil
	})
	return js.Global().Get("Promise").New(executor)
}
