//go:build js

package envelope

import (
	"sync/atomic"

	"github.com/blanket-fl/blanket/shared/envelope/webhpke"
)

// noWebCrypto makes webSealer report no WebCrypto, so that the tests under
// js also run the fallback.
var noWebCrypto atomic.Bool

// webSealer returns webhpke.Seal when the JavaScript environment's
// WebCrypto has X25519 (probed once, webhpke.Available), nil otherwise.
func webSealer() sealFunc {
	if noWebCrypto.Load() || !webhpke.Available() {
		return nil
	}
	return webhpke.Seal
}

// goSealer, the fallback without WebCrypto X25519, is webhpke's RFC 9180
// schedule over Go's crypto/ecdh and crypto/aes, not crypto/hpke: this
// package links no crypto/hpke under js (seal.go).
var goSealer sealFunc = webhpke.SealGo
