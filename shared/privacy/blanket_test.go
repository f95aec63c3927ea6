package privacy

import (
	"errors"
	"math"
	"testing"
)

func TestBlanketLemma1Value(t *testing.T) {
	// ε_l = 1, b = 2, n = 10^5, δ = 10^-6 (inside the validity range).
	got, err := BlanketLemma1(1, 2, 100000, 1e-6)
	if err != nil {
		t.Fatal(err)
	}
	want := math.Sqrt(14 * math.Log(2e6) * (math.E + 1) / 99999)
	if math.Abs(got-want) > 1e-15 {
		t.Errorf("got %.16g want %.16g", got, want)
	}
	// Same through the γ form of BBGN'19 Theorem 3.1.
	g, _ := rgbGamma(1, 2)
	if v, err := blanketRGB(g, 2, 100000, 1e-6); err != nil || math.Abs(v-got) > 1e-15 {
		t.Errorf("BlanketRGB = %v, %v; want %v", v, err, got)
	}
}

func TestRGBGamma(t *testing.T) {
	if g, _ := rgbGamma(math.Log(3), 2); math.Abs(g-0.5) > 1e-15 {
		t.Errorf("RGBGamma(ln 3, 2) = %v, want 0.5", g)
	}
	if _, err := rgbGamma(0, 2); !errors.Is(err, ErrInvalidParameter) {
		t.Errorf("RGBGamma(0): %v", err)
	}
}

func TestBlanketRefusals(t *testing.T) {
	outsideCases := []struct {
		name  string
		fn    func() error
		wants error
	}{
		{"eps_c > 1 (n too small)", func() error { _, err := BlanketLemma1(1, 2, 100, 1e-6); return err }, ErrOutsideValidity},
		{"27k branch dominates (delta near 1)", func() error {
			// The 27k branch is the max iff ε > 14 ln(2/δ)/27 = 0.414 at
			// δ = 0.9; γ = 0.5, k = 1, n = 100 give ε = 0.475.
			_, err := blanketRGB(0.5, 1, 100, 0.9)
			return err
		}, ErrOutsideValidity},
		{"FLAME's SS-Simple dimension (eps_l = 0.01)", func() error {
			// At FLAME's δ_cd = 6.4e-10, n = 1000: ε_c = 0.96 for b = 3
			// (valid, though above ε_l) and 1.11 > 1 for b = 4.
			_, err := BlanketLemma1(0.01, 4, 1000, 6.4e-10)
			return err
		}, ErrOutsideValidity},
		{"gamma > 1", func() error { _, err := blanketRGB(1.5, 2, 1000, 1e-6); return err }, ErrInvalidParameter},
		{"n < 2", func() error { _, err := blanketRGB(0.5, 2, 1, 1e-6); return err }, ErrInvalidParameter},
		{"delta = 0", func() error { _, err := BlanketLemma1(1, 2, 100000, 0); return err }, ErrInvalidParameter},
		{"eps NaN", func() error { _, err := BlanketLemma1(math.NaN(), 2, 100000, 1e-6); return err }, ErrInvalidParameter},
		{"b = 0", func() error { _, err := BlanketLemma1(1, 0, 100000, 1e-6); return err }, ErrInvalidParameter},
	}
	for _, c := range outsideCases {
		if err := c.fn(); !errors.Is(err, c.wants) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.wants)
		}
	}
}

// TestBlanketLemma1Monotone: on a grid, ε_c increases with ε_l and
// decreases with n wherever Lemma 1 applies, and the grid has enough valid
// points to mean something.
func TestBlanketLemma1Monotone(t *testing.T) {
	epsLs := []float64{0.1, 0.5, 1, 2, 3}
	ns := []int{10000, 100000, 1000000}
	valid := 0
	for _, b := range []int{2, 10} {
		for i, e := range epsLs {
			for j, n := range ns {
				v, err := BlanketLemma1(e, b, n, 1e-8)
				if err != nil {
					if !errors.Is(err, ErrOutsideValidity) {
						t.Fatal(err)
					}
					continue
				}
				valid++
				if i > 0 {
					if prev, err := BlanketLemma1(epsLs[i-1], b, n, 1e-8); err == nil && !(v > prev) {
						t.Errorf("b=%d n=%d: eps_c(%g)=%g <= eps_c(%g)=%g", b, n, e, v, epsLs[i-1], prev)
					}
				}
				if j > 0 {
					if prev, err := BlanketLemma1(e, b, ns[j-1], 1e-8); err == nil && !(v < prev) {
						t.Errorf("b=%d eps=%g: eps_c(n=%d)=%g >= eps_c(n=%d)=%g", b, e, n, v, ns[j-1], prev)
					}
				}
			}
		}
	}
	if valid < 15 {
		t.Errorf("only %d valid grid points", valid)
	}
}
