package pld

import (
	"math"
	"testing"
)

var methods = []Method{RoundUp, ConnectDots}

// lchoose returns log(n choose j).
func lchoose(n, j int) float64 {
	a, _ := math.Lgamma(float64(n + 1))
	b, _ := math.Lgamma(float64(j + 1))
	c, _ := math.Lgamma(float64(n - j + 1))
	return a - b - c
}

// rrExactDelta is the exact delta(eps) of k-fold binary randomized
// response with local eps0: the loss is (2j-k)eps0 with j ~ Bin(k, p),
// p = e^eps0/(1+e^eps0), under P.
func rrExactDelta(eps0 float64, k int, eps float64) float64 {
	p := math.Exp(eps0) / (1 + math.Exp(eps0))
	s := 0.0
	for j := 0; j <= k; j++ {
		l := float64(2*j-k) * eps0
		if l > eps {
			s += math.Exp(lchoose(k, j)+float64(j)*math.Log(p)+float64(k-j)*math.Log1p(-p)) * -math.Expm1(eps-l)
		}
	}
	return s
}

// hockeyStick is H_{e^eps}(P || Q) = sum max(0, P - e^eps Q).
func hockeyStick(p, q []float64, eps float64) float64 {
	s := 0.0
	x := math.Exp(eps)
	for i := range p {
		s += max(0, p[i]-x*q[i])
	}
	return s
}

