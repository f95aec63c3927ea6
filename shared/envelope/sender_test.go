package envelope

import (
	"bytes"
	"crypto/ecdh"
	"crypto/hpke"
	"encoding/hex"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// RFC 8439, section 2.5.2: Poly1305 of a 34-byte message (the test pads
// the partial last block the raw-Poly1305 way: a 1 byte, no 2^128 bit).
func TestPoly1305RFC8439(t *testing.T) {
	key := mustHex32(t, "85d6be7857556d337f4452fe42d506a80103808afb0db2fd4abff6af4149f51b")
	msg := []byte("Cryptographic Forum Research Group")
	p := newPoly1305(key)
	for len(msg) >= 16 {
		p.block(msg[:16], 1)
		msg = msg[16:]
	}
	var last [16]byte
	copy(last[:], msg)
	last[len(msg)] = 1
	p.block(last[:], 0)
	var tag [16]byte
	p.sum(tag[:])
	if got := hex.EncodeToString(tag[:]); got != "a8061dc1305136c6c22b8baf0c0127a9" {
		t.Fatalf("tag %s", got)
	}
}

// RFC 8439, section 2.8.2: the AEAD vector (first 16 bytes of the
// ciphertext and the tag).
func TestChaChaPolyRFC8439(t *testing.T) {
	var key [32]byte
	for i := range key {
		key[i] = 0x80 + byte(i)
	}
	nonce := [12]byte{0x07, 0, 0, 0, 0x40, 0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47}
	aad, _ := hex.DecodeString("50515253c0c1c2c3c4c5c6c7")
	pt := []byte("Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.")
	out := chachaPolySeal([]byte("prefix"), &key, &nonce, pt, aad)
	if string(out[:6]) != "prefix" || len(out) != 6+len(pt)+TagSize {
		t.Fatalf("output %d bytes, prefix %q", len(out), out[:6])
	}
	out = out[6:]
	if got := hex.EncodeToString(out[:16]); got != "d31a8d34648e60db7b86afbc53ef7ec2" {
		t.Errorf("ciphertext starts %s", got)
	}
	if got := hex.EncodeToString(out[len(pt):]); got != "1ae10b594f09e26a7e902ecbd0600691" {
		t.Errorf("tag %s", got)
	}
}

// The own sender's output opens with crypto/hpke (which has its own
// X25519, HKDF schedule and ChaCha20-Poly1305) for every plaintext length
// from 0 to 300 bytes, random plaintexts and several rounds; its
// encapsulated key is the X25519 public key of the ephemeral scalar. This
// checks X25519, the key schedule, ChaCha20 (several blocks and partial
// blocks) and Poly1305 (partial and full blocks) at once.
func TestOwnSenderOpensWithCryptoHPKE(t *testing.T) {
	k := testKey(t, 1)
	rng := rand.New(rand.NewPCG(3, 4))
	maxLen := 300
	if testing.Short() {
		maxLen = 70
	}
	for n := 0; n <= maxLen; n++ {
		round := rng.Uint64()
		s, err := newSender(k.Public().HPKE, round)
		if err != nil {
			t.Fatal(err)
		}
		pt := make([]byte, n)
		for i := range pt {
			pt[i] = byte(rng.Uint32())
		}
		var eph [32]byte
		for i := range eph {
			eph[i] = byte(rng.Uint32())
		}
		sealed, err := s.seal(nil, &eph, pt)
		if err != nil {
			t.Fatal(err)
		}
		if len(sealed) != EncSize+n+TagSize {
			t.Fatalf("n=%d: %d bytes", n, len(sealed))
		}
		priv, _ := ecdh.X25519().NewPrivateKey(eph[:])
		if !bytes.Equal(sealed[:EncSize], priv.PublicKey().Bytes()) {
			t.Fatalf("n=%d: enc is not the ephemeral public key", n)
		}
		got, err := hpke.Open(k.hpke, kdf, aead, ValuesInfo(round), sealed)
		if err != nil {
			t.Fatalf("n=%d: crypto/hpke cannot open: %v", n, err)
		}
		if !bytes.Equal(got, pt) {
			t.Fatalf("n=%d: opened to different bytes", n)
		}
		if _, err := hpke.Open(k.hpke, kdf, aead, ValuesInfo(round+1), sealed); err == nil {
			t.Fatalf("n=%d: opens for the next round", n)
		}
	}
}

// SealValues and SealEach through the own sender (the js path, run here on
// every platform): round trip with OpenValues / OpenEach, fresh
// encapsulation per message, tampering rejected, bad key rejected.
func TestOwnSenderSealValuesAndEach(t *testing.T) {
	k := testKey(t, 1)
	pub := k.Public().HPKE
	for _, n := range []int{0, 1, 157} {
		vals := testValues(n)
		sealed, err := sealValues(pub, 5, vals, true)
		if err != nil {
			t.Fatal(err)
		}
		got, err := k.OpenValues(5, sealed, nil)
		if err != nil || len(got) != n {
			t.Fatalf("n=%d: %d values, %v", n, len(got), err)
		}
		for i := range vals {
			if got[i] != vals[i] {
				t.Fatalf("n=%d: value %d", n, i)
			}
		}
	}
	vals := testValues(2*batchChunk + 1)
	vals[3] = math.Inf(1)
	msgs, err := sealEach(pub, 6, vals, true)
	if err != nil {
		t.Fatal(err)
	}
	seen := make(map[[EncSize]byte]bool)
	for i, m := range msgs {
		if len(m) != Width1Len || cap(m) != Width1Len {
			t.Fatalf("message %d: len %d cap %d", i, len(m), cap(m))
		}
		enc := [EncSize]byte(m[:EncSize])
		if seen[enc] {
			t.Fatalf("message %d repeats an encapsulated key", i)
		}
		seen[enc] = true
	}
	msgs[7] = bytes.Clone(msgs[7])
	msgs[7][Width1Len-1] ^= 1
	got, errs := k.OpenEach(6, msgs, nil)
	for i := range vals {
		switch i {
		case 3:
			if !errors.Is(errs[i], ErrNonFinite) {
				t.Fatalf("message 3: %v", errs[i])
			}
		case 7:
			if !errors.Is(errs[i], ErrOpen) {
				t.Fatalf("message 7: %v", errs[i])
			}
		default:
			if errs[i] != nil || got[i] != vals[i] {
				t.Fatalf("message %d: %v, %v", i, errs[i], got[i])
			}
		}
	}
	if _, err := sealValues([32]byte{}, 1, []float64{1}, true); !errors.Is(err, ErrSeal) {
		t.Fatalf("zero key: %v", err)
	}
	if _, err := sealEach([32]byte{}, 1, []float64{1}, true); !errors.Is(err, ErrSeal) {
		t.Fatalf("zero key, each: %v", err)
	}
}

// The cached sender of sealOwn follows the key and the round: a message
// sealed after a change opens only with the new key and round.
func TestOwnSenderCacheFollowsKeyAndRound(t *testing.T) {
	k1, k2 := testKey(t, 1), testKey(t, 2)
	steps := []struct {
		k     *testPriv
		other *testPriv
		round uint64
	}{{k1, k2, 1}, {k1, k2, 2}, {k2, k1, 2}, {k1, k2, 1}, {k1, k2, 1}}
	for i, s := range steps {
		sealed, err := sealValues(s.k.Public().HPKE, s.round, []float64{float64(i)}, true)
		if err != nil {
			t.Fatal(err)
		}
		if v, err := s.k.OpenValues(s.round, sealed, nil); err != nil || v[0] != float64(i) {
			t.Fatalf("step %d: %v %v", i, v, err)
		}
		if _, err := s.k.OpenValues(s.round+1, sealed, nil); !errors.Is(err, ErrOpen) {
			t.Fatalf("step %d: opens for another round: %v", i, err)
		}
		if _, err := s.other.OpenValues(s.round, sealed, nil); !errors.Is(err, ErrOpen) {
			t.Fatalf("step %d: opens with another key: %v", i, err)
		}
	}
}

// With the same ephemeral scalar, the sender's shared secret through the
// recipient key's table and through the ladder give the same message.
func TestOwnSenderTableMatchesLadder(t *testing.T) {
	k := testKey(t, 3)
	s, err := newSender(k.Public().HPKE, 8)
	if err != nil {
		t.Fatal(err)
	}
	if s.dhTab == nil {
		t.Fatal("no table for the aggregator's key")
	}
	ladder := *s
	ladder.dhTab = nil
	rng := rand.New(rand.NewPCG(13, 14))
	for range 20 {
		var eph [32]byte
		for i := range eph {
			eph[i] = byte(rng.Uint32())
		}
		a, err := s.seal(nil, &eph, []byte("12345678"))
		if err != nil {
			t.Fatal(err)
		}
		b, err := ladder.seal(nil, &eph, []byte("12345678"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Fatalf("eph %x: table and ladder seal differently", eph)
		}
	}
	// A key on the twist has no table; sealing to it still works.
	twist := [32]byte{2}
	if _, ok := edFromMontgomery(&twist); ok {
		t.Fatal("u = 2 maps to the curve; the test needs a twist point")
	}
	if tab := peerTableFor(twist); tab != nil {
		t.Fatal("table for a twist point")
	}
	if _, err := sealValues(twist, 1, []float64{1}, true); err != nil {
		t.Fatal(err)
	}
}
