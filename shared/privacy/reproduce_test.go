package privacy

// This file reproduces the printed numbers of FLAME (AAAI 2021) and APES
// (AAAI 2023) and documents exactly which computation produced each. The
// computations that are not valid guarantees (FLAME's pre-correction
// Bennett bound; APES's averaged echo sum with a normal approximation) are
// implemented here, in test code only, never in the package API.
//
// FLAME (numbers in §Evaluations and the repository README of
// github.com/Rachelxuan11/FLAME, get_budget.py):
//
//	printed                         reproduced (pre-correction)   corrected (package API)
//	SS-Simple (0.91, 5e-6)          0.9100562                      0.92781
//	SS-Double/Topk 0.24 (0.237926)  0.2379266                      0.30451
//	shuffling only 20.53 (20.5352544) 20.5352544                   26.0431
//	β = 1/10: 2.348 per epoch       2.348191 (ε_lk = 0.5, n_p = 666) 2.91914
//
// Settings (FLAME code, flearn/counter): Laplace randomizer on [0,1];
// δ_c = 0.01/n^1.1 with n = 1000 users per round (5.01e-6, printed 5e-6);
// SS-Simple: ε_ld = 78.5/7850 = 0.01, δ_cd = δ_c/(d+1), per-dimension ε_cd by
// the Bennett bound over n = 1000 reports, Theorem 1 over d = 7850.
// SS-Double/Topk: β = 1/50, k = 157, ε_lk = 0.5, δ_cd = δ_c/(2k+1),
// δ_ck = δ_cd/β, n_p = ⌊1000/3⌋ = 333, Lemma 4, Theorem 4 over 2k = 314.
// "Shuffling only": the same without Lemma 4, Bennett at δ_cd directly.
// "Per epoch" = per round: MNIST's 6,000 users are split into 6 disjoint
// batches of 1,000 and each user takes part in exactly one round per epoch,
// so an epoch's guarantee for a user is that of its one round. The β = 1/10
// figure does not state n_p. With the paper's stated per-dimension budget
// for SS-Double/Topk, ε_lk = 0.5 (so ε_l = 392.5, k = 785), the only n_p
// printing as 2.348 is 666 = ⌊1000/1.5⌋ (n/n_p = 1.5; the code's mp_rate
// option is a float), giving 2.348191. A search over ε_lk ∈ {0.1, 0.2, 0.25,
// 0.3, 0.4, 0.5, 1} and n_p ∈ [10, 1000] finds other fits only at other
// budgets: ε_lk = 0.4, n_p = 444 (2.348200), and, if 2.348 was rounded
// rather than truncated, ε_lk = 0.2, n_p = 137 (2.347608) and ε_lk = 0.3,
// n_p = 268 (2.347708). (FLAME mixes conventions: 0.2379 is printed
// rounded as 0.24, 20.5352 truncated as 20.53.)
//
// The discrepancy: FLAME copied BBGN's amplification_bounds.py before its
// authors corrected it. The old BennettExact used η = a/b₊ and divided each
// binomial term by m, i.e. it bounded E[(L_1+…+L_m)_+] by
// e^{−mαh(β)}·b₊/(m·a·ln(1+β)) instead of e^{−mαh(β)}·b₊/ln(1+β)
// (correctedTail documents the derivation). The old value is smaller by the
// factor m(e^ε − 1), which is above 1 in all of FLAME's settings, so its δ
// was too small and its ε too optimistic.
//
// APES Table 3 (Uniform2, n = 10,000, δ_s = 1e-8), from the authors' code
// (github.com/yixuanLL/EoN, Hiding/applifytheory.py and
// computeamplification*.py):
//
//	printed  reproduced   computation
//	UniS 0.069  0.069666  FMT'22 numerical algorithm (Apple's
//	                      computeamplification.py) at ε* = max ε_i,
//	                      10 bisection steps from its closed form, step 100
//	APES 0.057  0.057494  the same algorithm with the clone count C replaced
//	                      by a normal approximation N(μ − ½, σ²) of the
//	                      averaged echo count μ = Σ_{i≠1}Σ_j p_ij/n (Lemma 6)
//
// Both printed values are truncated, not rounded, to three decimals (as are
// the user-level ε^uc below). Neither is a closed form: Theorem 4 as
// printed gives 0.2051 and eq. (2) gives 0.2408. The APES figure is not a
// valid guarantee (the averaged echo sum is unjustified, see eonBound, and a
// normal approximation is not an upper bound); the package's corrected
// closed forms give 0.2635 (Lemma 4 divergence) and 0.2128 (exact
// divergence).

