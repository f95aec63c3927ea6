package privacy

import (
	"errors"
	"math"
	"testing"

	"github.com/blanket-fl/blanket/shared/internal/stattest"
	"github.com/blanket-fl/blanket/shared/noise"
)

// simpson is the Simpson rule shared with the other sampler tests.
var simpson = stattest.Simpson

// laplaceDensity is the density of x + Lap(1/eps0) at y.
func laplaceDensity(eps0, x, y float64) float64 { return eps0 / 2 * math.Exp(-eps0*math.Abs(y-x)) }

// TestLaplaceParamsByIntegration recomputes, from the Laplace densities
// alone, the blanket mass γ = ∫ inf_x μ_x, the mean and second moment of
// L = (μ_x(W) − e^ε μ_x'(W))/ω(W) under W ~ ω = inf_x μ_x/γ, and its
// maximum, and compares them with params(). inf over x ∈ [0,1] of
// e^{−ε0|y−x|} is attained at x = 0 or x = 1 (|y−x| is convex in x). The
// worst pair (0, 1) must attain the bounds; another pair must stay below.
func TestLaplaceParamsByIntegration(t *testing.T) {
	for _, eps0 := range []float64{0.1, 0.5, 2} {
		for _, frac := range []float64{0.3, 0.8} {
			eps := frac * eps0
			inf := func(y float64) float64 {
				return math.Min(laplaceDensity(eps0, 0, y), laplaceDensity(eps0, 1, y))
			}
			tail := 60 / eps0
			integrate := func(f func(float64) float64) float64 {
				return simpson(f, -tail, 0, 40000) + simpson(f, 0, 0.5, 2000) +
					simpson(f, 0.5, 1, 2000) + simpson(f, 1, 1+tail, 40000)
			}
			gamma := integrate(inf)
			p := LaplaceMechanism().params(eps0, eps)
			if math.Abs(gamma-p.gamma) > 1e-9 {
				t.Errorf("eps0=%g: gamma = %.12f, params %.12f", eps0, gamma, p.gamma)
			}
			for _, pair := range [][2]float64{{0, 1}, {0.3, 0.8}} {
				x, xp := pair[0], pair[1]
				L := func(y float64) float64 {
					w := inf(y) / gamma
					return (laplaceDensity(eps0, x, y) - math.Exp(eps)*laplaceDensity(eps0, xp, y)) / w
				}
				mean := integrate(func(y float64) float64 { return L(y) * inf(y) / gamma })
				second := integrate(func(y float64) float64 { return L(y) * L(y) * inf(y) / gamma })
				if math.Abs(mean+math.Expm1(eps)) > 1e-8 {
					t.Errorf("eps0=%g eps=%g pair %v: E[L] = %.10f, want %.10f", eps0, eps, pair, mean, -math.Expm1(eps))
				}
				maxL := math.Inf(-1)
				for y := -3.0; y <= 4; y += 1e-3 {
					maxL = math.Max(maxL, L(y))
				}
				worst := pair == [2]float64{0, 1}
				if worst {
					if math.Abs(second-p.second) > 1e-8*p.second {
						t.Errorf("eps0=%g eps=%g: E[L^2] = %.12f, params %.12f", eps0, eps, second, p.second)
					}
					if math.Abs(maxL-p.bPlus) > 1e-9 {
						t.Errorf("eps0=%g eps=%g: max L = %.12f, params %.12f", eps0, eps, maxL, p.bPlus)
					}
				} else if second > p.second || maxL > p.bPlus+1e-12 {
					t.Errorf("eps0=%g eps=%g pair %v: E[L^2] %.6f or max %.6f above the worst-case bounds %.6f, %.6f", eps0, eps, pair, second, maxL, p.second, p.bPlus)
				}
			}
		}
	}
}

// TestRRParamsByEnumeration enumerates R_{γ,k}'s outputs: μ_x(y) = γ/k +
// (1−γ)1{y=x}, blanket uniform, L(y) = (μ_x(y) − e^ε μ_x'(y))/(1/k).
func TestRRParamsByEnumeration(t *testing.T) {
	for _, k := range []int{2, 5, 32} {
		m, err := RRMechanism(k)
		if err != nil {
			t.Fatal(err)
		}
		for _, eps0 := range []float64{0.2, 1, 3} {
			eps := 0.4 * eps0
			gamma := float64(k) / (math.Exp(eps0) + float64(k) - 1)
			mu := func(x, y int) float64 {
				v := gamma / float64(k)
				if x == y {
					v += 1 - gamma
				}
				return v
			}
			var second, maxL float64
			maxL = math.Inf(-1)
			for y := 0; y < k; y++ {
				l := float64(k) * (mu(0, y) - math.Exp(eps)*mu(1, y))
				second += l * l / float64(k)
				maxL = math.Max(maxL, l)
			}
			p := m.params(eps0, eps)
			if math.Abs(p.gamma-gamma) > 1e-15 || math.Abs(p.gamma+p.oneMinusGamma-1) > 1e-15 {
				t.Errorf("k=%d eps0=%g: gamma %v / 1-gamma %v, want %v", k, eps0, p.gamma, p.oneMinusGamma, gamma)
			}
			if math.Abs(second-p.second) > 1e-12*second || math.Abs(maxL-p.bPlus) > 1e-12 {
				t.Errorf("k=%d eps0=%g: E[L^2] %v max %v, params %v %v", k, eps0, second, maxL, p.second, p.bPlus)
			}
		}
	}
}

