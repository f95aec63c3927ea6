package envelope

import (
	"crypto/hpke"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/shared/parallel"
)

// Width-1 messages. Under the width-1 protocol every coordinate travels in
// its own sealed message, sealed independently: a fresh HPKE encapsulation
// (a fresh ephemeral X25519 key) per value, so that no two messages share
// any byte the aggregator could link them by. SealEach and OpenEach (the
// aggregator's, aggregator/internal/sealkey) are the
// batch forms of SealValues and OpenValues for that case. They produce and
// accept exactly the bytes of SealValues(pub, round, []float64{v}) and
// nothing else: a message sealed by SealEach opens with OpenValues and vice
// versa.
//
// What a batch saves is the per-call setup (parsing the recipient key,
// the round's part of the key schedule under js, building the info
// string, one output array for the whole batch, one crypto/rand read per
// 64 ephemeral scalars under js) and, natively, the wall time of using
// every core: messages are sealed and opened by up to GOMAXPROCS
// goroutines. What stays per message is inherent to independent
// encapsulations: two X25519 multiplications to seal (fixed-base tables
// under js, see sender.go), one to open, and the HPKE key schedule; under
// js/wasm GOMAXPROCS is 1 and the batch runs on the calling goroutine.

// BatchChunk is the number of messages a worker claims at a time (in
// SealEach and the aggregator's OpenEach, with parallel.Chunks): large
// enough that claiming (one atomic add) is free next to ~100 µs of
// cryptography per message, small enough to balance two to a few dozen
// workers on batches of a few thousand messages.
const BatchChunk = 64

const batchChunk = BatchChunk

// Width1Len is the length of a sealed width-1 message: SealedLen(1) = 56.
const Width1Len = 8 + Overhead

// SealEach seals every value of values as its own width-1 message to the
// X25519 key hpkePub for round, each with an independent HPKE encapsulation.
// out[i] is exactly what SealValues(hpkePub, round, values[i:i+1]) would
// return (Width1Len bytes, the same distribution of bytes); the messages
// share one backing array but each has its capacity capped at its own
// length, so appending to one never overwrites another.
//
// Values are encoded as they are, non-finite ones included (as
// SealValues). On error no message is returned; errors wrap ErrSeal. An
// empty values gives an empty, non-nil result.
func SealEach(hpkePub [32]byte, round uint64, values []float64) ([][]byte, error) {
	return sealEach(hpkePub, round, values, ownSender)
}

// sealEach is SealEach with crypto/hpke (own false) or the package's own
// sender (own true, the js/wasm path; see sender.go).
func sealEach(hpkePub [32]byte, round uint64, values []float64, own bool) ([][]byte, error) {
	var (
		pk hpke.PublicKey
		s  *sender
	)
	var err error
	if own {
		s, err = newSender(hpkePub, round)
	} else {
		pk, err = kem.NewPublicKey(hpkePub[:])
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSeal, err)
	}
	in := ValuesInfo(round)
	backing := make([]byte, len(values)*Width1Len)
	out := make([][]byte, len(values))
	err = parallel.Chunks(len(values), batchChunk, func(lo, hi int) error {
		var pt [8]byte
		var ephs [batchChunk * 32]byte
		if own {
			// One crypto/rand read for the chunk's ephemeral scalars.
			if _, err := rand.Read(ephs[:32*(hi-lo)]); err != nil {
				return fmt.Errorf("%w: %w", ErrSeal, err)
			}
			defer clear(ephs[:])
		}
		for i := lo; i < hi; i++ {
			binary.BigEndian.PutUint64(pt[:], math.Float64bits(values[i]))
			m := backing[i*Width1Len : i*Width1Len : (i+1)*Width1Len]
			var c []byte
			var err error
			if own {
				c, err = s.seal(m, (*[32]byte)(ephs[32*(i-lo):]), pt[:])
			} else {
				c, err = hpke.Seal(pk, kdf, aead, in, pt[:])
				if err == nil {
					c = append(m, c...)
				}
			}
			if err != nil {
				return fmt.Errorf("%w: message %d: %w", ErrSeal, i, err)
			}
			if len(c) != Width1Len || &c[0] != &backing[i*Width1Len] {
				return fmt.Errorf("%w: message %d: sealed length %d, want %d", ErrSeal, i, len(c), Width1Len)
			}
			out[i] = c
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
