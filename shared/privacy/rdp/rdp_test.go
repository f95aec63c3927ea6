package rdp

import (
	"errors"
	"math"
	"testing"

	"github.com/blanket-fl/blanket/shared/privacy/amplify"
)

// gaussianDelta is the exact delta(eps) of the Gaussian mechanism with
// mu = sens/sigma (Balle and Wang 2018, Theorem 8).
func gaussianDelta(mu, eps float64) float64 {
	phi := func(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }
	return phi(-eps/mu+mu/2) - math.Exp(eps)*phi(-eps/mu-mu/2)
}

func TestConversionsGaussian(t *testing.T) {
	for _, sigma := range []float64{0.8, 2, 5} {
		c, err := GaussianRDP(sigma, 1, DefaultOrders())
		if err != nil {
			t.Fatal(err)
		}
		for _, delta := range []float64{1e-3, 1e-6, 1e-10} {
			em, _, err := MironovEpsilon(c, delta)
			if err != nil {
				t.Fatal(err)
			}
			eb, _, _ := BalleEpsilon(c, delta)
			eo, _, err := OptimalEpsilon(c, delta)
			if err != nil {
				t.Fatal(err)
			}
			if !(eo <= eb+1e-9 && eb <= em+1e-12) {
				t.Errorf("sigma=%v delta=%v: want optimal %v <= Balle %v <= Mironov %v", sigma, delta, eo, eb, em)
			}
			// Every conversion is an upper bound: the exact Gaussian delta at
			// the returned eps must be <= delta.
			if d := gaussianDelta(1/sigma, eo); d > delta*(1+1e-6) {
				t.Errorf("sigma=%v: optimal conversion eps %v has exact delta %v > %v", sigma, eo, d, delta)
			}
			dOpt, err := optimalDelta(c, eo)
			if err != nil {
				t.Fatal(err)
			}
			if dOpt > delta*(1+1e-4) { // golden-section/bisection tolerance
				t.Errorf("sigma=%v: OptimalDelta(%v) = %v inconsistent with OptimalEpsilon at %v", sigma, eo, dOpt, delta)
			}
		}
	}
}

// Check-in Lemma 3 read as a DP-to-RDP conversion is invalid: at delta = 0
// its value (the minimal divergence g) is 0 while eps-RR has positive
// Renyi divergence; pureDPToRDP is exact for RR.
func TestLemma3AndPureDP(t *testing.T) {
	for _, eps := range []float64{0.1, 1, 3} {
		for _, a := range []float64{1.5, 2, 8, 64} {
			g := minBinaryDivergence(0, eps, a)
			r, err := pureDPToRDP(eps, a)
			if err != nil {
				t.Fatal(err)
			}
			if !(g == 0 && r > 0) {
				t.Errorf("eps=%v a=%v: Lemma 3 value %v, RR divergence %v", eps, a, g, r)
			}
			// RR computed directly.
			p := math.Exp(eps) / (1 + math.Exp(eps))
			direct := math.Log(math.Pow(p, a)*math.Pow(1-p, 1-a)+math.Pow(1-p, a)*math.Pow(p, 1-a)) / (a - 1)
			if math.Abs(direct-r) > 1e-10*math.Max(1, r) {
				t.Errorf("PureDPToRDP(%v, %v) = %v, RR direct %v", eps, a, r, direct)
			}
			if r > eps+1e-12 || r > a*eps*eps/2+1e-12 {
				t.Errorf("PureDPToRDP(%v, %v) = %v above min(eps, a eps^2/2)", eps, a, r)
			}
		}
	}
}