import (
	"math"
	"sort"
	"testing"

	"github.com/blanket-fl/blanket/shared/noise"
)

// preCorrectionTail is the Bennett tail of BBGN's amplification_bounds.py
// before the 2020 correction, as vendored in FLAME's flearn/counter:
// η = a/b₊ and an extra division by m. NOT a valid bound.
func preCorrectionTail(m float64, c bennettCoef) float64 {
	eta := c.a / c.b
	return math.Exp(-m*c.alpha*bennettH(c.beta)) / (m * eta * math.Log1p(c.beta))
}

// preCorrectionLaplace is an Amplifier using the pre-correction tail, so
// that the package's own FLAME pipelines (SSSimple, SSDouble) reproduce
// FLAME's code step for step.
type preCorrectionLaplace struct{}

func (preCorrectionLaplace) Name() string { return "pre-correction Bennett (Laplace)" }
func (preCorrectionLaplace) Citation() string {
	return "FLAME code, BBGN'19 before the 2020 correction"
}
func (preCorrectionLaplace) Epsilon(eps0 float64, n int, delta float64) (float64, error) {
	return bennettSearch(LaplaceMechanism(), eps0, n, delta, preCorrectionTail), nil
}

// flameDeltaC is FLAME's δ_c = 0.01/n^1.1 (baseCounter.py).
func flameDeltaC(n int) float64 { return 0.01 / math.Pow(float64(n), 1.1) }

// truncatedTo reports whether x printed truncated to the given number of
// decimals reads as printed, i.e. printed <= x < printed + 10^-decimals.
func truncatedTo(x, printed float64, decimals int) bool {
	ulp := math.Pow(10, -float64(decimals))
	return x >= printed-1e-12 && x < printed+ulp
}

type flameCase struct {
	name        string
	cfg         FLAMEConfig
	shuffleOnly bool
	// printed value and how it must be matched
	check     func(float64) bool
	printed   string
	corrected float64 // this package's corrected value, pinned to 1e-4
}

func flameCases() []flameCase {
	dc := flameDeltaC(1000)
	return []flameCase{
		{
			name:    "SS-Simple",
			cfg:     FLAMEConfig{EpsLocal: 78.5, D: 7850, K: 7850, N: 1000, DeltaC: dc},
			check:   func(x float64) bool { return math.Abs(x-0.91) <= 0.005 }, // printed "0.91"
			printed: "0.91", corrected: 0.92781,
		},
		{
			name: "SS-Double/Topk beta=1/50",
			cfg:  FLAMEConfig{EpsLocal: 78.5, D: 7850, K: 157, N: 1000, NPad: 333, DeltaC: dc},
			// printed "0.24"; README: --epsilon=0.237926 (6 decimals, truncated)
			check:   func(x float64) bool { return math.Abs(x-0.24) <= 0.005 && truncatedTo(x, 0.237926, 6) },
			printed: "0.24 / 0.237926", corrected: 0.30451,
		},
		{
			name:        "SS-Topk shuffling only",
			cfg:         FLAMEConfig{EpsLocal: 78.5, D: 7850, K: 157, N: 1000, NPad: 333, DeltaC: dc},
			shuffleOnly: true,
			// printed "20.53" (truncated: 20.5352…); README: --epsilon=20.5352544
			check:   func(x float64) bool { return truncatedTo(x, 20.53, 2) && math.Abs(x-20.5352544) < 1e-7 },
			printed: "20.53 / 20.5352544", corrected: 26.0431,
		},
		{
			name:    "SS-Topk beta=1/10 per epoch",
			cfg:     FLAMEConfig{EpsLocal: 392.5, D: 7850, K: 785, N: 1000, NPad: 666, DeltaC: dc},
			check:   func(x float64) bool { return math.Abs(x-2.348) <= 0.0005 }, // printed "2.348"
			printed: "2.348", corrected: 2.91914,
		},
	}
}

