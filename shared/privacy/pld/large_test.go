package pld

import (
	"math"
	"testing"
)

// rrExactEpsilon inverts rrExactDelta by bisection (to 1e-9 absolute).
func rrExactEpsilon(eps0 float64, k int, delta float64) float64 {
	lo, hi := 0.0, float64(k)*eps0
	if rrExactDelta(eps0, k, 0) <= delta {
		return 0
	}
	for hi-lo > 1e-9 {
		mid := lo + (hi-lo)/2
		if rrExactDelta(eps0, k, mid) > delta {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// TestEpsilonLargeLoss: Epsilon is correct far above the ~709 nats where
// e^eps overflows a float64. k-fold binary randomized response with
// eps0 = 8 reaches composed losses of 1600; at every delta from 1e-12 to
// 0.5 the PLD's eps must be certified against the exact binomial curve
// (exact delta at it <= delta), within the grid bias k*h of the exact eps,
// and non-decreasing in k. Before the log-space inversion this returned
// 709.4 or 0 above ~709 nats.
func TestEpsilonLargeLoss(t *testing.T) {
	const eps0, h = 8.0, 1e-2
	for _, m := range methods {
		rr, err := randomizedResponse(eps0, 2, Options{Width: h, Method: m})
		if err != nil {
			t.Fatal(err)
		}
		prev := map[float64]float64{}
		for _, k := range []int{1, 50, 88, 89, 90, 120, 200} {
			c, err := rr.SelfCompose(k)
			if err != nil {
				t.Fatal(err)
			}
			for _, delta := range []float64{1e-12, 1e-5, 1e-2, 0.5} {
				e, err := c.Epsilon(delta)
				if err != nil {
					t.Fatalf("%v k=%d delta=%g: %v", m, k, delta, err)
				}
				if st := c.Stats(); math.IsInf(e, 1) && st.InfinityMass+st.ErrorBound >= delta {
					continue // no finite eps at this delta: correctly +Inf
				}
				exact := rrExactEpsilon(eps0, k, delta)
				if math.IsNaN(e) || math.IsInf(e, 0) {
					t.Fatalf("%v k=%d delta=%g: eps %v", m, k, delta, e)
				}
				if d := rrExactDelta(eps0, k, e); d > delta*(1+1e-9) {
					t.Errorf("%v k=%d delta=%g: eps %.6f has exact delta %.3g > delta (exact eps %.6f)", m, k, delta, e, d, exact)
				}
				if e > exact+float64(k)*h+1e-6 {
					t.Errorf("%v k=%d delta=%g: eps %.6f above exact %.6f + k*h", m, k, delta, e, exact)
				}
				if e < prev[delta] {
					t.Errorf("%v k=%d delta=%g: eps %.6f below the previous k's %.6f", m, k, delta, e, prev[delta])
				}
				prev[delta] = e
				if d := mustDelta(t, c, e); d > delta*(1+1e-9) {
					t.Errorf("%v k=%d delta=%g: Delta(Epsilon) = %g", m, k, delta, d)
				}
			}
		}
	}
}

// TestGaussianLargeMu: at mu = sensitivity/sigma = 30 (the largest the
// constructor accepts) the Gaussian's grid reaches ~705 nats. Its PLD must still dominate the exact curve
// (Balle-Wang, computed in log space) and give a finite eps close to the
// exact one, alone and over 4 rounds (mu = 60, losses near 1800 nats).
func TestGaussianLargeMu(t *testing.T) {
	for _, m := range methods {
		g, err := Gaussian(1.0/30, 1, Options{Width: 1e-2, Method: m})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []int{1, 4} {
			c, err := g.SelfCompose(k)
			if err != nil {
				t.Fatal(err)
			}
			mu := 30 * math.Sqrt(float64(k))
			for _, eps := range []float64{400, 700, 800, 1500} {
				got, exact := mustDelta(t, c, eps), GaussianDelta(mu, eps)
				if math.IsNaN(exact) || got < exact*(1-1e-9)-1e-300 {
					t.Errorf("%v k=%d eps=%v: PLD delta %.6g below exact %.6g", m, k, eps, got, exact)
				}
			}
			e, err := c.Epsilon(1e-5)
			if err != nil || math.IsNaN(e) || math.IsInf(e, 0) {
				t.Fatalf("%v k=%d: eps %v (%v)", m, k, e, err)
			}
			if d := GaussianDelta(mu, e); d > 1e-5*(1+1e-6) {
				t.Errorf("%v k=%d: eps %v has exact delta %g", m, k, e, d)
			}
			lo := e - float64(k)*1e-2 - 0.5
			if d := GaussianDelta(mu, lo); d <= 1e-5 {
				t.Errorf("%v k=%d: eps %v far above the exact (delta at %v is %g)", m, k, e, lo, d)
			}
		}
	}
}
