package privacy

import (
	"errors"
	"math"
	"testing"
)

// clipLaplaceDensity is APES Definition 4 with C = A = 1 and λ = 2C/ε = 2/ε.
func clipLaplaceDensity(eps, f, z float64) float64 {
	lam := 2 / eps
	s := 1 - 0.5*math.Exp((-1+f)/lam) - 0.5*math.Exp((-1-f)/lam)
	return math.Exp(-math.Abs(z-f)/lam) / (2 * lam * s)
}

func TestClipLaplaceDensityNormalized(t *testing.T) {
	for _, eps := range []float64{0.05, 1, 5} {
		for _, f := range []float64{-1, -0.3, 0, 0.9} {
			mass := simpson(func(z float64) float64 { return clipLaplaceDensity(eps, f, z) }, -1, f, 2000) +
				simpson(func(z float64) float64 { return clipLaplaceDensity(eps, f, z) }, f, 1, 2000)
			if math.Abs(mass-1) > 1e-10 {
				t.Errorf("eps=%g f=%g: mass %v", eps, f, mass)
			}
		}
	}
}

// TestClipLaplaceNeighborDivergence computes sup over inputs and outputs of
// ln(p_i(z|f_s)/p_j(z|f_t)) by exhaustive search on a grid of [−1,1]³ and
// compares it with the exact formula (attained at a grid corner) and with
// APES Lemma 4's bound (never smaller). Same budgets give ε (Clip-Laplace
// is exactly ε-LDP, APES Theorem 1).
func TestClipLaplaceNeighborDivergence(t *testing.T) {
	const steps = 40
	grid := make([]float64, steps+1)
	for i := range grid {
		grid[i] = -1 + 2*float64(i)/steps
	}
	for _, pr := range [][2]float64{{0.05, 1}, {1, 0.05}, {0.3, 0.3}, {2, 0.5}, {0.5, 2}, {1, 1}} {
		ei, ej := pr[0], pr[1]
		sup := math.Inf(-1)
		for _, fs := range grid {
			for _, ft := range grid {
				for _, z := range grid {
					sup = math.Max(sup, math.Log(clipLaplaceDensity(ei, fs, z)/clipLaplaceDensity(ej, ft, z)))
				}
			}
		}
		exact, err := clipLaplaceNeighborDivergence(ei, ej)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(sup-exact) > 1e-9 {
			t.Errorf("eps_i=%g eps_j=%g: grid sup %.12f, formula %.12f", ei, ej, sup, exact)
		}
		lemma4, _ := clipLaplaceNeighborDivergenceBound(ei, ej)
		if lemma4 < exact-1e-15 {
			t.Errorf("eps_i=%g eps_j=%g: Lemma 4 bound %v below exact %v", ei, ej, lemma4, exact)
		}
		if ei == ej && math.Abs(exact-ei) > 1e-12 {
			t.Errorf("same budgets: D_N = %v, want eps = %v", exact, ei)
		}
	}
	if _, err := clipLaplaceNeighborDivergence(0, 1); !errors.Is(err, ErrInvalidParameter) {
		t.Errorf("eps = 0: %v", err)
	}
}

// TestEchoProbabilityIsLemma6 checks echoProbability against Lemma 6's
// printed p_ij with i the echoing user and j the echoed one.
func TestEchoProbabilityIsLemma6(t *testing.T) {
	for _, pr := range [][2]float64{{0.05, 1}, {1, 0.05}, {0.4, 0.7}} {
		ei, ej := pr[0], pr[1]
		want := ei / ej * (1 - math.Exp(-ej)) / (1 - math.Exp(-ei)) * math.Exp(-math.Max(ei, ej))
		got, err := echoProbability(ei, ej, false)
		if err != nil || math.Abs(got-want) > 1e-15 {
			t.Errorf("p(%g, %g) = %v %v, want %v", ei, ej, got, err, want)
		}
		exact, _ := echoProbability(ei, ej, true)
		if exact < got || exact > 1 {
			t.Errorf("exact p(%g, %g) = %v, Lemma 4 version %v", ei, ej, exact, got)
		}
	}
}

