package audit

import (
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// What a run could have caught.
//
// A lower bound below the charge says nothing unless the run could have
// shown a bound above it had the charge been too small. Two numbers say how
// much it could:
//
//   - Ceiling(trials, alpha, delta): the largest bound any attack can show
//     with these trials, a perfect distinguisher's (every true positive,
//     no false positive): ln((TPR_lo − δ)/FPR_hi) with TP = trials,
//     FP = 0. A charge at or above it cannot be shown too small, whatever
//     the leak: the run is blind.
//   - Detectable(trials, alpha, delta, charged): the smallest true ε (at δ)
//     of a leak shaped like the Gaussian mechanism's that the run would
//     have shown above the charge with probability at least 1/2. The
//     Gaussian shape is μ-GDP (Dong, Roth and Su, "Gaussian differential
//     privacy", JRSS-B 2022): the optimal test of the pair sees the
//     statistic N(0, 1) under one hypothesis and N(μ, 1) under the other,
//     whose ε at δ is gdpEpsilon(μ, δ) (their Corollary 2.13; Balle and
//     Wang, ICML 2018, Theorem 8: exact, no slack). For a threshold t,
//     FP ~ Bin(trials, Φ̄(t)) and TP ~ Bin(trials, Φ̄(t − μ)) are
//     independent; with a the (1 − 1/√2)-quantile of TP and b the
//     1/√2-quantile of FP, P[TP ≥ a and FP ≤ b] ≥ 1/2, and on that event
//     the run's bound is at least epsLower(a, b) (it increases in TP and
//     decreases in FP). Detectable is gdpEpsilon at the smallest μ for
//     which some threshold makes epsLower(a, b) exceed the charge (the
//     threshold is the best one for that μ: an oracle's choice, so the
//     number is what the run could catch at best; an attack that picks its
//     threshold on calibration trials, as Run does, is close to it when
//     the calibration trials are as many as the evaluation ones).
//
// For secure summation the yardstick is exact in shape: the release is a
// (discrete) Gaussian shift, and a mechanism whose servers add σ/k instead
// of the σ charged is μk-GDP. For the shuffle protocols it is a yardstick:
// their privacy loss is not exactly Gaussian-shaped (asymptotically it is,
// for many shuffled messages: Dong et al. 2022, Section 5), and the attacks
// are not all optimal.

// Ceiling is the largest lower bound on ε (at delta) that any attack can
// show with trials per hypothesis, each Clopper-Pearson bound at level
// alpha: a perfect distinguisher's.
func Ceiling(trials int, alpha, delta float64) float64 {
	return epsLower(trials, 0, trials, alpha, delta)
}

// Detectable returns the smallest true ε (at delta) of a Gaussian-shaped
// leak that a run with trials evaluation trials per hypothesis (bounds at
// level alpha each) shows above charged with probability at least 1/2,
// and false when no leak can (charged is at or above the Ceiling). See
// the comment above for the derivation.
func Detectable(trials int, alpha, delta, charged float64) (float64, bool) {
	if trials < 1 || !(charged >= 0) || Ceiling(trials, alpha, delta) <= charged {
		return 0, false
	}
	caught := func(mu float64) bool { b, _ := bestGuaranteed(mu, trials, alpha, delta, charged); return b > charged }
	lo, hi := 0.0, 1.0
	for !caught(hi) {
		lo, hi = hi, 2*hi
		if hi > 64 {
			return 0, false
		}
	}
	for hi-lo > 1e-3*hi {
		mid := (lo + hi) / 2
		if caught(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return gdpEpsilon(hi, delta), true
}

// bestGuaranteed is the largest, over thresholds t on a grid of step 0.05
// in [−2, μ + 9], of guaranteed(μ, t): the bound a μ-GDP pair shows with
// probability at least 1/2 at the best threshold, and that threshold. It
// stops at the first threshold whose bound exceeds stop (+Inf: never).
func bestGuaranteed(mu float64, trials int, alpha, delta, stop float64) (best, thr float64) {
	for i := 0; ; i++ {
		t := -2 + 0.05*float64(i)
		if t > mu+9 {
			return best, thr
		}
		if g := guaranteed(mu, t, trials, alpha, delta); g > best {
			best, thr = g, t
			if best > stop {
				return best, thr
			}
		}
	}
}

// guaranteed is epsLower(a, b) for threshold t (see Detectable).
func guaranteed(mu, t float64, trials int, alpha, delta float64) float64 {
	q := 1 / math.Sqrt2
	fpr := normalSurvival(t)
	tpr := normalSurvival(t - mu)
	a := binomialQuantile(trials, tpr, 1-q) // P[TP >= a] >= q
	if a == 0 {
		return 0
	}
	b := binomialQuantile(trials, fpr, q) // P[FP <= b] >= q
	return epsLower(a, b, trials, alpha, delta)
}

// binomialQuantile returns the smallest k with P[Bin(n, p) <= k] >= u.
// For u = 1 − 1/√2 and the TP count it gives P[TP >= k] >= 1/√2 too,
// since P[TP <= k − 1] < u.
func binomialQuantile(n int, p, u float64) int {
	if p <= 0 {
		return 0
	}
	if p >= 1 {
		return n
	}
	b := distuv.Binomial{N: float64(n), P: p}
	lo, hi := 0, n
	for lo < hi {
		mid := (lo + hi) / 2
		if b.CDF(float64(mid)) >= u {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

func normalSurvival(x float64) float64 { return math.Erfc(x/math.Sqrt2) / 2 }

// gdpDelta is the δ(ε) of μ-GDP: Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)
// (Dong, Roth and Su 2022, Corollary 2.13; Balle and Wang 2018, Theorem 8).
func gdpDelta(mu, eps float64) float64 {
	a := normalSurvival(eps/mu - mu/2)
	b := normalSurvival(eps/mu + mu/2)
	// e^ε Φ̄(x) underflows to 0·∞ for large ε; in log space.
	d := a - math.Exp(eps+math.Log(b))
	if b == 0 {
		d = a
	}
	return max(d, 0)
}

// gdpEpsilon is the smallest ε >= 0 with gdpDelta(mu, ε) <= delta
// (gdpDelta decreases in ε; bisection to 1e-9 relative).
func gdpEpsilon(mu, delta float64) float64 {
	if !(mu > 0) || gdpDelta(mu, 0) <= delta {
		return 0
	}
	lo, hi := 0.0, 1.0
	for gdpDelta(mu, hi) > delta {
		lo, hi = hi, 2*hi
	}
	for hi-lo > 1e-9*hi {
		mid := (lo + hi) / 2
		if gdpDelta(mu, mid) > delta {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// TrialsToDetect returns the smallest trial count on the grid 500·2^i, at
// most maxTrials, with which a run detects (Detectable) every
// Gaussian-shaped leak of true ε at least factor·charged: the trials an
// audit needs to catch a factor-times under-charge at least half the
// time. False when maxTrials do not suffice.
func TrialsToDetect(factor, charged, alpha, delta float64, maxTrials int) (int, bool) {
	for t := 500; t <= maxTrials; t *= 2 {
		if d, ok := Detectable(t, alpha, delta, charged); ok && d <= factor*charged {
			return t, true
		}
	}
	return 0, false
}
