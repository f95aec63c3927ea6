package noise

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestBernoulliScripted(t *testing.T) {
	// p = 3/4: exact threshold 3*2^62 on the first word.
	cases := []struct {
		p     float64
		words []uint64
		want  bool
	}{
		{0.75, []uint64{3<<62 - 1}, true},
		{0.75, []uint64{3 << 62}, false},
		{0, []uint64{}, false},
		{math.NaN(), []uint64{}, false},
		{1, []uint64{}, true},
		{-1, []uint64{}, false},
		// p2 (below) has its 53 significant bits split across two words:
		// a tie on the first word is decided by the second.
		{p2, []uint64{hiP2, math.MaxUint64}, false},
		{p2, []uint64{hiP2, 0}, true},                     // second word 0 < lo
		{p2, []uint64{hiP2, loP2}, false},                 // second word == lo: U >= p
		{p2, []uint64{hiP2, loP2 - 1}, true},              // just below
		{p2, []uint64{hiP2 - 1}, true},                    // first word below
		{p2, []uint64{hiP2 + 1}, false},                   // first word above
		{0x1p-70, []uint64{0, 1<<58 - 1}, true},           // p = 2^-70: word 2 threshold 2^58
		{0x1p-70, []uint64{0, 1 << 58}, false},            //
		{0x1p-70, []uint64{1}, false},                     // nonzero first word: U > 2^-64 > p
		{math.SmallestNonzeroFloat64, []uint64{5}, false}, // subnormal
	}
	for i, c := range cases {
		s := &scripted{t: t, words: c.words}
		if got := Bernoulli(s, c.p); got != c.want {
			t.Errorf("case %d: Bernoulli(%v) with words %x = %v, want %v", i, c.p, c.words, got, c.want)
		}
		if s.i != len(c.words) {
			t.Errorf("case %d: used %d words, want %d", i, s.i, len(c.words))
		}
	}
}

// p2 = (2^52 + 1) * 2^-75: its 53 significant bits occupy bits 23..75
// after the binary point, so the first word holds the top 42 of them
// (hiP2) and the second word the last 11, left-aligned (loP2).
var (
	p2   = float64(1<<52+1) * 0x1p-75
	hiP2 = uint64(1<<52+1) >> 11
	loP2 = uint64(1) << 53
)

func TestBernoulliFrequency(t *testing.T) {
	// n = 10^6 draws per p; |count - np| <= 5.5 sd fails with probability
	// < 4e-8 per p for a correct sampler.
	s := NewSeeded(1)
	for _, p := range []float64{0.3, 1.0 / 3, 1.7 * 0x1p-12, 0.999, 0.5} {
		n := 1000000
		c := 0
		for range n {
			if Bernoulli(s, p) {
				c++
			}
		}
		sd := math.Sqrt(float64(n) * p * (1 - p))
		if d := math.Abs(float64(c) - float64(n)*p); d > 5.5*sd {
			t.Errorf("Bernoulli(%v): %d successes in %d, expected %.1f ± %.1f", p, c, n, float64(n)*p, sd)
		}
	}
}

func TestAcceptExpScripted(t *testing.T) {
	y := 0.3
	x := math.Exp(-y) * 0x1p64
	th := uint64(x)
	frac := x - float64(th)
	// Tie on the first word: decided by Bernoulli(frac) on the next words.
	s := &scripted{t: t, words: []uint64{th, 0}}
	if frac > 0 && !acceptExp(s, y) {
		t.Errorf("tie with zero continuation should accept (frac=%v)", frac)
	}
	s = &scripted{t: t, words: []uint64{th + 1}}
	if acceptExp(s, y) {
		t.Error("word above exp(-y) accepted")
	}
	s = &scripted{t: t, words: []uint64{th - 1}}
	if !acceptExp(s, y) {
		t.Error("word below exp(-y) rejected")
	}
	s = &scripted{t: t, words: []uint64{0}}
	if !acceptExp(s, 1e-300) {
		t.Error("tiny y rejected")
	}
}

