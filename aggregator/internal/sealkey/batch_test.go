package sealkey

import (
	"bytes"
	"errors"
	"math"
	"runtime"
	"testing"

	"github.com/blanket-fl/blanket/shared/envelope"
)

// OpenEach accepts what envelope.SealValues seals with one value.
func TestOpenEachOpensSealValues(t *testing.T) {
	k := testKey(t, 1)
	var sealed [][]byte
	for i := range 5 {
		m, err := envelope.SealValues(k.Public().HPKE, 4, []float64{float64(i) / 4})
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

// Every single-bit change of every byte of a message (enc, ciphertext,
// tag) is rejected as envelope.ErrOpen, only that message fails, and its value is
// NaN; the others still open.
func TestOpenEachRejectsTampering(t *testing.T) {
	k := testKey(t, 1)
	vals := []float64{0.125, 0.25, 0.5}
	sealed, err := envelope.SealEach(k.Public().HPKE, 3, vals)
	if err != nil {
		t.Fatal(err)
	}
	for i := range envelope.Width1Len {
		for _, mask := range []byte{0x01, 0x80} {
			batch := [][]byte{sealed[0], bytes.Clone(sealed[1]), sealed[2]}
			batch[1][i] ^= mask
			got, errs := k.OpenEach(3, batch, nil)
			if len(errs) != 3 || errs[0] != nil || errs[2] != nil || !errors.Is(errs[1], envelope.ErrOpen) || errors.Is(errs[1], envelope.ErrNonFinite) {
				t.Fatalf("byte %d ^ %#x: errs = %v, want envelope.ErrOpen for message 1 only", i, mask, errs)
			}
			if got[0] != vals[0] || !math.IsNaN(got[1]) || got[2] != vals[2] {
				t.Fatalf("byte %d ^ %#x: values %v", i, mask, got)
			}
		}
	}
}

func TestOpenEachRejectsWrongRoundKeyLength(t *testing.T) {
	k, other := testKey(t, 1), testKey(t, 2)
	sealed, err := envelope.SealEach(k.Public().HPKE, 10, []float64{0.5, 0.75})
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
			if isBad[i] != (errs[i] != nil) || (isBad[i] && (!errors.Is(errs[i], envelope.ErrOpen) || !math.IsNaN(got[i]))) {
				t.Fatalf("%s: message %d: err %v, value %v", name, i, errs[i], got[i])
			}
		}
	}
	for _, r := range []uint64{0, 9, 11, 10 + 1<<32, math.MaxUint64} {
		check("wrong round", k, r, sealed, 0, 1)
	}
	check("wrong key", other, 10, sealed, 0, 1)
	wide, err := envelope.SealValues(k.Public().HPKE, 10, []float64{0.5, 0.75})
	if err != nil {
		t.Fatal(err)
	}
	check("lengths", k, 10, [][]byte{sealed[0], nil, sealed[1][:envelope.Width1Len-1], wide, append(bytes.Clone(sealed[1]), 0), sealed[1]}, 1, 2, 3, 4)
}

func TestOpenEachNonFinite(t *testing.T) {
	k := testKey(t, 1)
	vals := []float64{0.5, math.NaN(), math.Inf(1), 1, math.Inf(-1)}
	sealed, err := envelope.SealEach(k.Public().HPKE, 1, vals)
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
		if !finite && (!errors.Is(errs[i], envelope.ErrNonFinite) || errors.Is(errs[i], envelope.ErrOpen) || !math.IsNaN(got[i])) {
			t.Fatalf("message %d (%v): err %v, value %v, want envelope.ErrNonFinite and NaN", i, v, errs[i], got[i])
		}
	}
}

// envelope.SealEach and OpenEach also run with several workers (GOMAXPROCS > 1)
// where the platform has them; the results must not depend on it.
func TestSealOpenEachWorkers(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	k := testKey(t, 1)
	vals := testValues(5*envelope.BatchChunk + 3)
	for _, procs := range []int{1, 3} {
		runtime.GOMAXPROCS(procs)
		sealed, err := envelope.SealEach(k.Public().HPKE, 2, vals)
		if err != nil {
			t.Fatal(err)
		}
		sealed[envelope.BatchChunk+1] = sealed[envelope.BatchChunk+1][:10]
		got, errs := k.OpenEach(2, sealed, nil)
		for i := range vals {
			if i == envelope.BatchChunk+1 {
				if !errors.Is(errs[i], envelope.ErrOpen) || !math.IsNaN(got[i]) {
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
