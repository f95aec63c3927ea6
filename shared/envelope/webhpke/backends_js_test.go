//go:build js

package webhpke

import "testing"

// Under js the tests run over WebCrypto (Seal, Open; Node's and
// Chromium's have X25519, so a missing one fails) and over the Go
// primitives (SealGo, OpenGo: the fallback where a browser's has none).
var platformBackends = []backend{webBackend, goBackend}

var webBackend = backend{
	name: "webcrypto",
	prims: func(t *testing.T) primitives {
		t.Helper()
		need(t)
		s, err := subtle()
		if err != nil {
			t.Fatal(err)
		}
		return webCrypto{s}
	},
	seal: Seal,
	open: Open,
}

func need(t *testing.T) {
	t.Helper()
	if !Available() {
		t.Fatalf("WebCrypto X25519 unavailable in this JavaScript environment: %v", probe.err)
	}
}