func TestPairRDP(t *testing.T) {
	// n = 1: the shuffled RR pair is RR itself.
	p, err := amplify.ShuffledRRPair(1, 1.3)
	if err != nil {
		t.Fatal(err)
	}
	c, err := PairRDP(p, DefaultOrders())
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range c.Orders {
		r, _ := pureDPToRDP(1.3, a)
		if math.Abs(c.Eps[i]-r) > 1e-10*math.Max(1, r) {
			t.Errorf("order %v: pair RDP %v, RR %v", a, c.Eps[i], r)
		}
	}
	// Shuffling more users can only reduce the RDP (FMT'23 pairs).
	prev := math.Inf(1)
	for _, n := range []int{10, 100, 1000} {
		q, err := amplify.FMT23Pair(n, 1, amplify.PairOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c, err := PairRDP(q, []float64{2, 8})
		if err != nil {
			t.Fatal(err)
		}
		if c.Eps[0] > prev {
			t.Errorf("n=%d: RDP %v increased", n, c.Eps[0])
		}
		prev = c.Eps[0]
		// The shuffle pair's RDP is at most the local one.
		if r, _ := pureDPToRDP(1, 8); c.Eps[1] > r {
			t.Errorf("n=%d: order-8 RDP %v above the local %v", n, c.Eps[1], r)
		}
	}
}

func TestSubsampling(t *testing.T) {
	orders := IntegerOrders(40)
	for _, q := range []float64{0.001, 0.05, 0.3} {
		exact, err := SampledGaussianRDP(q, 1.5, 1, orders)
		if err != nil {
			t.Fatal(err)
		}
		base := func(j int) (float64, error) { return float64(j) / (2 * 1.5 * 1.5), nil }
		zw, err := PoissonSubsampled(q, base, orders)
		if err != nil {
			t.Fatal(err)
		}
		for i := range orders {
			if zw.Eps[i] < exact.Eps[i]*(1-1e-9) {
				t.Errorf("q=%v order %v: Zhu-Wang upper bound %v below the exact sampled Gaussian %v", q, orders[i], zw.Eps[i], exact.Eps[i])
			}
			if full := base; exact.Eps[i] > func() float64 { v, _ := full(int(orders[i])); return v }()+1e-12 {
				t.Errorf("subsampling increased the RDP at order %v", orders[i])
			}
		}
	}
	// Rate 1 returns the base; rate 0 returns 0.
	base := func(j int) (float64, error) { return 0.1 * float64(j), nil }
	c1, _ := PoissonSubsampled(1, base, []float64{5})
	c0, _ := PoissonSubsampled(0, base, []float64{5})
	w0, _ := wbkSubsampled(0, base, math.Inf(1), []float64{5})
	if c1.Eps[0] != 0.5 || c0.Eps[0] != 0 || w0.Eps[0] != 0 {
		t.Errorf("edge rates: %v %v %v", c1.Eps[0], c0.Eps[0], w0.Eps[0])
	}
	// WBK with a pure-DP base must cover a real subsampled mechanism: M(S)
	// = e-RR of the indicator "value v occurs in S" (e-DP under
	// replace-one when only the replaced record can hold v). Subsampled at
	// rate g: P = g RR(1) + (1-g) RR(0) on D, Q = RR(0) on D'; check both
	// orders.
	g, e := 0.1, 1.0
	pe := math.Exp(e) / (1 + math.Exp(e))
	w, err := wbkSubsampled(g, func(j int) (float64, error) { return pureDPToRDP(e, float64(j)) }, e, IntegerOrders(20))
	if err != nil {
		t.Fatal(err)
	}
	P := []float64{g*pe + (1-g)*(1-pe), g*(1-pe) + (1-g)*pe} // Pr[output 1], Pr[output 0]
	Q := []float64{1 - pe, pe}
	renyi := func(p, q []float64, a float64) float64 {
		var s float64
		for i := range p {
			s += math.Pow(p[i], a) * math.Pow(q[i], 1-a)
		}
		return math.Log(s) / (a - 1)
	}
	for i, a := range w.Orders {
		ex := math.Max(renyi(P, Q, a), renyi(Q, P, a))
		if w.Eps[i] < ex*(1-1e-9) {
			t.Errorf("order %v: WBK %v below the exact witness %v", a, w.Eps[i], ex)
		}
	}
}

// The check-in paper's LDP-SGD claim (Section 5.2): eps0 = 2, n = 60,000,
// check-in rate 0.1, about 6,800 rounds; "eps ~ 1 with our RDP approach,
// ~3 with strong composition". The paper states no delta for this
// experiment; we use delta = 1e-5.
//
// What we get (documented, asserted loosely):
//   - Theorem 2 (Eq. 7) with the e^{eps0} reading of Lemma 4: eps ~ 17.5;
//     literally as printed (2 eps0, 8 eps0, which makes l~ larger): ~ 8.3. Its higher-order
//     terms j Gamma(j/2) (2(e^{2 eps0}-1)^2/e^{2 eps0})^{j/2} grow so fast
//     that the best order is 2-3. We cannot reproduce "eps ~ 1" from Eq. 7.
//   - Theorem 3 (lower bound, Eq. 8) composed and converted the same way:
//     eps ~ 0.81.
//   - Tight per-round pair (checkInPair: exact RDP of the corrected
//     variation-ratio pair), composed in RDP: eps ~ 5.0 (the per-round RDP
//     is ~8.1e-5 * alpha at small orders, vs 3.1e-6 * alpha for Eq. 8 and
//     1.1e-3 at order 2 for Eq. 7).
//   - Approach 1 / Approach 2 with the exact FMT'23 shuffle at each k and
//     valid approximate-RDP conversions: eps ~ 10.9 / 10.5 (delta 5.7e-6
//     of slack + 5e-6 conversion).
func TestCheckInClaim(t *testing.T) {
	n, g, e0, T, delta := 60000, 0.1, 2.0, 6800, 1e-5
	orders := IntegerOrders(64)
	eps := func(c Curve) float64 {
		ct, err := c.Scale(T)
		if err != nil {
			t.Fatal(err)
		}
		e, _, err := BalleEpsilon(ct, delta)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	up, err := Theorem2Curve(n, g, e0, orders, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	lo, err := theorem3Curve(n, g, e0, orders, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	lit, err := fromFunc(orders, func(a float64) (float64, error) { return theorem2(n, g, e0, int(a), 0.5, true) })
	if err != nil {
		t.Fatal(err)
	}
	tight, err := TightCheckIn(n, g, e0, orders)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range orders {
		if up.Eps[i] < lo.Eps[i] || tight.Eps[i] < lo.Eps[i] {
			t.Errorf("order %v: upper bounds (Eq. 7 %v, tight %v) below the lower bound %v", a, up.Eps[i], tight.Eps[i], lo.Eps[i])
		}
	}
	eUp, eLit, eLo, eTight := eps(up), eps(lit), eps(lo), eps(tight)
	tT, _ := tight.Scale(T)
	eTightOpt, _, err := OptimalEpsilon(tT, delta)
	if err != nil {
		t.Fatal(err)
	}
	if !(eLo < eTight && eTight < eUp && eTightOpt <= eTight+1e-9) {
		t.Errorf("want lower %v < tight %v < Eq. 7 %v and optimal conversion %v <= Balle", eLo, eTight, eUp, eTightOpt)
	}
	if eUp < 3 {
		t.Errorf("Eq. 7 now gives %v: the documented non-reproduction of the paper's eps ~ 1 no longer holds; update the comment", eUp)
	}
	sh, err := pureShuffleDP(e0, 1e-9)
	if err != nil {
		t.Fatal(err)
	}
	a1, err := approach1(n, g, orders, sh)
	if err != nil {
		t.Fatal(err)
	}
	a2, err := Approach2(n, g, orders, sh)
	if err != nil {
		t.Fatal(err)
	}
	a1T, _ := a1.ScaleApprox(T)
	a2T, _ := a2.ScaleApprox(T)
	e1, d1, err := a1T.Epsilon(delta / 2)
	if err != nil {
		t.Fatal(err)
	}
	e2, d2, _ := a2T.Epsilon(delta / 2)
	if d1 > delta || d2 > delta {
		t.Errorf("approach slack too large: %v %v", d1, d2)
	}
	t.Logf("check-in eps0=2 n=60000 gamma=0.1 T=6800 delta=1e-5: Eq.7 (e^eps0 reading) %.3f, Eq.7 literal %.3f, Eq.8 lower %.3f, tight pair %.3f (optimal conversion %.3f), Approach1 %.3f (delta %.2g), Approach2 %.3f (delta %.2g); paper: ~1 (RDP) vs ~3 (strong composition)",
		eUp, eLit, eLo, eTight, eTightOpt, e1, d1, e2, d2)
}

// Federated DP-SGD style: a Gaussian local randomizer is (eps0, delta0)-LDP
// (delta0 = 1/n^1.5 as in the paper's Appendix B); without a verified
// shuffle theorem for approximate LDP we can always use the
// no-amplification guarantee, which Approaches 1 and 2 then subsample and
// mix over k.
func TestApproachesGaussianNoAmplification(t *testing.T) {
	n, g, e0 := 10000, 0.01, 2.0
	d0 := 1 / math.Pow(float64(n), 1.5)
	sh, err := noAmplificationDP(e0, d0)
	if err != nil {
		t.Fatal(err)
	}
	a1, err := approach1(n, g, IntegerOrders(32), sh)
	if err != nil {
		t.Fatal(err)
	}
	a2, err := Approach2(n, g, IntegerOrders(32), sh)
	if err != nil {
		t.Fatal(err)
	}
	// Slack: each round's is E[k/n] delta0 = g delta0 (plus 1e-15 tails).
	for _, a := range []ApproxCurve{a1, a2} {
		if math.Abs(a.Delta-g*d0) > 1e-14 {
			t.Errorf("slack %v, want %v", a.Delta, g*d0)
		}
	}
	// One round of Approach 2 must be no better than plain subsampling
	// amplification at rate g (the mixture over k averages rates k/n).
	r, _ := pureDPToRDP(math.Log1p(g*math.Expm1(e0)), 2)
	if a2.Eps[0] < r*0.9 {
		t.Errorf("Approach 2 order-2 RDP %v implausibly below the rate-g value %v", a2.Eps[0], r)
	}
	fm, err := FMT21ApproxShuffleDP(e0, d0, 1e-8)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Approach2(n, g, IntegerOrders(32), fm); err != nil {
		t.Fatal(err)
	}
}

func TestComposeAndApprox(t *testing.T) {
	c, _ := GaussianRDP(3, 1, []float64{2, 4})
	s, err := compose(c, c, c)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := c.Scale(3)
	if s.Eps[1] != k.Eps[1] || math.Abs(s.Eps[0]-3*c.Eps[0]) > 1e-15 {
		t.Errorf("compose %v vs scale %v", s.Eps, k.Eps)
	}
	a, err := approxDPToRDP(1, 1e-6, []float64{2, 4})
	if err != nil {
		t.Fatal(err)
	}
	a3, _ := a.ScaleApprox(3)
	b, _ := ComposeApprox(a, a, a)
	if math.Abs(a3.Delta-b.Delta) > 1e-15 || math.Abs(a3.Delta-3e-6) > 1e-11 {
		t.Errorf("approx delta %v %v", a3.Delta, b.Delta)
	}
	if _, err := compose(c, Curve{Orders: []float64{2, 5}, Eps: []float64{0, 0}}); err == nil {
		t.Error("composing different orders should fail")
	}
}

func TestInvalidInputs(t *testing.T) {
	good, _ := GaussianRDP(1, 1, []float64{2})
	bad := []func() error{
		func() error { _, err := GaussianRDP(0, 1, []float64{2}); return err },
		func() error { _, err := GaussianRDP(1, 1, []float64{1}); return err },
		func() error { _, err := GaussianRDP(1, 1, []float64{3, 2}); return err },
		func() error { _, _, err := BalleEpsilon(good, 0); return err },
		func() error { _, _, err := OptimalEpsilon(good, math.NaN()); return err },
		func() error { _, err := optimalDelta(good, -1); return err },
		func() error { _, err := pureDPToRDP(-1, 2); return err },
		func() error { _, err := SampledGaussianRDP(0.1, 1, 1, []float64{2.5}); return err },
		func() error { _, err := PoissonSubsampled(1.5, nil, []float64{2}); return err },
		func() error { _, err := theorem2Bound(0, 0.1, 1, 2, 0.5); return err },
		func() error { _, err := theorem2Bound(100, 0.1, 1, 1, 0.5); return err },
		func() error { _, err := theorem2Bound(100, 0.001, 1, 2, 0.5); return err },
		func() error { _, err := theorem3(100, 0, 1, 2, 0.5); return err },
		func() error { _, err := theorem3(100, 0.1, 1, 2, 0); return err },
		func() error { _, err := theorem1(10, 0.5, 1, nil, 0); return err },
		func() error { _, err := TightCheckIn(100, 0.1, math.Inf(1), []float64{2}); return err },
		func() error { _, err := pureShuffleDP(1, 1); return err },
		func() error { _, err := approach1(100, 0.1, []float64{2.5}, nil); return err },
		func() error { _, err := approxDPToRDP(1, 1, []float64{2}); return err },
	}
	for i, f := range bad {
		err := f()
		if err == nil {
			t.Errorf("case %d: expected an error", i)
		} else if !errors.Is(err, ErrInvalid) && i != 15 && i != 16 {
			t.Errorf("case %d: error %v does not wrap ErrInvalid", i, err)
		}
	}
}

func BenchmarkTightCheckIn(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if _, err := TightCheckIn(60000, 0.1, 2, IntegerOrders(64)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOptimalEpsilon(b *testing.B) {
	c, _ := GaussianRDP(2, 1, DefaultOrders())
	for i := 0; i < b.N; i++ {
		if _, _, err := OptimalEpsilon(c, 1e-6); err != nil {
			b.Fatal(err)
		}
	}
}
