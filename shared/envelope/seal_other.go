//go:build !js

package envelope

// webSealer: natively there is no WebCrypto; crypto/hpke seals.
func webSealer() sealFunc { return nil }
