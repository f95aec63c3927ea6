package privacy

import (
	"errors"
	"math"
	"testing"
)

func TestFLAMETheorem1And4(t *testing.T) {
	e, d, err := flameTheorem1(0.0015, 6e-10, 7850)
	if err != nil {
		t.Fatal(err)
	}
	adv := 0.0015*math.Sqrt(2*7850*math.Log(1/6e-10)) + 7850*0.0015*math.Expm1(0.0015)
	if math.Abs(e-math.Min(adv, 7850*0.0015)) > 1e-12 || math.Abs(d-7851*6e-10) > 1e-20 {
		t.Errorf("Theorem 1: (%v, %v), want (%v, %v)", e, d, adv, 7851*6e-10)
	}
	// Theorem 4 is Theorem 1 over 2k dimensions.
	e4, d4, _ := FLAMETheorem4(0.01, 1e-8, 157)
	e1, d1, _ := flameTheorem1(0.01, 1e-8, 314)
	if e4 != e1 || d4 != d1 {
		t.Errorf("Theorem 4 (%v, %v) != Theorem 1 over 2k (%v, %v)", e4, d4, e1, d1)
	}
	if _, _, err := flameTheorem1(0.01, 0, 10); !errors.Is(err, ErrInvalidParameter) {
		t.Errorf("delta_cd = 0: %v", err)
	}
	if _, _, err := FLAMETheorem4(0.01, 1e-3, 1000); !errors.Is(err, ErrOutsideValidity) {
		t.Errorf("(2k+1)·delta >= 1: %v", err)
	}
}

func TestFLAMEConfigRefusals(t *testing.T) {
	good := FLAMEConfig{EpsLocal: 78.5, D: 7850, K: 157, N: 1000, NPad: 333, DeltaC: 5e-6}
	amp := BennettAmplifier{Mech: LaplaceMechanism()}
	for name, mut := range map[string]func(*FLAMEConfig){
		"NaN eps":    func(c *FLAMEConfig) { c.EpsLocal = math.NaN() },
		"K > D":      func(c *FLAMEConfig) { c.K = c.D + 1 },
		"K = 0":      func(c *FLAMEConfig) { c.K = 0 },
		"N = 1":      func(c *FLAMEConfig) { c.N = 1 },
		"NPad = 0":   func(c *FLAMEConfig) { c.NPad = 0 },
		"DeltaC = 1": func(c *FLAMEConfig) { c.DeltaC = 1 },
	} {
		c := good
		mut(&c)
		b, err := SSDouble(c, amp)
		if !errors.Is(err, ErrInvalidParameter) || b.Valid || b.Reason == "" {
			t.Errorf("%s: bound %+v, err %v", name, b, err)
		}
	}
	if _, err := SSDouble(good, nil); !errors.Is(err, ErrInvalidParameter) {
		t.Errorf("nil amplifier: %v", err)
	}
	if _, err := SSSimple(good, amp); !errors.Is(err, ErrInvalidParameter) {
		t.Errorf("SS-Simple with K < D: %v", err)
	}
	// Lemma 1 does not apply at FLAME's SS-Simple dimension (ε_c > 1).
	simple := FLAMEConfig{EpsLocal: 78.5, D: 7850, K: 7850, N: 1000, DeltaC: 5e-6}
	if b, err := SSSimple(simple, RGBAmplifier{B: 8}); !errors.Is(err, ErrOutsideValidity) || b.Valid {
		t.Errorf("Lemma 1 at eps_ld = 0.01, n = 1000: %+v %v", b, err)
	}
}

// TestFLAMEMonotone: on a grid, every FLAME accountant's ε_c increases with
// ε_l and decreases with n (n_p for SS-Double).
func TestFLAMEMonotone(t *testing.T) {
	lap := BennettAmplifier{Mech: LaplaceMechanism()}
	run := func(f func(FLAMEConfig, Amplifier) (Bound, error), base FLAMEConfig, epsLs []float64, ns []int, setN func(*FLAMEConfig, int)) {
		t.Helper()
		for i, e := range epsLs {
			for j, n := range ns {
				c := base
				c.EpsLocal = e
				setN(&c, n)
				b, err := f(c, lap)
				if err != nil {
					t.Fatal(err)
				}
				if i > 0 {
					c2 := c
					c2.EpsLocal = epsLs[i-1]
					p, _ := f(c2, lap)
					if !(b.Epsilon > p.Epsilon) {
						t.Errorf("%s: eps_c(eps_l=%g)=%g <= eps_c(eps_l=%g)=%g", b.Method, e, b.Epsilon, epsLs[i-1], p.Epsilon)
					}
				}
				if j > 0 {
					c2 := c
					setN(&c2, ns[j-1])
					p, _ := f(c2, lap)
					if !(b.Epsilon < p.Epsilon) {
						t.Errorf("%s: eps_c(n=%d)=%g >= eps_c(n=%d)=%g", b.Method, n, b.Epsilon, ns[j-1], p.Epsilon)
					}
				}
			}
		}
	}
	simple := FLAMEConfig{D: 785, K: 785, DeltaC: 1e-5}
	run(SSSimple, simple, []float64{3, 7.85, 20}, []int{500, 1000, 4000}, func(c *FLAMEConfig, n int) { c.N = n })
	double := FLAMEConfig{D: 7850, K: 157, N: 1000, DeltaC: 1e-5}
	setNp := func(c *FLAMEConfig, n int) { c.NPad = n }
	run(SSDouble, double, []float64{40, 78.5, 150}, []int{200, 333, 1000}, setNp)
	run(SSDoubleShuffleOnly, double, []float64{40, 78.5, 150}, []int{200, 333, 1000}, setNp)
}
