package client

import (
	"testing"

	"github.com/blanket-fl/blanket/shared/privacy"
)

// TestSecAggEpsilonMemo: at check-in rate 1 the volunteer's guarantee is
// the dominating pair row's, the accountant's own figure at make run's
// settings; at q < 1 the remembered guarantee is the accountant's, for
// each argument it was asked with, and a second volunteer asking the same
// gets it from the memo.
func TestSecAggEpsilonMemo(t *testing.T) {
	for _, c := range []struct {
		sigma, sens, q float64
		rounds         int
	}{{203831, 78643, 1, 1}, {203831, 78643, 1, 5}, {100000, 78643, 0.5, 3}} {
		want, err := privacy.SecAggReplaceOneEpsilon(c.sigma, c.sens, c.q, c.rounds, ownDelta)
		if err != nil {
			t.Fatal(err)
		}
		if c.q == 1 {
			// The dominating pair row alone: at most the RDP row's slack
			// above the smaller of the two (here it is the smaller).
			got, err := secAggEpsilon(c.sigma, c.sens, c.q, c.rounds, ownDelta)
			if err != nil || got < want || got > want*1.001 {
				t.Fatalf("%+v: %v (%v), the accountant's %v", c, got, err, want)
			}
			continue
		}
		for range 2 {
			got, err := secAggEpsilon(c.sigma, c.sens, c.q, c.rounds, ownDelta)
			if err != nil || got != want {
				t.Fatalf("%+v: %v (%v), want %v", c, got, err, want)
			}
		}
		secAggMemo.Lock()
		_, ok := secAggMemo.m[secAggKey{c.sigma, c.sens, c.q, c.rounds, ownDelta}]
		secAggMemo.Unlock()
		if !ok {
			t.Fatalf("%+v not remembered", c)
		}
	}
	if _, err := secAggEpsilon(-1, 1, 1, 1, ownDelta); err == nil {
		t.Fatal("an invalid sigma accepted")
	}
}

// BenchmarkSecAggEpsilon: a volunteer's own guarantee after 5 rounds at
// make run's σ, by the whole accountant, by the dominating pair row alone
// (check-in rate 1), and remembered (q < 1), side by side.
func BenchmarkSecAggEpsilon(b *testing.B) {
	b.Run("accountant", func(b *testing.B) {
		for b.Loop() {
			if _, err := privacy.SecAggReplaceOneEpsilon(203831, 78643, 1, 5, ownDelta); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("pair", func(b *testing.B) {
		for b.Loop() {
			if _, err := secAggEpsilon(203831, 78643, 1, 5, ownDelta); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("memo q=0.5", func(b *testing.B) {
		for b.Loop() {
			if _, err := secAggEpsilon(203831, 78643, 0.5, 5, ownDelta); err != nil {
				b.Fatal(err)
			}
		}
	})
}
