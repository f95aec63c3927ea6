package pine

import (
	"math"
	"testing"

	"github.com/blanket-fl/blanket/shared/noise"
)

// TestForBlanketRange: parameters exist for d from a few dozen to 7850
// and clips over six orders of magnitude; the sensitivity covers the clip
// plus the rounding margin sqrt(d)/2 units and no more than one extra
// unit beyond it.
func TestForBlanketRange(t *testing.T) {
	for _, d := range []int{30, 100, 785, 7850} {
		for _, clip := range []float64{0.001, 0.1, 1, 3, 1000} {
			p, err := ForBlanket(d, clip)
			if err != nil {
				t.Fatalf("d %d clip %g: %v", d, clip, err)
			}
			lo := clip*p.Scale() + math.Sqrt(float64(d))/2
			if s := p.Sensitivity(); s < lo || s > lo+2 {
				t.Fatalf("d %d clip %g: sensitivity %v, want in [%v, %v]", d, clip, s, lo, lo+2)
			}
			if u := p.PublicShareSize() + p.LeaderShareSize() + p.HelperShareSize(); d == 7850 && u > 100_000 {
				t.Fatalf("upload %d bytes at d = 7850", u)
			}
			s := p.Soundness()
			if s.PerReport > -64 || s.PerAttempt > -64 || s.HonestRetry > -64 {
				t.Fatalf("d %d clip %g: soundness %+v above 2^-64", d, clip, s)
			}
		}
	}
	for _, bad := range []struct {
		d    int
		clip float64
	}{{0, 1}, {10, 0}, {10, math.NaN()}, {10, math.Inf(1)}, {10, -1}} {
		if _, err := ForBlanket(bad.d, bad.clip); err == nil {
			t.Fatalf("ForBlanket(%d, %v) accepted", bad.d, bad.clip)
		}
	}
}

// TestEncodeWorstRounding: an update of norm at most the clip whose every
// entry sits just above a rounding midpoint (each rounds outward by
// almost half a unit, the worst case of the triangle-inequality margin)
// still encodes within L2NormBound, so Shard accepts it; and the encoded
// norm is within the Sensitivity. Also: half-to-even ties, and refusals.
func TestEncodeWorstRounding(t *testing.T) {
	for _, d := range []int{30, 7850} {
		p := mustBlanket(t, d)
		a := 1 / math.Sqrt(float64(d)) * p.Scale() // per-entry magnitude, units
		k := math.Floor(a - 0.5)
		v := (k + 0.5 + math.Min(1e-6, (a-k-0.5)/2)) / p.Scale()
		x := make([]float64, d)
		var n2 float64
		for i := range x {
			x[i] = v
			if i%2 == 1 {
				x[i] = -v
			}
			n2 += v * v
		}
		if math.Sqrt(n2) > 1 {
			t.Fatalf("test vector norm %v above the clip", math.Sqrt(n2))
		}
		e, err := p.Encode(x)
		if err != nil {
			t.Fatalf("d %d: worst-case rounding refused: %v", d, err)
		}
		var sq float64
		for _, u := range e {
			if math.Abs(float64(u)) != k+1 {
				t.Fatalf("entry rounded to %d, want +-%v", u, k+1)
			}
			sq += float64(u) * float64(u)
		}
		if math.Sqrt(sq) > p.Sensitivity() {
			t.Fatalf("encoded norm %v above the sensitivity %v", math.Sqrt(sq), p.Sensitivity())
		}
		pub, l, h, err := p.Shard(x, [16]byte{}, noise.NewSeeded(1))
		if err != nil {
			t.Fatalf("d %d: Shard: %v", d, err)
		}
		if _, err := prepBoth(p, make([]byte, nonceSize), pub, l, h); err != nil {
			t.Fatalf("d %d: worst-case rounding rejected: %v", d, err)
		}
	}
	p := mustBlanket(t, 4)
	s := p.Scale()
	e, err := p.Encode([]float64{0.5 / s, 1.5 / s, -2.5 / s, -0.5 / s})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{0, 2, -2, 0}; e[0] != want[0] || e[1] != want[1] || e[2] != want[2] || e[3] != want[3] {
		t.Fatalf("ties: %v, want %v (half to even)", e, want)
	}
	for _, bad := range [][]float64{
		{math.NaN(), 0, 0, 0}, {math.Inf(-1), 0, 0, 0}, {5e-324, 0, 0, 0}, {1.01, 0, 0, 0}, {0, 0, 0},
	} {
		if _, err := p.Encode(bad); err == nil {
			t.Fatalf("Encode(%v) accepted", bad)
		}
	}
}
