package pine

import (
	"bytes"
	"crypto/aes"
	"encoding/binary"
	"testing"
)

// TestXofCounterWrap: the CTR counter is the low 8 bytes and wraps modulo
// 2^64 without touching the nonce half (PyCryptodome's MODE_CTR with
// nonce and initial_value, as the reference uses).
func TestXofCounterWrap(t *testing.T) {
	x, err := newXof(make([]byte, seedSize), []byte("wrap"))
	if err != nil {
		t.Fatal(err)
	}
	nonce := append([]byte(nil), x.ctr[:8]...)
	binary.BigEndian.PutUint64(x.ctr[8:], ^uint64(0))
	got := make([]byte, 48)
	x.read(got)
	blk, _ := aes.NewCipher(aesKey(x))
	var want []byte
	for _, c := range []uint64{^uint64(0), 0, 1} {
		in := binary.BigEndian.AppendUint64(append([]byte(nil), nonce...), c)
		out := make([]byte, 16)
		blk.Encrypt(out, in)
		want = append(want, out...)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("stream after the counter wrap differs from nonce || counter mod 2^64")
	}
}

// aesKey recovers the AES key of x from its HMAC (recomputed).
func aesKey(_ *xof) []byte {
	m := newMac(make([]byte, seedSize), []byte("wrap"))
	var sum [32]byte
	m.Sum(sum[:0])
	return sum[:16]
}