// sampleLaplaceL draws the privacy amplification variable of Laplace on
// [0,1] for the worst pair (0, 1): W ~ ω is ≤ 0 or ≥ 1 with probability
// γ/2 each, otherwise t = max(W, 1−W) ∈ [½, 1] has density ∝ e^{−ε0 t}
// (inverse CDF) and W = t or 1 − t with probability ½ each.
func sampleLaplaceL(src noise.Source, eps0, eps float64) float64 {
	g := math.Exp(-eps0 / 2)
	u := noise.Uniform(src)
	switch {
	case u < g/2:
		return g * (math.Exp(eps0) - math.Exp(eps))
	case u < g:
		return g * (1 - math.Exp(eps+eps0))
	}
	hi, lo := math.Exp(-eps0/2), math.Exp(-eps0)
	tt := -math.Log(hi-noise.Uniform(src)*(hi-lo)) / eps0
	if noise.Uniform(src) < 0.5 {
		y := 1 - tt
		return g * (math.Exp(eps0*(1-2*y)) - math.Exp(eps))
	}
	return g * (1 - math.Exp(eps+eps0*(2*tt-1)))
}

// TestBennettTailAgainstMonteCarlo estimates E[(L_1+…+L_m)_+] for the
// Laplace mechanism by simulation and checks that the corrected Bennett
// tail bounds it from above, and that the pre-correction tail FLAME used
// (reproduce_test.go) falls below it, i.e. is not an upper bound at all.
// Sample size 40,000 sums per case; each comparison allows 6 standard
// errors, so a wrong verdict from sampling noise has probability below
// 1e-9 per comparison (normal tail), and the seed is fixed.
func TestBennettTailAgainstMonteCarlo(t *testing.T) {
	src := noise.NewSeeded(7)
	const samples = 40000
	for _, c := range []struct {
		eps0, eps       float64
		m               int
		preCorrectionLo bool // the case separates the pre-correction tail from the truth
	}{
		{eps0: 2, eps: 0.5, m: 30, preCorrectionLo: true},
		{eps0: 1, eps: 0.3, m: 50},
	} {
		p := LaplaceMechanism().params(c.eps0, c.eps)
		a := math.Expm1(c.eps)
		coef := bennettCoef{a: a, b: p.bPlus, alpha: p.second / (p.bPlus * p.bPlus), beta: a * p.bPlus / p.second}
		var s, s2 float64
		for i := 0; i < samples; i++ {
			var sum float64
			for j := 0; j < c.m; j++ {
				sum += sampleLaplaceL(src, c.eps0, c.eps)
			}
			v := math.Max(sum, 0)
			s += v
			s2 += v * v
		}
		est := s / samples
		se := math.Sqrt((s2/samples - est*est) / samples)
		corrected := correctedTail(float64(c.m), coef)
		if corrected < est-6*se {
			t.Errorf("%+v: corrected tail %.5g below Monte Carlo %.5g ± %.2g", c, corrected, est, se)
		}
		if pre := preCorrectionTail(float64(c.m), coef); c.preCorrectionLo && !(pre < est-6*se) {
			t.Errorf("%+v: pre-correction tail %.5g not below Monte Carlo %.5g ± %.2g", c, pre, est, se)
		}
	}
}

func TestBinomialExpect(t *testing.T) {
	// Σ_{k=1}^{n} P[Bin(n,q)=k]·e^{−λk} = (1−q+q e^{−λ})^n − (1−q)^n.
	for _, c := range []struct {
		n      int
		q, lam float64
	}{{1, 0.3, 0.5}, {50, 0.3, 0.1}, {1000, 0.995, 0.01}, {1000000, 0.6, 0.001}, {20, 1e-3, 2}} {
		got := binomialExpect(c.n, c.q, 1-c.q, func(k int) float64 { return math.Exp(-c.lam * float64(k)) })
		fn := float64(c.n)
		want := math.Exp(fn*math.Log1p(-c.q+c.q*math.Exp(-c.lam))) - math.Exp(fn*math.Log1p(-c.q))
		// log-gamma of n ~ 1e6 carries ~1e-9 relative error (maxBennettN doc).
		if math.Abs(got-want) > 1e-8*want {
			t.Errorf("%+v: got %.15g want %.15g", c, got, want)
		}
	}
}