func TestFMTClosedForm(t *testing.T) {
	got, err := fmtClosedForm(1, 10000, 1e-8)
	if err != nil {
		t.Fatal(err)
	}
	e := math.E
	want := math.Log(1 + (e-1)/(e+1)*(8*math.Sqrt(e*math.Log(4e8)/10000)+8*e/10000))
	if math.Abs(got-want) > 1e-15 {
		t.Errorf("got %v want %v", got, want)
	}
	// ε0 = 3 > ln(1000/(16 ln(4e8))) = 1.15: refused.
	if _, err := fmtClosedForm(3, 1000, 1e-8); !errors.Is(err, ErrOutsideValidity) {
		t.Errorf("eps0 too large: %v", err)
	}
	if _, err := fmtClosedForm(1, 1000, 0); !errors.Is(err, ErrInvalidParameter) {
		t.Errorf("delta = 0: %v", err)
	}
}

// TestEoNUniformIsFMT: with equal budgets every echo probability is
// e^{−ε0} and S = (n−1)e^{−ε0}, so Theorem 4 is FMT'22 with n − 1 users.
func TestEoNUniformIsFMT(t *testing.T) {
	const n, eps0, delta = 5000, 0.8, 1e-7
	eps := make([]float64, n)
	for i := range eps {
		eps[i] = eps0
	}
	want, err := fmtClosedForm(eps0, n-1, delta)
	if err != nil {
		t.Fatal(err)
	}
	for _, exact := range []bool{false, true} {
		b, err := eonBound(eps, delta, exact)
		if err != nil || math.Abs(b.Epsilon-want) > 1e-12 {
			t.Errorf("exact=%v: %+v %v, want %v", exact, b, err, want)
		}
		if pre := math.Expm1(eps0) / (math.Exp(eps0) + 1); math.Abs(b.Delta-pre*delta) > 1e-20 {
			t.Errorf("delta = %v, want %v", b.Delta, pre*delta)
		}
	}
	uniS, _ := apesUniS(eps, delta)
	if u, _ := fmtClosedForm(eps0, n, delta); uniS.Epsilon != u || uniS.Delta != delta {
		t.Errorf("UniS %+v, want FMT at n = %d", uniS, n)
	}
}

// TestEoNCoversEveryUser recomputes, for every user u of a small
// heterogeneous population, the echo sum S_u = Σ_{i≠u} p(ε_i; ε_u) and the
// resulting Theorem 4 ε for u, and checks that eonBound is at least all of
// them (it is meant to hold for every user at once).
func TestEoNCoversEveryUser(t *testing.T) {
	eps := uniformQuantiles(1000, 0.05, 1)
	eps[17] = 1.3 // a single outlier with the largest budget
	const delta = 1e-3
	for _, exact := range []bool{false, true} {
		b, err := eonBound(eps, delta, exact)
		if err != nil {
			t.Fatal(err)
		}
		worst := 0.0
		for u := range eps {
			var s float64
			for i, e := range eps {
				if i != u {
					s += echoP(e, eps[u], exact)
				}
			}
			e, _, err := eonFormula(eps[u], s, delta)
			if err != nil {
				t.Fatal(err)
			}
			worst = math.Max(worst, e)
		}
		if b.Epsilon < worst-1e-15 {
			t.Errorf("exact=%v: EoNBound %v below user-wise worst %v", exact, b.Epsilon, worst)
		}
		if b.Epsilon > worst*1.01 {
			t.Errorf("exact=%v: EoNBound %v far above user-wise worst %v", exact, b.Epsilon, worst)
		}
	}
}

