//go:build js

package webhpke

import (
	"bytes"
	"crypto/ecdh"
	"crypto/hpke"
	"crypto/sha3"
	_ "embed"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
)

// These tests run under GOOS=js in Node (go_js_wasm_exec; Node 20's
// globalThis.crypto.subtle has X25519) and, as a test binary loaded in a
// page, in headless Chromium (scripts/browsertest TestWebHPKEInChromium).
// crypto/hpke, compiled to wasm here, is the reference.

func suite() (hpke.KEM, hpke.KDF, hpke.AEAD) {
	return hpke.DHKEM(ecdh.X25519()), hpke.HKDFSHA256(), hpke.AES128GCM()
}

func need(t *testing.T) {
	t.Helper()
	if !Available() {
		t.Fatalf("WebCrypto X25519 unavailable in this JavaScript environment: %v", probe.err)
	}
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The vector is RFC 9180's for this suite in base mode (Appendix A.1), as
// Go's crypto/hpke tests carry it (GOROOT/src/crypto/hpke/testdata/
// rfc9180.json, the entry with mode 0, kem_id 32, kdf_id 1, aead_id 1,
// copied unchanged): the encryptions are given as a digest of 1000 of
// them, SHAKE128 of the ciphertexts of sequence numbers 0..999 with aad and
// plaintext drawn from SHAKE128 (length byte, then bytes), which is how
// crypto/hpke's TestVectors checks them and how this test does.
type vector struct {
	Info    string `json:"info"`
	IkmE    string `json:"ikmE"`
	SkRm    string `json:"skRm"`
	PkRm    string `json:"pkRm"`
	Enc     string `json:"enc"`
	AccEncs string `json:"encryptions_accumulated"`
}

// The vector is embedded so that the test binary also runs in a browser
// (scripts/browsertest TestWebHPKEInChromium), which has no file system.
//
//go:embed testdata/rfc9180-base-x25519-sha256-aes128gcm.json
var vectorJSON []byte

func loadVector(t *testing.T) vector {
	t.Helper()
	var v vector
	if err := json.Unmarshal(vectorJSON, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func drawInput(t *testing.T, r io.Reader) []byte {
	t.Helper()
	var l [1]byte
	if _, err := r.Read(l[:]); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, l[0])
	if _, err := r.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// The sender, with the vector's ephemeral key fixed, produces the
// vector's encapsulated key and its 1000 ciphertexts byte for byte.
func TestRFC9180Vector(t *testing.T) {
	need(t)
	v := loadVector(t)
	kem, _, _ := suite()
	ephPriv, err := kem.DeriveKeyPair(unhex(t, v.IkmE))
	if err != nil {
		t.Fatal(err)
	}
	var eph ephemeral
	skE, err := ephPriv.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	copy(eph.sk[:], skE)
	copy(eph.pk[:], ephPriv.PublicKey().Bytes())
	var pkR [32]byte
	copy(pkR[:], unhex(t, v.PkRm))
	s, err := subtle()
	if err != nil {
		t.Fatal(err)
	}
	ctxs, err := setupSenders(s, pkR, unhex(t, v.Info), 1, &eph)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := hex.EncodeToString(ctxs[0].enc[:]), v.Enc; got != want {
		t.Fatalf("enc %s, want %s", got, want)
	}
	source, sink := sha3.NewSHAKE128(), sha3.NewSHAKE128()
	ps := make([]any, 1000)
	for seq := range ps {
		aad, pt := drawInput(t, source), drawInput(t, source)
		ps[seq] = aesGCM(s, "encrypt", &ctxs[0], uint64(seq), aad, pt)
	}
	cts, err := all(ps)
	if err != nil {
		t.Fatal(err)
	}
	for _, ct := range cts {
		sink.Write(appendBytes(nil, ct))
	}
	acc := make([]byte, 16)
	sink.Read(acc)
	if got := hex.EncodeToString(acc); got != v.AccEncs {
		t.Fatalf("accumulated encryptions %s, want %s", got, v.AccEncs)
	}

	// Single shot (sequence 0, empty aad), fixed ephemeral key: the
	// vector's recipient key opens it with crypto/hpke.
	pt := []byte("Beauty is truth, truth beauty")
	out, err := seal(pkR, unhex(t, v.Info), [][]byte{pt}, nil, &eph)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out[0][:EncSize], unhex(t, v.Enc)) {
		t.Fatalf("single-shot enc %x, want %s", out[0][:EncSize], v.Enc)
	}
	skR, err := kem.NewPrivateKey(unhex(t, v.SkRm))
	if err != nil {
		t.Fatal(err)
	}
	_, kdf, aead := suite()
	got, err := hpke.Open(skR, kdf, aead, unhex(t, v.Info), out[0])
	if err != nil || !bytes.Equal(got, pt) {
		t.Fatalf("crypto/hpke opens to %q, %v", got, err)
	}
}

// Every length from 0 to 300 bytes and random plaintexts, sealed in one
// batch by WebCrypto, open with crypto/hpke, each exactly once: not under
// another info, and not after any one byte is flipped.
func TestSealOpensWithCryptoHPKE(t *testing.T) {
	need(t)
	kem, kdf, aead := suite()
	sk, err := kem.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	var pkR [32]byte
	copy(pkR[:], sk.PublicKey().Bytes())
	rng := rand.New(rand.NewChaCha8([32]byte{1}))
	pts := make([][]byte, 301)
	for n := range pts {
		pts[n] = make([]byte, n)
		for i := range pts[n] {
			pts[n][i] = byte(rng.Uint32())
		}
	}
	info := []byte("blanket/v1 test info")
	out, err := Seal(pkR, info, pts, nil)
	if err != nil {
		t.Fatal(err)
	}
	encs := map[string]bool{}
	for n, c := range out {
		if len(c) != len(pts[n])+Overhead {
			t.Fatalf("message %d: %d bytes, want %d", n, len(c), len(pts[n])+Overhead)
		}
		encs[string(c[:EncSize])] = true
		got, err := hpke.Open(sk, kdf, aead, info, c)
		if err != nil || !bytes.Equal(got, pts[n]) {
			t.Fatalf("message %d: crypto/hpke opens to %x, %v", n, got, err)
		}
		if _, err := hpke.Open(sk, kdf, aead, []byte("other info"), c); err == nil {
			t.Fatalf("message %d opens under another info", n)
		}
		bad := bytes.Clone(c)
		bad[rng.IntN(len(bad))] ^= 1 << rng.IntN(8)
		if _, err := hpke.Open(sk, kdf, aead, info, bad); err == nil {
			t.Fatalf("message %d opens with a flipped bit", n)
		}
	}
	if len(encs) != len(pts) {
		t.Fatalf("%d distinct encapsulated keys for %d messages", len(encs), len(pts))
	}
}

// Seal appends to the slices it is given.
func TestSealAppends(t *testing.T) {
	need(t)
	kem, kdf, aead := suite()
	sk, err := kem.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	var pkR [32]byte
	copy(pkR[:], sk.PublicKey().Bytes())
	out, err := Seal(pkR, nil, [][]byte{{1, 2, 3}}, [][]byte{[]byte("prefix")})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(out[0], []byte("prefix")) {
		t.Fatalf("output %x lost its prefix", out[0])
	}
	if got, err := hpke.Open(sk, kdf, aead, nil, out[0][6:]); err != nil || !bytes.Equal(got, []byte{1, 2, 3}) {
		t.Fatalf("opens to %x, %v", got, err)
	}
	if _, err := Seal(pkR, nil, [][]byte{{1}}, make([][]byte, 2)); !errors.Is(err, ErrSeal) {
		t.Fatalf("mismatched out: %v", err)
	}
	if out, err := Seal(pkR, nil, nil, nil); err != nil || len(out) != 0 {
		t.Fatalf("empty batch: %v, %v", out, err)
	}
}

// What crypto/hpke seals, Open opens; a flipped bit or another info does
// not open.
func TestOpenOpensCryptoHPKE(t *testing.T) {
	need(t)
	kem, kdf, aead := suite()
	sk, err := kem.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	var skR, pkR [32]byte
	b, err := sk.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	copy(skR[:], b)
	copy(pkR[:], sk.PublicKey().Bytes())
	info := []byte("blanket/v1 test info")
	var pts, sealed [][]byte
	for n := range 40 {
		pt := bytes.Repeat([]byte{byte(n)}, n)
		c, err := hpke.Seal(sk.PublicKey(), kdf, aead, info, pt)
		if err != nil {
			t.Fatal(err)
		}
		pts, sealed = append(pts, pt), append(sealed, c)
	}
	got, err := Open(skR, pkR, info, sealed)
	if err != nil {
		t.Fatal(err)
	}
	for i := range pts {
		if !bytes.Equal(got[i], pts[i]) {
			t.Fatalf("message %d opens to %x, want %x", i, got[i], pts[i])
		}
	}
	if _, err := Open(skR, pkR, []byte("other"), sealed[:1]); !errors.Is(err, ErrOpen) {
		t.Fatalf("another info: %v", err)
	}
	bad := bytes.Clone(sealed[5])
	bad[len(bad)-1] ^= 1
	if _, err := Open(skR, pkR, info, [][]byte{bad}); !errors.Is(err, ErrOpen) {
		t.Fatalf("flipped bit: %v", err)
	}
	if _, err := Open(skR, pkR, info, [][]byte{make([]byte, Overhead-1)}); !errors.Is(err, ErrOpen) {
		t.Fatalf("short message: %v", err)
	}
}

// A low-order recipient key (here 0, whose DH output is all zeros) fails
// to seal, as it does in crypto/hpke (RFC 9180, section 7.1.4).
func TestSealRejectsLowOrderKey(t *testing.T) {
	need(t)
	if _, err := Seal([32]byte{}, nil, [][]byte{{1}}, nil); !errors.Is(err, ErrSeal) {
		t.Fatalf("zero key: %v", err)
	}
	kem, kdf, aead := suite()
	pk, err := kem.NewPublicKey(make([]byte, 32))
	if err == nil {
		if _, err := hpke.Seal(pk, kdf, aead, nil, []byte{1}); err == nil {
			t.Fatal("crypto/hpke seals to the zero key")
		}
	}
}

// A batch larger than maxBatch goes in chunks: every message still opens,
// in order, each under its own encapsulation.
func TestSealChunks(t *testing.T) {
	need(t)
	kem, kdf, aead := suite()
	sk, err := kem.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	var pkR [32]byte
	copy(pkR[:], sk.PublicKey().Bytes())
	pts := make([][]byte, 2*maxBatch+3)
	for i := range pts {
		pts[i] = binary.BigEndian.AppendUint32(nil, uint32(i))
	}
	out, err := Seal(pkR, []byte("chunks"), pts, nil)
	if err != nil {
		t.Fatal(err)
	}
	encs := map[string]bool{}
	for i, c := range out {
		got, err := hpke.Open(sk, kdf, aead, []byte("chunks"), c)
		if err != nil || !bytes.Equal(got, pts[i]) {
			t.Fatalf("message %d opens to %x, %v", i, got, err)
		}
		encs[string(c[:EncSize])] = true
	}
	if len(encs) != len(pts) {
		t.Fatalf("%d distinct encapsulated keys for %d messages", len(encs), len(pts))
	}
}