func runFLAME(t *testing.T, c flameCase, amp Amplifier) Bound {
	t.Helper()
	var b Bound
	var err error
	switch {
	case c.cfg.K == c.cfg.D:
		b, err = SSSimple(c.cfg, amp)
	case c.shuffleOnly:
		b, err = SSDoubleShuffleOnly(c.cfg, amp)
	default:
		b, err = SSDouble(c.cfg, amp)
	}
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	return b
}

func TestReproduceFLAMEPrintedNumbers(t *testing.T) {
	for _, c := range flameCases() {
		t.Run(c.name, func(t *testing.T) {
			old := runFLAME(t, c, preCorrectionLaplace{})
			if !c.check(old.Epsilon) {
				t.Errorf("pre-correction epsilon = %.10g, want printed %s", old.Epsilon, c.printed)
			}
			// δ_c printed as 5e-6 (one significant digit).
			if math.Abs(old.Delta-5e-6) > 0.5e-6 {
				t.Errorf("delta = %g, want printed 5e-6", old.Delta)
			}
			fixed := runFLAME(t, c, BennettAmplifier{Mech: LaplaceMechanism()})
			if math.Abs(fixed.Epsilon-c.corrected) > 1e-4 {
				t.Errorf("corrected epsilon = %.6f, want %.5f", fixed.Epsilon, c.corrected)
			}
			// In every FLAME setting m(e^ε − 1) > 1, so the correction
			// raises δ at each ε and hence the smallest admissible ε.
			if !(fixed.Epsilon > old.Epsilon) {
				t.Errorf("corrected %.6f <= pre-correction %.6f", fixed.Epsilon, old.Epsilon)
			}
			if fixed.Delta != old.Delta {
				t.Errorf("delta differs: %g vs %g", fixed.Delta, old.Delta)
			}
			t.Logf("%s: printed %s, pre-correction %.10g, corrected %.6f, delta %.4g", c.name, c.printed, old.Epsilon, fixed.Epsilon, fixed.Delta)
		})
	}
}

// TestFLAMEBetaTenthNPadIsUnique documents the search that found n_p = 666:
// its neighbours do not print as 2.348.
func TestFLAMEBetaTenthNPadIsUnique(t *testing.T) {
	for _, np := range []int{665, 667} {
		c := flameCases()[3]
		c.cfg.NPad = np
		if b := runFLAME(t, c, preCorrectionLaplace{}); math.Abs(b.Epsilon-2.348) <= 0.0005 {
			t.Errorf("n_p = %d also gives %.6f", np, b.Epsilon)
		}
	}
}

// ---- APES Table 3 ----

// logBinomPMF returns log P[Bin(n,p) = k].
func logBinomPMF(k, n int, logp, log1p float64) float64 {
	a, _ := math.Lgamma(float64(n) + 1)
	b, _ := math.Lgamma(float64(k) + 1)
	c, _ := math.Lgamma(float64(n-k) + 1)
	return a - b - c + float64(k)*logp + float64(n-k)*log1p
}

// binomCDF is P[Bin(n,p) ≤ ⌊x⌋] (scipy.stats.binom.cdf), summed from the
// nearer tail until the terms are negligible.
func binomCDF(x float64, n int, p float64) float64 {
	k := int(math.Floor(x))
	if k < 0 {
		return 0
	}
	if k >= n {
		return 1
	}
	lp, l1p := math.Log(p), math.Log1p(-p)
	s := 0.0
	if float64(k) < float64(n)*p {
		for j := k; j >= 0; j-- {
			term := math.Exp(logBinomPMF(j, n, lp, l1p))
			s += term
			if term < 1e-18*s {
				break
			}
		}
		return s
	}
	for j := k + 1; j <= n; j++ {
		term := math.Exp(logBinomPMF(j, n, lp, l1p))
		s += term
		if term < 1e-18*s {
			break
		}
	}
	return 1 - s
}

