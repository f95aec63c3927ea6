package envelope

import "fmt"

// Where sealing happens. Every backend seals in HPKE (RFC 9180) base mode,
// single shot, with the suite DHKEM(X25519, HKDF-SHA256), HKDF-SHA256,
// AES-128-GCM, a fresh ephemeral key pair per message, and produces the
// same wire format with the same distribution; every opener opens it with
// crypto/hpke.
//
//   - Natively every message is sealed by Go's crypto/hpke (seal_other.go).
//   - Under js/wasm it is sealed by the browser's WebCrypto (X25519 and
//     AES-GCM: the browser's vetted, native implementations) and Go's
//     crypto/hkdf through envelope/webhpke, which composes RFC 9180's
//     Encap and key schedule from them (webhpke.Seal).
//   - A browser without WebCrypto X25519 (or a page outside a secure
//     context, which has no crypto.subtle) falls back to the same webhpke
//     schedule over Go's crypto/ecdh X25519 and crypto/aes GCM, compiled to
//     wasm (webhpke.SealGo), not to crypto/hpke: crypto/hpke's KEM table
//     would link the NIST curves and ML-KEM into the browser module, and the
//     js build does not link crypto/hpke at all (seal_js.go;
//     wasm/internal/browser's TestNoHPKEInTheBrowser checks it).
//
// webhpke's two implementations are checked against RFC 9180's vector for
// the suite (Appendix A.1.1) and against crypto/hpke in both directions,
// natively, in Node and in Chromium; fallback_test.go checks natively that
// SealGo and crypto/hpke agree for Blanket's own info strings.

// Backends, as SealBackend names them.
const (
	BackendWebCrypto = "webcrypto"
	// BackendGo is Go's own implementation: crypto/hpke natively,
	// webhpke.SealGo under js.
	BackendGo = "go"
)

// sealFunc seals every pts[i] to pkR under info, each with its own
// encapsulation, single shot, empty aad, and appends enc || ciphertext ||
// tag to out[i].
type sealFunc func(pkR [32]byte, info []byte, pts [][]byte, out [][]byte) ([][]byte, error)

// SealBackend names the implementation this program seals with:
// BackendWebCrypto under js/wasm when the JavaScript environment's
// WebCrypto has X25519, BackendGo otherwise. Under js the first call
// probes WebCrypto (a promise: call it from a goroutine, not from a
// syscall/js callback), as the first seal does.
func SealBackend() string {
	if webSealer() != nil {
		return BackendWebCrypto
	}
	return BackendGo
}

// sealBatch seals with this platform's backend; errors wrap ErrSeal.
func sealBatch(pkR [32]byte, info []byte, pts [][]byte, out [][]byte) ([][]byte, error) {
	seal := goSealer
	if web := webSealer(); web != nil {
		seal = web
	}
	out, err := seal(pkR, info, pts, out)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSeal, err)
	}
	return out, nil
}
