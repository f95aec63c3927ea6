package privacy

import (
	"errors"
	"math"
	"testing"
)

func TestAdvancedComposition(t *testing.T) {
	// ε = 0.01, t = 10^4, δ' = e^-10: sqrt(2·10^4·10)·0.01 + 10^4·0.01·(e^0.01 − 1).
	e, d, err := AdvancedComposition(0.01, 1e-9, 10000, math.Exp(-10))
	if err != nil {
		t.Fatal(err)
	}
	want := math.Sqrt(200000)*0.01 + 100*math.Expm1(0.01)
	if math.Abs(e-want) > 1e-12 || math.Abs(d-(1e-5+math.Exp(-10))) > 1e-18 {
		t.Errorf("got (%v, %v), want (%v, %v)", e, d, want, 1e-5+math.Exp(-10))
	}
	for _, c := range []struct {
		eps, delta float64
		k          int
		dp         float64
		want       error
	}{
		{0.1, 0, 10, 0, ErrInvalidParameter},
		{0.1, 0, 10, 1, ErrInvalidParameter},
		{math.Inf(1), 0, 10, 1e-6, ErrInvalidParameter},
		{0.1, 0.2, 10, 1e-6, ErrOutsideValidity},
		{0.1, 0, 0, 1e-6, ErrInvalidParameter},
	} {
		if _, _, err := AdvancedComposition(c.eps, c.delta, c.k, c.dp); !errors.Is(err, c.want) {
			t.Errorf("%+v: err = %v, want %v", c, err, c.want)
		}
	}
}

func TestComposeMinPicksSmaller(t *testing.T) {
	// Large ε: basic composition (t·ε) wins.
	e, d, _ := composeMin(1, 1e-6, 10)
	if e != 10 || math.Abs(d-11e-6) > 1e-20 {
		t.Errorf("got (%v, %v), want (10, 1.1e-5)", e, d)
	}
	// Small ε over many steps: advanced wins.
	e, _, _ = composeMin(0.001, 1e-9, 10000)
	if !(e < 10) {
		t.Errorf("advanced composition not chosen: %v", e)
	}
}

func TestAdvancedCompositionMonotone(t *testing.T) {
	prev := 0.0
	for _, eps := range []float64{0.001, 0.01, 0.1, 1} {
		e, _, _ := AdvancedComposition(eps, 0, 100, 1e-6)
		if !(e > prev) {
			t.Errorf("not increasing in eps at %g", eps)
		}
		prev = e
	}
	prev = 0
	for _, k := range []int{1, 10, 100, 1000} {
		e, _, _ := AdvancedComposition(0.01, 0, k, 1e-6)
		if !(e > prev) {
			t.Errorf("not increasing in t at %d", k)
		}
		prev = e
	}
}

func TestSubsample(t *testing.T) {
	e, d, err := Subsample(0.7, 1e-6, 1)
	if err != nil || math.Abs(e-0.7) > 1e-15 || d != 1e-6 {
		t.Errorf("q = 1 must be the identity, got (%v, %v, %v)", e, d, err)
	}
	e, d, _ = Subsample(1, 1e-6, 0.02)
	if want := math.Log(1 + 0.02*(math.E-1)); math.Abs(e-want) > 1e-15 || math.Abs(d-2e-8) > 1e-22 {
		t.Errorf("got (%v, %v), want (%v, 2e-8)", e, d, want)
	}
	for _, q := range []float64{0, -0.1, 1.5, math.NaN()} {
		if _, _, err := Subsample(1, 0, q); !errors.Is(err, ErrInvalidParameter) {
			t.Errorf("q = %v: %v", q, err)
		}
	}
	// Amplification: smaller than ε for q < 1, increasing in ε and q.
	a, _, _ := Subsample(1, 0, 0.1)
	b, _, _ := Subsample(2, 0, 0.1)
	c, _, _ := Subsample(1, 0, 0.2)
	if !(a < 1 && b > a && c > a) {
		t.Errorf("monotonicity: %v %v %v", a, b, c)
	}
}