// hidingOneStep is onestep() of computeamplification.py: the hockey-stick
// divergence, conditioned on c clones, between the FMT'22 pair
// P = αBin(c,½) + (1−α)(Bin(c,½)+1) and Q (roles swapped), α = e^{ε0}/(e^{ε0}+1).
func hidingOneStep(c int, eps, eps0 float64, pMinusQ bool) float64 {
	alpha := math.Exp(eps0) / (math.Exp(eps0) + 1)
	effeps := math.Log(((math.Exp(eps)+1)*alpha - 1) / ((1+math.Exp(eps))*alpha - math.Exp(eps)))
	beta := 1 / (math.Exp(-effeps) + 1)
	if pMinusQ {
		beta = 1 / (math.Exp(effeps) + 1)
	}
	cutoff := beta * float64(c+1)
	pc := alpha*binomCDF(cutoff, c, 0.5) + (1-alpha)*binomCDF(cutoff-1, c, 0.5)
	qc := (1-alpha)*binomCDF(cutoff, c, 0.5) + alpha*binomCDF(cutoff-1, c, 0.5)
	if pMinusQ {
		return pc - math.Exp(eps)*qc
	}
	return (1 - qc) - math.Exp(eps)*(1-pc)
}

// hidingDeltaComp is deltacomp() of computeamplification.py (and of
// computeamplification_perS.py, which differs only in mass): it walks
// chunks of `step` clone counts outward from the expected count, weighting
// each chunk's endpoint divergences by the chunk's probability mass. The
// q-side maximum repeats the upper endpoint (max(deltaq_upperc,
// deltaq_upperc) in the reference code), reproduced as is.
func hidingDeltaComp(n int, expectation float64, mass func(lo, hi int) float64, eps0, eps, deltaUpper float64, step int) float64 {
	deltaP, deltaQ, probUsed := 0.0, 0.0, 0.0
	chunks := int(math.Ceil(float64(n) / float64(step)))
	for b := 1; b < chunks; b++ {
		for s := 0; s < 2; s++ {
			var upper, lower int
			if s == 0 {
				upper = int(math.Ceil(expectation + float64(b*step)))
				lower = upper - step + 1
				if b == 1 {
					lower = upper - step
				}
				if lower > n-1 {
					continue
				}
				upper = min(upper, n-1)
			} else {
				lower = int(math.Ceil(expectation - float64(b*step)))
				upper = lower + step - 1
				if upper < 0 {
					continue
				}
				lower = max(lower, 0)
			}
			m := mass(lower, upper)
			if math.Max(deltaP, deltaQ) > deltaUpper {
				return deltaUpper
			}
			if 1-probUsed < deltaP && 1-probUsed < deltaQ {
				return math.Max(deltaP+1-probUsed, deltaQ+1-probUsed)
			}
			deltaP += m * math.Max(hidingOneStep(upper, eps, eps0, true), hidingOneStep(lower, eps, eps0, true))
			qu := hidingOneStep(upper, eps, eps0, false)
			deltaQ += m * math.Max(qu, qu)
			probUsed += m
		}
	}
	return math.Max(deltaP, deltaQ)
}

// hidingBisect is binarysearch(): `iters` halvings of [0, upper], returning
// the right end.
func hidingBisect(deltaAt func(float64) float64, delta float64, iters int, upper float64) float64 {
	l, r := 0.0, upper
	for i := 0; i < iters; i++ {
		m := (l + r) / 2
		if deltaAt(m) < delta {
			r = m
		} else {
			l = m
		}
	}
	return r
}

// APES's settings for Table 3 (applifytheory.py).
const (
	apesIters = 10
	apesStep  = 100
)

