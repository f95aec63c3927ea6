package check

import (
	"errors"
	"math"
	"testing"
)

var errKind = errors.New("kind")

func TestFinite(t *testing.T) {
	for _, v := range []float64{0, -1, 1e308, math.SmallestNonzeroFloat64} {
		if !Finite(v) {
			t.Errorf("Finite(%v) = false", v)
		}
	}
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if Finite(v) {
			t.Errorf("Finite(%v) = true", v)
		}
	}
}

func TestChecks(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	cases := []struct {
		name     string
		check    func(float64) error
		ok, fail []float64
	}{
		{"Positive", func(v float64) error { return Positive(errKind, "x", v) }, []float64{1e-300, 1, 1e300}, []float64{0, -1, nan, inf, -inf}},
		{"NonNegative", func(v float64) error { return NonNegative(errKind, "x", v) }, []float64{0, 1, 1e300}, []float64{-1e-300, nan, inf, -inf}},
		{"OpenUnit", func(v float64) error { return OpenUnit(errKind, "x", v) }, []float64{1e-300, 0.5, math.Nextafter(1, 0)}, []float64{0, 1, -1, nan, inf, -inf}},
		{"DeltaOrZero", func(v float64) error { return DeltaOrZero(errKind, "x", v) }, []float64{0, 0.5, math.Nextafter(1, 0)}, []float64{1, -1e-300, nan, inf, -inf}},
		{"Probability", func(v float64) error { return Probability(errKind, "x", v) }, []float64{0, 0.5, 1}, []float64{math.Nextafter(1, 2), -1e-300, nan, inf, -inf}},
	}
	for _, c := range cases {
		for _, v := range c.ok {
			if err := c.check(v); err != nil {
				t.Errorf("%s(%v) = %v, want nil", c.name, v, err)
			}
		}
		for _, v := range c.fail {
			if err := c.check(v); !errors.Is(err, errKind) {
				t.Errorf("%s(%v) = %v, want an error wrapping the kind", c.name, v, err)
			}
		}
	}
	if err := Count(errKind, "n", 0, 1); !errors.Is(err, errKind) {
		t.Errorf("Count(0, min 1) = %v, want an error wrapping the kind", err)
	}
	if err := Count(errKind, "n", 1, 1); err != nil {
		t.Errorf("Count(1, min 1) = %v, want nil", err)
	}
}

func TestMessages(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{Positive(errKind, "eps", -1), "kind: eps = -1, want a finite value > 0"},
		{Positive(nil, "eps", -1), "eps = -1, want a finite value > 0"},
		{OpenUnit(errKind, "delta", 1), "kind: delta = 1, want 0 < delta < 1"},
		{DeltaOrZero(errKind, "delta", 1), "kind: delta = 1, want 0 <= delta < 1"},
		{Probability(errKind, "q", 2), "kind: q = 2, want 0 <= q <= 1"},
		{NonNegative(errKind, "s", -1), "kind: s = -1, want a finite value >= 0"},
		{Count(errKind, "n", 0, 1), "kind: n = 0, want >= 1"},
	} {
		if c.err == nil || c.err.Error() != c.want {
			t.Errorf("error %v, want %q", c.err, c.want)
		}
	}
}
