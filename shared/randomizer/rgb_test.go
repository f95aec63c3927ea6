package randomizer

import (
	"fmt"
	"math"
	"math/big"
	"testing"

	"github.com/blanket-fl/blanket/shared/noise"
)

var rgbParams = []struct {
	eps float64
	b   int
}{
	{0.01, 1}, {0.1, 3}, {0.5, 1}, {0.5, 10}, {1, 2}, {1, 10}, {2, 16}, {5, 100}, {10, 7}, {0.3, 1000},
}

// rgbInputs returns the inputs enumerated by the LDP tests: the worst
// cases 0 and 1, every bucket point k/b and the midpoints between them,
// values just inside the ends, and a few irrational-looking ones.
func rgbInputs(b int) []float64 {
	xs := []float64{0, 1, math.Nextafter(0, 1), math.Nextafter(1, 0), 1 / math.Pi, 1 / math.E, 0.5}
	step := 1
	if b > 200 {
		step = b / 200
	}
	for k := 0; k <= b; k += step {
		xs = append(xs, float64(k)/float64(b), (float64(k)+0.5)/float64(b), (float64(k)+0.01)/float64(b))
	}
	return xs
}

// rgbPMFExact is the output probability of Randomize(x) = k/b as an exact
// rational, computed from the float64 gamma and rounding fraction the
// sampler actually uses (its Bernoulli and Intn draws are exact).
func rgbPMFExact(r *RGB, x float64, k int) *big.Rat {
	lo, frac := r.round(x)
	data := new(big.Rat)
	switch k {
	case lo:
		data.Sub(big.NewRat(1, 1), new(big.Rat).SetFloat64(frac))
	case lo + 1:
		data.SetFloat64(frac)
	}
	g := new(big.Rat).SetFloat64(r.gamma)
	p := new(big.Rat).Sub(big.NewRat(1, 1), g)
	p.Mul(p, data)
	return p.Add(p, new(big.Rat).Quo(g, big.NewRat(int64(r.b)+1, 1)))
}

func TestRGBExactLDP(t *testing.T) {
	// Proof of eps-LDP by exact enumeration: for every output k/b, the
	// largest and smallest probability over all enumerated inputs
	// (including the worst cases x = 0 and x = 1) are computed in exact
	// rational arithmetic from the float64 parameters the sampler uses;
	// their ratio must never exceed the float64 e^eps, and (in float64)
	// must reach it to 1e-12: the bound is tight.
	for _, c := range rgbParams {
		r, err := NewRGB(c.eps, c.b)
		if err != nil {
			t.Fatal(err)
		}
		xs := rgbInputs(c.b)
		bound := new(big.Rat).SetFloat64(math.Exp(c.eps))
		worst := 0.0
		kStep := 1
		if c.b > 200 {
			kStep = c.b / 50
		}
		for k := 0; k <= c.b; k += kStep {
			var hi, lo *big.Rat
			fhi, flo := 0.0, math.Inf(1)
			for _, x := range xs {
				p := rgbPMFExact(r, x, k)
				if hi == nil || p.Cmp(hi) > 0 {
					hi = p
				}
				if lo == nil || p.Cmp(lo) < 0 {
					lo = p
				}
				fp := r.PMF(x, k)
				fhi, flo = math.Max(fhi, fp), math.Min(flo, fp)
			}
			ratio := new(big.Rat).Quo(hi, lo)
			if ratio.Cmp(bound) > 0 {
				f, _ := ratio.Float64()
				t.Errorf("eps=%v b=%d output %d: exact ratio %v > e^eps = %v", c.eps, c.b, k, f, math.Exp(c.eps))
			}
			worst = math.Max(worst, fhi/flo)
		}
		if rel := math.Abs(worst/math.Exp(c.eps) - 1); rel > 1e-12 {
			t.Errorf("eps=%v b=%d: max ratio %v, e^eps %v (rel %v): not tight", c.eps, c.b, worst, math.Exp(c.eps), rel)
		}
		// PMF sums to 1 for every input.
		for _, x := range xs[:10] {
			s := 0.0
			for k := 0; k <= c.b; k++ {
				s += r.PMF(x, k)
			}
			if math.Abs(s-1) > 1e-12 {
				t.Errorf("eps=%v b=%d x=%v: PMF sums to %v", c.eps, c.b, x, s)
			}
		}
	}
}

func TestRGBGammaFormula(t *testing.T) {
	for _, c := range rgbParams {
		r, err := NewRGB(c.eps, c.b)
		if err != nil {
			t.Fatal(err)
		}
		want := float64(c.b+1) / (math.Exp(c.eps) + float64(c.b))
		if rel := r.Gamma()/want - 1; rel < 0 || rel > 1e-14 {
			t.Errorf("eps=%v b=%d: gamma %v, want (b+1)/(e^eps+b) = %v (rel %v, must round up)", c.eps, c.b, r.Gamma(), want, rel)
		}
	}
}