// fmtNumericUniS is UniS.get_eps: FMT'22's numerical bound at ε0 for n
// users, bisection started at computeamplification.closedformanalysis.
func fmtNumericUniS(n int, eps0, delta float64) float64 {
	upper := eps0
	fn := float64(n)
	if eps0 < math.Log(fn/(16*math.Log(4/delta))) {
		a := 8 * math.Sqrt(math.Exp(eps0)*math.Log(4/delta)/fn)
		c := 8 * math.Exp(eps0) / fn
		e := math.Log(1 + a + c)
		upper = math.Log(1 + (-math.Expm1(-eps0))/(1+math.Exp(-eps0-e))*(a+c))
	}
	p := math.Exp(-eps0)
	lp, l1p := math.Log(p), math.Log1p(-p)
	mass := func(lo, hi int) float64 { // binom.cdf(hi) - binom.cdf(lo) + binom.pmf(lo)
		return binomCDF(float64(hi), n-1, p) - binomCDF(float64(lo), n-1, p) + math.Exp(logBinomPMF(lo, n-1, lp, l1p))
	}
	return hidingBisect(func(e float64) float64 {
		return hidingDeltaComp(n, float64(n-1)*p, mass, eps0, e, delta, apesStep)
	}, delta, apesIters, upper)
}

// averagedEchoCount is probEoN(): μ = Σ_{i≠argmax} Σ_j p_ij/n with Lemma 6's
// p_ij and σ² = Σ (p_ij/n)(1 − p_ij/n), computed in O(n log n) with prefix
// sums over the sorted budgets instead of the reference's O(n²) loop.
func averagedEchoCount(eps []float64) (mu, sigma float64) {
	e := append([]float64(nil), eps...)
	sort.Float64s(e)
	n := len(e)
	fn := float64(n)
	g := func(x float64) float64 { return -math.Expm1(-x) / x }
	low, low2 := make([]float64, n+1), make([]float64, n+1) // Σ_{j<idx} g, g²
	for j := 0; j < n; j++ {
		low[j+1] = low[j] + g(e[j])
		low2[j+1] = low2[j] + g(e[j])*g(e[j])
	}
	high, high2 := make([]float64, n+1), make([]float64, n+1) // Σ_{j>=idx} g e^{-ε_j}, g² e^{-2ε_j}
	for j := n - 1; j >= 0; j-- {
		high[j] = high[j+1] + g(e[j])*math.Exp(-e[j])
		high2[j] = high2[j+1] + g(e[j])*g(e[j])*math.Exp(-2*e[j])
	}
	var s1, s2 float64
	for i := 0; i < n-1; i++ { // the last (largest) budget is user 1's
		// p_ij = g(ε_j)/g(ε_i)·e^{−max(ε_i,ε_j)}; split j at ε_j <= ε_i.
		k := sort.SearchFloat64s(e, math.Nextafter(e[i], math.Inf(1)))
		w := 1 / g(e[i])
		s1 += w * (math.Exp(-e[i])*low[k] + high[k]) / fn
		s2 += w * w * (math.Exp(-2*e[i])*low2[k] + high2[k]) / (fn * fn)
	}
	return s1, math.Sqrt(s1 - s2)
}

// eonNumericAsPrinted is PerS.get_eps (computeamplification_perS.py).
func eonNumericAsPrinted(eps []float64, delta float64) (numeric, closedForm float64) {
	mu, sigma := averagedEchoCount(eps)
	e1 := 0.0
	for _, e := range eps {
		e1 = math.Max(e1, e)
	}
	pre := math.Expm1(e1) / (math.Exp(e1) + 1)
	closedForm = math.Log(1 + pre*(8*math.Sqrt(math.Log(4/delta)/mu)+8/mu))
	phi := func(x float64) float64 { return 0.5 * math.Erfc(-(x-(mu-0.5))/(sigma*math.Sqrt2)) }
	mass := func(lo, hi int) float64 { return phi(float64(hi)) - phi(float64(lo)) }
	numeric = hidingBisect(func(e float64) float64 {
		return hidingDeltaComp(len(eps), mu, mass, e1, e, delta, apesStep)
	}, delta, apesIters, closedForm)
	return numeric, closedForm
}

func seededUniform2(n int, seed uint64) []float64 {
	src := noise.NewSeeded(seed)
	out := make([]float64, n)
	for i := range out {
		out[i] = 0.05 + 0.95*noise.Uniform(src)
	}
	return out
}