func TestAcceptExpFrequency(t *testing.T) {
	// n = 10^6 per y, 5.5 sd tolerance: false failure < 4e-8 per y. y
	// covers the squeeze region (< 1), y = 1 and the no-squeeze region.
	s := NewSeeded(2)
	for _, y := range []float64{0.01, 0.17, 0.7, 1, 2.5, 9} {
		p := math.Exp(-y)
		n := 1000000
		c := 0
		for range n {
			if acceptExp(s, y) {
				c++
			}
		}
		sd := math.Sqrt(float64(n) * p * (1 - p))
		if d := math.Abs(float64(c) - float64(n)*p); d > 5.5*sd+1 {
			t.Errorf("acceptExp(%v): %d of %d, expected %.1f ± %.1f", y, c, n, float64(n)*p, sd)
		}
	}
}

// geomBins returns integer bin edges e_0=0 < e_1 < ... for a geometric
// with ratio q, each bin with probability about 1/k, and the exact bin
// probabilities q^a - q^b (last bin open).
func geomBins(q float64, k int) ([]int64, []float64) {
	lnq := math.Log(q)
	edges := []int64{0}
	for j := 1; j < k; j++ {
		e := int64(math.Ceil(math.Log(1-float64(j)/float64(k)) / lnq))
		if e > edges[len(edges)-1] {
			edges = append(edges, e)
		}
	}
	probs := make([]float64, len(edges))
	for i, a := range edges {
		pa := math.Pow(q, float64(a))
		if i+1 < len(edges) {
			probs[i] = pa - math.Pow(q, float64(edges[i+1]))
		} else {
			probs[i] = pa
		}
	}
	return edges, probs
}