func TestRGBPaperLiteralViolatesLDP(t *testing.T) {
	// FLAME Algorithm 1 as printed: gamma = b/(e^eps+b-1), blanket
	// Unif({1..b}), xbar in {0..b}. Output 0 has probability 1-gamma for
	// x = 0 and exactly 0 for x = 1: the privacy loss is infinite.
	for _, c := range rgbParams {
		b := float64(c.b)
		gamma := b / (math.Exp(c.eps) + b - 1)
		p0x0 := (1 - gamma) * 1 // xbar = 0 surely, blanket never gives 0
		p0x1 := (1 - gamma) * 0 // xbar = b surely
		if !(p0x0 > 0 && p0x1 == 0) {
			t.Fatalf("eps=%v b=%d: literal reading should put mass only under x=0 on output 0", c.eps, c.b)
		}
		// Second reading: same gamma, blanket over {0..b} (b+1 values).
		// Ratio = ((1-gamma) + gamma/(b+1)) / (gamma/(b+1))
		//       = 1 + (e^eps - 1)(b+1)/b  >  e^eps.
		ratio := ((1 - gamma) + gamma/(b+1)) / (gamma / (b + 1))
		want := 1 + math.Expm1(c.eps)*(b+1)/b
		if math.Abs(ratio/want-1) > 1e-12 {
			t.Errorf("eps=%v b=%d: ratio %v, derived %v", c.eps, c.b, ratio, want)
		}
		if !(ratio > math.Exp(c.eps)) {
			t.Errorf("eps=%v b=%d: paper gamma with b+1 outputs gives ratio %v <= e^eps", c.eps, c.b, ratio)
		}
	}
}

func TestRGBSamplerMatchesPMF(t *testing.T) {
	// Chi-square of 200,000 reports per (x, b) against PMF, cells with
	// expected count < 20 pooled; threshold at the 1e-6 quantile: a correct
	// sampler fails with probability ~1e-6 per case.
	s := noise.NewSeeded(21)
	for _, c := range []struct {
		eps float64
		b   int
		x   float64
	}{{1, 10, 0.37}, {0.5, 3, 0}, {3, 5, 1}, {2, 16, 0.5}, {1, 10, -3}} {
		r, err := NewRGB(c.eps, c.b)
		if err != nil {
			t.Fatal(err)
		}
		n := 200000
		counts := make([]int, c.b+1)
		for range n {
			y := r.Randomize(c.x, s)
			k := int(math.Round(y * float64(c.b)))
			if k < 0 || k > c.b || float64(k)/float64(c.b) != y {
				t.Fatalf("report %v is not in {0, 1/b, ..., 1}", y)
			}
			counts[k]++
		}
		probs := make([]float64, c.b+1)
		for k := range probs {
			probs[k] = r.PMF(c.x, k)
		}
		pc, pp := pool(counts, probs, n)
		if stat, crit := chiSquare(pc, pp), chiSquareCritical(len(pp)-1); stat > crit {
			t.Errorf("eps=%v b=%d x=%v: chi2 %.1f > %.1f", c.eps, c.b, c.x, stat, crit)
		}
	}
}

// pool merges adjacent cells until each has expected count >= 20.
func pool(counts []int, probs []float64, n int) ([]int, []float64) {
	var pc []int
	var pp []float64
	c, p := 0, 0.0
	for i := range counts {
		c += counts[i]
		p += probs[i]
		if p*float64(n) >= 20 {
			pc, pp = append(pc, c), append(pp, p)
			c, p = 0, 0
		}
	}
	if p > 0 || c > 0 {
		if len(pc) == 0 {
			return []int{c}, []float64{p}
		}
		pc[len(pc)-1] += c
		pp[len(pp)-1] += p
	}
	return pc, pp
}

func TestRGBBlanketUniform(t *testing.T) {
	// 110,000 blanket draws over b+1 = 11 values, chi-square at 1e-6.
	s := noise.NewSeeded(22)
	r, err := NewRGB(1, 10)
	if err != nil {
		t.Fatal(err)
	}
	counts := make([]int, 11)
	for range 110000 {
		counts[int(math.Round(r.Blanket(s)*10))]++
	}
	probs := make([]float64, 11)
	for i := range probs {
		probs[i] = 1.0 / 11
	}
	if stat, crit := chiSquare(counts, probs), chiSquareCritical(10); stat > crit {
		t.Errorf("blanket chi2 %.1f > %.1f", stat, crit)
	}
}

