package shuffler

import (
	"math"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/envelope/envelopetest"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/wire"
)

// waitSealed polls until the pool has sealed want blocks (background work;
// a correctness wait, not a timing assertion).
func waitSealed(t *testing.T, p *Pool, want int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for p.Sealed() < want {
		if time.Now().After(deadline) {
			t.Fatalf("pool sealed %d of %d blocks", p.Sealed(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// markSeal is a cheap seal whose output starts with mark, so a test can
// tell pooled dummies from dummies sealed at close.
func markSeal(mark byte) sealFunc {
	return func(_ [32]byte, _ uint64, v []float64) ([]byte, error) {
		s := make([]byte, envelope.SealedLen(len(v)))
		s[0] = mark
		return s, nil
	}
}

// TestPoolShortfallAndSurplus: with a pool smaller than the dummies needed,
// Build uses all of it and seals the rest at close; with a larger one, it
// uses only what it needs. Either way every dimension is padded to exactly
// n_p (ParseBatch checks coverage) and no pooled block appears twice.
func TestPoolShortfallAndSurplus(t *testing.T) {
	p := params() // d = 8, width = 1, n_p = 6: 48 messages
	real := make([]wire.BatchMessage, 8)
	for i, j := range []uint32{0, 1, 2, 3, 0, 7, 5, 6} {
		real[i] = wire.BatchMessage{Indices: []uint32{j}, Sealed: make([]byte, envelope.SealedLen(1))}
	}
	const nd = 8*6 - 8
	r := Round{Round: 3, Params: p, Reports: 2, CheckedIn: 2, Population: 2}
	for _, size := range []int{0, 5, nd, nd + 7} {
		pool, err := newPool(r, noise.NewSeeded(9), size, markSeal(1))
		if err != nil {
			t.Fatal(err)
		}
		waitSealed(t, pool, size)
		in := append([]wire.BatchMessage(nil), real...)
		b, st, err := build(r, in, noise.NewSeeded(10), 2, markSeal(2), pool)
		if err != nil {
			t.Fatal(err)
		}
		if want := min(size, nd); st.Presealed != want || st.DummyMessages != nd {
			t.Fatalf("pool %d: stats %+v, want %d presealed", size, st, want)
		}
		enc, _ := b.MarshalBinary()
		if _, err := wire.ParseBatch(enc, p); err != nil {
			t.Fatalf("pool %d: ParseBatch: %v", size, err)
		}
		pooled, atClose := 0, 0
		seen := map[*byte]bool{}
		for _, m := range b.Messages {
			switch m.Sealed[0] {
			case 1:
				pooled++
				if seen[&m.Sealed[0]] {
					t.Fatalf("pool %d: a pooled block used twice", size)
				}
				seen[&m.Sealed[0]] = true
			case 2:
				atClose++
			}
		}
		if pooled != min(size, nd) || atClose != nd-pooled {
			t.Fatalf("pool %d: %d pooled, %d sealed at close", size, pooled, atClose)
		}
		if pool.Sealed() != size {
			t.Fatalf("pool %d: %d sealed after take", size, pool.Sealed())
		}
	}
}

// TestPresealer: Presealer.Build finds the pool Start made for the
// same round (number, key, parameters, population), really sealed to the
// key: pooled dummies open to blanket samples. A round differing only in
// population gets no pool; a taken pool is gone.
func TestPresealer(t *testing.T) {
	var ps Presealer
	key, err := envelopetest.DeriveKey([32]byte{4})
	if err != nil {
		t.Fatal(err)
	}
	pub := key.Public().HPKE
	p := params()
	r := Round{Round: 77, Params: p, HPKEPub: pub, Population: 2}
	if got := EstimateDummies(p, 2); got != 8*6-2*p.Messages() {
		t.Fatalf("EstimateDummies = %d", got)
	}
	if err := ps.Start(r, noise.NewSeeded(5)); err != nil {
		t.Fatal(err)
	}
	other := r
	other.Population = 3
	if ps.take(other) != nil {
		t.Fatal("a pool for another population")
	}
	pool := ps.take(r)
	if pool == nil {
		t.Fatal("no pool registered")
	}
	want := EstimateDummies(p, 2)
	waitSealed(t, pool, want)
	ps.add(pool) // put it back for Build
	real := realMessages(t, pub, 77, [][]uint32{{0}, {1}, {2}, {3}, {0}, {7}, {5}, {6}}, 0.125)
	r.Reports, r.CheckedIn = 2, 2
	b, st, err := ps.Build(r, real, noise.NewSeeded(6), 1)
	if err != nil {
		t.Fatal(err)
	}
	if st.Presealed != want || st.DummyMessages != 40 {
		t.Fatalf("stats %+v, want %d presealed", st, want)
	}
	if ps.take(r) != nil {
		t.Fatal("pool still held after Build")
	}
	// All 40 dummies (all pooled) open to Lap(1/2, 2) samples (blanket of
	// Laplace at eps = 2/4): the mean of 40 values has sd 0.45, so
	// |mean - 0.5| > 2.5 has probability < 1e-7 (fixed seeds).
	sum, n := 0.0, 0
	for _, m := range b.Messages {
		v, err := key.OpenValues(77, m.Sealed, nil)
		if err != nil {
			t.Fatal(err)
		}
		if v[0] == 0.125 {
			continue
		}
		sum += v[0]
		n++
	}
	if n != 40 || math.Abs(sum/40-0.5) > 2.5 {
		t.Fatalf("%d dummy values, mean %v", n, sum/float64(n))
	}
}

// TestPoolEvictionAndValidation: a Presealer keeps maxPools pools and
// stops the evicted ones; a pool for another round is refused; bad sizes
// and parameters are rejected.
func TestPoolEvictionAndValidation(t *testing.T) {
	p := params()
	var ps Presealer
	var pools []*Pool
	for i := range maxPools + 2 {
		pool, err := newPool(Round{Round: uint64(1000 + i), Params: p}, noise.NewSeeded(1), 0, markSeal(1))
		if err != nil {
			t.Fatal(err)
		}
		ps.add(pool)
		pools = append(pools, pool)
	}
	for i, pool := range pools {
		got := ps.take(Round{Round: uint64(1000 + i), Params: p})
		if evicted := i < 2; (got == nil) != evicted {
			t.Fatalf("pool %d: taken %v, evicted %v", i, got != nil, evicted)
		}
		pool.mu.Lock()
		stopped := pool.stopped
		pool.mu.Unlock()
		if i < 2 && !stopped {
			t.Fatalf("evicted pool %d not stopped", i)
		}
	}
	pool, err := newPool(Round{Round: 1, Params: p}, noise.NewSeeded(1), 1, markSeal(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := BuildFrom(Round{Round: 2, Params: p}, nil, noise.NewSeeded(1), 1, pool); err == nil {
		t.Fatal("a pool for round 1 accepted for round 2")
	}
	bad := p
	bad.Randomizer = 9
	for _, tc := range []struct {
		p   wire.Params
		n   int
		src noise.Source
	}{{p, -1, noise.NewSeeded(1)}, {p, maxPoolBlocks + 1, noise.NewSeeded(1)}, {p, 1, nil}, {bad, 1, noise.NewSeeded(1)}} {
		if _, err := NewPool(Round{Round: 1, Params: tc.p}, tc.src, tc.n); err == nil {
			t.Fatalf("NewPool(%d) accepted", tc.n)
		}
	}
	// EstimateDummies: quota and check-in probability bound the expected
	// reporters; never negative.
	q := p
	q.Quota, q.CheckInP = 1, 0.5
	if got := EstimateDummies(q, 10); got != 48-q.Messages() {
		t.Fatalf("quota estimate %d", got)
	}
	if got := EstimateDummies(p, 1000); got != 0 {
		t.Fatalf("oversubscribed estimate %d", got)
	}
}
