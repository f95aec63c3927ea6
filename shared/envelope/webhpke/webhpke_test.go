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

// These tests run natively (the Go primitives, goCrypto: SealGo, OpenGo)
// and under GOOS=js in Node (go_js_wasm_exec; Node 20's
// globalThis.crypto.subtle has X25519) and, as a test binary loaded in a
// page, in headless Chromium (scripts/browsertest TestWebHPKEInChromium),
// where they run over both WebCrypto (Seal, Open) and the Go primitives.
// crypto/hpke, linked into these test binaries only, is the reference.

func suite() (hpke.KEM, hpke.KDF, hpke.AEAD) {
	return hpke.DHKEM(ecdh.X25519()), hpke.HKDFSHA256(), hpke.AES128GCM()
}

// backend is one implementation of the primitives with its exported
// entry points.
type backend struct {
	name  string
	prims func(t *testing.T) primitives
	seal  func(pkR [32]byte, info []byte, pts [][]byte, out [][]byte) ([][]byte, error)
	open  func(skR, pkR [32]byte, info []byte, sealed [][]byte) ([][]byte, error)
}

var goBackend = backend{
	name:  "go",
	prims: func(*testing.T) primitives { return goCrypto{} },
	seal:  SealGo,
	open:  OpenGo,
}

// forEach runs f as a subtest for every backend of this platform
// (platformBackends: the Go primitives, and WebCrypto under js).
func forEach(t *testing.T, f func(t *testing.T, b backend)) {
	for _, b := range platformBackends {
		t.Run(b.name, func(t *testing.T) {
			b.prims(t) // fails the test if the backend is unavailable
			f(t, b)
		})
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

// rfcA11 is RFC 9180's Appendix A.1.1 (base mode of this suite) with its
// intermediate values and six encryptions, as testdata/rfc9180-a11.json
// carries it (its "source" names where it was copied from).
type rfcA11 struct {
	Source      string `json:"source"`
	KEM         int    `json:"kem_id"`
	KDF         int    `json:"kdf_id"`
	AEAD        int    `json:"aead_id"`
	Mode        int    `json:"mode"`
	Info        string `json:"info"`
	IkmE        string `json:"ikmE"`
	PkEm        string `json:"pkEm"`
	SkEm        string `json:"skEm"`
	PkRm        string `json:"pkRm"`
	SkRm        string `json:"skRm"`
	Enc         string `json:"enc"`
	Key         string `json:"key"`
	BaseNonce   string `json:"base_nonce"`
	Encryptions []struct {
		Seq   uint64 `json:"seq"`
		Pt    string `json:"pt"`
		Aad   string `json:"aad"`
		Nonce string `json:"nonce"`
		Ct    string `json:"ct"`
	} `json:"encryptions"`
}

// The vectors are embedded so that the test binary also runs in a browser
// (scripts/browsertest TestWebHPKEInChromium), which has no file system.
var (
	//go:embed testdata/rfc9180-a11.json
	a11JSON []byte
	//go:embed testdata/rfc9180-base-x25519-sha256-aes128gcm.json
	vectorJSON []byte
)

func loadA11(t *testing.T) rfcA11 {
	t.Helper()
	var v rfcA11
	if err := json.Unmarshal(a11JSON, &v); err != nil {
		t.Fatal(err)
	}
	if v.Source == "" || v.Mode != 0 || v.KEM != 0x20 || v.KDF != 1 || v.AEAD != 1 || len(v.Encryptions) != 6 {
		t.Fatalf("testdata/rfc9180-a11.json is not the suite's base-mode vector: %+v", v)
	}
	return v
}

// fixedEphemeral is the vector's ephemeral key pair, skEm, whose public
// key crypto/ecdh computes to be the vector's pkEm.
func fixedEphemeral(t *testing.T, v rfcA11) *ephemeral {
	t.Helper()
	var eph ephemeral
	copy(eph.sk[:], unhex(t, v.SkEm))
	sk, err := ecdh.X25519().NewPrivateKey(eph.sk[:])
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(sk.PublicKey().Bytes()); got != v.PkEm {
		t.Fatalf("X25519(skEm) = %s, want pkEm %s", got, v.PkEm)
	}
	copy(eph.pk[:], sk.PublicKey().Bytes())
	return &eph
}

// RFC 9180, Appendix A.1.1: with the vector's ephemeral key, the sender's
// schedule gives the vector's enc, AEAD key and base nonce, and its
// encryptions of sequence numbers 0, 1, 2, 4, 255 and 256 (with their
// aad) are the vector's byte for byte and decrypt back; the recipient's
// decap with skRm gives the same key and base nonce.
func TestRFC9180A11(t *testing.T) {
	v := loadA11(t)
	forEach(t, func(t *testing.T, b backend) {
		p := b.prims(t)
		eph := fixedEphemeral(t, v)
		pkR := [32]byte(unhex(t, v.PkRm))
		info := unhex(t, v.Info)
		ctxs, err := setupSenders(p, pkR, info, 1, eph)
		if err != nil {
			t.Fatal(err)
		}
		c := &ctxs[0]
		if got := hex.EncodeToString(c.enc[:]); got != v.Enc {
			t.Fatalf("enc %s, want %s", got, v.Enc)
		}
		if got := hex.EncodeToString(c.key[:]); got != v.Key {
			t.Fatalf("key %s, want %s", got, v.Key)
		}
		if got := hex.EncodeToString(c.nonce[:]); got != v.BaseNonce {
			t.Fatalf("base_nonce %s, want %s", got, v.BaseNonce)
		}
		jobs := make([]aeadJob, len(v.Encryptions))
		for i, e := range v.Encryptions {
			jobs[i] = c.job(e.Seq, unhex(t, e.Aad), unhex(t, e.Pt))
			if got := hex.EncodeToString(jobs[i].nonce[:]); got != e.Nonce {
				t.Fatalf("sequence %d: nonce %s, want %s", e.Seq, got, e.Nonce)
			}
		}
		cts, err := p.crypt(false, jobs, make([][]byte, len(jobs)))
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range v.Encryptions {
			if got := hex.EncodeToString(cts[i]); got != e.Ct {
				t.Fatalf("sequence %d: ct %s, want %s", e.Seq, got, e.Ct)
			}
			jobs[i].in = cts[i]
		}
		pts, err := p.crypt(true, jobs, make([][]byte, len(jobs)))
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range v.Encryptions {
			if got := hex.EncodeToString(pts[i]); got != e.Pt {
				t.Fatalf("sequence %d decrypts to %s, want %s", e.Seq, got, e.Pt)
			}
		}
		jobs[0].in = bytes.Clone(cts[0])
		jobs[0].in[3] ^= 1
		if _, err := p.crypt(true, jobs[:1], make([][]byte, 1)); err == nil {
			t.Fatal("a modified ciphertext decrypts")
		}

		skR := [32]byte(unhex(t, v.SkRm))
		dh, err := p.decap(&skR, [][]byte{unhex(t, v.Enc)})
		if err != nil {
			t.Fatal(err)
		}
		rc := make([]context, 1)
		copy(rc[0].enc[:], unhex(t, v.Enc))
		if err := schedule(rc, dh, &pkR, info); err != nil {
			t.Fatal(err)
		}
		if hex.EncodeToString(rc[0].key[:]) != v.Key || hex.EncodeToString(rc[0].nonce[:]) != v.BaseNonce {
			t.Fatalf("recipient key %x, base nonce %x, want %s, %s", rc[0].key, rc[0].nonce, v.Key, v.BaseNonce)
		}
	})
}

// The same test case as crypto/hpke's tests carry it (GOROOT/src/crypto/
// hpke/testdata/rfc9180.json, the entry with mode 0, kem_id 32, kdf_id 1,
// aead_id 1, copied unchanged): the encryptions are given as a digest of
// 1000 of them, SHAKE128 of the ciphertexts of sequence numbers 0..999
// with aad and plaintext drawn from SHAKE128 (length byte, then bytes),
// which is how crypto/hpke's TestVectors checks them and how this test
// does.
type accVector struct {
	Info    string `json:"info"`
	IkmE    string `json:"ikmE"`
	SkRm    string `json:"skRm"`
	PkRm    string `json:"pkRm"`
	Enc     string `json:"enc"`
	AccEncs string `json:"encryptions_accumulated"`
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
// vector's encapsulated key and its 1000 accumulated ciphertexts; a
// single-shot seal with that key opens with crypto/hpke and with the
// backend's own opener.
func TestRFC9180Vector(t *testing.T) {
	a11 := loadA11(t)
	var v accVector
	if err := json.Unmarshal(vectorJSON, &v); err != nil {
		t.Fatal(err)
	}
	if v.IkmE != a11.IkmE || v.PkRm != a11.PkRm || v.Enc != a11.Enc || v.Info != a11.Info {
		t.Fatal("the two vector files are not the same test case")
	}
	forEach(t, func(t *testing.T, b backend) {
		p := b.prims(t)
		eph := fixedEphemeral(t, a11)
		pkR := [32]byte(unhex(t, v.PkRm))
		ctxs, err := setupSenders(p, pkR, unhex(t, v.Info), 1, eph)
		if err != nil {
			t.Fatal(err)
		}
		source, sink := sha3.NewSHAKE128(), sha3.NewSHAKE128()
		jobs := make([]aeadJob, 1000)
		for seq := range jobs {
			aad, pt := drawInput(t, source), drawInput(t, source)
			jobs[seq] = ctxs[0].job(uint64(seq), aad, pt)
		}
		cts, err := p.crypt(false, jobs, make([][]byte, len(jobs)))
		if err != nil {
			t.Fatal(err)
		}
		for _, ct := range cts {
			sink.Write(ct)
		}
		acc := make([]byte, 16)
		sink.Read(acc)
		if got := hex.EncodeToString(acc); got != v.AccEncs {
			t.Fatalf("accumulated encryptions %s, want %s", got, v.AccEncs)
		}

		// Single shot (sequence 0, empty aad), fixed ephemeral key: the
		// vector's recipient key opens it with crypto/hpke and with the
		// backend.
		pt := []byte("Beauty is truth, truth beauty")
		out, err := seal(p, pkR, unhex(t, v.Info), [][]byte{pt}, nil, eph)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out[0][:EncSize], unhex(t, v.Enc)) {
			t.Fatalf("single-shot enc %x, want %s", out[0][:EncSize], v.Enc)
		}
		kem, kdf, aead := suite()
		skR, err := kem.NewPrivateKey(unhex(t, v.SkRm))
		if err != nil {
			t.Fatal(err)
		}
		got, err := hpke.Open(skR, kdf, aead, unhex(t, v.Info), out[0])
		if err != nil || !bytes.Equal(got, pt) {
			t.Fatalf("crypto/hpke opens to %q, %v", got, err)
		}
		mine, err := b.open([32]byte(unhex(t, v.SkRm)), pkR, unhex(t, v.Info), out)
		if err != nil || !bytes.Equal(mine[0], pt) {
			t.Fatalf("%s opens to %q, %v", b.name, mine, err)
		}
	})
}

// The schedule rejects an all-zero DH output (RFC 9180, section 7.1.4)
// whatever the primitives let through: here primitives that return one.
func TestScheduleRejectsZeroDH(t *testing.T) {
	p := zeroDH{goCrypto{}}
	if _, err := seal(p, [32]byte{9}, nil, [][]byte{{1}}, nil, nil); !errors.Is(err, ErrSeal) {
		t.Fatalf("seal with an all-zero DH output: %v", err)
	}
	if _, err := open(p, [32]byte{1}, [32]byte{9}, nil, [][]byte{make([]byte, Overhead+1)}); !errors.Is(err, ErrOpen) {
		t.Fatalf("open with an all-zero DH output: %v", err)
	}
}

// zeroDH is goCrypto with every DH output replaced by zeros.
type zeroDH struct{ goCrypto }

func (z zeroDH) encap(pkR *[32]byte, n int, fixed *ephemeral) ([][EncSize]byte, [][]byte, error) {
	encs, dh, err := z.goCrypto.encap(pkR, n, fixed)
	for _, d := range dh {
		clear(d)
	}
	return encs, dh, err
}

func (z zeroDH) decap(skR *[32]byte, encs [][]byte) ([][]byte, error) {
	dh := make([][]byte, len(encs))
	for i := range dh {
		dh[i] = make([]byte, hashSize)
	}
	return dh, nil
}

// Every length from 0 to 300 bytes and random plaintexts, sealed in one
// batch, open with crypto/hpke, each exactly once: not under
// another info, and not after any one byte is flipped.
func TestSealOpensWithCryptoHPKE(t *testing.T) { forEach(t, testSealOpensWithCryptoHPKE) }

func testSealOpensWithCryptoHPKE(t *testing.T, b backend) {
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
	out, err := b.seal(pkR, info, pts, nil)
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
func TestSealAppends(t *testing.T) { forEach(t, testSealAppends) }

func testSealAppends(t *testing.T, b backend) {
	kem, kdf, aead := suite()
	sk, err := kem.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	var pkR [32]byte
	copy(pkR[:], sk.PublicKey().Bytes())
	out, err := b.seal(pkR, nil, [][]byte{{1, 2, 3}}, [][]byte{[]byte("prefix")})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(out[0], []byte("prefix")) {
		t.Fatalf("output %x lost its prefix", out[0])
	}
	if got, err := hpke.Open(sk, kdf, aead, nil, out[0][6:]); err != nil || !bytes.Equal(got, []byte{1, 2, 3}) {
		t.Fatalf("opens to %x, %v", got, err)
	}
	if _, err := b.seal(pkR, nil, [][]byte{{1}}, make([][]byte, 2)); !errors.Is(err, ErrSeal) {
		t.Fatalf("mismatched out: %v", err)
	}
	if out, err := b.seal(pkR, nil, nil, nil); err != nil || len(out) != 0 {
		t.Fatalf("empty batch: %v, %v", out, err)
	}
}

// What crypto/hpke seals, Open opens; a flipped bit or another info does
// not open.
func TestOpenOpensCryptoHPKE(t *testing.T) { forEach(t, testOpenOpensCryptoHPKE) }

func testOpenOpensCryptoHPKE(t *testing.T, b backend) {
	kem, kdf, aead := suite()
	sk, err := kem.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	var skR, pkR [32]byte
	raw, err := sk.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	copy(skR[:], raw)
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
	got, err := b.open(skR, pkR, info, sealed)
	if err != nil {
		t.Fatal(err)
	}
	for i := range pts {
		if !bytes.Equal(got[i], pts[i]) {
			t.Fatalf("message %d opens to %x, want %x", i, got[i], pts[i])
		}
	}
	if _, err := b.open(skR, pkR, []byte("other"), sealed[:1]); !errors.Is(err, ErrOpen) {
		t.Fatalf("another info: %v", err)
	}
	bad := bytes.Clone(sealed[5])
	bad[len(bad)-1] ^= 1
	if _, err := b.open(skR, pkR, info, [][]byte{bad}); !errors.Is(err, ErrOpen) {
		t.Fatalf("flipped bit: %v", err)
	}
	if _, err := b.open(skR, pkR, info, [][]byte{make([]byte, Overhead-1)}); !errors.Is(err, ErrOpen) {
		t.Fatalf("short message: %v", err)
	}
}

// A low-order recipient key (here 0, whose DH output is all zeros) fails
// to seal, as it does in crypto/hpke (RFC 9180, section 7.1.4).
func TestSealRejectsLowOrderKey(t *testing.T) { forEach(t, testSealRejectsLowOrderKey) }

func testSealRejectsLowOrderKey(t *testing.T, b backend) {
	if _, err := b.seal([32]byte{}, nil, [][]byte{{1}}, nil); !errors.Is(err, ErrSeal) {
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
func TestSealChunks(t *testing.T) { forEach(t, testSealChunks) }

func testSealChunks(t *testing.T, b backend) {
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
	out, err := b.seal(pkR, []byte("chunks"), pts, nil)
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
