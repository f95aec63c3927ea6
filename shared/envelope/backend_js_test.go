//go:build js

package envelope

import (
	"bytes"
	"math"
	"testing"
)

// backends are the two ways a js/wasm program seals: WebCrypto
// (webhpke.Seal), and the Go fallback (webhpke.SealGo) where the browser
// lacks WebCrypto X25519.
var backends = []string{BackendWebCrypto, BackendGo}

// useBackend makes the package seal with the named backend until the
// test (or benchmark) ends.
func useBackend(tb testing.TB, name string) {
	tb.Helper()
	noWebCrypto.Store(name == BackendGo)
	tb.Cleanup(func() { noWebCrypto.Store(false) })
	if got := SealBackend(); got != name {
		tb.Fatalf("sealing with %s, want %s", got, name)
	}
}

// Node's WebCrypto (the test runner, go_js_wasm_exec, Node 20) has
// X25519, so under js the package seals with it, not with the fallback.
func TestSealBackendIsWebCrypto(t *testing.T) {
	if got := SealBackend(); got != BackendWebCrypto {
		t.Fatalf("SealBackend() = %q, want %q", got, BackendWebCrypto)
	}
}

// Both backends seal what crypto/hpke opens, for values, width-1 batches
// and shares, and the fallback is used when WebCrypto is turned off.
func TestBothBackendsOpen(t *testing.T) {
	k := testKey(t, 3)
	pub := k.Public().HPKE
	for _, name := range backends {
		t.Run(name, func(t *testing.T) {
			useBackend(t, name)
			vals := testValues(20)
			vals[3] = math.Copysign(0, -1)
			s, err := SealValues(pub, 7, vals)
			if err != nil {
				t.Fatal(err)
			}
			got, err := k.OpenValues(7, s, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i := range vals {
				if math.Float64bits(got[i]) != math.Float64bits(vals[i]) {
					t.Fatalf("value %d = %v, want %v", i, got[i], vals[i])
				}
			}
			each, err := SealEach(pub, 7, vals)
			if err != nil {
				t.Fatal(err)
			}
			back, errs := k.OpenEach(7, each, nil)
			if errs != nil {
				t.Fatal(errs)
			}
			for i := range vals {
				if math.Float64bits(back[i]) != math.Float64bits(vals[i]) {
					t.Fatalf("width-1 value %d = %v, want %v", i, back[i], vals[i])
				}
			}
			share := bytes.Repeat([]byte{0xa5}, 300)
			sealed, err := SealShare(pub, 7, ShareHelper, [32]byte{}, share)
			if err != nil {
				t.Fatal(err)
			}
			if len(sealed) != ShareSealedLen(len(share)) {
				t.Fatalf("sealed share of %d bytes, want %d", len(sealed), ShareSealedLen(len(share)))
			}
			inf, _ := ShareInfo(7, ShareHelper, [32]byte{})
			pt, err := openRaw(k, inf, sealed)
			if err != nil || !bytes.Equal(pt, share) {
				t.Fatalf("share opens to %d bytes, %v", len(pt), err)
			}
		})
	}
}

// setBackend is useBackend for benchmarks that switch within one run.
func setBackend(name string) { noWebCrypto.Store(name == BackendGo) }