func binOf(edges []int64, v int64) int {
	lo, hi := 0, len(edges)-1
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if edges[mid] <= v {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

func TestGeometricChiSquare(t *testing.T) {
	// For each p: 200,000 draws into ~40 equiprobable bins with exact
	// probabilities; reject above the 1e-6 chi-square quantile, so a
	// correct sampler fails with probability ~1e-6 per p. The p values
	// cover T = 1 (p >= 0.16), and the H*T+L decomposition with small and
	// large T; p = 1e-9 uses the H tail beyond one block many times.
	s := NewSeeded(3)
	for _, p := range []float64{0.9, 0.5, 0.2, 0.05, 0.003, 1e-6, 1e-9} {
		q := 1 - p
		edges, probs := geomBins(q, 40)
		counts := make([]int, len(edges))
		n := 200000
		sum := 0.0
		gs, err := newGeometricSampler(p)
		if err != nil {
			t.Fatal(err)
		}
		for range n {
			g := gs.Sample(s)
			if g < 0 {
				t.Fatalf("negative geometric %d", g)
			}
			counts[binOf(edges, g)]++
			sum += float64(g)
		}
		stat := chiSquare(counts, probs)
		if crit := chiSquareCritical(len(edges) - 1); stat > crit {
			t.Errorf("Geometric(%v): chi2 = %.1f > %.1f (%d bins)", p, stat, crit, len(edges))
		}
		// Mean (1-p)/p; sd of the mean sqrt(1-p)/p/sqrt(n); 5.5 sd.
		mean, sdm := q/p, math.Sqrt(q)/p/math.Sqrt(float64(n))
		if math.Abs(sum/float64(n)-mean) > 5.5*sdm {
			t.Errorf("Geometric(%v): mean %v, want %v ± %v", p, sum/float64(n), mean, sdm)
		}
	}
}

func TestTwoSidedGeometricChiSquare(t *testing.T) {
	// 200,000 draws per lambda; bins: |k| in geometric bins times the
	// sign, exact probabilities; false failure ~1e-6 per lambda.
	s := NewSeeded(4)
	for _, lambda := range []float64{3, 0.7, 0.1, 1e-3, 1e-8} {
		q := math.Exp(-lambda)
		edges, _ := geomBins(q, 20)
		// Pr[|K| in [a,b)] for a >= 1 is 2/(1+q) (q^a - q^b); Pr[K=0] = (1-q)/(1+q).
		// Cells: 0, then ±[edge_i, edge_{i+1}) with edges shifted to start at 1.
		type cell struct{ lo, hi int64 }
		var cells []cell
		for i, e := range edges {
			lo := max(e, 1)
			hi := int64(math.MaxInt64)
			if i+1 < len(edges) {
				hi = edges[i+1]
			}
			if lo < hi {
				cells = append(cells, cell{lo, hi})
			}
		}
		probs := []float64{(1 - q) / (1 + q)}
		for _, c := range cells {
			pr := math.Pow(q, float64(c.lo))
			if c.hi != math.MaxInt64 {
				pr -= math.Pow(q, float64(c.hi))
			}
			pr /= 1 + q
			probs = append(probs, pr, pr)
		}
		counts := make([]int, len(probs))
		n := 200000
		dl, err := NewDiscreteLaplace(lambda)
		if err != nil {
			t.Fatal(err)
		}
		for range n {
			k := dl.Sample(s)
			if k == 0 {
				counts[0]++
				continue
			}
			a := k
			if a < 0 {
				a = -a
			}
			idx := 0
			for i, c := range cells {
				if a >= c.lo && a < c.hi {
					idx = i
					break
				}
			}
			if k > 0 {
				counts[1+2*idx]++
			} else {
				counts[2+2*idx]++
			}
		}
		stat := chiSquare(counts, probs)
		if crit := chiSquareCritical(len(probs) - 1); stat > crit {
			t.Errorf("TwoSidedGeometric(%v): chi2 = %.1f > %.1f (%d cells)", lambda, stat, crit, len(probs))
		}
	}
}

func TestGeometricOneOffMeans(t *testing.T) {
	// The table-free one-off functions draw from the same laws: 20,000
	// draws each, mean within 5.5 sd (false failure < 4e-8 per case).
	s := NewSeeded(13)
	n := 20000
	for _, p := range []float64{0.7, 0.01, 1e-7} {
		sum := 0.0
		for range n {
			g, err := geometric(s, p)
			if err != nil {
				t.Fatal(err)
			}
			sum += float64(g)
		}
		mean, sdm := (1-p)/p, math.Sqrt(1-p)/p/math.Sqrt(float64(n))
		if math.Abs(sum/float64(n)-mean) > 5.5*sdm {
			t.Errorf("Geometric(%v): mean %v, want %v ± %v", p, sum/float64(n), mean, sdm)
		}
	}
	for _, lambda := range []float64{2, 0.01} {
		q := math.Exp(-lambda)
		// E|K| = 2q/((1-q)(1+q)); Var|K| <= E[K^2] = 2q/(1-q)^2.
		sum := 0.0
		for range n {
			k, err := twoSidedGeometric(s, lambda)
			if err != nil {
				t.Fatal(err)
			}
			sum += math.Abs(float64(k))
		}
		mean := 2 * q / ((1 - q) * (1 + q))
		sdm := math.Sqrt(2*q) / (1 - q) / math.Sqrt(float64(n))
		if math.Abs(sum/float64(n)-mean) > 5.5*sdm {
			t.Errorf("TwoSidedGeometric(%v): E|K| %v, want %v ± %v", lambda, sum/float64(n), mean, sdm)
		}
	}
}

func TestGeometricValidation(t *testing.T) {
	for _, p := range []float64{0, 1, -0.1, 1.1, math.NaN(), math.Inf(1), 1e-300} {
		if _, err := newGeometricSampler(p); err == nil {
			t.Errorf("NewGeometricSampler(%v) accepted", p)
		}
	}
	for _, l := range []float64{0, -1, math.NaN(), math.Inf(1), minLambda / 2} {
		if _, err := NewDiscreteLaplace(l); err == nil {
			t.Errorf("NewDiscreteLaplace(%v) accepted", l)
		}
	}
	s := NewSeeded(5)
	for _, p := range []float64{0, -0.1, 1.1, math.NaN(), math.Inf(1), 1e-300} {
		if _, err := geometric(s, p); err == nil {
			t.Errorf("Geometric(%v) accepted", p)
		}
	}
	if g, err := geometric(s, 1); err != nil || g != 0 {
		t.Errorf("Geometric(1) = %d, %v; want 0", g, err)
	}
	for _, l := range []float64{0, -1, math.NaN(), math.Inf(1), minLambda / 2} {
		if _, err := twoSidedGeometric(s, l); err == nil {
			t.Errorf("TwoSidedGeometric(%v) accepted", l)
		}
	}
}

func TestLaplaceKS(t *testing.T) {
	// n = 100,000 noise draws per epsilon against the continuous Laplace
	// CDF of scale Scale(); the grid (step <= scale*2^-39) moves the CDF by
	// < 1e-11. DKW: Pr[D > d] <= 1e-6 for a correct sampler.
	s := NewSeeded(6)
	n := 100000
	for _, eps := range []float64{0.01, 1, 30} {
		l, err := NewLaplace(eps, 1)
		if err != nil {
			t.Fatal(err)
		}
		x := 0.3
		sample := make([]float64, n)
		for i := range sample {
			sample[i] = l.Add(x, s)
		}
		d := ksDistance(sample, func(v float64) float64 { return laplaceCDF(v, l.Snap(x), l.Scale()) })
		if bound := dkwBound(n, 1e-6); d > bound {
			t.Errorf("Laplace eps=%v: KS distance %.5f > %.5f", eps, d, bound)
		}
	}
}

func TestLaplaceGrid(t *testing.T) {
	// Every output is an exact multiple of the power-of-two granularity,
	// whatever the input: the output support does not depend on x.
	s := NewSeeded(7)
	l, err := NewLaplace(0.8, 1)
	if err != nil {
		t.Fatal(err)
	}
	g := l.Granularity()
	if fr, _ := math.Frexp(g); fr != 0.5 {
		t.Fatalf("granularity %v is not a power of two", g)
	}
	if sc := 1 / 0.8; g < sc/granularityParam || g >= 2*sc/granularityParam {
		t.Fatalf("granularity %v not in [scale/2^40, scale/2^39)", g)
	}
	for i := range 20000 {
		x := Uniform(s)*3 - 1
		if i%3 == 0 {
			x = math.Nextafter(0.3, 1) // a value with bits below the grid
		}
		out := l.Add(x, s)
		if k := out / g; k != math.Trunc(k) {
			t.Fatalf("output %v for x=%v is not on the grid %v", out, x, g)
		}
	}
	// The snapped input differs from x by at most g/2.
	for _, x := range []float64{0, 1, 0.1, 1.0 / 3, -7.25} {
		if d := math.Abs(l.Snap(x) - x); d > g/2 {
			t.Errorf("Snap(%v) moved by %v > g/2", x, d)
		}
	}
	if l.Snap(0) != 0 || l.Snap(1) != 1 {
		t.Error("0 and 1 must be grid points")
	}
	// Privacy parameter per grid step: lambda*(sens+g)/g == eps.
	if got := l.Lambda() * (1 + g) / g; math.Abs(got-0.8) > 1e-15 {
		t.Errorf("lambda*(sens+g)/g = %v, want eps = 0.8", got)
	}
}

func TestLaplaceValidation(t *testing.T) {
	bad := [][2]float64{{0, 1}, {-1, 1}, {math.NaN(), 1}, {math.Inf(1), 1}, {1, 0}, {1, math.NaN()}, {1, math.Inf(1)}, {1e-300, 1e300}}
	for _, b := range bad {
		if _, err := NewLaplace(b[0], b[1]); err == nil {
			t.Errorf("NewLaplace(%v, %v) accepted", b[0], b[1])
		}
	}
	l, err := NewLaplace(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, iv := range [][2]float64{{1, 0}, {math.NaN(), 1}, {0, math.Inf(1)}, {0.1e-13, 0.2e-13}} {
		if _, err := l.Truncate(iv[0], iv[1]); err == nil {
			t.Errorf("Truncate(%v, %v) accepted", iv[0], iv[1])
		}
	}
}

func truncLaplaceCDF(x, mu, b, lo, hi float64) float64 {
	if x < lo {
		return 0
	}
	if x >= hi {
		return 1
	}
	return (laplaceCDF(x, mu, b) - laplaceCDF(lo, mu, b)) / (laplaceCDF(hi, mu, b) - laplaceCDF(lo, mu, b))
}

func TestTruncatedLaplaceKS(t *testing.T) {
	// Both proposal modes (uniform for small eps, Laplace for large eps)
	// and centres inside, at the edge and clamped from outside. n = 100,000
	// per case, DKW bound at alpha = 1e-6 per case.
	s := NewSeeded(8)
	n := 100000
	for _, c := range []struct{ eps, lo, hi, x float64 }{
		{0.05, -0.5, 0.5, 0.2},
		{1, -0.5, 0.5, -0.5},
		{1.9, -0.5, 0.5, 0.5},
		{10, -1, 1, 0.4},
		{40, -0.5, 0.5, 3}, // clamped to 0.5
	} {
		l, err := NewLaplace(c.eps, 1)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := l.Truncate(c.lo, c.hi)
		if err != nil {
			t.Fatal(err)
		}
		centre := l.Snap(math.Min(math.Max(c.x, c.lo), c.hi))
		sample := make([]float64, n)
		for i := range sample {
			v := tr.Add(c.x, s)
			if v < c.lo || v > c.hi {
				t.Fatalf("eps=%v: output %v outside [%v, %v]", c.eps, v, c.lo, c.hi)
			}
			sample[i] = v
		}
		d := ksDistance(sample, func(v float64) float64 { return truncLaplaceCDF(v, centre, l.Scale(), c.lo, c.hi) })
		if bound := dkwBound(n, 1e-6); d > bound {
			t.Errorf("truncated eps=%v x=%v (uniform proposal %v): KS %.5f > %.5f", c.eps, c.x, tr.uniform, d, bound)
		}
	}
}

func TestGaussianKS(t *testing.T) {
	// n = 100,000 per sigma against N(snap(x), EffectiveSigma^2); DKW at
	// alpha = 1e-6 per sigma.
	s := NewSeeded(9)
	n := 100000
	for _, sigma := range []float64{0.01, 1, 250} {
		g, err := NewGaussian(sigma, 1)
		if err != nil {
			t.Fatal(err)
		}
		if r := g.EffectiveSigma()/sigma - 1; r < 0 || r > 0x1p-38*math.Max(1, sigma) {
			t.Errorf("sigma=%v: effective sigma inflated by %v", sigma, r)
		}
		x := 0.7
		sample := make([]float64, n)
		for i := range sample {
			sample[i] = g.Add(x, s)
		}
		d := ksDistance(sample, func(v float64) float64 { return normalCDF(v, g.Snap(x), g.EffectiveSigma()) })
		if bound := dkwBound(n, 1e-6); d > bound {
			t.Errorf("Gaussian sigma=%v: KS %.5f > %.5f", sigma, d, bound)
		}
		for _, v := range sample[:1000] {
			if k := v / g.Granularity(); k != math.Trunc(k) {
				t.Fatalf("Gaussian output %v off the grid", v)
			}
		}
	}
}

func TestGaussianValidation(t *testing.T) {
	bad := [][2]float64{{0, 1}, {-1, 1}, {math.NaN(), 1}, {math.Inf(1), 1}, {1, 0}, {1, math.NaN()}, {1e-9, 1e9}}
	for _, b := range bad {
		if _, err := NewGaussian(b[0], b[1]); err == nil {
			t.Errorf("NewGaussian(%v, %v) accepted", b[0], b[1])
		}
	}
}

func TestIntnMatchesMathRand(t *testing.T) {
	// Intn and Shuffle must keep the exact streams of math/rand/v2's
	// Uint64N (seeded experiments stay reproducible across versions).
	for _, n := range []int{2, 3, 7, 64, 1000, 1 << 40, 1<<62 + 12345} {
		a, b := NewSeeded(11), NewSeeded(11)
		r := rand.New(b.(rand.Source))
		for range 1000 {
			if x, y := Intn(a, n), int(r.Uint64N(uint64(n))); x != y {
				t.Fatalf("Intn(%d) = %d, math/rand/v2 gives %d", n, x, y)
			}
		}
	}
	if Intn(NewSeeded(1), 0) != 0 || Intn(NewSeeded(1), -5) != 0 || Intn(NewSeeded(1), 1) != 0 {
		t.Error("Intn(n <= 1) must be 0")
	}
}

func TestShuffleUniform(t *testing.T) {
	// 24 permutations of 4 items, 240,000 shuffles; chi-square with 23 df
	// at the 1e-6 quantile.
	s := NewSeeded(12)
	counts := make([]int, 24)
	for range 240000 {
		p := [4]int{0, 1, 2, 3}
		Shuffle(s, 4, func(i, j int) { p[i], p[j] = p[j], p[i] })
		// Lehmer code rank.
		rank := 0
		for i := range 4 {
			c := 0
			for j := i + 1; j < 4; j++ {
				if p[j] < p[i] {
					c++
				}
			}
			rank = rank*(4-i) + c
		}
		counts[rank]++
	}
	probs := make([]float64, 24)
	for i := range probs {
		probs[i] = 1.0 / 24
	}
	if stat, crit := chiSquare(counts, probs), chiSquareCritical(23); stat > crit {
		t.Errorf("Shuffle chi2 = %.1f > %.1f", stat, crit)
	}
}

func TestUniformRange(t *testing.T) {
	s := &scripted{t: t, words: []uint64{0, math.MaxUint64}}
	if u := Uniform(s); u != 0 {
		t.Errorf("Uniform(0) = %v", u)
	}
	if u := Uniform(s); u >= 1 {
		t.Errorf("Uniform(max) = %v, want < 1", u)
	}
}

func TestSecureSource(t *testing.T) {
	// Two Secure sources must not produce the same stream, and 10^5 words
	// must have ~50% ones (|ones - n/2| <= 6 sd: false failure < 2e-9).
	a, b := Secure(), Secure()
	same := 0
	ones := 0
	n := 100000
	for range n {
		x, y := a.Uint64(), b.Uint64()
		if x == y {
			same++
		}
		for v := x; v != 0; v &= v - 1 {
			ones++
		}
	}
	if same > 0 {
		t.Errorf("%d identical words from two secure sources", same)
	}
	bitsN := float64(64 * n)
	if d := math.Abs(float64(ones) - bitsN/2); d > 6*math.Sqrt(bitsN/4) {
		t.Errorf("secure source bit balance off: %d ones of %v", ones, bitsN)
	}
}

func TestGeomComponents(t *testing.T) {
	// The two halves of G = H*T + L separately, with more power than the
	// end-to-end tests (L is nearly uniform within a block, so a wrong
	// tilt barely shows in G). lambda = 1e-6 gives T = 173,286.
	// L: 4,000,000 draws, mean within 6 sd (false failure < 2e-9) and a
	// 16-bin chi-square at 1e-6. H: 1,000,000 draws, chi-square at 1e-6.
	// (A 10% error in the L tilt moves the mean by ~14 sd.)
	s := NewSeeded(14)
	lambda := 1e-6
	g, err := newGeom(lambda, true)
	if err != nil {
		t.Fatal(err)
	}
	T := float64(g.t)
	q := math.Exp(-lambda)
	n := 4000000
	const bins = 16
	counts := make([]int, bins)
	sum := 0.0
	for range n {
		l := g.sampleL(s)
		if l >= g.t {
			t.Fatalf("L = %d >= T = %d", l, g.t)
		}
		sum += float64(l)
		counts[int(float64(l)*bins/T)]++
	}
	// E[L] = q/(1-q) - T q^T/(1-q^T); Var[L] <= T^2/12.
	mean := q/(1-q) - T*math.Pow(q, T)/(1-math.Pow(q, T))
	if sdm := T / math.Sqrt(12*float64(n)); math.Abs(sum/float64(n)-mean) > 6*sdm {
		t.Errorf("E[L] = %v, want %v ± %v", sum/float64(n), mean, sdm)
	}
	probs := make([]float64, bins)
	norm := 1 - math.Pow(q, T)
	for i := range bins {
		a := math.Ceil(float64(i) * T / bins)
		b := math.Ceil(float64(i+1) * T / bins)
		probs[i] = (math.Pow(q, a) - math.Pow(q, b)) / norm
	}
	if stat, crit := chiSquare(counts, probs), chiSquareCritical(bins-1); stat > crit {
		t.Errorf("L chi2 = %.1f > %.1f", stat, crit)
	}

	rho := g.rho
	const hCells = 30
	hc := make([]int, hCells+1)
	nh := 1000000
	for range nh {
		h := g.sampleH(s)
		hc[min(int(h), hCells)]++
	}
	hp := make([]float64, hCells+1)
	for h := range hCells {
		hp[h] = (1 - rho) * math.Pow(rho, float64(h))
	}
	hp[hCells] = math.Pow(rho, hCells)
	if stat, crit := chiSquare(hc, hp), chiSquareCritical(hCells); stat > crit {
		t.Errorf("H chi2 = %.1f > %.1f", stat, crit)
	}
}

// A secure source refills its block from crypto/rand when exhausted and
// never repeats a block; block sizes are rounded up to whole words.
func TestSecureSourceBlocks(t *testing.T) {
	for _, n := range []int{1, 8, 13, 512, secureBufSize} {
		s := newSecureSource(n)
		words := len(s.buf) / 8
		if len(s.buf)%8 != 0 || len(s.buf) < n {
			t.Fatalf("n=%d: block of %d bytes", n, len(s.buf))
		}
		seen := make(map[uint64]bool)
		for i := range 3*words + 1 {
			v := s.Uint64()
			if seen[v] {
				t.Fatalf("n=%d: word %d repeats", n, i)
			}
			seen[v] = true
		}
	}
	if s, ok := Secure().(*secureSource); !ok || len(s.buf) != secureBufSize {
		t.Fatalf("Secure() is not a %d-byte secureSource", secureBufSize)
	}
}