func TestReproduceAPESTable3(t *testing.T) {
	const n, deltaS = 10000, 1e-8
	budgets := map[string][]float64{
		"quantiles":   Uniform2Budgets(n),
		"seeded draw": seededUniform2(n, 2023),
	}
	for name, eps := range budgets {
		t.Run(name, func(t *testing.T) {
			epsMax := 0.0
			for _, e := range eps {
				epsMax = math.Max(epsMax, e)
			}
			uniS := fmtNumericUniS(n, epsMax, deltaS)
			if !truncatedTo(uniS, 0.069, 3) {
				t.Errorf("UniS (FMT'22 numerical at max eps) = %.6f, want printed 0.069", uniS)
			}
			apes, thm4AsPrinted := eonNumericAsPrinted(eps, deltaS)
			if !truncatedTo(apes, 0.057, 3) {
				t.Errorf("APES (EoN numerical, averaged p_ij, normal approx) = %.6f, want printed 0.057", apes)
			}
			// The closed forms are far from the printed values: the
			// printed numbers are numerical.
			closedUniS, err := apesUniS(eps, deltaS)
			if err != nil || closedUniS.Epsilon < 3*uniS {
				t.Errorf("eq. (2) = %v (%v), expected far above the numerical %.4f", closedUniS.Epsilon, err, uniS)
			}
			if thm4AsPrinted < 3*apes {
				t.Errorf("Theorem 4 as printed = %.4f, expected far above the numerical %.4f", thm4AsPrinted, apes)
			}
			t.Logf("UniS numerical %.6f (eq. 2: %.4f); APES numerical %.6f (Theorem 4 as printed: %.4f)", uniS, closedUniS.Epsilon, apes, thm4AsPrinted)
		})
	}
}

// TestReproduceAPESUserLevel reproduces Table 3's user-level ε^uc columns
// from the dimension-level values above (full precision: 0.0574942 and
// 0.0696662 at the quantile budgets): advanced composition over d = 7850
// dimensions with δ' = δ_s = 1e-8, so δ^uc = d·δ^c + δ' = 3.63e-5 ("3.6e-5");
// S-APES composes over 2b = 3140 (b = 1570 = d/5, the b of its ε^ul range
// 78.5~1570) with δ' chosen so that δ^uc is the same 3.63e-5; LDP-Min
// (pure 0.05-DP per dimension) spends the whole 3.63e-5 as δ'; PLDP (1-DP
// per dimension) is basic composition, d·1 = 7850. All printed values are
// truncated to one decimal.
func TestReproduceAPESUserLevel(t *testing.T) {
	const d, deltaS = 7850, 1e-8
	eps := Uniform2Budgets(10000)
	apes, _ := eonNumericAsPrinted(eps, deltaS)
	uniS := fmtNumericUniS(10000, eps[len(eps)-1], deltaS)
	pre := math.Expm1(1.0) / (math.E + 1) // δ^c = pre·δ_s at ε* ≈ 1
	deltaC := pre * deltaS
	deltaUC := d*deltaC + deltaS

	check := func(name string, got, printed float64) {
		t.Helper()
		if !truncatedTo(got, printed, 1) {
			t.Errorf("%s: eps_uc = %.4f, want printed %.1f", name, got, printed)
		}
	}
	e, dl, err := AdvancedComposition(apes, deltaC, d, deltaS)
	if err != nil {
		t.Fatal(err)
	}
	check("APES", e, 57.6)
	if math.Abs(dl-3.6e-5) > 0.05e-5 {
		t.Errorf("APES delta_uc = %g, want printed 3.6e-5", dl)
	}
	e, _, _ = AdvancedComposition(uniS, deltaC, d, deltaS)
	check("UniS", e, 76.9)
	// S-APES: APES Proposition 1 (paper.SAPESUserLevel, tested there to
	// be exactly this) composes over 2b dimensions.
	const b = 1570
	e, _, err = AdvancedComposition(apes, deltaC, 2*b, deltaUC-2*b*deltaC)
	if err != nil {
		t.Fatal(err)
	}
	check("S-APES", e, 25.6)
	e, _, _ = AdvancedComposition(0.05, 0, d, deltaUC)
	check("LDP-Min", e, 40.1)
	// PLDP's 7850 (basic composition, d·1) is checked in package paper
	// (TestReproduceAPESUserLevelPLDP), where BasicComposition lives.
}
