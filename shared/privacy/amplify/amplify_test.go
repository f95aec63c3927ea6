package amplify

import (
	"errors"
	"math"
	"testing"
)

var (
	gridEps0 = []float64{0.5, 1, 2, 4, 8}
	gridN    = []int{1000, 10000, 100000}
)

const gridDelta = 1e-6

// closeRel reports |a-b| <= tol*max(|a|,|b|) + abs.
func closeRel(a, b, tol, abs float64) bool {
	return math.Abs(a-b) <= tol*math.Max(math.Abs(a), math.Abs(b))+abs
}

func TestPairsValidateAndMatchMixture(t *testing.T) {
	lap, _ := LaplaceVR(1)
	rgb, _ := RGammaBVR(0.2, 5)
	for _, n := range []int{2, 50, 1000} {
		for _, e0 := range []float64{0.5, 2, 6} {
			f21, _ := FMT21(n, e0)
			f23, _ := FMT23(n, e0)
			vl, _ := NewVariationRatio(n, lap)
			vr, _ := NewVariationRatio(n, rgb)
			for _, m := range []*Mixture{f21, f23, vl, vr} {
				p, err := m.Pair(PairOptions{})
				if err != nil {
					t.Fatalf("%s n=%d: %v", m.Method, n, err)
				}
				if err := p.Validate(); err != nil {
					t.Fatalf("%s n=%d eps0=%v: %v", m.Method, n, e0, err)
				}
				if ml, inf := p.MaxLoss(); ml > m.MaxLoss()+1e-9 || inf != 0 {
					t.Errorf("%s: max loss %v (inf mass %v) above the bound %v", m.Method, ml, inf, m.MaxLoss())
				}
				for _, eps := range []float64{0, 0.05, 0.3, 1, 3} {
					a, b := m.Delta(eps), p.Delta(eps)
					if !closeRel(a, b, 1e-9, 1e-14) {
						t.Errorf("%s n=%d eps0=%v eps=%v: Mixture.Delta %v != Pair.Delta %v", m.Method, n, e0, eps, a, b)
					}
					// Symmetry: the reversed order has the same curve.
					if r := p.Swap().Delta(eps); !closeRel(b, r, 1e-9, 1e-14) {
						t.Errorf("%s: H(P||Q)=%v but H(Q||P)=%v", m.Method, b, r)
					}
				}
			}
		}
	}
}