func TestBennettEpsilonIsMinimalAndFeasible(t *testing.T) {
	for _, m := range []Mechanism{LaplaceMechanism(), GenericMechanism()} {
		for _, c := range []struct {
			eps0  float64
			n     int
			delta float64
		}{{0.5, 333, 1e-6}, {0.01, 1000, 6e-10}, {2, 10000, 1e-8}} {
			eps, err := BennettEpsilon(m, c.eps0, c.n, c.delta)
			if err != nil {
				t.Fatal(err)
			}
			if !(eps > 0 && eps <= c.eps0) {
				t.Fatalf("%v %+v: eps = %v outside (0, eps0]", m, c, eps)
			}
			d, _ := BennettDelta(m, c.eps0, c.n, eps)
			if d > c.delta {
				t.Errorf("%v %+v: delta(eps) = %g > target", m, c, d)
			}
			if eps < c.eps0 {
				if d, _ := BennettDelta(m, c.eps0, c.n, eps*(1-1e-9)); !(d > c.delta) {
					t.Errorf("%v %+v: eps = %v is not minimal, delta just below = %g", m, c, eps, d)
				}
			}
		}
	}
}

// TestBennettMonotone checks on a grid that the amplified ε increases with
// the local ε0 and decreases with the number of shuffled reports n, for
// every mechanism, and that it is at most ε0.
func TestBennettMonotone(t *testing.T) {
	rr2, _ := RRMechanism(2)
	rr10, _ := RRMechanism(10)
	eps0s := []float64{0.05, 0.2, 0.5, 1, 2}
	ns := []int{100, 1000, 10000}
	for _, m := range []Mechanism{LaplaceMechanism(), rr2, rr10, GenericMechanism()} {
		grid := make([][]float64, len(eps0s))
		for i, e0 := range eps0s {
			grid[i] = make([]float64, len(ns))
			for j, n := range ns {
				e, err := BennettEpsilon(m, e0, n, 1e-8)
				if err != nil {
					t.Fatal(err)
				}
				if e > e0 {
					t.Errorf("%v: eps %v > eps0 %v", m, e, e0)
				}
				grid[i][j] = e
			}
		}
		for i := range eps0s {
			for j := range ns {
				if i > 0 && !(grid[i][j] >= grid[i-1][j]) {
					t.Errorf("%v n=%d: eps(eps0=%g)=%g < eps(eps0=%g)=%g", m, ns[j], eps0s[i], grid[i][j], eps0s[i-1], grid[i-1][j])
				}
				if j > 0 && !(grid[i][j] <= grid[i][j-1]) {
					t.Errorf("%v eps0=%g: eps(n=%d)=%g > eps(n=%d)=%g", m, eps0s[i], ns[j], grid[i][j], ns[j-1], grid[i][j-1])
				}
			}
		}
		// Strict amplification somewhere on the grid.
		if !(grid[2][2] < eps0s[2]/2) {
			t.Errorf("%v: no amplification at eps0=0.5, n=10000: %g", m, grid[2][2])
		}
	}
}

func TestBennettDeltaMonotoneInEps(t *testing.T) {
	prev := 2.0
	for eps := 0.01; eps < 0.5; eps += 0.01 {
		d, err := BennettDelta(LaplaceMechanism(), 0.5, 1000, eps)
		if err != nil {
			t.Fatal(err)
		}
		if d > prev {
			t.Errorf("delta(%g) = %g > delta(previous) = %g", eps, d, prev)
		}
		prev = d
	}
	if d, _ := BennettDelta(LaplaceMechanism(), 0.5, 1000, 0.5); d != 0 {
		t.Errorf("delta at eps = eps0 is %g, want 0", d)
	}
}

func TestBennettRefusals(t *testing.T) {
	lap := LaplaceMechanism()
	bad := []struct {
		eps0  float64
		n     int
		delta float64
	}{
		{math.NaN(), 100, 1e-6}, {0, 100, 1e-6}, {-1, 100, 1e-6}, {math.Inf(1), 100, 1e-6},
		{1, 0, 1e-6}, {1, maxBennettN + 1, 1e-6},
		{1, 100, 0}, {1, 100, 1}, {1, 100, math.NaN()},
	}
	for _, c := range bad {
		if _, err := BennettEpsilon(lap, c.eps0, c.n, c.delta); !errors.Is(err, ErrInvalidParameter) {
			t.Errorf("BennettEpsilon(%v, %d, %v): err = %v, want ErrInvalidParameter", c.eps0, c.n, c.delta, err)
		}
	}
	if _, err := BennettDelta(lap, 1, 100, math.NaN()); !errors.Is(err, ErrInvalidParameter) {
		t.Errorf("BennettDelta(NaN eps): %v", err)
	}
	if _, err := RRMechanism(1); !errors.Is(err, ErrInvalidParameter) {
		t.Errorf("RRMechanism(1): %v", err)
	}
}

func BenchmarkBennettEpsilonLaplace(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if _, err := BennettEpsilon(LaplaceMechanism(), 0.5, 333, 1e-6); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSSSimpleFLAME(b *testing.B) {
	cfg := FLAMEConfig{EpsLocal: 78.5, D: 7850, K: 7850, N: 1000, DeltaC: 5e-6}
	amp := BennettAmplifier{Mech: LaplaceMechanism()}
	for i := 0; i < b.N; i++ {
		if _, err := SSSimple(cfg, amp); err != nil {
			b.Fatal(err)
		}
	}
}
