//go:build !js

package webhpke

// Natively there is no WebCrypto: the tests run over the Go primitives.
var platformBackends = []backend{goBackend}
