package envelope

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

// batchSizes straddle the chunk size so that both the single-worker path
// and several workers with a partial last chunk are exercised.
var batchSizes = []int{0, 1, batchChunk - 1, batchChunk, 3*batchChunk + 5}

func TestSealEachRoundTrip(t *testing.T) {
	k := testKey(t, 1)
	pub := k.Public().HPKE
	for _, n := range batchSizes {
		vals := testValues(n)
		if n > 3 {
			vals[0], vals[1], vals[2] = math.Copysign(0, -1), math.SmallestNonzeroFloat64, -math.MaxFloat64
		}
		sealed, err := SealEach(pub, 9, vals)
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if sealed == nil || len(sealed) != n {
			t.Fatalf("n=%d: %d messages (nil %v)", n, len(sealed), sealed == nil)
		}
		for i, m := range sealed {
			if len(m) != Width1Len || cap(m) != Width1Len || Width1Len != SealedLen(1) {
				t.Fatalf("n=%d: message %d has len %d cap %d, want %d", n, i, len(m), cap(m), SealedLen(1))
			}
			// Every message opens alone with the single-message API.
			got, err := k.OpenValues(9, m, make([]float64, 1))
			if err != nil {
				t.Fatalf("n=%d: OpenValues(message %d): %v", n, i, err)
			}
			if math.Float64bits(got[0]) != math.Float64bits(vals[i]) {
				t.Fatalf("n=%d: message %d opened to %v, want %v", n, i, got[0], vals[i])
			}
		}
		// And the batch opens in order, into dst when it is large enough.
		dst := make([]float64, 0, n+1)
		got, errs := k.OpenEach(9, sealed, dst)
		if errs != nil {
			t.Fatalf("n=%d: errs = %v", n, errs)
		}
		if len(got) != n || (n > 0 && &got[0] != &dst[:1][0]) {
			t.Fatalf("n=%d: got %d values, dst reused %v", n, len(got), n > 0 && &got[0] == &dst[:1][0])
		}
		for i := range vals {
			if math.Float64bits(got[i]) != math.Float64bits(vals[i]) {
				t.Fatalf("n=%d: value %d = %v, want %v", n, i, got[i], vals[i])
			}
		}
	}
}

// No two sealed messages share their encapsulated key (the first EncSize
// bytes), within a batch and across batches, even for equal values: the
// aggregator cannot link messages by their bytes.
func TestSealEachDistinctEncapsulation(t *testing.T) {
	n := 2000
	if testing.Short() {
		n = 300
	}
	k := testKey(t, 1)
	same := make([]float64, n) // all zero: only the encapsulation differs
	seen := make(map[[EncSize]byte]int)
	for batch := range 2 {
		sealed, err := SealEach(k.Public().HPKE, 1, same)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range sealed {
			enc := [EncSize]byte(m[:EncSize])
			if j, dup := seen[enc]; dup {
				t.Fatalf("batch %d message %d repeats the encapsulated key of message %d", batch, i, j)
			}
			seen[enc] = batch*n + i
		}
		// The ciphertexts and tags differ too (fresh keys, so fresh
		// keystreams), though equal plaintexts.
		if bytes.Equal(sealed[0][EncSize:], sealed[1][EncSize:]) {
			t.Fatal("two messages of the same value share ciphertext and tag")
		}
	}
}

// Appending to one message must not overwrite its neighbour in the shared
// backing array.
func TestSealEachMessagesDoNotAlias(t *testing.T) {
	k := testKey(t, 1)
	sealed, err := SealEach(k.Public().HPKE, 1, []float64{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	second := bytes.Clone(sealed[1])
	_ = append(sealed[0], 0xff, 0xff)
	if !bytes.Equal(sealed[1], second) {
		t.Fatal("appending to message 0 modified message 1")
	}
}

func TestSealEachRejectsBadKey(t *testing.T) {
	out, err := SealEach([32]byte{}, 1, []float64{1, 2})
	if !errors.Is(err, ErrSeal) || out != nil {
		t.Fatalf("zero key: out %v, err = %v, want nil and ErrSeal", out, err)
	}
}
