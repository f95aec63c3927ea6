package randomizer

import (
	"fmt"
	"math"
	"testing"

	"github.com/blanket-fl/blanket/shared/noise"
)

var clipParams = []struct{ eps, r float64 }{
	{0.05, 1}, {0.5, 1}, {1, 1}, {1, 1.5}, {3, 1}, {3, 4}, {8, 2}, {0.2, 10},
}

func TestClipLaplaceDensityRatio(t *testing.T) {
	// APES Theorem 1 (re-derived on ClipLaplace): with lambda = Delta f/eps
	// the truncated, renormalized density is exactly eps-LDP. Over 101
	// inputs (with 0 and 1) and 401 outputs spanning the output range
	// (with both ends), the max density ratio must not exceed e^eps (1e-12
	// relative slack for rounding) and must reach it (1e-9): no factor 2
	// from the normalization.
	for _, c := range clipParams {
		cl, err := NewClipLaplace(c.eps, c.r)
		if err != nil {
			t.Fatal(err)
		}
		lo, hi := cl.Bounds()
		worst := 0.0
		for i := 0; i <= 400; i++ {
			y := lo + (hi-lo)*float64(i)/400
			dmax, dmin := 0.0, math.Inf(1)
			for j := 0; j <= 100; j++ {
				d := cl.Density(float64(j)/100, y)
				dmax, dmin = math.Max(dmax, d), math.Min(dmin, d)
			}
			worst = math.Max(worst, dmax/dmin)
		}
		if e := math.Exp(c.eps); worst > e*(1+1e-12) || worst < e*(1-1e-9) {
			t.Errorf("eps=%v r=%v: max density ratio %v, e^eps %v", c.eps, c.r, worst, e)
		}
	}
}

func TestClipLaplaceDensityAndExpect(t *testing.T) {
	// The density integrates to 1 and its mean is Expect (Simpson, 20,000
	// intervals on each side of the kink at the centre).
	for _, c := range clipParams {
		cl, err := NewClipLaplace(c.eps, c.r)
		if err != nil {
			t.Fatal(err)
		}
		lo, hi := cl.Bounds()
		for _, x := range []float64{0, 0.1, 0.5, 0.77, 1} {
			f := func(y float64) float64 { return cl.Density(x, y) }
			yf := func(y float64) float64 { return y * cl.Density(x, y) }
			mass := simpson(f, lo, x, 20000) + simpson(f, x, hi, 20000)
			mean := simpson(yf, lo, x, 20000) + simpson(yf, x, hi, 20000)
			if math.Abs(mass-1) > 1e-9 || math.Abs(mean-cl.Expect(x)) > 1e-9 {
				t.Errorf("eps=%v r=%v x=%v: mass %v, numeric mean %v, Expect %v", c.eps, c.r, x, mass, mean, cl.Expect(x))
			}
		}
	}
}

func TestClipLaplaceExpectMatchesPaperEq1(t *testing.T) {
	// APES eq. (1) in paper units (clip bound C, lambda_i = 2C/eps, A = C,
	// gbar in [-C, C]) maps to Expect by y = z/(2C) + 1/2. Direct
	// evaluation of eq. (1) is accurate for these moderate eps.
	for _, C := range []float64{0.1, 1, 5} {
		for _, eps := range []float64{0.05, 0.5, 2, 10} {
			cl, err := NewClipLaplace(eps, 1)
			if err != nil {
				t.Fatal(err)
			}
			lam := 2 * C / eps
			for _, gbar := range []float64{-C, -0.3 * C, 0, 0.6 * C, C} {
				e1 := math.Exp((-C - gbar) / lam)
				e2 := math.Exp((-C + gbar) / lam)
				paper := ((C+lam)*(e1-e2) + 2*gbar) / (2 - e1 - e2)
				x := (gbar + C) / (2 * C)
				if got := (cl.Expect(x) - 0.5) * 2 * C; math.Abs(got-paper) > 1e-9*C {
					t.Errorf("C=%v eps=%v gbar=%v: Expect gives %v, eq. (1) %v", C, eps, gbar, got, paper)
				}
			}
		}
	}
}

