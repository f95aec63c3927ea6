package client

import (
	"errors"
	"math"
	"testing"

	"github.com/blanket-fl/blanket/shared/privacy"
)

// TestSecAggEpsilonMemo: at check-in rate 1 the volunteer's guarantee is
// the dominating pair row's, the accountant's own figure at make run's
// settings; at q < 1 it is bit for bit the accountant's
// (privacy.SecAggReplaceOneEpsilon) for each argument it was asked with,
// from one curve per (σ, Δ, q) built once and kept across rounds, and a
// second volunteer asking the same gets the remembered answer.
func TestSecAggEpsilonMemo(t *testing.T) {
	for _, c := range []struct {
		sigma, sens, q float64
		rounds         int
	}{{203831, 78643, 1, 1}, {203831, 78643, 1, 5}, {100000, 78643, 0.5, 3}, {100000, 78643, 0.5, 4}} {
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
		g := ownGroup{c.sigma, c.sens, c.q}
		ownCache.Lock()
		before := ownCache.curves[g]
		ownCache.Unlock()
		for range 2 {
			got, err := secAggEpsilon(c.sigma, c.sens, c.q, c.rounds, ownDelta)
			if err != nil || math.Float64bits(got) != math.Float64bits(want) {
				t.Fatalf("%+v: %v (%v), want %v", c, got, err, want)
			}
		}
		ownCache.Lock()
		e, ok := ownCache.eps[ownKey{g, c.rounds, ownDelta}]
		cv := ownCache.curves[g]
		ownCache.Unlock()
		if !ok || e != want || cv == nil || (before != nil && cv != before) {
			t.Fatalf("%+v: remembered %v (%v), curve %p then %p", c, e, ok, before, cv)
		}
	}
	for _, bad := range []struct{ sigma, sens, q float64 }{{-1, 1, 1}, {-1, 1, 0.5}, {10, 0, 0.5}, {10, 1, 0}, {10, 1, 2}} {
		if _, err := secAggEpsilon(bad.sigma, bad.sens, bad.q, 1, ownDelta); !errors.Is(err, privacy.ErrInvalidParameter) {
			t.Fatalf("%+v accepted: %v", bad, err)
		}
	}
	if _, err := secAggEpsilon(300, 138, 0.5, 0, ownDelta); !errors.Is(err, privacy.ErrInvalidParameter) {
		t.Fatalf("0 rounds accepted: %v", err)
	}
}

// secAggRel is one secure-summation round's release as the client
// accounts it (D is the model's dimension, which the volunteer's own
// guarantee does not use).
func secAggRel(round int, sigma, sens, q float64) privacy.Release {
	return privacy.Release{Round: round, Protocol: privacy.ProtocolSecAgg, Randomizer: privacy.RandomizerDiscreteGaussian,
		D: 7850, N: 1, SecAggSigma: sigma, SecAggSensitivity: sens, CheckInRate: q}
}

// TestOwnPrivacySecAggRounds: after each of k secure-summation rounds at
// check-in rate 0.5, Privacy() is exactly (SecAggReplaceOneEpsilon(σ, Δ,
// 0.5, k, ownDelta), ownDelta, k), the direct computation; rounds of a
// second specification (q = 1, the pair row) add their own group's ε and
// ownDelta (basic composition), and the first group's term is unchanged;
// a round with an invalid σ is refused with ErrInvalidParameter.
func TestOwnPrivacySecAggRounds(t *testing.T) {
	const sigma, sens, q = 300.0, 138.0, 0.5
	c := &Client{}
	var first float64
	for k := 1; k <= 6; k++ {
		if err := c.account(secAggRel(k, sigma, sens, q)); err != nil {
			t.Fatal(err)
		}
		want, err := privacy.SecAggReplaceOneEpsilon(sigma, sens, q, k, ownDelta)
		if err != nil {
			t.Fatal(err)
		}
		eps, delta, n := c.Privacy()
		if eps != want || delta != ownDelta || n != k {
			t.Fatalf("after %d rounds: (%v, %v, %d), want (%v, %v, %d)", k, eps, delta, n, want, ownDelta, k)
		}
		first = want
	}
	const sigma2 = 600.0
	for k := 1; k <= 3; k++ {
		if err := c.account(secAggRel(6+k, sigma2, sens, 1)); err != nil {
			t.Fatal(err)
		}
		second, err := privacy.SecAggPairReplaceOneEpsilon(sigma2, sens, k, ownDelta)
		if err != nil {
			t.Fatal(err)
		}
		eps, delta, n := c.Privacy()
		if eps != first+second || delta != ownDelta+ownDelta || n != 6+k {
			t.Fatalf("after %d more rounds at q = 1: (%v, %v, %d), want (%v, %v, %d)", k, eps, delta, n, first+second, 2*ownDelta, 6+k)
		}
	}
	bad := &Client{}
	if err := bad.account(secAggRel(1, -1, sens, q)); !errors.Is(err, privacy.ErrInvalidParameter) {
		t.Fatalf("sigma -1: %v", err)
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
