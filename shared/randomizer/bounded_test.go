package randomizer

import (
	"math"
	"testing"

	"github.com/blanket-fl/blanket/shared/noise"
)

// boundedCases are the randomizers with unbounded noise NewBounded clamps,
// from very small to large per-coordinate budgets (noise scale 100 down to
// about 0.1).
func boundedCases(t *testing.T) []Affine {
	t.Helper()
	var out []Affine
	for _, eps := range []float64{0.01, 0.5, 2, 8} {
		l, err := NewLaplace(eps)
		if err != nil {
			t.Fatal(err)
		}
		g, err := NewGaussian(eps, 1e-6)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, l, g)
	}
	return out
}

// noiseSd is the unclamped noise's standard deviation.
func noiseSd(r Affine) float64 {
	switch rz := r.(type) {
	case *Laplace:
		return math.Sqrt2 * rz.Scale()
	case *Gaussian:
		return rz.Sigma()
	}
	return math.NaN()
}

// TestBoundedReach: the support reaches Reach noise standard deviations
// beyond [0,1]; Expect is the clamped mean (Simpson over the
// wrapped density, 1e-7 relative to the noise scale); Affine is its tangent
// at 1/2 with centre 1/2; Bias bounds |Expect - affine| on a 1001-point
// grid, is attained at x = 1 and is below 3% of the half-range Slope/2; Std is the clamped standard deviation at
// 1/2 (Simpson); and the debiased noise Std/Slope is below the unclamped
// sd (Laplace) or at most 0.53% above it (Gaussian; 1.0052 as σ grows).
func TestBoundedReach(t *testing.T) {
	for _, r := range boundedCases(t) {
		b, err := NewBounded(r, Reach(r))
		if err != nil {
			t.Fatal(err)
		}
		name := r.Name()
		sd := noiseSd(r)
		lo, hi := b.Support()
		if reach := Reach(r); math.Abs(-lo-reach*sd) > 1e-12*sd || math.Abs(hi-1-reach*sd) > 1e-12*sd {
			t.Errorf("%s eps=%v: support [%v, %v], want reach %v·%v", name, r.Epsilon(), lo, hi, reach, sd)
		}
		dens := func(x, y float64) float64 {
			if l, ok := r.(*Laplace); ok {
				return l.Density(x, y)
			}
			return r.(*Gaussian).Density(x, y)
		}
		// Moments of clamp(x + N) by Simpson on [lo, hi] plus the clamped
		// masses at the ends (by the same rule on a wide outer range).
		moments := func(x float64) (mean, variance float64) {
			w := 60 * sd
			const steps = 200000
			inner0 := simpson(func(y float64) float64 { return dens(x, y) }, lo, x, steps) + simpson(func(y float64) float64 { return dens(x, y) }, x, hi, steps)
			inner1 := simpson(func(y float64) float64 { return y * dens(x, y) }, lo, x, steps) + simpson(func(y float64) float64 { return y * dens(x, y) }, x, hi, steps)
			inner2 := simpson(func(y float64) float64 { return (y - 0.5) * (y - 0.5) * dens(x, y) }, lo, x, steps) + simpson(func(y float64) float64 { return (y - 0.5) * (y - 0.5) * dens(x, y) }, x, hi, steps)
			pl := simpson(func(y float64) float64 { return dens(x, y) }, lo-w, lo, steps)
			ph := simpson(func(y float64) float64 { return dens(x, y) }, hi, hi+w, steps)
			if math.Abs(inner0+pl+ph-1) > 1e-9 {
				t.Fatalf("%s eps=%v: mass %v", name, r.Epsilon(), inner0+pl+ph)
			}
			mean = inner1 + pl*lo + ph*hi
			variance = inner2 + pl*(lo-0.5)*(lo-0.5) + ph*(hi-0.5)*(hi-0.5) - (mean-0.5)*(mean-0.5)
			return mean, variance
		}
		for _, x := range []float64{0, 0.2, 0.5, 0.9, 1} {
			m, v := moments(x)
			if math.Abs(m-b.Expect(x)) > 1e-7*math.Max(sd, 1) {
				t.Errorf("%s eps=%v x=%v: Expect %v, numeric %v", name, r.Epsilon(), x, b.Expect(x), m)
			}
			if x == 0.5 && math.Abs(math.Sqrt(v)-b.Std()) > 1e-6*sd {
				t.Errorf("%s eps=%v: Std %v, numeric %v", name, r.Epsilon(), b.Std(), math.Sqrt(v))
			}
		}
		off, slope := b.Affine()
		if math.Abs(off+slope/2-0.5) > 1e-15 || b.Expect(0.5) != 0.5 {
			t.Errorf("%s eps=%v: centre %v, Expect(1/2) %v", name, r.Epsilon(), off+slope/2, b.Expect(0.5))
		}
		const h = 1e-4
		if tan := (b.Expect(0.5+h) - b.Expect(0.5-h)) / (2 * h); math.Abs(tan-slope) > 1e-6 {
			t.Errorf("%s eps=%v: tangent %v, Affine slope %v", name, r.Epsilon(), tan, slope)
		}
		worst := 0.0
		for i := range 1001 {
			x := float64(i) / 1000
			worst = math.Max(worst, math.Abs(b.Expect(x)-off-slope*x))
		}
		if worst > b.Bias()*(1+1e-9)+1e-15 || worst < b.Bias()*(1-1e-9)-1e-15 {
			t.Errorf("%s eps=%v: largest distance %v, Bias %v", name, r.Epsilon(), worst, b.Bias())
		}
		if b.Bias() > 0.03*slope/2 {
			t.Errorf("%s eps=%v: curvature bias %v above 3%% of the half-range %v", name, r.Epsilon(), b.Bias(), slope/2)
		}
		limit := 1.0
		if _, ok := r.(*Gaussian); ok {
			limit = 1.0053
		}
		if b.Std()/slope > limit*sd {
			t.Errorf("%s eps=%v: debiased clamped noise %v > %v × unclamped %v", name, r.Epsilon(), b.Std()/slope, limit, sd)
		}
		t.Logf("%s eps=%v: support [%.4g, %.4g], debiased noise %.4f × unclamped, bias %.2e of the half-range", name, r.Epsilon(), lo, hi, b.Std()/slope/sd, b.Bias()/(slope/2))
		if g, ok := r.(*Gaussian); ok && r.Epsilon() <= 0.5 {
			// Why not reach 1 for the Gaussian: at the budgets the shuffle
			// protocols run (ε0 <= 0.5 by default) it raises the debiased
			// noise by more than 4%.
			b1, err := NewBounded(g, 1)
			if err != nil {
				t.Fatal(err)
			}
			if _, s1 := b1.Affine(); b1.Std()/s1 < 1.04*sd {
				t.Errorf("gaussian eps=%v reach 1: debiased noise %v × unclamped, want above 1.04", r.Epsilon(), b1.Std()/s1/sd)
			}
		}
	}
}

