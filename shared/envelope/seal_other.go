//go:build !js

package envelope

import (
	"crypto/ecdh"
	"crypto/hpke"
	"fmt"

	"github.com/blanket-fl/blanket/shared/parallel"
)

// Natively there is no WebCrypto: crypto/hpke seals (seal.go).
func webSealer() sealFunc { return nil }

var goSealer sealFunc = sealStd

var (
	kem  = hpke.DHKEM(ecdh.X25519())
	kdf  = hpke.HKDFSHA256()
	aead = hpke.AES128GCM()
)

// Suite returns the HPKE suite every message and share is sealed with:
// DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM. An opener
// (the aggregator's aggregator/internal/sealkey, the relay's helper key,
// the test opener envelopetest) opens with exactly this suite. It exists
// natively only: under js envelope does not link crypto/hpke (seal.go).
func Suite() (hpke.KEM, hpke.KDF, hpke.AEAD) { return kem, kdf, aead }

// sealStd is sealFunc with crypto/hpke, on up to GOMAXPROCS goroutines in
// chunks of BatchChunk (parallel.Chunks).
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
