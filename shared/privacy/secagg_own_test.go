package privacy

import (
	"errors"
	"math"
	"testing"
)

// TestSecAggOwnCurveEqualsDirect: one SecAggOwnCurve, asked round after
// round as a volunteer's device asks it (rounds growing, two δ), returns
// bit for bit what SecAggReplaceOneEpsilon computes from scratch, at check-in
// rate 1 (where the RDP row also takes group privacy) and below 1, at σ
// from a few integer units (where the smoothing of the pair row costs most)
// to make run's; so the cached curves are never altered by a conversion.
// For two rounds it also agrees (to 1e-9 relative: the ledger adds the
// curves round by round, Epsilon multiplies) with the ledger's tightest
// replace-one row for releases of 2^40 coordinates, the dimension the pair
// row assumes.
func TestSecAggOwnCurveEqualsDirect(t *testing.T) {
	for _, p := range []struct{ sigma, sens, q float64 }{
		{203831, 78643, 1}, {203831, 78643, 0.5}, {300, 138, 1}, {300, 138, 0.1}, {4.5, 1, 0.5}, {10, 8, 0.01},
	} {
		c, err := NewSecAggReplaceOne(p.sigma, p.sens, p.q)
		if err != nil {
			t.Fatalf("%+v: %v", p, err)
		}
		for _, rounds := range []int{1, 2, 3, 7, 50} {
			for _, delta := range []float64{1e-5, 1e-9} {
				got, err := c.Epsilon(rounds, delta)
				want, werr := SecAggReplaceOneEpsilon(p.sigma, p.sens, p.q, rounds, delta)
				if err != nil || werr != nil || math.Float64bits(got) != math.Float64bits(want) || !(got > 0) {
					t.Fatalf("%+v rounds %d delta %v: cached %v (%v), direct %v (%v)", p, rounds, delta, got, err, want, werr)
				}
			}
		}
		r := secAggRelease(1, p.sigma, p.sens, p.q)
		r.D = secAggPairMaxDim
		r2 := r
		r2.Round = 2
		rep, err := Account([]Release{r, r2}, 1e-5)
		if err != nil || rep.Tightest < 0 {
			t.Fatalf("%+v: ledger %v, tightest %d", p, err, rep.Tightest)
		}
		got, err := c.Epsilon(2, 1e-5)
		if want := rep.Rows[rep.Tightest].Epsilon; err != nil || math.Abs(got-want) > 1e-9*want {
			t.Fatalf("%+v: cached %v (%v), the ledger's tightest row %v (%s)", p, got, err, want, rep.Rows[rep.Tightest].Method)
		}
	}
}

// TestSecAggOwnCurveInvalid: invalid σ, Δ or check-in rate are refused
// when the curve is built, invalid rounds or δ when it is asked, all as
// ErrInvalidParameter, by the cached curve and by SecAggReplaceOneEpsilon
// alike.
func TestSecAggOwnCurveInvalid(t *testing.T) {
	for _, p := range []struct{ sigma, sens, q float64 }{
		{-1, 1, 1}, {0, 1, 1}, {math.NaN(), 1, 1}, {math.Inf(1), 1, 1}, {10, 0, 1}, {10, -3, 0.5}, {10, 1, 0}, {10, 1, 1.5}, {10, 1, math.NaN()},
	} {
		if c, err := NewSecAggReplaceOne(p.sigma, p.sens, p.q); !errors.Is(err, ErrInvalidParameter) || c != nil {
			t.Errorf("%+v: NewSecAggReplaceOne %v, %v", p, c, err)
		}
		if _, err := SecAggReplaceOneEpsilon(p.sigma, p.sens, p.q, 1, 1e-5); !errors.Is(err, ErrInvalidParameter) {
			t.Errorf("%+v: SecAggReplaceOneEpsilon %v", p, err)
		}
	}
	c, err := NewSecAggReplaceOne(300, 138, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []struct {
		rounds int
		delta  float64
	}{{0, 1e-5}, {-1, 1e-5}, {1, 0}, {1, 1}, {1, -1e-5}, {1, math.NaN()}} {
		if _, err := c.Epsilon(a.rounds, a.delta); !errors.Is(err, ErrInvalidParameter) {
			t.Errorf("rounds %d delta %v: %v", a.rounds, a.delta, err)
		}
		if _, err := SecAggReplaceOneEpsilon(300, 138, 0.5, a.rounds, a.delta); !errors.Is(err, ErrInvalidParameter) {
			t.Errorf("direct, rounds %d delta %v: %v", a.rounds, a.delta, err)
		}
	}
}

// BenchmarkSecAggOwnEpsilon: a volunteer's own replace-one guarantee at
// round 50 of identical rounds (σ = 203,831 and Δ = 78,643 integer units,
// make run's setting in shared/client's tests; check-in rate 0.5; δ =
// 1e-5), recomputed from scratch (SecAggReplaceOneEpsilon) and from a
// curve built once (SecAggOwnCurve.Epsilon), side by side; and the
// curve's construction alone.
func BenchmarkSecAggOwnEpsilon(b *testing.B) {
	const sigma, sens, q, rounds, delta = 203831, 78643, 0.5, 50, 1e-5
	b.Run("recompute", func(b *testing.B) {
		for b.Loop() {
			if _, err := SecAggReplaceOneEpsilon(sigma, sens, q, rounds, delta); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		c, err := NewSecAggReplaceOne(sigma, sens, q)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := c.Epsilon(rounds, delta); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("build", func(b *testing.B) {
		for b.Loop() {
			if _, err := NewSecAggReplaceOne(sigma, sens, q); err != nil {
				b.Fatal(err)
			}
		}
	})
}
