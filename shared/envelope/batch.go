package envelope

import (
	"encoding/binary"
	"fmt"
	"math"
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
// building the info string, one output array for the whole batch) and,
// natively, the wall time of using every core: messages are sealed and
// opened by up to GOMAXPROCS goroutines. In the browser (WebCrypto,
// seal.go) the batch runs each step of HPKE for all its messages at once,
// so the goroutine waits for WebCrypto's promises four times per batch,
// not per message. What stays per message is inherent to independent
// encapsulations: an X25519 key generation and a DH to seal, a DH to open,
// and the HPKE key schedule.

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
// empty values gives an empty, non-nil result. Under js/wasm it seals with
// WebCrypto (seal.go): call it from a goroutine, not a syscall/js
// callback.
func SealEach(hpkePub [32]byte, round uint64, values []float64) ([][]byte, error) {
	backing := make([]byte, len(values)*Width1Len)
	plain := make([]byte, 8*len(values))
	pts := make([][]byte, len(values))
	out := make([][]byte, len(values))
	for i, v := range values {
		pts[i] = plain[8*i : 8*i+8 : 8*i+8]
		binary.BigEndian.PutUint64(pts[i], math.Float64bits(v))
		out[i] = backing[i*Width1Len : i*Width1Len : (i+1)*Width1Len]
	}
	out, err := sealBatch(hpkePub, ValuesInfo(round), pts, out)
	if err != nil {
		return nil, err
	}
	for i, c := range out {
		if len(c) != Width1Len || &c[0] != &backing[i*Width1Len] {
			return nil, fmt.Errorf("%w: message %d: sealed length %d, want %d", ErrSeal, i, len(c), Width1Len)
		}
	}
	return out, nil
}