func TestClipLaplaceExpectSmallEps(t *testing.T) {
	// For eps -> 0, expanding e^{-|z-f|/lambda} to first order gives the
	// mean (f A eps/2)(1 - f^2/(3A^2)) (f = x - 1/2, A = 1/2), with
	// relative corrections O(eps); the cancellation-free form must
	// reproduce it where the naive formula loses all digits. (The centred
	// mean is checked directly: Expect adds 1/2, whose ulp would dominate.)
	for _, eps := range []float64{1e-4, 1e-6, 1e-9} {
		cl, err := NewClipLaplace(eps, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range []float64{0, 0.2, 0.9, 1} {
			f := x - 0.5
			want := f * 0.5 * eps / 2 * (1 - f*f/(3*0.25))
			got := clipLaplaceMean(f, 1/cl.Epsilon(), 0.5)
			if math.Abs(got-want) > (eps+1e-12)*math.Abs(want) {
				t.Errorf("eps=%v x=%v: mean %v, small-eps limit %v", eps, x, got, want)
			}
		}
	}
}

func TestClipLaplaceExpectLargeEps(t *testing.T) {
	// Huge eps*r: no overflow. Far from the output bounds the mean is x;
	// at the bound (x = 1, r = 1) the density is a one-sided exponential
	// of scale 1/eps, mean 1 - 1/eps.
	for _, eps := range []float64{200, 2000, 1e6} {
		wide, err := NewClipLaplace(eps, 4)
		if err != nil {
			t.Fatal(err)
		}
		if e := wide.Expect(0.3); math.Abs(e-0.3) > 1e-12 {
			t.Errorf("eps=%v r=4: Expect(0.3) = %v", eps, e)
		}
		tight, err := NewClipLaplace(eps, 1)
		if err != nil {
			t.Fatal(err)
		}
		if e := tight.Expect(1); math.Abs(e-(1-1/eps)) > 1e-12 {
			t.Errorf("eps=%v r=1: Expect(1) = %v, want %v", eps, e, 1-1/eps)
		}
		c, err := NewClipLaplaceCalibrator([]float64{eps, eps / 2}, 4)
		if err != nil {
			t.Fatal(err)
		}
		if g, err := c.Invert(c.Mean(0.3)); err != nil || math.Abs(g-0.3) > 1e-10 {
			t.Errorf("eps=%v: calibration %v, %v", eps, g, err)
		}
	}
}

func TestClipLaplaceDerivative(t *testing.T) {
	// The analytic derivative used by the calibrator's Newton steps
	// matches a central finite difference (h = 1e-6, tolerance 1e-6
	// relative plus 1e-9 for the difference's rounding) in both evaluation
	// regimes (u <= 1/2 and u > 1/2). At f = ±a with r = 1 the derivative
	// is 0: the mean is flat where the input sits on the output bound.
	for _, c := range clipParams {
		m := newClipMoments(1/c.eps, c.r/2)
		for _, f := range []float64{-0.5, -0.2, 0, 0.31, 0.5} {
			_, d := m.mean(f, true)
			h := 1e-6
			up, _ := m.mean(f+h, false)
			dn, _ := m.mean(f-h, false)
			fd := (up - dn) / (2 * h)
			if math.Abs(d-fd) > 1e-6*math.Abs(fd)+1e-9 {
				t.Errorf("eps=%v r=%v f=%v: derivative %v, finite difference %v", c.eps, c.r, f, d, fd)
			}
		}
	}
}

func TestClipLaplaceExpectMonotone(t *testing.T) {
	for _, c := range clipParams {
		cl, err := NewClipLaplace(c.eps, c.r)
		if err != nil {
			t.Fatal(err)
		}
		prev := math.Inf(-1)
		for i := 0; i <= 1000; i++ {
			e := cl.Expect(float64(i) / 1000)
			if !(e > prev) {
				t.Fatalf("eps=%v r=%v: Expect not increasing at x=%v", c.eps, c.r, float64(i)/1000)
			}
			prev = e
		}
		if math.Abs(cl.Expect(0.5)-0.5) > 1e-15 {
			t.Errorf("Expect(1/2) = %v, want 1/2 by symmetry", cl.Expect(0.5))
		}
	}
}

func clipCDF(cl *ClipLaplace, x, y float64) float64 {
	lo, hi := cl.Bounds()
	return truncLaplaceCDF(y, clamp01(x), 1/cl.Epsilon(), lo, hi)
}

func TestClipLaplaceSamplerKS(t *testing.T) {
	// 50,000 reports per case against the truncated Laplace CDF; DKW at
	// alpha = 1e-6 per case. Covers both proposal modes of the sampler and
	// the blanket R(1/2).
	s := noise.NewSeeded(41)
	n := 50000
	bound := dkwBound(n, 1e-6)
	for _, c := range clipParams {
		cl, err := NewClipLaplace(c.eps, c.r)
		if err != nil {
			t.Fatal(err)
		}
		lo, hi := cl.Bounds()
		for _, x := range []float64{0, 0.3, 1, -1} {
			sample := make([]float64, n)
			for i := range sample {
				v := cl.Randomize(x, s)
				if v < lo || v > hi {
					t.Fatalf("eps=%v r=%v: report %v outside [%v, %v]", c.eps, c.r, v, lo, hi)
				}
				sample[i] = v
			}
			if d := ksDistance(sample, func(v float64) float64 { return clipCDF(cl, x, v) }); d > bound {
				t.Errorf("eps=%v r=%v x=%v: KS %.5f > %.5f", c.eps, c.r, x, d, bound)
			}
		}
		sample := make([]float64, n)
		for i := range sample {
			sample[i] = cl.Blanket(s)
		}
		if d := ksDistance(sample, func(v float64) float64 { return clipCDF(cl, 0.5, v) }); d > bound {
			t.Errorf("eps=%v r=%v blanket: KS %.5f > %.5f", c.eps, c.r, d, bound)
		}
	}
}

func TestClipLaplaceValidation(t *testing.T) {
	for _, c := range [][2]float64{{0, 1}, {-1, 1}, {math.NaN(), 1}, {math.Inf(1), 1}, {1, 0.99}, {1, 0}, {1, math.NaN()}, {1, math.Inf(1)}, {1, -2}} {
		if _, err := NewClipLaplace(c[0], c[1]); err == nil {
			t.Errorf("NewClipLaplace(%v, %v) accepted", c[0], c[1])
		}
	}
}

// personalEps returns n personalized budgets spread over [lo, hi] with
// repeats (APES Table 2 style "Uniform" budgets).
func personalEps(n int, lo, hi float64, levels int) []float64 {
	eps := make([]float64, n)
	for i := range eps {
		eps[i] = lo + (hi-lo)*float64(i%levels)/float64(levels-1)
	}
	return eps
}

func TestCalibrationMeanMatchesRandomizers(t *testing.T) {
	eps := personalEps(30, 0.05, 1, 7)
	for _, r := range []float64{1, 2} {
		c, err := NewClipLaplaceCalibrator(eps, r)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range []float64{0, 0.13, 0.5, 0.9, 1} {
			want := 0.0
			for _, e := range eps {
				cl, err := NewClipLaplace(e, r)
				if err != nil {
					t.Fatal(err)
				}
				want += cl.Expect(g) / float64(len(eps))
			}
			if got := c.Mean(g); math.Abs(got-want) > 1e-14 {
				t.Errorf("r=%v g=%v: calibrator mean %v, average of Expect %v", r, g, got, want)
			}
		}
	}
}

func TestCalibrationInvertsExactly(t *testing.T) {
	// From exact expectations, the inversion recovers g to 1e-10 (the
	// root finder targets ~1e-13), for uniform and personalized budgets,
	// tiny budgets (flat F) and large ones (F close to the identity).
	cases := [][]float64{
		personalEps(100, 0.05, 1, 20),
		{0.5},
		{1e-4, 2e-4},
		{8, 8, 12, 30},
		personalEps(1000, 0.01, 5, 1000),
	}
	for _, eps := range cases {
		for _, r := range []float64{1, 1.7} {
			c, err := NewClipLaplaceCalibrator(eps, r)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i <= 50; i++ {
				g := float64(i) / 50
				got, err := c.Invert(c.Mean(g))
				if err != nil {
					t.Fatal(err)
				}
				if math.Abs(got-g) > 1e-10 {
					t.Errorf("eps[0]=%v (n=%d) r=%v: Invert(Mean(%v)) = %v", eps[0], len(eps), r, g, got)
				}
			}
		}
	}
}

func TestCalibrationClampsAndErrors(t *testing.T) {
	c, err := NewClipLaplaceCalibrator([]float64{0.5, 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := c.Range()
	if !(lo > 0 && hi < 1 && lo < 0.5 && hi > 0.5) {
		t.Fatalf("range [%v, %v] implausible for bounded reports", lo, hi)
	}
	for _, tc := range []struct{ obs, want float64 }{{lo - 0.1, 0}, {-5, 0}, {lo, 0}, {hi, 1}, {hi + 1e-3, 1}, {3, 1}} {
		if got, err := c.Invert(tc.obs); err != nil || got != tc.want {
			t.Errorf("Invert(%v) = %v, %v; want %v", tc.obs, got, err, tc.want)
		}
	}
	for _, obs := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if _, err := c.Invert(obs); err == nil {
			t.Errorf("Invert(%v) accepted", obs)
		}
	}
	for _, bad := range []struct {
		eps []float64
		r   float64
	}{{nil, 1}, {[]float64{}, 1}, {[]float64{1, 0}, 1}, {[]float64{1, math.NaN()}, 1}, {[]float64{-1}, 1}, {[]float64{math.Inf(1)}, 1}, {[]float64{1}, 0.5}, {[]float64{1}, math.NaN()}} {
		if _, err := NewClipLaplaceCalibrator(bad.eps, bad.r); err == nil {
			t.Errorf("NewClipLaplaceCalibrator(%v, %v) accepted", bad.eps, bad.r)
		}
		if _, err := invertClipLaplaceMean(0.5, bad.eps, bad.r); err == nil {
			t.Errorf("InvertClipLaplaceMean(0.5, %v, %v) accepted", bad.eps, bad.r)
		}
	}
}

// clipVariance returns Var[R(x)] by numerical integration of Density.
func clipVariance(cl *ClipLaplace, x float64) float64 {
	lo, hi := cl.Bounds()
	m := cl.Expect(x)
	f := func(y float64) float64 { return (y - m) * (y - m) * cl.Density(x, y) }
	return simpson(f, lo, x, 4000) + simpson(f, x, hi, 4000)
}

func TestCalibrationRecoversFromSimulation(t *testing.T) {
	// n = 2,000 users with personalized budgets all report the same g
	// (APES's calibration assumption); the analyzer inverts the observed
	// mean. The estimate's standard deviation is sd(mean)/F'(g), with
	// sd(mean) = sqrt(sum_i Var_i)/n from the exact per-user variances;
	// each of the 12 (g, r) cases must land within 5.5 sd (false failure
	// < 4e-8 each).
	s := noise.NewSeeded(42)
	n := 2000
	eps := personalEps(n, 0.5, 4, 8)
	for _, r := range []float64{1, 2} {
		cal, err := NewClipLaplaceCalibrator(eps, r)
		if err != nil {
			t.Fatal(err)
		}
		rands := make([]*ClipLaplace, n)
		for i, e := range eps {
			if rands[i], err = NewClipLaplace(e, r); err != nil {
				t.Fatal(err)
			}
		}
		for _, g := range []float64{0.02, 0.2, 0.35, 0.5, 0.8, 0.97} {
			sum, varSum := 0.0, 0.0
			for i, cl := range rands {
				sum += cl.Randomize(g, s)
				if i < 8 { // 8 distinct budgets, each used n/8 times
					varSum += clipVariance(cl, g) * float64(n/8)
				}
			}
			est, err := cal.Invert(sum / float64(n))
			if err != nil {
				t.Fatal(err)
			}
			sd := math.Sqrt(varSum) / float64(n) / cal.deriv(g)
			if math.Abs(est-g) > 5.5*sd {
				t.Errorf("r=%v g=%v: estimate %v (sd %v)", r, g, est, sd)
			}
		}
	}
}

func ExampleClipLaplaceCalibrator() {
	// Three users with personalized budgets; the analyzer observed the
	// mean report 0.55 for one dimension.
	c, err := NewClipLaplaceCalibrator([]float64{0.5, 1, 2}, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	g, err := c.Invert(0.55)
	if err != nil {
		fmt.Println(err)
		return
	}
	lo, hi := c.Range()
	fmt.Printf("g=%.4f F(g)=%.4f range=[%.4f, %.4f]\n", g, c.Mean(g), lo, hi)
	// Output: g=0.7026 F(g)=0.5500 range=[0.4067, 0.5933]
}