func TestCoarsenDominates(t *testing.T) {
	p, err := fmt21Pair(500, 2, PairOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.Coarsen(1e-3)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Len() >= p.Len() {
		t.Errorf("coarsening did not merge atoms: %d -> %d", p.Len(), c.Len())
	}
	for _, eps := range []float64{0, 0.01, 0.1, 0.4, 1, 1.9} {
		f, g := p.Delta(eps), c.Delta(eps)
		if g < f-1e-15 {
			t.Errorf("eps=%v: coarse delta %v below exact %v", eps, g, f)
		}
		if g > f+1e-3*f+1e-12 && f > 1e-10 {
			// Losses move by at most 1e-3, so delta(eps) <= exact delta(eps-1e-3).
			if g > p.Delta(eps-1e-3)+1e-15 {
				t.Errorf("eps=%v: coarse delta %v above exact delta at eps-step %v", eps, g, p.Delta(eps-1e-3))
			}
		}
	}
	opt := PairOptions{LossStep: 1e-3}
	c2, err := fmt21Pair(500, 2, opt)
	if err != nil {
		t.Fatal(err)
	}
	if c2.Len() != c.Len() {
		t.Errorf("LossStep option gives %d atoms, Coarsen %d", c2.Len(), c.Len())
	}
}

// Published value: the README of apple/ml-shuffling-amplification (the
// code of FMT'21) reports, for n = 1e5, eps0 = 4, delta = 1e-6, that the
// numerical FMT'21 epsilon lies between 0.1675385583317841 and
// 0.172790550755978 (their bisection brackets with step 100 and 10
// iterations); their closed form (code variant) gives 0.5378. We compute
// the same pair exactly.
func TestPublishedFMT21(t *testing.T) {
	m, err := FMT21(100000, 4)
	if err != nil {
		t.Fatal(err)
	}
	e, err := m.Epsilon(1e-6)
	if err != nil {
		t.Fatal(err)
	}
	if e < 0.1675385583317841 || e > 0.172790550755978 {
		t.Errorf("FMT21 n=1e5 eps0=4: eps = %v outside the published bracket [0.16754, 0.17279]", e)
	}
	cf, err := FMT21ClosedForm(100000, 4, 1e-6)
	if err != nil {
		t.Fatal(err)
	}
	// The paper's statement has the factor (e^eps0-1)/(e^eps0+1); the code
	// uses (1-e^-eps0)/(1+e^{-eps0-eps'}), slightly larger: 0.5378.
	if cf < 0.53 || cf > 0.5378040242374512 {
		t.Errorf("closed form %v, want about 0.534 (paper) <= 0.5378 (code)", cf)
	}
	t.Logf("FMT21 n=1e5 eps0=4 delta=1e-6: numerical %.6f (published bracket [0.16754, 0.17279]), closed form %.4f (code: 0.5378)", e, cf)
}

type epsFunc func(delta float64) (float64, error)

func TestGridOrderingAndFloor(t *testing.T) {
	prev := map[string]map[float64]float64{}
	for _, n := range gridN {
		for i, e0 := range gridEps0 {
			f21, _ := FMT21(n, e0)
			f23, _ := FMT23(n, e0)
			gv, _ := GenericVR(e0)
			vr, err := NewVariationRatio(n, gv)
			if err != nil {
				t.Fatal(err)
			}
			floor, _ := NewRRFloor(n, e0)
			rgb2, _ := RGammaBVR(2/(math.Exp(e0)+1), 2)
			vk2, err := NewVariationRatio(n, rgb2)
			if err != nil {
				t.Fatal(err)
			}
			lap, _ := LaplaceVR(e0)
			vlap, _ := NewVariationRatio(n, lap)
			rgb8, _ := RGammaBVR(8/(math.Exp(e0)+7), 8)
			vk8, _ := NewVariationRatio(n, rgb8)

			get := func(name string, f epsFunc) float64 {
				e, err := f(gridDelta)
				if err != nil {
					t.Fatalf("%s n=%d eps0=%v: %v", name, n, e0, err)
				}
				if e < 0 || e > e0+1e-9 {
					t.Errorf("%s n=%d eps0=%v: eps %v outside [0, eps0]", name, n, e0, e)
				}
				if prev[name] == nil {
					prev[name] = map[float64]float64{}
				}
				// Monotone in n: decreasing (n grows along the outer loop).
				if p, ok := prev[name][e0]; ok && e > p+1e-9 {
					t.Errorf("%s eps0=%v: eps %v at n=%d above %v at the smaller n", name, e0, e, n, p)
				}
				prev[name][e0] = e
				return e
			}
			eFloor := get("rr-floor", floor.Epsilon)
			e23 := get("fmt23", f23.Epsilon)
			e21 := get("fmt21", f21.Epsilon)
			eVR := get("vr-generic", vr.Epsilon)
			eK2 := get("vr-rgb-k2", vk2.Epsilon)
			eLap := get("vr-laplace", vlap.Epsilon)
			eK8 := get("vr-rgb-k8", vk8.Epsilon)
			if eFloor > e23+1e-9 {
				t.Errorf("n=%d eps0=%v: FMT23 %v below the shuffled-RR floor %v", n, e0, e23, eFloor)
			}
			if e23 > e21+1e-9 {
				t.Errorf("n=%d eps0=%v: FMT23 %v above FMT21 %v", n, e0, e23, e21)
			}
			if !closeRel(eVR, e23, 1e-8, 1e-10) || !closeRel(eK2, e23, 1e-8, 1e-10) {
				t.Errorf("n=%d eps0=%v: generic VR %v and R_{gamma,b} k=2 %v should equal FMT23 %v", n, e0, eVR, eK2, e23)
			}
			// The randomizer-specific (corrected) variation-ratio pairs are
			// valid (TestVariationRatioAgainstExactShuffles) but not tighter
			// than the generic pair at these settings: their clone
			// probability 2*alpha*p/q is smaller than 2/(e^eps0+1). Only
			// sanity-check them here; k = 2 must coincide with generic.
			_, _ = eLap, eK8
			if cf, err := FMT21ClosedForm(n, e0, gridDelta); err == nil {
				if e21 > cf+1e-9 {
					t.Errorf("n=%d eps0=%v: FMT21 numerical %v above its closed form %v", n, e0, e21, cf)
				}
			} else if !errors.Is(err, ErrInvalidRegime) {
				t.Errorf("closed form: unexpected error %v", err)
			}
			// Monotone in eps0 (increasing) at fixed n.
			if i > 0 {
				f23p, _ := FMT23(n, gridEps0[i-1])
				ep, _ := f23p.Epsilon(gridDelta)
				if ep > e23+1e-9 {
					t.Errorf("n=%d: FMT23 eps %v at eps0=%v above %v at eps0=%v", n, ep, gridEps0[i-1], e23, e0)
				}
			}
			t.Logf("n=%-6d eps0=%-3v floor %.5f  fmt23 %.5f  fmt21 %.5f  laplace %.5f  rgb(k=8) %.5f", n, e0, eFloor, e23, e21, eLap, eK8)
		}
	}
}

func TestRRWorstCase(t *testing.T) {
	for _, n := range []int{10, 40} {
		for _, e0 := range []float64{0.5, 2, 4} {
			ex, err := newRRExact(n, e0)
			if err != nil {
				t.Fatal(err)
			}
			floor, _ := NewRRFloor(n, e0)
			f23, _ := FMT23(n, e0)
			f21, _ := FMT21(n, e0)
			for _, eps := range []float64{0, 0.05, 0.2, 0.5, 1, 2} {
				dx, df := ex.Delta(eps), floor.Delta(eps)
				if df > dx+1e-14 {
					t.Errorf("n=%d eps0=%v eps=%v: floor %v above exact %v", n, e0, eps, df, dx)
				}
				// The generic bounds must cover the true worst case of RR.
				if d := f23.Delta(eps); d < dx-1e-12 {
					t.Errorf("n=%d eps0=%v eps=%v: FMT23 delta %v below exact shuffled RR %v", n, e0, eps, d, dx)
				}
				if d := f21.Delta(eps); d < dx-1e-12 {
					t.Errorf("n=%d eps0=%v eps=%v: FMT21 delta %v below exact shuffled RR %v", n, e0, eps, d, dx)
				}
			}
		}
	}
	// Documented finding: the all-equal composition is not always the
	// worst one at small eps (n = 10, eps0 = 2, eps = 0.05).
	ex, _ := newRRExact(10, 2)
	floor, _ := NewRRFloor(10, 2)
	if ex.Delta(0.05) <= floor.Delta(0.05)*1.01 {
		t.Errorf("expected an intermediate composition to beat all-equal at n=10, eps0=2, eps=0.05")
	}
}

// exactShuffleDelta computes the exact hockey-stick divergence of the
// shuffled histograms of a finite randomizer for one dataset. rand[x][y]
// is Pr[R(x) = y]; others lists the other users' inputs; x0, x1 the two
// values of the differing user.
func exactShuffleDelta(rand [][]float64, others []int, x0, x1 int, eps float64) float64 {
	k := len(rand[0])
	type hist = [8]int
	dist := func(first int) map[hist]float64 {
		cur := map[hist]float64{{}: 1}
		for _, x := range append([]int{first}, others...) {
			next := map[hist]float64{}
			for h, pr := range cur {
				for y := 0; y < k; y++ {
					h2 := h
					h2[y]++
					next[h2] += pr * rand[x][y]
				}
			}
			cur = next
		}
		return cur
	}
	p, q := dist(x0), dist(x1)
	g := math.Exp(eps)
	var d float64
	for h, pv := range p {
		if v := pv - g*q[h]; v > 0 {
			d += v
		}
	}
	return d
}

// The variation-ratio pairs with a neutral component (W00 > 0) are checked
// against the exact shuffled histograms of k-ary RR and of RR with
// participation probability (check-in), for every dataset of n = 5 users.
// The pair exactly as published (neutral report merged into the counts)
// fails this check; we document the counterexample.
func TestVariationRatioAgainstExactShuffles(t *testing.T) {
	const n = 5
	// 3-ary RR at eps0 = 1.5.
	e := math.Exp(1.5)
	k := 3
	krr := make([][]float64, k)
	for x := range krr {
		krr[x] = make([]float64, k)
		for y := range krr[x] {
			krr[x][y] = 1 / (e + float64(k) - 1)
		}
		krr[x][x] = e / (e + float64(k) - 1)
	}
	v, err := RGammaBVR(float64(k)/(e+float64(k)-1), k)
	if err != nil {
		t.Fatal(err)
	}
	checkAll(t, "3-RR", krr, v, n)
	// Binary RR at eps0 = 2 with participation 0.3 (output 2 = absent).
	e2, g := math.Exp(2), 0.3
	ci := [][]float64{
		{g * e2 / (e2 + 1), g / (e2 + 1), 1 - g},
		{g / (e2 + 1), g * e2 / (e2 + 1), 1 - g},
	}
	gv, _ := GenericVR(2)
	vs, err := gv.Subsampled(g)
	if err != nil {
		t.Fatal(err)
	}
	checkAll(t, "check-in RR", ci, vs, n)

	// Counterexample to the merged (published) pair: 3-RR, eps0 = 1.5,
	// others all hold value 0, eps = 1.2.
	m, _ := NewVariationRatio(n, v)
	pub := *m
	pub.merged = true
	exact := exactShuffleDelta(krr, []int{0, 0, 0, 0}, 0, 1, 1.2)
	if !(pub.Delta(1.2) < exact-0.01 && m.Delta(1.2) >= exact) {
		t.Errorf("expected the published merged pair (%v) below the exact %v and the corrected one (%v) above",
			pub.Delta(1.2), exact, m.Delta(1.2))
	}
	t.Logf("3-RR eps0=1.5 n=5 eps=1.2: exact %.4f, published VR pair %.4f, corrected %.4f, generic %.4f",
		exact, pub.Delta(1.2), m.Delta(1.2), func() float64 { g, _ := FMT23(n, 1.5); return g.Delta(1.2) }())
}

func checkAll(t *testing.T, name string, r [][]float64, v VariationRatio, n int) {
	t.Helper()
	m, err := NewVariationRatio(n, v)
	if err != nil {
		t.Fatal(err)
	}
	inputs := len(r)
	// Every multiset of the other n-1 inputs (order is irrelevant).
	var rec func(start int, cur []int)
	worst := map[float64]float64{}
	epsGrid := []float64{0, 0.1, 0.3, 0.7, 1.2}
	rec = func(start int, cur []int) {
		if len(cur) == n-1 {
			for x0 := 0; x0 < inputs; x0++ {
				for x1 := 0; x1 < inputs; x1++ {
					if x0 == x1 {
						continue
					}
					for _, eps := range epsGrid {
						worst[eps] = math.Max(worst[eps], exactShuffleDelta(r, cur, x0, x1, eps))
					}
				}
			}
			return
		}
		for x := start; x < inputs; x++ {
			rec(x, append(cur, x))
		}
	}
	rec(0, nil)
	for _, eps := range epsGrid {
		if d := m.Delta(eps); d < worst[eps]-1e-12 {
			t.Errorf("%s n=%d eps=%v: variation-ratio delta %v below the exact worst case %v", name, n, eps, d, worst[eps])
		}
	}
}

func TestInvalidInputs(t *testing.T) {
	bad := []func() error{
		func() error { _, err := FMT21(0, 1); return err },
		func() error { _, err := FMT21(10, 0); return err },
		func() error { _, err := FMT21(10, math.NaN()); return err },
		func() error { _, err := FMT23(10, math.Inf(1)); return err },
		func() error { _, err := FMT21ClosedForm(1000, 8, 1e-6); return err },
		func() error { _, err := FMT21ClosedForm(1000, 1, 0); return err },
		func() error { _, err := LaplaceVR(-1); return err },
		func() error { _, err := RGammaBVR(1.5, 4); return err },
		func() error { _, err := RGammaBVR(0.5, 1); return err },
		func() error { return VariationRatio{P: 2, Beta: 0.9, Q: 2}.Validate() },
		func() error { return VariationRatio{P: 0.5, Beta: 0.1, Q: 2}.Validate() },
		func() error { _, err := ShuffledRRPair(0, 1); return err },
		func() error { _, err := shuffledRRPairK(10, 10, 1); return err },
		func() error { _, err := newRRExact(5000, 1); return err },
		func() error { m, _ := FMT21(100, 1); _, err := m.Epsilon(0); return err },
		func() error { m, _ := FMT21(100, 1); _, err := m.Epsilon(math.NaN()); return err },
		func() error { _, err := fmt21Pair(100, 1, PairOptions{TailMass: -1}); return err },
		func() error { _, err := fmt21Pair(100000, 1, PairOptions{MaxAtoms: 1000}); return err },
		func() error { p, _ := ShuffledRRPair(10, 1); _, err := p.Coarsen(0); return err },
		func() error { return (&Pair{Relation: ReplaceOne, LogP: []float64{0}, LogQ: []float64{-1}}).Validate() },
	}
	for i, f := range bad {
		if err := f(); err == nil {
			t.Errorf("case %d: expected an error", i)
		}
	}
	if !errors.Is((&Pair{}).Validate(), ErrInvalidPair) {
		t.Error("Validate error does not wrap ErrInvalidPair")
	}
}

// BenchmarkFMT21EpsilonN1e6 times eps(delta = 1e-6) of the exact FMT'21
// numerical bound at n = 1e6, eps0 = 1 (target: < 1 s).
func BenchmarkFMT21EpsilonN1e6(b *testing.B) {
	for i := 0; i < b.N; i++ {
		m, err := FMT21(1000000, 1)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := m.Epsilon(1e-6); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFMT21DeltaN1e6 times one delta(eps) evaluation at n = 1e6.
func BenchmarkFMT21DeltaN1e6(b *testing.B) {
	m, err := FMT21(1000000, 1)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		m.Delta(0.004)
	}
}

// TestMixtureLargeEpsilon: a single shuffle of eps0-LDP reports with
// eps0 = 50 at n = 1 is no better than the randomizer itself; above
// eps = 36.7 nats, where 1 + e^eps rounds to e^eps, the threshold of the
// pair once dropped the top atom and gave eps = 36.8 < the exact
// randomized-response floor.
func TestMixtureLargeEpsilon(t *testing.T) {
	for _, n := range []int{1, 10, 1000} {
		for _, eps0 := range []float64{38, 50} {
			m, err := FMT21(n, eps0)
			if err != nil {
				t.Fatal(err)
			}
			f, err := NewRRFloor(n, eps0)
			if err != nil {
				t.Fatal(err)
			}
			for _, delta := range []float64{1e-12, 1e-5, 0.1} {
				e, err := m.Epsilon(delta)
				if err != nil {
					t.Fatal(err)
				}
				lo, err := f.Epsilon(delta)
				if err != nil {
					t.Fatal(err)
				}
				if e < lo*(1-1e-9) {
					t.Errorf("n=%d eps0=%v delta=%g: pair eps %v below the RR floor %v", n, eps0, delta, e, lo)
				}
			}
		}
	}
}