func mustDelta(t *testing.T, p *PLD, eps float64) float64 {
	t.Helper()
	d, err := p.Delta(eps)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestRandomizedResponseBinomial compares k-fold binary randomized response
// with the exact binomial computation. Pessimism: PLD >= exact. Tightness:
// both discretizations move each round's loss up by at most h, so the PLD
// is at most the exact curve shifted by k*h, plus the accounted infinity
// mass and error bound.
func TestRandomizedResponseBinomial(t *testing.T) {
	const eps0, h = 1.0, 1e-3
	for _, m := range methods {
		rr, err := randomizedResponse(eps0, 2, Options{Width: h, Method: m})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []int{1, 2, 7, 30, 64} {
			c, err := rr.SelfCompose(k)
			if err != nil {
				t.Fatal(err)
			}
			st := c.Stats()
			for _, eps := range []float64{0, 0.3, 1, 2.5, 5, 10} {
				got := mustDelta(t, c, eps)
				exact := rrExactDelta(eps0, k, eps)
				upper := rrExactDelta(eps0, k, eps-float64(k)*h) + st.InfinityMass + st.ErrorBound + 1e-12
				if got < exact {
					t.Errorf("%v k=%d eps=%v: PLD delta %.12g below exact %.12g", m, k, eps, got, exact)
				}
				if got > upper {
					t.Errorf("%v k=%d eps=%v: PLD delta %.12g above shifted exact %.12g", m, k, eps, got, upper)
				}
			}
		}
	}
}

// TestRandomizedResponseKary checks k-ary randomized response (k=4) after
// 5 rounds against brute-force enumeration of the 4^5 product outcomes.
func TestRandomizedResponseKary(t *testing.T) {
	const eps0, h, rounds, arity = 1.5, 1e-3, 5, 4
	den := math.Exp(eps0) + arity - 1
	p1 := []float64{math.Exp(eps0) / den, 1 / den, 1 / den, 1 / den}
	q1 := []float64{1 / den, math.Exp(eps0) / den, 1 / den, 1 / den}
	p, q := []float64{1}, []float64{1}
	for range rounds {
		var np, nq []float64
		for i := range p {
			for j := range p1 {
				np = append(np, p[i]*p1[j])
				nq = append(nq, q[i]*q1[j])
			}
		}
		p, q = np, nq
	}
	for _, m := range methods {
		rr, err := randomizedResponse(eps0, arity, Options{Width: h, Method: m})
		if err != nil {
			t.Fatal(err)
		}
		c, err := rr.SelfCompose(rounds)
		if err != nil {
			t.Fatal(err)
		}
		for _, eps := range []float64{0, 1, 3, 6} {
			got := mustDelta(t, c, eps)
			exact := hockeyStick(p, q, eps)
			st := c.Stats()
			shifted := hockeyStick(p, q, eps-rounds*h) + st.InfinityMass + st.ErrorBound + 1e-12
			if got < exact || got > shifted {
				t.Errorf("%v eps=%v: PLD delta %.12g not in [exact %.12g, shifted %.12g]", m, eps, got, exact, shifted)
			}
		}
	}
}

// TestGaussianComposition compares the k-fold Gaussian PLD with the exact
// delta of one Gaussian with mu*sqrt(k): always above it; within 2e-3
// relative (plus 1e-9) for ConnectDots at h = 1e-3 and k <= 1000; below the k*h-shifted curve for
// RoundUp.
func TestGaussianComposition(t *testing.T) {
	cases := []struct {
		sigma float64
		k     int
	}{{1, 1}, {2, 4}, {5, 25}, {20, 300}, {40, 1000}}
	const h = 1e-3
	for _, m := range methods {
		for _, tc := range cases {
			g, err := Gaussian(tc.sigma, 1, Options{Width: h, Method: m})
			if err != nil {
				t.Fatal(err)
			}
			c, err := g.SelfCompose(tc.k)
			if err != nil {
				t.Fatal(err)
			}
			st := c.Stats()
			mu := math.Sqrt(float64(tc.k)) / tc.sigma
			for _, eps := range []float64{0, 0.5, 1, 2, 4} {
				got := mustDelta(t, c, eps)
				exact := GaussianDelta(mu, eps)
				if got < exact {
					t.Errorf("%v sigma=%v k=%d eps=%v: %.12g below exact %.12g", m, tc.sigma, tc.k, eps, got, exact)
				}
				var upper float64
				if m == ConnectDots {
					upper = exact*1.002 + 1e-9
				} else {
					upper = GaussianDelta(mu, eps-float64(tc.k)*h) + st.InfinityMass + st.ErrorBound
				}
				if got > upper {
					t.Errorf("%v sigma=%v k=%d eps=%v: %.12g above %.12g (exact %.12g)", m, tc.sigma, tc.k, eps, got, upper, exact)
				}
			}
		}
	}
}

// exactGaussianEpsilon inverts GaussianDelta by bisection.
func exactGaussianEpsilon(mu, delta float64) float64 {
	lo, hi := 0.0, 100.0
	for range 200 {
		mid := (lo + hi) / 2
		if GaussianDelta(mu, mid) > delta {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// TestEpsilon checks that Epsilon inverts Delta exactly (Delta at the
// answer is <= delta, slightly below the answer it is > delta) and that it
// is never below the exact Gaussian epsilon.
func TestEpsilon(t *testing.T) {
	g, err := Gaussian(10, 1, Options{Width: 1e-3, Method: ConnectDots})
	if err != nil {
		t.Fatal(err)
	}
	c, err := g.SelfCompose(100)
	if err != nil {
		t.Fatal(err)
	}
	for _, delta := range []float64{1e-3, 1e-5, 1e-7, 1e-9} {
		e, err := c.Epsilon(delta)
		if err != nil {
			t.Fatal(err)
		}
		exact := exactGaussianEpsilon(1, delta)
		if e < exact || e > exact+0.01 {
			t.Errorf("delta=%g: eps %.9f, exact %.9f", delta, e, exact)
		}
		if d := mustDelta(t, c, e); d > delta*(1+1e-9) {
			t.Errorf("delta=%g: Delta(Epsilon) = %g", delta, d)
		}
		if d := mustDelta(t, c, e-1e-6); d <= delta {
			t.Errorf("delta=%g: Delta(Epsilon-1e-6) = %g, want > delta", delta, d)
		}
	}
	// Large delta: eps = 0. Delta below the infinity mass: +Inf.
	if e, _ := c.Epsilon(1); e != 0 {
		t.Errorf("Epsilon(1) = %v, want 0", e)
	}
	if e, _ := c.Epsilon(0); !math.IsInf(e, 1) {
		t.Errorf("Epsilon(0) = %v, want +Inf", e)
	}
}

// TestMonotoneInRounds: composing one more round never lowers delta.
func TestMonotoneInRounds(t *testing.T) {
	for _, m := range methods {
		g, err := Gaussian(3, 1, Options{Width: 2e-3, Method: m})
		if err != nil {
			t.Fatal(err)
		}
		rr, err := randomizedResponse(0.7, 3, Options{Width: 2e-3, Method: m})
		if err != nil {
			t.Fatal(err)
		}
		for _, base := range []*PLD{g, rr} {
			cur := base
			prev := make([]float64, 4)
			for k := 1; k <= 12; k++ {
				for i, eps := range []float64{0, 0.5, 1.5, 3} {
					d := mustDelta(t, cur, eps)
					if d < prev[i] {
						t.Errorf("%v k=%d eps=%v: delta %.12g < previous %.12g", m, k, eps, d, prev[i])
					}
					prev[i] = d
				}
				next, err := cur.Compose(base)
				if err != nil {
					t.Fatal(err)
				}
				cur = next
			}
			// SelfCompose(12) agrees with 12 sequential compositions
			// up to truncation and round-off.
			sq, err := base.SelfCompose(12)
			if err != nil {
				t.Fatal(err)
			}
			seq, err := base.SelfCompose(11)
			if err != nil {
				t.Fatal(err)
			}
			if seq, err = seq.Compose(base); err != nil {
				t.Fatal(err)
			}
			for _, eps := range []float64{0.5, 2} {
				a, b := mustDelta(t, sq, eps), mustDelta(t, seq, eps)
				if math.Abs(a-b) > 1e-10 {
					t.Errorf("%v eps=%v: squaring %.12g vs sequential %.12g", m, eps, a, b)
				}
			}
		}
	}
}

// TestTruncationAccounted: with a large tail mass the truncated upper tail
// is counted in the infinity mass, delta stays above the exact value and
// the total mass (finite + infinite) is conserved.
func TestTruncationAccounted(t *testing.T) {
	for _, m := range methods {
		g, err := Gaussian(2, 1, Options{Width: 1e-3, Method: m, TailMass: 1e-6})
		if err != nil {
			t.Fatal(err)
		}
		c, err := g.SelfCompose(16)
		if err != nil {
			t.Fatal(err)
		}
		st := c.Stats()
		if st.TruncatedMass <= 1e-7 || st.TruncatedMass > 1e-6*40 {
			t.Errorf("%v: truncated mass %g, want in (1e-7, 4e-5]", m, st.TruncatedMass)
		}
		if st.InfinityMass < st.TruncatedMass {
			t.Errorf("%v: infinity mass %g below truncated %g", m, st.InfinityMass, st.TruncatedMass)
		}
		total := c.remove.inf + sum(c.remove.probs)
		if math.Abs(total-1) > 1e-9 {
			t.Errorf("%v: total mass %.15f, want 1", m, total)
		}
		for _, eps := range []float64{1, 3, 6, 20} {
			got := mustDelta(t, c, eps)
			if exact := GaussianDelta(2, eps); got < exact {
				t.Errorf("%v eps=%v: %g below exact %g", m, eps, got, exact)
			}
			if got < st.InfinityMass {
				t.Errorf("%v eps=%v: %g below infinity mass %g", m, eps, got, st.InfinityMass)
			}
		}
	}
}

// TestTruncate checks the truncation rule directly: lower tail onto the
// lowest kept point, upper tail to infinity, mass conserved.
func TestTruncate(t *testing.T) {
	d := &dist{offset: -3, probs: []float64{1e-9, 2e-9, 0.5, 0.3, 0.2 - 6e-9, 1e-9, 2e-9}}
	d.truncate(3.5e-9)
	want := []float64{0.5 + 3e-9, 0.3, 0.2 - 6e-9}
	if d.offset != -1 || len(d.probs) != 3 {
		t.Fatalf("offset %d probs %v", d.offset, d.probs)
	}
	for i := range want {
		if math.Abs(d.probs[i]-want[i]) > 1e-17 {
			t.Errorf("probs[%d] = %.17g, want %.17g", i, d.probs[i], want[i])
		}
	}
	if math.Abs(d.inf-3e-9) > 1e-20 || math.Abs(d.truncated-3e-9) > 1e-20 {
		t.Errorf("inf %g truncated %g, want 3e-9", d.inf, d.truncated)
	}
}

// TestLaplace: one use matches the closed form from above, and k uses are
// pure (k a)-DP: delta vanishes (up to the accounted floors) above
// k*(a + h).
func TestLaplace(t *testing.T) {
	const a, h = 0.8, 1e-3
	for _, m := range methods {
		l, err := laplace(1/a, 1, Options{Width: h, Method: m})
		if err != nil {
			t.Fatal(err)
		}
		for _, eps := range []float64{-1, 0, 0.2, 0.5, 0.79} {
			got, exact := mustDelta(t, l, eps), laplaceDelta(a, eps)
			upper := laplaceDelta(a, eps-h) + 1e-12
			if got < exact || got > upper {
				t.Errorf("%v eps=%v: %.12g not in [%.12g, %.12g]", m, eps, got, exact, upper)
			}
		}
		c, err := l.SelfCompose(10)
		if err != nil {
			t.Fatal(err)
		}
		st := c.Stats()
		if d := mustDelta(t, c, 10*(a+h)); d > st.InfinityMass+st.ErrorBound+1e-15 || d > 1e-10 {
			t.Errorf("%v: delta(10(a+h)) = %g, want ~0 (floors %+v)", m, d, st)
		}
		// Composition of Laplace is not pure at smaller eps.
		if d := mustDelta(t, c, 5*a); d < 1e-3 {
			t.Errorf("%v: delta(5a) = %g, suspiciously small", m, d)
		}
	}
}

// TestAsymmetricPairBothDirections: for an asymmetric pair the reported
// delta is the max of H(P||Q) and H(Q||P), each exact up to the grid.
func TestAsymmetricPairBothDirections(t *testing.T) {
	p := []float64{0.5, 0.3, 0.2, 0}
	q := []float64{0.1, 0.3, 0.5, 0.1}
	const h = 1e-4
	for _, m := range methods {
		pl, err := fromPair(p, q, Options{Width: h, Method: m})
		if err != nil {
			t.Fatal(err)
		}
		one, err := fromPair(p, q, Options{Width: h, Method: m, BothOrdersDominated: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, eps := range []float64{0, 0.5, 1, 1.7} {
			exact := max(hockeyStick(p, q, eps), hockeyStick(q, p, eps))
			shifted := max(hockeyStick(p, q, eps-h), hockeyStick(q, p, eps-h)) + 1e-12
			got := mustDelta(t, pl, eps)
			if got < exact || got > shifted {
				t.Errorf("%v eps=%v: %.12g not in [%.12g, %.12g]", m, eps, got, exact, shifted)
			}
			gotOne := mustDelta(t, one, eps)
			if e1 := hockeyStick(p, q, eps); gotOne < e1 || gotOne > hockeyStick(p, q, eps-h)+1e-12 {
				t.Errorf("%v eps=%v one direction: %.12g vs exact %.12g", m, eps, gotOne, e1)
			}
		}
		// Infinite loss (P > 0 = Q) is a floor of the add direction:
		// Q has mass 0.1 where P has none.
		if d := mustDelta(t, pl, 50); d < 0.1 {
			t.Errorf("%v: delta(50) = %g, want >= infinite-loss mass 0.1", m, d)
		}
	}
}

// TestSubsampledPairExact: Poisson subsampling of binary RR (rate 0.3),
// composed 3 times, against brute-force enumeration of the product pairs
// for the remove pair (rate P + (1-rate) Q, Q) and its swap.
func TestSubsampledPairExact(t *testing.T) {
	const eps0, rate, h, rounds = 2.0, 0.3, 1e-4, 3
	p1 := []float64{math.Exp(eps0) / (1 + math.Exp(eps0)), 1 / (1 + math.Exp(eps0))}
	q1 := []float64{p1[1], p1[0]}
	mix, err := subsample(p1, q1, rate)
	if err != nil {
		t.Fatal(err)
	}
	mp, mq := []float64{1}, []float64{1}
	for range rounds {
		var np, nq []float64
		for i := range mp {
			for j := range mix {
				np = append(np, mp[i]*mix[j])
				nq = append(nq, mq[i]*q1[j])
			}
		}
		mp, mq = np, nq
	}
	for _, m := range methods {
		pl, err := fromPair(mix, q1, Options{Width: h, Method: m})
		if err != nil {
			t.Fatal(err)
		}
		c, err := pl.SelfCompose(rounds)
		if err != nil {
			t.Fatal(err)
		}
		for _, eps := range []float64{0, 0.3, 1, 2} {
			exact := max(hockeyStick(mp, mq, eps), hockeyStick(mq, mp, eps))
			shifted := max(hockeyStick(mp, mq, eps-rounds*h), hockeyStick(mq, mp, eps-rounds*h)) + 1e-12
			got := mustDelta(t, c, eps)
			if got < exact || got > shifted {
				t.Errorf("%v eps=%v: %.12g not in [%.12g, %.12g]", m, eps, got, exact, shifted)
			}
		}
		// Subsampling amplifies: below the unsampled delta.
		base, err := randomizedResponse(eps0, 2, Options{Width: h, Method: m})
		if err != nil {
			t.Fatal(err)
		}
		if a, b := mustDelta(t, pl, 0.5), mustDelta(t, base, 0.5); a >= b {
			t.Errorf("%v: subsampled delta %g not below %g", m, a, b)
		}
	}
	// Log-domain subsampling agrees.
	lp := []float64{math.Log(p1[0]), math.Log(p1[1])}
	lq := []float64{math.Log(q1[0]), math.Log(q1[1])}
	lm, err := SubsampleLog(lp, lq, rate)
	if err != nil {
		t.Fatal(err)
	}
	for i := range lm {
		if math.Abs(math.Exp(lm[i])-mix[i]) > 1e-15 {
			t.Errorf("SubsampleLog[%d] = %v, want log(%v)", i, lm[i], mix[i])
		}
	}
}

// subsampledGaussianExact returns the exact single-round delta(eps) of the
// Poisson-subsampled Gaussian, max over the remove pair
// (q N(mu,1) + (1-q) N(0,1), N(0,1)) and its swap; with x* the threshold
// of the likelihood ratio,
// remove: q Phi(mu - x*) - (e^eps - 1 + q) Phi(-x*),
// add:    (1 - e^eps (1-q)) Phi(x') - e^eps q Phi(x' - mu).
func subsampledGaussianExact(mu, q, eps float64) float64 {
	x := math.Exp(eps)
	rem := 0.0
	if c := x - 1 + q; c > 0 {
		xs := (math.Log(c/q) + mu*mu/2) / mu
		rem = q*stdNormalCDF(mu-xs) - c*stdNormalCDF(-xs)
	} else {
		rem = 1 - x
	}
	add := 0.0
	if c := 1 - x*(1-q); c > 0 {
		xs := (math.Log(c/(q*x)) + mu*mu/2) / mu
		add = c*stdNormalCDF(xs) - x*q*stdNormalCDF(xs-mu)
	}
	return max(rem, add)
}

func TestSubsampledGaussian(t *testing.T) {
	const sigma, rate, h = 0.8, 0.05, 1e-3
	for _, m := range methods {
		sg, err := subsampledGaussian(sigma, 1, rate, Options{Width: h, Method: m})
		if err != nil {
			t.Fatal(err)
		}
		for _, eps := range []float64{0, 0.05, 0.2, 0.5, 1} {
			got := mustDelta(t, sg, eps)
			exact := subsampledGaussianExact(1/sigma, rate, eps)
			if got < exact {
				t.Errorf("%v eps=%v: %.12g below exact %.12g", m, eps, got, exact)
			}
			// Two discretizations (base and subsampled) at h each.
			if upper := subsampledGaussianExact(1/sigma, rate, eps-2*h) + 1e-9; got > upper {
				t.Errorf("%v eps=%v: %.12g above shifted exact %.12g", m, eps, got, upper)
			}
		}
		full, err := subsampledGaussian(sigma, 1, 1, Options{Width: h, Method: m})
		if err != nil {
			t.Fatal(err)
		}
		if a, b := mustDelta(t, full, 1), GaussianDelta(1/sigma, 1); a < b || a > b*1.01 {
			t.Errorf("%v: rate 1 delta %g, Gaussian %g", m, a, b)
		}
		c, err := sg.SelfCompose(50)
		if err != nil {
			t.Fatal(err)
		}
		if a, b := mustDelta(t, c, 1), mustDelta(t, sg, 1); a < b {
			t.Errorf("%v: 50 rounds delta %g below one round %g", m, a, b)
		}
	}
}

// TestConvolve checks the FFT convolution against the direct sum: linear
// (no wrap-around) and within the stated error bound.
func TestConvolve(t *testing.T) {
	for _, n := range []int{50, 1000, 5000} {
		a := make([]float64, n)
		b := make([]float64, n/2+3)
		for i := range a {
			x := float64(i-n/3) / float64(n/10)
			a[i] = math.Exp(-x * x / 2)
		}
		for i := range b {
			b[i] = 1 / float64(1+i)
		}
		// Mass at the far ends: wrap-around would fold it onto index 0.
		a[n-1], b[len(b)-1] = 0.5, 0.5
		sa, sb := sum(a), sum(b)
		for i := range a {
			a[i] /= sa
		}
		for i := range b {
			b[i] /= sb
		}
		c, bound := convolve(a, b)
		if len(c) != len(a)+len(b)-1 {
			t.Fatalf("n=%d: length %d", n, len(c))
		}
		var l1 float64
		for k := range c {
			exact := 0.0
			for i := max(0, k-len(b)+1); i <= min(k, len(a)-1); i++ {
				exact += a[i] * b[k-i]
			}
			l1 += math.Abs(c[k] - exact)
		}
		if l1 > bound {
			t.Errorf("n=%d: L1 error %g exceeds bound %g", n, l1, bound)
		}
		if bound > 1e-11 {
			t.Errorf("n=%d: bound %g unexpectedly loose", n, bound)
		}
	}
}

func TestValidation(t *testing.T) {
	good := Options{Width: 1e-3}
	bad := []Options{{}, {Width: -1}, {Width: math.NaN()}, {Width: math.Inf(1)}, {Width: 2},
		{Width: 1e-3, Method: 7}, {Width: 1e-3, TailMass: -1}, {Width: 1e-3, TailMass: 0.1}}
	for _, o := range bad {
		if _, err := Gaussian(1, 1, o); err == nil {
			t.Errorf("Gaussian accepted options %+v", o)
		}
	}
	if _, err := Gaussian(0, 1, good); err == nil {
		t.Error("sigma 0 accepted")
	}
	if _, err := Gaussian(1, math.NaN(), good); err == nil {
		t.Error("NaN sensitivity accepted")
	}
	if _, err := laplace(-1, 1, good); err == nil {
		t.Error("negative scale accepted")
	}
	if _, err := randomizedResponse(1, 1, good); err == nil {
		t.Error("k=1 accepted")
	}
	if _, err := subsampledGaussian(1, 1, 0, good); err == nil {
		t.Error("rate 0 accepted")
	}
	if _, err := fromPair([]float64{0.5, 0.5}, []float64{1}, good); err == nil {
		t.Error("length mismatch accepted")
	}
	if _, err := fromPair([]float64{0.5, 0.4}, []float64{0.5, 0.5}, good); err == nil {
		t.Error("P not summing to 1 accepted")
	}
	if _, err := fromPair([]float64{-0.5, 1.5}, []float64{0.5, 0.5}, good); err == nil {
		t.Error("negative probability accepted")
	}
	if _, err := fromPair(nil, nil, good); err == nil {
		t.Error("empty pair accepted")
	}
	if _, err := FromLogPair([]float64{math.NaN()}, []float64{0}, good); err == nil {
		t.Error("NaN log-probability accepted")
	}
	if _, err := subsample([]float64{1}, []float64{1}, 1.5); err == nil {
		t.Error("rate 1.5 accepted")
	}
	g, err := Gaussian(1, 1, good)
	if err != nil {
		t.Fatal(err)
	}
	g2, err := Gaussian(1, 1, Options{Width: 2e-3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Compose(g2); err == nil {
		t.Error("composition across grid widths accepted")
	}
	if _, err := g.Compose(nil); err == nil {
		t.Error("nil composition accepted")
	}
	if _, err := g.SelfCompose(0); err == nil {
		t.Error("k=0 accepted")
	}
	if _, err := g.Delta(math.NaN()); err == nil {
		t.Error("NaN eps accepted")
	}
	for _, d := range []float64{-1, 2, math.NaN()} {
		if _, err := g.Epsilon(d); err == nil {
			t.Errorf("delta %v accepted", d)
		}
	}
	// A grid that would exceed maxBuckets is refused, not allocated.
	if _, err := Gaussian(0.05, 1, Options{Width: 1e-7}); err == nil {
		t.Error("oversized grid accepted")
	}
}