func TestRGBExpect(t *testing.T) {
	// Expect is exactly the mean of PMF, and affine with the advertised
	// offset and slope.
	for _, c := range rgbParams[:8] {
		r, err := NewRGB(c.eps, c.b)
		if err != nil {
			t.Fatal(err)
		}
		off, slope := r.Affine()
		for _, x := range []float64{0, 0.2, 1.0 / 3, 0.5, 0.999, 1} {
			m := 0.0
			for k := 0; k <= c.b; k++ {
				m += float64(k) / float64(c.b) * r.PMF(x, k)
			}
			if math.Abs(m-r.Expect(x)) > 1e-12 || math.Abs(off+slope*x-r.Expect(x)) > 1e-15 {
				t.Errorf("eps=%v b=%d x=%v: PMF mean %v, Expect %v, affine %v", c.eps, c.b, x, m, r.Expect(x), off+slope*x)
			}
		}
		if math.Abs(off-r.Gamma()/2) > 0 || math.Abs(slope-(1-r.Gamma())) > 0 {
			t.Errorf("affine (%v, %v) != (gamma/2, 1-gamma)", off, slope)
		}
	}
}

func TestRGBValidation(t *testing.T) {
	for _, c := range []struct {
		eps float64
		b   int
	}{{0, 10}, {-1, 10}, {math.NaN(), 10}, {math.Inf(1), 10}, {1, 0}, {1, -3}, {1, 1<<30 + 1}, {50, 10}} {
		if _, err := NewRGB(c.eps, c.b); err == nil {
			t.Errorf("NewRGB(%v, %d) accepted", c.eps, c.b)
		}
	}
}

func TestRGBBuckets(t *testing.T) {
	// rgbBuckets minimizes M(b) = (7/6) b ln(2/delta)/eps^2 + n/(4b^2):
	// its result must beat its neighbours.
	for _, c := range []struct {
		n           int
		eps, delta  float64
		wantAtLeast int
	}{{1000, 1, 1e-6, 1}, {100000, 1, 1e-8, 5}, {10000000, 0.5, 1e-9, 10}} {
		b, err := rgbBuckets(c.n, c.eps, c.delta)
		if err != nil {
			t.Fatal(err)
		}
		m := func(b int) float64 {
			bf := float64(b)
			return 7.0/6*bf*math.Log(2/c.delta)/(c.eps*c.eps) + float64(c.n)/(4*bf*bf)
		}
		if b < c.wantAtLeast || (b > 1 && m(b-1) < m(b)) || m(b+1) < m(b) {
			t.Errorf("RGBBuckets(%d, %v, %v) = %d: M(b-1..b+1) = %v %v %v", c.n, c.eps, c.delta, b, m(max(b-1, 1)), m(b), m(b+1))
		}
	}
	for _, bad := range []struct {
		n          int
		eps, delta float64
	}{{1, 1, 1e-6}, {100, 0, 1e-6}, {100, 1, 0}, {100, 1, 1}, {100, math.NaN(), 1e-6}, {100, 1, math.NaN()}} {
		if _, err := rgbBuckets(bad.n, bad.eps, bad.delta); err == nil {
			t.Errorf("RGBBuckets(%v) accepted", bad)
		}
	}
}

func TestRGBBucketsLocal(t *testing.T) {
	// The chosen b must minimize the exact worst-case de-biased variance
	// over x in [0,1] (computed here from PMF on a grid of x) among
	// b in [1, 64], to within 2%.
	for _, eps := range []float64{0.5, 2, 5, 8} {
		b, err := rgbBucketsLocal(eps)
		if err != nil {
			t.Fatal(err)
		}
		worstVar := func(b int) float64 {
			r, err := NewRGB(eps, b)
			if err != nil {
				t.Fatal(err)
			}
			_, slope := r.Affine()
			w := 0.0
			for i := 0; i <= 200; i++ {
				x := float64(i) / 200
				m, m2 := 0.0, 0.0
				for k := 0; k <= b; k++ {
					y := float64(k) / float64(b)
					m += y * r.PMF(x, k)
					m2 += y * y * r.PMF(x, k)
				}
				w = math.Max(w, (m2-m*m)/(slope*slope))
			}
			return w
		}
		best := math.Inf(1)
		for c := 1; c <= 64; c++ {
			best = math.Min(best, worstVar(c))
		}
		if v := worstVar(b); v > 1.02*best {
			t.Errorf("eps=%v: RGBBucketsLocal = %d has worst variance %v, best over [1,64] is %v", eps, b, v, best)
		}
	}
	if _, err := rgbBucketsLocal(math.NaN()); err == nil {
		t.Error("RGBBucketsLocal(NaN) accepted")
	}
}

func ExampleNewRGB() {
	r, err := NewRGB(1, 10)
	if err != nil {
		fmt.Println(err)
		return
	}
	off, slope := r.Affine()
	fmt.Printf("gamma=%.4f offset=%.4f slope=%.4f E[R(0.3)]=%.4f\n", r.Gamma(), off, slope, r.Expect(0.3))
	// Output: gamma=0.8649 offset=0.4324 slope=0.1351 E[R(0.3)]=0.4730
}
