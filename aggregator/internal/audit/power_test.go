package audit

import (
	"math"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/privacy"
)

// TestGDPEpsilon: gdpEpsilon inverts gdpDelta, and the ledger's RDP
// charge for a Gaussian-noise release is never below the exact ε of the
// continuous Gaussian with the same noise multiplier (the RDP route is an
// upper bound on it), and within 15% of it at these settings.
func TestGDPEpsilon(t *testing.T) {
	for _, mu := range []float64{0.2, 0.5, 1, 2, 4} {
		for _, delta := range []float64{1e-3, 1e-5, 1e-7} {
			e := gdpEpsilon(mu, delta)
			if d := gdpDelta(mu, e); math.Abs(d-delta) > 1e-6*delta {
				t.Errorf("mu %v delta %v: eps %v gives delta %v", mu, delta, e, d)
			}
		}
	}
	for _, sigma := range []float64{1000, 2670, 5000} {
		const sens = 515.76
		charged, err := privacy.SecAggReplaceOneEpsilon(sigma, sens, 1, 1, 1e-5)
		if err != nil {
			t.Fatal(err)
		}
		exact := gdpEpsilon(2*sens/sigma, 1e-5)
		t.Logf("sigma %v: RDP charge %.4f, exact Gaussian %.4f", sigma, charged, exact)
		if charged < exact || charged > 1.15*exact {
			t.Errorf("sigma %v: charge %v against the exact %v", sigma, charged, exact)
		}
	}
}

// TestDetectableMeansHalfTheTime: at the μ Detectable reports (1,000
// trials, Alpha = 1e-3, charge 1.5) and the threshold it found, 2,000
// simulated runs (TP, FP independent binomials) show a bound above the
// charge in at least half of them (Detectable's guarantee: at least 1/2;
// the test's 0.47 leaves 2.7 standard errors, false failure below 0.4%,
// fixed seed); at a μ 20% smaller, the guaranteed bound is not above the
// charge (Detectable is the smallest). Also: Ceiling is a perfect
// distinguisher's bound, and more trials detect smaller leaks.
func TestDetectableMeansHalfTheTime(t *testing.T) {
	const trials, alpha, delta, charged = 1000, 1e-3, 1e-5, 1.5
	eps, ok := Detectable(trials, alpha, delta, charged)
	if !ok {
		t.Fatal("nothing detectable")
	}
	// Recover μ from ε (gdpEpsilon increases in μ).
	lo, hi := 0.0, 20.0
	for hi-lo > 1e-9 {
		mid := (lo + hi) / 2
		if gdpEpsilon(mid, delta) < eps {
			lo = mid
		} else {
			hi = mid
		}
	}
	mu := hi
	g, thr := bestGuaranteed(mu, trials, alpha, delta, math.Inf(1))
	if !(g > charged) {
		t.Fatalf("at mu %v the guaranteed bound %v is not above %v", mu, g, charged)
	}
	if g2, _ := bestGuaranteed(0.8*mu, trials, alpha, delta, math.Inf(1)); g2 > charged {
		t.Errorf("at 0.8 mu the guaranteed bound %v is already above %v: Detectable is not the smallest", g2, charged)
	}
	src := noise.NewSeeded(4)
	tpLaw := distuv.Binomial{N: trials, P: normalSurvival(thr - mu), Src: randSource{src}}
	fpLaw := distuv.Binomial{N: trials, P: normalSurvival(thr), Src: randSource{src}}
	const runs = 2000
	caught := 0
	for range runs {
		if epsLower(int(tpLaw.Rand()), int(fpLaw.Rand()), trials, alpha, delta) > charged {
			caught++
		}
	}
	t.Logf("detectable eps %.3f (mu %.3f, threshold %.2f): caught in %d of %d simulated runs", eps, mu, thr, caught, runs)
	if float64(caught)/runs < 0.47 {
		t.Errorf("caught in %d of %d runs, want at least half", caught, runs)
	}
	if c := Ceiling(trials, alpha, delta); math.Abs(c-epsLower(trials, 0, trials, alpha, delta)) > 0 || c < charged {
		t.Errorf("ceiling %v", c)
	}
	if e2, _ := Detectable(10*trials, alpha, delta, charged); !(e2 < eps) {
		t.Errorf("10x the trials detects %v, not less than %v", e2, eps)
	}
	if _, ok := Detectable(trials, alpha, delta, Ceiling(trials, alpha, delta)); ok {
		t.Error("a charge at the ceiling reported detectable")
	}
}

// randSource adapts a noise.Source to gonum's rand.Source.
type randSource struct{ s noise.Source }

func (r randSource) Uint64() uint64 { return r.s.Uint64() }
func (r randSource) Seed(uint64)    {}

// TestTrialsToDetect: the trials returned detect a factor-times
// under-charge and half of them do not (the smallest on the grid); a cap
// below what is needed reports false.
func TestTrialsToDetect(t *testing.T) {
	const alpha, delta = 1e-3, 1e-5
	tr, ok := TrialsToDetect(2, 1, alpha, delta, 1<<20)
	if !ok {
		t.Fatal("no trial count up to 2^20 detects a 2x under-charge of 1")
	}
	d, _ := Detectable(tr, alpha, delta, 1)
	d2, ok2 := Detectable(tr/2, alpha, delta, 1)
	t.Logf("2x of a charge of 1: %d trials (detectable %.3f; half of them %.3f)", tr, d, d2)
	if d > 2 || (tr > 500 && ok2 && d2 <= 2) {
		t.Errorf("%d trials: detectable %v, at half %v", tr, d, d2)
	}
	if _, ok := TrialsToDetect(2, 1, alpha, delta, tr/2); ok {
		t.Error("a cap below the need reported enough")
	}
}
