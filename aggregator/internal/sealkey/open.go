package sealkey

import (
	"crypto/hpke"
	"fmt"
	"math"
	"sync"

	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/parallel"
)

// OpenValues opens a message sealed by envelope.SealValues for round and
// decodes its values.
//
// The number of values is n = (len(sealed) - envelope.Overhead)/8. If
// len(dst) > 0, len(dst) is the expected n and any other length is
// rejected; pass nil or dst[:0] to accept any n. The values are written to
// dst's backing array when cap(dst) >= n (no allocation besides HPKE's own
// plaintext) and the n values are returned.
//
// Errors wrap envelope.ErrOpen for a bad length, the wrong round, the
// wrong key or any modified byte; they wrap envelope.ErrNonFinite (and not
// ErrOpen) when the message opened but holds a NaN or an infinity. On
// error the contents of dst are unspecified.
func (k *PrivateKey) OpenValues(round uint64, sealed []byte, dst []float64) ([]float64, error) {
	if len(sealed) < envelope.Overhead || (len(sealed)-envelope.Overhead)%8 != 0 {
		return nil, fmt.Errorf("%w: sealed length %d is not %d + 8*n", envelope.ErrOpen, len(sealed), envelope.Overhead)
	}
	n := (len(sealed) - envelope.Overhead) / 8
	if len(dst) > 0 && len(dst) != n {
		return nil, fmt.Errorf("%w: sealed message has %d values, want %d", envelope.ErrOpen, n, len(dst))
	}
	_, kdf, aead := envelope.Suite()
	pt, err := hpke.Open(k.hpke, kdf, aead, envelope.ValuesInfo(round), sealed)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", envelope.ErrOpen, err)
	}
	if cap(dst) >= n {
		dst = dst[:n]
	} else {
		dst = make([]float64, n)
	}
	if !envelope.DecodeValues(dst, pt) {
		return nil, fmt.Errorf("%w: round %d", envelope.ErrNonFinite, round)
	}
	return dst, nil
}

// OpenEach opens width-1 messages sealed for round (by envelope.SealEach,
// or by envelope.SealValues with one value) and returns their values in
// order, vals[i] from sealed[i]. The values are written to dst's backing
// array when cap(dst) >= len(sealed), otherwise to a new slice.
//
// A message that does not open does not stop the batch: errs is nil when
// every message opened to a finite value; otherwise len(errs) ==
// len(sealed), errs[i] is nil for the messages that opened and, for the
// others, an error wrapping envelope.ErrOpen (wrong length, round, key, or
// a modified byte) or envelope.ErrNonFinite (opened, but NaN or infinite),
// as OpenValues reports them; vals[i] is NaN for every failed message, so
// a caller that ignores errs cannot silently average a rejected value.
//
// Natively the messages are opened by up to GOMAXPROCS goroutines, in
// chunks of envelope.BatchChunk (parallel.Chunks); k is safe for that.
func (k *PrivateKey) OpenEach(round uint64, sealed [][]byte, dst []float64) (vals []float64, errs []error) {
	n := len(sealed)
	if cap(dst) >= n {
		vals = dst[:n]
	} else {
		vals = make([]float64, n)
	}
	_, kdf, aead := envelope.Suite()
	in := envelope.ValuesInfo(round)
	var (
		mu     sync.Mutex
		failed []error
	)
	fail := func(i int, err error) {
		mu.Lock()
		if failed == nil {
			failed = make([]error, n)
		}
		failed[i] = err
		mu.Unlock()
	}
	// The callback never returns an error: failures are per message.
	_ = parallel.Chunks(n, envelope.BatchChunk, func(lo, hi int) error {
		for i := lo; i < hi; i++ {
			vals[i] = math.NaN()
			c := sealed[i]
			if len(c) != envelope.Width1Len {
				fail(i, fmt.Errorf("%w: message %d: length %d, want %d", envelope.ErrOpen, i, len(c), envelope.Width1Len))
				continue
			}
			pt, err := hpke.Open(k.hpke, kdf, aead, in, c)
			if err != nil {
				fail(i, fmt.Errorf("%w: message %d: %w", envelope.ErrOpen, i, err))
				continue
			}
			if len(pt) != 8 {
				fail(i, fmt.Errorf("%w: message %d: plaintext length %d, want 8", envelope.ErrOpen, i, len(pt)))
				continue
			}
			var v [1]float64
			if !envelope.DecodeValues(v[:], pt) {
				fail(i, fmt.Errorf("%w: message %d, round %d", envelope.ErrNonFinite, i, round))
				continue
			}
			vals[i] = v[0]
		}
		return nil
	})
	return vals, failed
}

// OpenLeaderShare opens a leader share sealed to the aggregator's key for
// round under the consent hash consent (envelope.SealShare with
// envelope.ShareLeader; consent is task.ConsentHash of the aggregator's
// task): a share sealed by a client that held another consent text's hash
// does not open. want is the expected share size (negative: any). Errors
// wrap envelope.ErrOpenShare (wrong length, round, role, key, consent
// text, or modified bytes).
func (k *PrivateKey) OpenLeaderShare(round uint64, consent [32]byte, sealed []byte, want int) ([]byte, error) {
	if want >= 0 && len(sealed) != envelope.ShareSealedLen(want) {
		return nil, fmt.Errorf("%w: %d bytes, want %d", envelope.ErrOpenShare, len(sealed), envelope.ShareSealedLen(want))
	}
	inf, err := envelope.ShareInfo(round, envelope.ShareLeader, consent)
	if err != nil {
		return nil, err
	}
	_, kdf, aead := envelope.Suite()
	pt, err := hpke.Open(k.hpke, kdf, aead, inf, sealed)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", envelope.ErrOpenShare, err)
	}
	return pt, nil
}