func TestEoNRefusals(t *testing.T) {
	if _, err := eonBound(uniformQuantiles(100, 0.05, 1), 1e-8, false); !errors.Is(err, ErrOutsideValidity) {
		t.Errorf("S < 16 ln(4/delta): %v", err)
	}
	for name, eps := range map[string][]float64{
		"one user": {0.5},
		"NaN":      {0.5, math.NaN(), 0.3},
		"zero":     {0.5, 0, 0.3},
		"Inf":      {0.5, math.Inf(1)},
	} {
		b, err := eonBound(eps, 1e-8, true)
		if !errors.Is(err, ErrInvalidParameter) || b.Valid {
			t.Errorf("%s: %+v %v", name, b, err)
		}
	}
	if _, err := eonBound(Uniform2Budgets(10000), 0, true); !errors.Is(err, ErrInvalidParameter) {
		t.Errorf("deltaS = 0: %v", err)
	}
}

// TestAPESMonotone: on a grid, each APES bound increases with the local
// budgets (all scaled up) and decreases with n.
func TestAPESMonotone(t *testing.T) {
	type bound func([]float64) (float64, error)
	bounds := map[string]bound{
		"UniS": func(e []float64) (float64, error) { b, err := apesUniS(e, 1e-8); return b.Epsilon, err },
		"EoN Lemma 4": func(e []float64) (float64, error) {
			b, err := eonBound(e, 1e-8, false)
			return b.Epsilon, err
		},
		"EoN exact": func(e []float64) (float64, error) { b, err := eonBound(e, 1e-8, true); return b.Epsilon, err },
	}
	scales := []float64{0.5, 1, 2}
	ns := []int{10000, 30000, 100000}
	for name, f := range bounds {
		for i, s := range scales {
			for j, n := range ns {
				v, err := f(uniformQuantiles(n, 0.05*s, s))
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if i > 0 {
					p, _ := f(uniformQuantiles(n, 0.05*scales[i-1], scales[i-1]))
					if !(v > p) {
						t.Errorf("%s n=%d: eps(scale %g)=%g <= eps(scale %g)=%g", name, n, s, v, scales[i-1], p)
					}
				}
				if j > 0 {
					p, _ := f(uniformQuantiles(ns[j-1], 0.05*s, s))
					if !(v < p) {
						t.Errorf("%s scale %g: eps(n=%d)=%g >= eps(n=%d)=%g", name, s, n, v, ns[j-1], p)
					}
				}
			}
		}
	}
}

func TestEoNExactTighter(t *testing.T) {
	eps := Uniform2Budgets(10000)
	l4, err1 := eonBound(eps, 1e-8, false)
	ex, err2 := eonBound(eps, 1e-8, true)
	if err1 != nil || err2 != nil || !(ex.Epsilon < l4.Epsilon) {
		t.Errorf("exact %+v not below Lemma 4 %+v (%v %v)", ex, l4, err1, err2)
	}
}

func TestUniform2Budgets(t *testing.T) {
	eps := Uniform2Budgets(1000)
	var sum float64
	for i, e := range eps {
		if e <= 0.05 || e >= 1 || (i > 0 && e <= eps[i-1]) {
			t.Fatalf("eps[%d] = %v", i, e)
		}
		sum += e
	}
	if math.Abs(sum/1000-0.525) > 1e-12 {
		t.Errorf("mean %v, want 0.525", sum/1000)
	}
	if Uniform2Budgets(0) != nil {
		t.Error("n = 0 should give nil")
	}
}

func TestCompareAPES(t *testing.T) {
	rows := CompareAPES(Uniform2Budgets(10000), 1e-8)
	if len(rows) != 4 {
		t.Fatalf("rows %v", rows)
	}
	if rows[0].Epsilon != 1-0.95/20000 || rows[0].Delta != 0 {
		t.Errorf("no-shuffle row %+v", rows[0])
	}
	for _, r := range rows[1:] {
		if !r.Valid || !(r.Epsilon < rows[0].Epsilon) {
			t.Errorf("row not valid or not amplified: %+v", r)
		}
	}
}

func BenchmarkEoNBound10k(b *testing.B) {
	eps := Uniform2Budgets(10000)
	for i := 0; i < b.N; i++ {
		if _, err := eonBound(eps, 1e-8, true); err != nil {
			b.Fatal(err)
		}
	}
}
