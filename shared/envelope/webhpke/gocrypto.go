package webhpke

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/rand"
	"fmt"
)

// SealGo is Seal with Go's standard library for the primitives instead of
// WebCrypto: crypto/ecdh's X25519 (a fresh ephemeral key pair per message
// from crypto/rand) and crypto/aes with crypto/cipher's GCM, under the
// same RFC 9180 schedule (base mode, DHKEM(X25519, HKDF-SHA256),
// HKDF-SHA256, AES-128-GCM, single shot, empty aad). Its output is
// byte for byte what crypto/hpke makes from the same ephemeral key
// (checked against RFC 9180's vector for the suite and against crypto/hpke
// in both directions, natively and under js). It is the browser's
// fallback where WebCrypto lacks X25519: unlike crypto/hpke, whose KEM
// table links the NIST curves and ML-KEM, it links only the suite. It runs
// anywhere and never blocks on promises. Errors wrap ErrSeal.
func SealGo(pkR [32]byte, info []byte, pts [][]byte, out [][]byte) ([][]byte, error) {
	return seal(goCrypto{}, pkR, info, pts, out, nil)
}

// OpenGo is Open with Go's standard library for the primitives: it opens
// what Seal, SealGo and crypto/hpke seal with the suite (single shot,
// empty aad) to the key pair (skR, pkR) under info, and fails as a whole
// (ErrOpen) if any message does not open.
func OpenGo(skR, pkR [32]byte, info []byte, sealed [][]byte) ([][]byte, error) {
	return open(goCrypto{}, skR, pkR, info, sealed)
}

// goCrypto is primitives over crypto/ecdh (X25519: crypto/ecdh's ECDH
// rejects an all-zero output) and crypto/aes + crypto/cipher (GCM, 12-byte
// nonce, 16-byte tag).
type goCrypto struct{}

func (goCrypto) encap(pkR *[32]byte, n int, fixed *ephemeral) ([][EncSize]byte, [][]byte, error) {
	x := ecdh.X25519()
	pub, err := x.NewPublicKey(pkR[:])
	if err != nil {
		return nil, nil, err
	}
	encs := make([][EncSize]byte, n)
	dh := make([][]byte, 0, n)
	for i := range encs {
		var sk *ecdh.PrivateKey
		if fixed != nil {
			sk, err = x.NewPrivateKey(fixed.sk[:])
		} else {
			sk, err = x.GenerateKey(rand.Reader)
		}
		if err != nil {
			return nil, dh, err
		}
		if copy(encs[i][:], sk.PublicKey().Bytes()) != EncSize {
			return nil, dh, fmt.Errorf("public key of %d bytes", len(sk.PublicKey().Bytes()))
		}
		z, err := sk.ECDH(pub)
		if err != nil {
			return nil, dh, err
		}
		dh = append(dh, z)
	}
	return encs, dh, nil
}

func (goCrypto) decap(skR *[32]byte, encs [][]byte) ([][]byte, error) {
	x := ecdh.X25519()
	sk, err := x.NewPrivateKey(skR[:])
	if err != nil {
		return nil, err
	}
	dh := make([][]byte, 0, len(encs))
	for i, e := range encs {
		pk, err := x.NewPublicKey(e)
		if err != nil {
			return dh, fmt.Errorf("message %d: %w", i, err)
		}
		z, err := sk.ECDH(pk)
		if err != nil {
			return dh, fmt.Errorf("message %d: %w", i, err)
		}
		dh = append(dh, z)
	}
	return dh, nil
}

func (goCrypto) crypt(open bool, jobs []aeadJob, out [][]byte) ([][]byte, error) {
	for i, j := range jobs {
		b, err := aes.NewCipher(j.key[:])
		if err != nil {
			return nil, err
		}
		g, err := cipher.NewGCM(b)
		if err != nil {
			return nil, err
		}
		if open {
			if out[i], err = g.Open(out[i], j.nonce[:], j.in, j.aad); err != nil {
				return nil, fmt.Errorf("message %d: %w", i, err)
			}
		} else {
			out[i] = g.Seal(out[i], j.nonce[:], j.in, j.aad)
		}
	}
	return out, nil
}