// TestBoundedSampler: the clamped sampler's mean matches Expect (and the
// blanket's matches 1/2) and every sample is Contained. 200,000 seeded
// draws per case; the tolerance of 6 standard errors (Std) fails a correct
// sampler with probability below 2e-9 per check.
func TestBoundedSampler(t *testing.T) {
	src := noise.NewSeeded(7)
	const draws = 200000
	for _, r := range boundedCases(t) {
		b, err := NewBounded(r, Reach(r))
		if err != nil {
			t.Fatal(err)
		}
		se := 6 * b.Std() / math.Sqrt(draws) * 1.2 // Std at x=1/2; the clamped sd at x=1 is within 20%
		for _, x := range []float64{0, 1} {
			sum := 0.0
			for range draws {
				v := b.Randomize(x, src)
				if !b.Contains(v) {
					t.Fatalf("%s eps=%v: sample %v outside the support", r.Name(), r.Epsilon(), v)
				}
				sum += v
			}
			if m := sum / draws; math.Abs(m-b.Expect(x)) > se {
				t.Errorf("%s eps=%v x=%v: sample mean %v, Expect %v (6 se %v)", r.Name(), r.Epsilon(), x, m, b.Expect(x), se)
			}
		}
		sum := 0.0
		for range draws {
			v := b.Blanket(src)
			if !b.Contains(v) {
				t.Fatalf("%s: blanket sample %v outside the support", r.Name(), v)
			}
			sum += v
		}
		if m := sum / draws; math.Abs(m-0.5) > 6*b.Std()/math.Sqrt(draws) {
			t.Errorf("%s eps=%v: blanket mean %v, want 1/2", r.Name(), r.Epsilon(), m)
		}
	}
}

// TestBoundedRGB: R_{γ,b} is bounded by construction: [0,1], its own
// affine mean, no bias, and Std its mixture's standard deviation at 1/2
// (checked against the exact distribution).
func TestBoundedRGB(t *testing.T) {
	for _, c := range []struct {
		eps float64
		b   int
	}{{0.5, 6}, {2, 7}, {8, 16}} {
		r, err := NewRGB(c.eps, c.b)
		if err != nil {
			t.Fatal(err)
		}
		b, err := NewBounded(r, Reach(r))
		if err != nil {
			t.Fatal(err)
		}
		lo, hi := b.Support()
		o1, s1 := b.Affine()
		o2, s2 := r.Affine()
		if lo != 0 || hi != 1 || o1 != o2 || s1 != s2 || b.Bias() != 0 {
			t.Errorf("eps=%v b=%d: support [%v, %v], affine (%v, %v) vs (%v, %v), bias %v", c.eps, c.b, lo, hi, o1, s1, o2, s2, b.Bias())
		}
		// Exact: mixture of randomized rounding of b/2 and uniform on {0..b}.
		g := r.Gamma()
		bf := float64(c.b)
		fl := math.Floor(bf / 2)
		f := bf/2 - fl
		v := 0.0
		for k := 0; k <= c.b; k++ {
			p := g / (bf + 1)
			if float64(k) == fl {
				p += (1 - g) * (1 - f)
			}
			if float64(k) == fl+1 {
				p += (1 - g) * f
			}
			y := float64(k)/bf - 0.5
			v += p * y * y
		}
		if math.Abs(math.Sqrt(v)-b.Std()) > 1e-12 {
			t.Errorf("eps=%v b=%d: Std %v, exact %v", c.eps, c.b, b.Std(), math.Sqrt(v))
		}
	}
}
