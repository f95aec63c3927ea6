package counts

import (
	"math"
	"testing"

	"github.com/blanket-fl/blanket/shared/internal/dgauss"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/privacy"
)

// encUnits is a value's encoding in fixed-point units (what an accepted
// honest report adds to the block's integer sum).
func encUnits(t testing.TB, b *Block, v Value) []int64 {
	t.Helper()
	x, err := b.encode(v)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int64, len(x))
	for i := range x {
		out[i] = int64(math.RoundToEven(x[i] * b.Scale()))
	}
	return out
}

// noisyDecode adds each server's noise (the shipped sampler, as
// Aggregate.AddNoise draws it) to an integer block sum of n reports and
// decodes it.
func noisyDecode(t testing.TB, b *Block, sum []int64, n int, sigma float64, srcs ...noise.Source) []float64 {
	t.Helper()
	s := append([]int64(nil), sum...)
	for _, src := range srcs {
		k, err := dgauss.Noise(sigma, len(s), src)
		if err != nil {
			t.Fatal(err)
		}
		for i := range s {
			s[i] += k[i]
		}
	}
	out, err := b.decode(s, n)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestNoisePathMatchesDirect: the PINE path (both servers' AddNoise on
// their aggregate shares, Unshard) gives exactly the integer sum of the
// reports' encodings plus the same seeded draws, decoded: the statistical
// tests below use the direct path.
func TestNoisePathMatchesDirect(t *testing.T) {
	s := testSpec(t)
	src := noise.NewSeeded(5)
	vals := [][]Value{
		{{Correct: 3, Evaluated: 9}, {Answer: 1}, {Answer: 0}, {Answer: 3}, {Answer: 4}},
		{{Correct: 9, Evaluated: 9}, {Answer: 0}, {Answer: 2}, {Answer: 1}, {Answer: 0}},
	}
	var reports []Report
	var nonces [][16]byte
	sums := make([][]int64, len(s.Blocks()))
	for v, vv := range vals {
		r, err := s.Shard(vv, nonceOf(v), src)
		if err != nil {
			t.Fatal(err)
		}
		reports, nonces = append(reports, r), append(nonces, nonceOf(v))
		for i, b := range s.Blocks() {
			e := encUnits(t, b, vv[i])
			if sums[i] == nil {
				sums[i] = make([]int64, len(e))
			}
			for j := range e {
				sums[i][j] += e[j]
			}
		}
	}
	lead, help, verdicts := round(t, s, reports, nonces)
	for _, err := range verdicts {
		if err != nil {
			t.Fatal(err)
		}
	}
	sigmas := []float64{50, 40, 30, 20, 10}
	if err := lead.AddNoise(sigmas, noise.NewSeeded(11)); err != nil {
		t.Fatal(err)
	}
	if err := help.AddNoise(sigmas, noise.NewSeeded(12)); err != nil {
		t.Fatal(err)
	}
	if err := lead.AddNoise(sigmas, noise.NewSeeded(11)); err == nil {
		t.Error("noise added twice")
	}
	lb, _ := lead.MarshalBinary()
	hb, _ := help.MarshalBinary()
	got, err := s.Unshard(lb, hb, 2)
	if err != nil {
		t.Fatal(err)
	}
	l, h := noise.NewSeeded(11), noise.NewSeeded(12)
	// Each server draws block by block from its stream: interleave as
	// AddNoise does (all of the leader's blocks, then the helper's).
	var lk, hk [][]int64
	for i, b := range s.Blocks() {
		a, _ := dgauss.Noise(sigmas[i], b.Dim(), l)
		lk = append(lk, a)
	}
	for i, b := range s.Blocks() {
		a, _ := dgauss.Noise(sigmas[i], b.Dim(), h)
		hk = append(hk, a)
	}
	for i, b := range s.Blocks() {
		x := append([]int64(nil), sums[i]...)
		for j := range x {
			x[j] += lk[i][j] + hk[i][j]
		}
		want, _ := b.decode(x, 2)
		for j := range want {
			if got.Counts[i][j] != want[j] {
				t.Errorf("block %d count %d: PINE path %v, direct %v", i, j, got.Counts[i][j], want[j])
			}
		}
	}
}

// TestCountEstimatorUnbiasedAndCovers: 200 fixed answers to a 5-option
// question (K = 8), the two servers' noise at σ = 3,000 units (CountSD
// 11.0 votes), 4,000 seeded rounds. Per option: the mean error is within
// 5 standard errors of 0 (false failure < 6e-7 each), the error variance
// within 11% of CountSD² (5 standard errors of a sample variance,
// √(2/4000) = 2.2% each), and the 95% interval covers the true count in
// at least 93% of rounds (4.1 standard deviations below 95%: false
// failure < 3e-5 each).
func TestCountEstimatorUnbiasedAndCovers(t *testing.T) {
	b, err := NewQuestion(5)
	if err != nil {
		t.Fatal(err)
	}
	const n, sigma, trials = 200, 3000.0, 4000
	truth := make([]float64, 5)
	sum := make([]int64, b.Dim())
	src := noise.NewSeeded(21)
	for range n {
		a := int(src.Uint64() % 5)
		truth[a]++
		for i, x := range encUnits(t, b, Value{Answer: a}) {
			sum[i] += x
		}
	}
	sd := b.CountSD(sigma)
	l, h := noise.NewSeeded(22), noise.NewSeeded(23)
	var mean, sq, cover [5]float64
	for range trials {
		c := noisyDecode(t, b, sum, n, sigma, l, h)
		iv, err := b.Histogram(c, sigma, 0.95)
		if err != nil {
			t.Fatal(err)
		}
		for j := range 5 {
			e := c[j] - truth[j]
			mean[j] += e / trials
			sq[j] += e * e / trials
			if iv[j].Lo <= truth[j] && truth[j] <= iv[j].Hi {
				cover[j] += 1.0 / trials
			}
		}
	}
	for j := range 5 {
		v := sq[j] - mean[j]*mean[j]
		t.Logf("option %d: mean error %+.3f (SE %.3f), variance %.1f (CountSD² %.1f), coverage %.4f", j, mean[j], sd/math.Sqrt(trials), v, sd*sd, cover[j])
		if math.Abs(mean[j]) > 5*sd/math.Sqrt(trials) {
			t.Errorf("option %d: biased (mean error %v)", j, mean[j])
		}
		if v < 0.89*sd*sd || v > 1.11*sd*sd {
			t.Errorf("option %d: variance %v, CountSD² %v", j, v, sd*sd)
		}
		if cover[j] < 0.93 {
			t.Errorf("option %d: coverage %v < 0.93", j, cover[j])
		}
	}
}

// TestAccuracyCoverage: 100 volunteers with 20-100 rows each (R = 100),
// each row correct with probability 0.8, fresh rows and fresh noise in
// each of 2,000 seeded rounds, at σ = 60 units (CountSD 21 rows: sampling
// dominates) and σ = 600 (CountSD 212 rows: noise dominates). The 95%
// interval of Accuracy covers 0.8 in at least 93% of rounds (4.1 standard
// deviations below 95%: false failure < 3e-5 if the coverage is 95%), and
// the mean estimate is within 5 standard errors plus the ratio's
// second-order bias bound 2p·CountSD²/E² of 0.8 (false failure < 6e-7).
func TestAccuracyCoverage(t *testing.T) {
	b, err := NewEval(100)
	if err != nil {
		t.Fatal(err)
	}
	const n, trials, p = 100, 2000, 0.8
	for k, sigma := range []float64{60, 600} {
		src := noise.NewSeeded(31 + uint64(k))
		l, h := noise.NewSeeded(41+uint64(k)), noise.NewSeeded(51+uint64(k))
		sd := b.CountSD(sigma)
		var cover, mean, sq, eSum float64
		dominated := 0
		for range trials {
			sum := make([]int64, 2)
			var e0 float64
			for range n {
				e := 20 + int(src.Uint64()%81)
				c := 0
				for range e {
					if noise.Uniform(src) < p {
						c++
					}
				}
				e0 += float64(e)
				for i, x := range encUnits(t, b, Value{Correct: c, Evaluated: e}) {
					sum[i] += x
				}
			}
			eSum += e0 / trials
			got := noisyDecode(t, b, sum, n, sigma, l, h)
			iv, err := Accuracy(got[0], got[1], sd, 0.95)
			if err != nil {
				t.Fatal(err)
			}
			if iv.Dominated {
				dominated++
				continue
			}
			if iv.Lo <= p && p <= iv.Hi {
				cover++
			}
			mean += iv.Estimate
			sq += iv.Estimate * iv.Estimate
		}
		m := trials - dominated
		cover /= trials
		mean /= float64(m)
		se := math.Sqrt((sq/float64(m) - mean*mean) / float64(m))
		bias := 2 * p * sd * sd / (eSum * eSum)
		t.Logf("sigma %v (CountSD %.1f rows, E ≈ %.0f rows): coverage %.4f, mean %.5f (SE %.5f, bias bound %.1e), dominated %d", sigma, sd, eSum, cover, mean, se, bias, dominated)
		if cover < 0.93 {
			t.Errorf("sigma %v: coverage %v < 0.93", sigma, cover)
		}
		if math.Abs(mean-p) > 5*se+bias {
			t.Errorf("sigma %v: mean estimate %v, want %v ± %v", sigma, mean, p, 5*se+bias)
		}
	}
}

// TestNoiseDominates: the plan's ratios from public parameters: the
// update's is aggregator task plan's √(2d)σ/(nΔ); a question's bars and
// an evaluation's accuracy flag at 100 volunteers for a small budget and
// not at 10,000.
func TestNoiseDominates(t *testing.T) {
	s := testSpec(t)
	sigmas := make([]float64, len(s.Blocks()))
	for i, b := range s.Blocks() {
		sigmas[i] = 40 * b.Sensitivity() // multiplier 40: a small extra budget
	}
	w, err := NoiseDominates(7850, 190344, 32814, s, sigmas, 100, 50)
	if err != nil {
		t.Fatal(err)
	}
	want := math.Sqrt(2*7850) * 190344 / (100 * 32814)
	if math.Abs(w[0].Ratio-want) > 1e-12*want || !w[0].Dominates {
		t.Errorf("update ratio %v (dominates %v), want %v", w[0].Ratio, w[0].Dominates, want)
	}
	for _, x := range w[1:] {
		t.Logf("n = 100: block %d ratio %.3f dominates %v", x.Block, x.Ratio, x.Dominates)
		if !x.Dominates {
			t.Errorf("block %d not flagged at 100 volunteers", x.Block)
		}
	}
	w, err = NoiseDominates(7850, 190344, 32814, s, sigmas, 10000, 50)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range w {
		t.Logf("n = 10000: block %d ratio %.3f dominates %v", x.Block, x.Ratio, x.Dominates)
		if x.Dominates {
			t.Errorf("block %d flagged at 10,000 volunteers", x.Block)
		}
	}
}

// log binomial pmf.
func logBinom(n, k int, p float64) float64 {
	a, _ := math.Lgamma(float64(n) + 1)
	b, _ := math.Lgamma(float64(k) + 1)
	c, _ := math.Lgamma(float64(n-k) + 1)
	return a - b - c + float64(k)*math.Log(p) + float64(n-k)*math.Log1p(-p)
}

// binomCDF is P[Binomial(n, p) <= k], summed from k away from the mean
// (or its complement) until the terms are negligible.
func binomCDF(n, k int, p float64) float64 {
	var s float64
	if float64(k) < float64(n)*p {
		for i := k; i >= 0; i-- {
			x := math.Exp(logBinom(n, i, p))
			s += x
			if x < s*1e-17 {
				break
			}
		}
		return min(1, s)
	}
	for i := k + 1; i <= n; i++ {
		x := math.Exp(logBinom(n, i, p))
		s += x
		if x < s*1e-17 {
			break
		}
	}
	return max(0, 1-s)
}

// cpUpper and cpLower are the one-sided Clopper-Pearson bounds at level
// 1 - alpha for k successes in n.
func cpUpper(n, k int, alpha float64) float64 {
	if k >= n {
		return 1
	}
	lo, hi := float64(k)/float64(n), 1.0
	for range 80 {
		m := (lo + hi) / 2
		if binomCDF(n, k, m) > alpha {
			lo = m
		} else {
			hi = m
		}
	}
	return hi
}

func cpLower(n, k int, alpha float64) float64 {
	if k <= 0 {
		return 0
	}
	return 1 - cpUpper(n, n-k, alpha)
}

// attackEps runs the likelihood-ratio distinguisher on one volunteer's
// (update, counts) pair against the release with ONE server's noise (the
// other server may be the attacker): n = 3 other volunteers; the target's
// update is −Δ_u or +Δ_u (1-d), its counts 0 of 0 or R of R (the
// evaluation block's diameter). The statistic is the Gaussian LR
// Σ_j ⟨O_j − mid_j, v_j⟩/σ_j²; its thresholds are fixed beforehand at
// the false-positive rates 1e-2 and 1e-3 the Gaussian model predicts.
// Returns the larger of the two ε lower bounds ln((TPR_lo − δ)/FPR_hi),
// Clopper-Pearson at 1 − 1e-3 per rate (Bonferroni over 4 rates).
func attackEps(t *testing.T, b *Block, du, sigU, sigC float64, trials int, seed uint64) float64 {
	t.Helper()
	R := b.Rows()
	others := []Value{{Correct: 3, Evaluated: 7}, {Correct: 50, Evaluated: 90}, {Correct: 0, Evaluated: 1}}
	base := make([]int64, 2)
	for _, v := range others {
		for i, x := range encUnits(t, b, v) {
			base[i] += x
		}
	}
	c0 := encUnits(t, b, Value{})
	c1 := encUnits(t, b, Value{Correct: R, Evaluated: R})
	vc := []float64{float64(c1[0] - c0[0]), float64(c1[1] - c0[1])}
	vu := 2 * du
	// Var of the statistic under either world: ‖v‖²/σ² summed.
	tsd := math.Sqrt(vu*vu/(sigU*sigU) + (vc[0]*vc[0]+vc[1]*vc[1])/(sigC*sigC))
	// z·tsd for the upper 1e-2 and 1e-3 quantiles of N(0, tsd²); under
	// world 0 the statistic is N(−tsd²/2, tsd²), hence the shift below.
	thr := []float64{2.326347874 * tsd, 3.090232306 * tsd}
	src := noise.NewSeeded(seed)
	pos := [2][2]int{}
	for w := range 2 {
		for range trials {
			zu, _ := dgauss.Noise(sigU, 1, src)
			zc, _ := dgauss.Noise(sigC, 2, src)
			u := -du + float64(w)*vu + float64(zu[0])
			cc := c0
			if w == 1 {
				cc = c1
			}
			// O − mid, projected.
			st := (u - 0) * vu / (sigU * sigU)
			for i := range 2 {
				o := float64(base[i]+cc[i]+zc[i]) - float64(base[i]) - float64(c0[i]+c1[i])/2
				st += o * vc[i] / (sigC * sigC)
			}
			for k, th := range thr {
				if st > th-tsd*tsd/2 {
					pos[w][k]++
				}
			}
		}
	}
	best := math.Inf(-1)
	for k := range thr {
		fpr := cpUpper(trials, pos[0][k], 1e-3)
		tpr := cpLower(trials, pos[1][k], 1e-3)
		e := math.Log(max(tpr-1e-5, 1e-300) / fpr)
		t.Logf("  threshold %d: FPR %d/%d (upper %.2e), TPR %d/%d (lower %.4f): eps lower bound %.3f", k, pos[0][k], trials, fpr, pos[1][k], trials, tpr, e)
		best = max(best, e)
	}
	return best
}

// TestEmpiricalAttackBelowCharge: the distinguisher above, at σ_u = 6,000
// (Δ_u = 1,000 units) and the evaluation block (R = 100) at σ_c = 1,800,
// 100,000 rounds per world: its ε lower bound (held with probability
// 1 − 4e-3) is below the ledger's charge for the joint round
// (privacy.SecAggJointReplaceOneEpsilon, δ = 1e-5). With the counts' σ
// and the update's σ divided by 3 (a server that under-noises) the same
// attack's bound exceeds that charge: the test has power.
func TestEmpiricalAttackBelowCharge(t *testing.T) {
	if testing.Short() {
		t.Skip("200,000 rounds")
	}
	b, err := NewEval(100)
	if err != nil {
		t.Fatal(err)
	}
	const du, sigU, sigC, trials = 1000.0, 6000.0, 1800.0, 100000
	parts := []privacy.SecAggPart{{Sigma: sigU, Sensitivity: du, D: 1}, {Sigma: sigC, Sensitivity: b.Sensitivity(), D: 2}}
	charge, err := privacy.SecAggJointReplaceOneEpsilon(parts, 1, 1, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	got := attackEps(t, b, du, sigU, sigC, trials, 61)
	t.Logf("charged %.4f, empirical lower bound %.4f", charge, got)
	if got > charge {
		t.Errorf("empirical epsilon %v exceeds the charge %v", got, charge)
	}
	weak := attackEps(t, b, du, sigU/3, sigC/3, trials, 62)
	t.Logf("noise / 3: empirical lower bound %.4f against the charge %.4f", weak, charge)
	if weak <= charge {
		t.Errorf("the attack does not see a third of the noise: %v <= %v", weak, charge)
	}
}
