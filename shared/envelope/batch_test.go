package envelope

import (
	"bytes"
	"errors"
	"math"
	"runtime"
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

// OpenEach accepts what SealValues seals with one value.
func TestOpenEachOpensSealValues(t *testing.T) {
	k := testKey(t, 1)
	var sealed [][]byte
	for i := range 5 {
		m, err := SealValues(k.Public().HPKE, 4, []float64{float64(i) / 4})
		if err != nil {
			t.Fatal(err)
		}
		sealed = append(sealed, m)
	}
	got, errs := k.OpenEach(4, sealed, nil)
	if errs != nil {
		t.Fatal(errs)
	}
	for i, v := range got {
		if v != float64(i)/4 {
			t.Fatalf("value %d = %v", i, v)
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

// Every single-bit change of every byte of a message (enc, ciphertext,
// tag) is rejected as ErrOpen, only that message fails, and its value is
// NaN; the others still open.
func TestOpenEachRejectsTampering(t *testing.T) {
	k := testKey(t, 1)
	vals := []float64{0.125, 0.25, 0.5}
	sealed, err := SealEach(k.Public().HPKE, 3, vals)
	if err != nil {
		t.Fatal(err)
	}
	for i := range Width1Len {
		for _, mask := range []byte{0x01, 0x80} {
			batch := [][]byte{sealed[0], bytes.Clone(sealed[1]), sealed[2]}
			batch[1][i] ^= mask
			got, errs := k.OpenEach(3, batch, nil)
			if len(errs) != 3 || errs[0] != nil || errs[2] != nil || !errors.Is(errs[1], ErrOpen) || errors.Is(errs[1], ErrNonFinite) {
				t.Fatalf("byte %d ^ %#x: errs = %v, want ErrOpen for message 1 only", i, mask, errs)
			}
			if got[0] != vals[0] || !math.IsNaN(got[1]) || got[2] != vals[2] {
				t.Fatalf("byte %d ^ %#x: values %v", i, mask, got)
			}
		}
	}
}

func TestOpenEachRejectsWrongRoundKeyLength(t *testing.T) {
	k, other := testKey(t, 1), testKey(t, 2)
	sealed, err := SealEach(k.Public().HPKE, 10, []float64{0.5, 0.75})
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, key *PrivateKey, round uint64, batch [][]byte, bad ...int) {
		t.Helper()
		got, errs := key.OpenEach(round, batch, nil)
		if len(errs) != len(batch) {
			t.Fatalf("%s: errs = %v, want one per message", name, errs)
		}
		isBad := make(map[int]bool)
		for _, i := range bad {
			isBad[i] = true
		}
		for i := range batch {
			if isBad[i] != (errs[i] != nil) || (isBad[i] && (!errors.Is(errs[i], ErrOpen) || !math.IsNaN(got[i]))) {
				t.Fatalf("%s: message %d: err %v, value %v", name, i, errs[i], got[i])
			}
		}
	}
	for _, r := range []uint64{0, 9, 11, 10 + 1<<32, math.MaxUint64} {
		check("wrong round", k, r, sealed, 0, 1)
	}
	check("wrong key", other, 10, sealed, 0, 1)
	wide, err := SealValues(k.Public().HPKE, 10, []float64{0.5, 0.75})
	if err != nil {
		t.Fatal(err)
	}
	check("lengths", k, 10, [][]byte{sealed[0], nil, sealed[1][:Width1Len-1], wide, append(bytes.Clone(sealed[1]), 0), sealed[1]}, 1, 2, 3, 4)
}

func TestOpenEachNonFinite(t *testing.T) {
	k := testKey(t, 1)
	vals := []float64{0.5, math.NaN(), math.Inf(1), 1, math.Inf(-1)}
	sealed, err := SealEach(k.Public().HPKE, 1, vals)
	if err != nil {
		t.Fatal(err)
	}
	got, errs := k.OpenEach(1, sealed, nil)
	if len(errs) != len(vals) {
		t.Fatalf("errs = %v", errs)
	}
	for i, v := range vals {
		finite := !math.IsNaN(v) && !math.IsInf(v, 0)
		if finite && (errs[i] != nil || got[i] != v) {
			t.Fatalf("message %d: err %v, value %v, want %v", i, errs[i], got[i], v)
		}
		if !finite && (!errors.Is(errs[i], ErrNonFinite) || errors.Is(errs[i], ErrOpen) || !math.IsNaN(got[i])) {
			t.Fatalf("message %d (%v): err %v, value %v, want ErrNonFinite and NaN", i, v, errs[i], got[i])
		}
	}
}

// The parallel path keeps the order and reports the first failed chunk's
// error whatever the number of workers.
func TestParallel(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 2, 7} {
		runtime.GOMAXPROCS(procs)
		for _, n := range batchSizes {
			hits := make([]int, n)
			err := parallel(n, func(lo, hi int) error {
				if lo < 0 || hi > n || hi-lo > batchChunk || lo >= hi {
					t.Errorf("procs %d n %d: range [%d, %d)", procs, n, lo, hi)
				}
				for i := lo; i < hi; i++ {
					hits[i]++
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for i, h := range hits {
				if h != 1 {
					t.Fatalf("procs %d n %d: index %d visited %d times", procs, n, i, h)
				}
			}
		}
		errFirst, errLater := errors.New("first"), errors.New("later")
		err := parallel(10*batchChunk, func(lo, hi int) error {
			switch lo / batchChunk {
			case 2:
				return errFirst
			case 3, 9:
				return errLater
			}
			return nil
		})
		// Chunks are claimed in order and a claimed chunk always runs, so
		// the lowest failing chunk is always reached and wins.
		if err != errFirst {
			t.Fatalf("procs %d: err = %v", procs, err)
		}
	}
}

// SealEach and OpenEach also run with several workers (GOMAXPROCS > 1)
// where the platform has them; the results must not depend on it.
func TestSealOpenEachWorkers(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	k := testKey(t, 1)
	vals := testValues(5*batchChunk + 3)
	for _, procs := range []int{1, 3} {
		runtime.GOMAXPROCS(procs)
		sealed, err := SealEach(k.Public().HPKE, 2, vals)
		if err != nil {
			t.Fatal(err)
		}
		sealed[batchChunk+1] = sealed[batchChunk+1][:10]
		got, errs := k.OpenEach(2, sealed, nil)
		for i := range vals {
			if i == batchChunk+1 {
				if !errors.Is(errs[i], ErrOpen) || !math.IsNaN(got[i]) {
					t.Fatalf("procs %d: truncated message: err %v value %v", procs, errs[i], got[i])
				}
				continue
			}
			if errs[i] != nil || got[i] != vals[i] {
				t.Fatalf("procs %d: message %d: err %v, value %v, want %v", procs, i, errs[i], got[i], vals[i])
			}
		}
	}
}
