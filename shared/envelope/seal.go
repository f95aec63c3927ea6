package envelope

import (
	"crypto/hpke"
	"fmt"

	"github.com/blanket-fl/blanket/shared/parallel"
)

// Where sealing happens. Natively every message is sealed by Go's
// crypto/hpke. Under js/wasm it is sealed by the browser's WebCrypto
// (X25519 and AES-GCM: the browser's vetted, native implementations) and
// Go's crypto/hkdf through envelope/webhpke, which composes RFC 9180's
// Encap and key schedule from them and is checked against RFC 9180's vector
// for the suite and against crypto/hpke; a browser without WebCrypto X25519 (or a page
// outside a secure context, which has no crypto.subtle) falls back to
// crypto/hpke compiled to wasm. Both produce the same wire format with the
// same distribution (a fresh ephemeral key pair per message), and every
// opener opens them with crypto/hpke.

// Backends, as SealBackend names them.
const (
	BackendWebCrypto = "webcrypto"
	BackendGo        = "crypto/hpke"
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
	seal := sealStd
	if web := webSealer(); web != nil {
		seal = web
	}
	out, err := seal(pkR, info, pts, out)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSeal, err)
	}
	return out, nil
}

// sealStd is sealFunc with crypto/hpke, natively on up to GOMAXPROCS
// goroutines in chunks of BatchChunk (parallel.Chunks).
func sealStd(pkR [32]byte, info []byte, pts [][]byte, out [][]byte) ([][]byte, error) {
	if out == nil {
		out = make([][]byte, len(pts))
	}
	if len(out) != len(pts) {
		return nil, fmt.Errorf("%d outputs for %d plaintexts", len(out), len(pts))
	}
	pk, err := kem.NewPublicKey(pkR[:])
	if err != nil {
		return nil, err
	}
	err = parallel.Chunks(len(pts), batchChunk, func(lo, hi int) error {
		for i := lo; i < hi; i++ {
			c, err := hpke.Seal(pk, kdf, aead, info, pts[i])
			if err != nil {
				return fmt.Errorf("message %d: %w", i, err)
			}
			out[i] = append(out[i], c...)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
