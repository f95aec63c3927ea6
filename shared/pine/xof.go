package pine

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
)

// seedSize is XofHmacSha256Aes128.SEED_SIZE.
const seedSize = 32

// xof is XofHmacSha256Aes128 of the PINE reference code
// (draft-chen-cfrg-vdaf-pine, poc/xof_hmac_sha256_aes128.py; the draft
// text names it for its Pine*HmacSha256Aes128 variants): the seed keys
// HMAC-SHA256 over len(dst) (one byte) || dst || binder; the 32-byte MAC
// is split into an AES-128 key (bytes 0..15), an 8-byte CTR nonce (16..23)
// and an 8-byte initial counter (24..31), and the output stream is AES-CTR
// over zeros with block = nonce || big-endian 64-bit counter. The counter
// wraps modulo 2^64 without carrying into the nonce (PyCryptodome's
// AES.MODE_CTR with nonce and initial_value, as the reference uses).
type xof struct {
	block cipher.Block
	ctr   [16]byte
	buf   [512]byte
	off   int
}

// newXof builds the XOF. The seed is 32 bytes by construction at every
// call site.
func newXof(seed, dst []byte, binder ...[]byte) (*xof, error) {
	m := newMac(seed, dst)
	for _, b := range binder {
		m.Write(b)
	}
	return xofFromMac(m)
}

// newMac starts the HMAC of the XOF constructor; callers may stream a long
// binder into it and finish with xofFromMac.
func newMac(seed, dst []byte) hash.Hash {
	m := hmac.New(sha256.New, seed)
	m.Write([]byte{byte(len(dst))})
	m.Write(dst)
	return m
}

func xofFromMac(m hash.Hash) (*xof, error) {
	var sum [32]byte
	m.Sum(sum[:0])
	blk, err := aes.NewCipher(sum[:16])
	if err != nil {
		return nil, fmt.Errorf("pine: xof: %w", err)
	}
	x := &xof{block: blk, off: len(xof{}.buf)}
	copy(x.ctr[:], sum[16:32])
	return x, nil
}

func (x *xof) refill() {
	for i := 0; i < len(x.buf); i += 16 {
		x.block.Encrypt(x.buf[i:i+16], x.ctr[:])
		c := binary.BigEndian.Uint64(x.ctr[8:]) + 1
		binary.BigEndian.PutUint64(x.ctr[8:], c)
	}
	x.off = 0
}

// read fills p with the next len(p) bytes of the stream.
func (x *xof) read(p []byte) {
	for len(p) > 0 {
		if x.off == len(x.buf) {
			x.refill()
		}
		n := copy(p, x.buf[x.off:])
		x.off += n
		p = p[n:]
	}
}

func (x *xof) byte1() byte {
	if x.off == len(x.buf) {
		x.refill()
	}
	b := x.buf[x.off]
	x.off++
	return b
}

// nextVec fills dst with field elements by rejection sampling (next_vec of
// VDAF-11, Section 6.2: 8 little-endian bytes, masked with
// next_power_of_2(q) - 1 = 2^64 - 1, kept if below q).
func (x *xof) nextVec(dst []fp) {
	var b [8]byte
	for i := 0; i < len(dst); {
		x.read(b[:])
		v := binary.LittleEndian.Uint64(b[:])
		if v < modulus {
			_ = dst[i].SetUint64(v)
			i++
		}
	}
}

// deriveSeed is derive_seed: the first SEED_SIZE bytes of the stream.
func deriveSeed(seed, dst []byte, binder ...[]byte) ([seedSize]byte, error) {
	var out [seedSize]byte
	x, err := newXof(seed, dst, binder...)
	if err != nil {
		return out, err
	}
	x.read(out[:])
	return out, nil
}

// expandVec is expand_into_vec.
func expandVec(dst []fp, seed, dstTag []byte, binder ...[]byte) error {
	x, err := newXof(seed, dstTag, binder...)
	if err != nil {
		return err
	}
	x.nextVec(dst)
	return nil
}
