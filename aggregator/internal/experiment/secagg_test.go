package experiment

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/secagg"
)

// tinySecAgg is a small secure-summation run: 800 volunteers (the
// partition's users), q = 1 (all 800 every round: at q < 1 the charge
// claims no check-in amplification, since the released count says when a
// volunteer took part), 3 rounds, sigma calibrated to replace-one eps 4
// over the 3 rounds.
func tinySecAgg() Options {
	o := smallOptions("secagg")
	o.SecAgg = secaggParams{Pop: 800, Q: 1, Rounds: 3}.withDefaults()
	return o
}

// TestSecAggLearnsAndAccounts: three rounds of the secagg method on the
// embedded digits beat chance (10 classes: 10%) by far, and the claim is
// exactly the accountant's: no add/remove ε is claimed (the row is not
// applicable: the released count is not covered), the replace-one ε is
// privacy.Account's tightest row of the releases built here from the
// run's rounds and secaggReplaceOne of them, and meets the calibration
// target.
func TestSecAggLearnsAndAccounts(t *testing.T) {
	o := tinySecAgg()
	res := simulateJSON(t, o)
	if len(res) != 1 {
		t.Fatalf("got %d results", len(res))
	}
	r := res[0]
	if r.Final < 0.5 {
		t.Errorf("secagg accuracy after 3 rounds = %.3f, want >= 0.5 (chance 0.1)", r.Final)
	}
	if len(r.Rounds) != 3 || r.Pop != 800 {
		t.Fatalf("rounds %d, population %d", len(r.Rounds), r.Pop)
	}
	p, err := secaggRoundParams(o.SecAgg, 7850, 800)
	if err != nil {
		t.Fatal(err)
	}
	var rs []privacy.Release
	for _, rec := range r.Rounds {
		if rec.Participants != 800 {
			t.Errorf("round %d: %d participants of 800 at q = 1", rec.Round, rec.Participants)
		}
		rs = append(rs, privacy.Release{Round: rec.Round, Protocol: privacy.ProtocolSecAgg, Randomizer: privacy.RandomizerDiscreteGaussian,
			D: 7850, N: rec.Participants, SecAggSigma: p.Sigma, SecAggSensitivity: p.Sensitivity(), CheckInRate: 1})
	}
	rep, err := privacy.Account(rs, 1e-5)
	if err != nil || rep.Tightest < 0 {
		t.Fatalf("account: %v, tightest %d", err, rep.Tightest)
	}
	if got, _, _ := addRemoveEps(rs, 1e-5); r.Claim.AddRemove != 0 || !math.IsNaN(got) {
		t.Errorf("claimed add/remove eps %v, privacy.Account's add/remove row %v: want none", r.Claim.AddRemove, got)
	}
	if got := rep.Rows[rep.Tightest].Epsilon; r.Claim.Total != got {
		t.Errorf("claimed replace-one eps %v, privacy.Account's tightest (replace-one) row %v", r.Claim.Total, got)
	}
	one, _, err := secaggReplaceOne(rs, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	if r.Claim.Total != one {
		t.Errorf("claimed replace-one eps %v, recomputed %v", r.Claim.Total, one)
	}
	if !(r.Claim.Total <= 4*(1+1e-9) && r.Claim.Delta == 1e-5) {
		t.Errorf("claim %+v: want replace-one <= 4 at delta 1e-5", r.Claim)
	}
}

// TestSecAggDeterministic: a fixed seed gives the same run whatever the
// number of workers; another seed does not.
func TestSecAggDeterministic(t *testing.T) {
	o := tinySecAgg()
	o.SecAgg.Rounds = 2
	strip := func(rs []runResult) []runResult {
		for i := range rs {
			rs[i].Duration = 0
			for j := range rs[i].Rounds {
				rs[i].Rounds[j].Seconds = 0
			}
		}
		return rs
	}
	a := strip(simulateJSON(t, o))
	o.Workers = 1
	b := strip(simulateJSON(t, o))
	if a[0].Final != b[0].Final || !slices.Equal(a[0].Rounds, b[0].Rounds) || a[0].Claim != b[0].Claim {
		t.Errorf("same seed, different runs:\n%+v\n%+v", a[0], b[0])
	}
	o.Seed++
	c := strip(simulateJSON(t, o))
	if slices.Equal(a[0].Rounds, c[0].Rounds) {
		t.Error("different seeds gave identical runs")
	}
}

// TestFastPathMatchesPrio3: on the same seeds the fast path and the real
// Prio3 pipeline (Shard with the FLP proof, both servers' preparation,
// AddNoise, Unshard) return identical counts, integer sums and means,
// for a small dimension with updates above and below the clip and for
// the MNIST dimension, with and without noise.
func TestFastPathMatchesPrio3(t *testing.T) {
	w := &world{seed: 11, workers: 2}
	for _, c := range []struct {
		d, n  int
		sigma float64
	}{{d: 40, n: 25, sigma: 3.5}, {d: 40, n: 7, sigma: 0}, {d: 40, n: 9, sigma: 250}, {d: 7850, n: 3, sigma: 181}} {
		p, err := secagg.NewParams(c.d, 0.5, 8, c.sigma, 100)
		if err != nil {
			t.Fatal(err)
		}
		src := noise.NewSeeded(uint64(c.d*1000 + c.n))
		users := make([]int, c.n)
		updates := make([][]float64, c.n)
		for i := range updates {
			users[i] = 3*i + 1
			scale := 0.05 * float64(i%4) // L2 norms from 0 to well above the clip
			updates[i] = make([]float64, c.d)
			for j := range updates[i] {
				updates[i][j] = scale * (2*noise.Uniform(src) - 1)
			}
		}
		for round := uint64(1); round <= 2; round++ {
			fast, err := fastSecAggSum(context.Background(), w, p, round, users, updates)
			if err != nil {
				t.Fatal(err)
			}
			real, err := prio3SecAggSum(context.Background(), w, p, round, users, updates)
			if err != nil {
				t.Fatal(err)
			}
			if fast.Count != real.Count || fast.NoiseShares != real.NoiseShares || !slices.Equal(fast.Sum, real.Sum) || !slices.Equal(fast.Mean, real.Mean) {
				t.Errorf("d=%d n=%d sigma=%v round %d: fast path (count %d, shares %d, sum[:4] %v) differs from Prio3 (count %d, shares %d, sum[:4] %v)",
					c.d, c.n, c.sigma, round, fast.Count, fast.NoiseShares, fast.Sum[:4], real.Count, real.NoiseShares, real.Sum[:4])
			}
			if c.sigma > 0 && slices.Equal(fast.Sum, noiseless(t, p, w, round, users, updates)) {
				t.Errorf("d=%d sigma=%v: the noisy sum equals the noise-free one", c.d, c.sigma)
			}
		}
	}
}

// noiseless returns the sum of the quantized updates without noise.
func noiseless(t *testing.T, p secagg.Params, w *world, round uint64, users []int, updates [][]float64) []int64 {
	t.Helper()
	p0, err := secagg.NewParams(p.Dim, p.Clip, p.Bits, 0, p.MaxReports)
	if err != nil {
		t.Fatal(err)
	}
	res, err := fastSecAggSum(context.Background(), w, p0, round, users, updates)
	if err != nil {
		t.Fatal(err)
	}
	return res.Sum
}

// TestCalibrateSecAggSigma: the calibrated sigma meets the target under
// its relation (replace-one through secaggReplaceOne, add/remove of the
// noisy sum through privacy.SecAggEpsilon), 1% less sigma misses it (it is the smallest), and
// sigma is non-increasing in the target epsilon and non-decreasing in the
// number of rounds and in the check-in rate.
func TestCalibrateSecAggSigma(t *testing.T) {
	const delta, sens = 1e-5, 137.8
	claim := func(relation string, sigma float64, rounds int, q float64) float64 {
		rs := make([]privacy.Release, rounds)
		for i := range rs {
			rs[i] = privacy.Release{Round: i + 1, Protocol: privacy.ProtocolSecAgg, Randomizer: privacy.RandomizerDiscreteGaussian,
				D: 7850, N: 200, SecAggSigma: sigma, SecAggSensitivity: sens, CheckInRate: q}
		}
		var e float64
		var err error
		if relation == relationReplaceOne {
			e, _, err = secaggReplaceOne(rs, delta)
		} else {
			// The noisy sum alone, what add/remove calibrates to (the
			// release's add/remove row is not applicable).
			e, err = privacy.SecAggEpsilon(sigma, sens, q, len(rs), delta)
		}
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	for _, relation := range []string{relationReplaceOne, relationAddRemove} {
		for _, c := range []struct {
			eps    float64
			rounds int
			q      float64
		}{{4, 20, 0.05}, {1, 12, 1}, {8, 60, 0.25}} {
			s, err := calibrateSecAggSigma(relation, c.eps, delta, c.rounds, c.q, sens)
			if err != nil {
				t.Fatal(err)
			}
			if e := claim(relation, s, c.rounds, c.q); e > c.eps*(1+1e-9) {
				t.Errorf("%s %+v: sigma %v gives eps %v above the target", relation, c, s, e)
			}
			if e := claim(relation, 0.99*s, c.rounds, c.q); e <= c.eps {
				t.Errorf("%s %+v: 0.99 sigma still meets the target (eps %v): not the smallest", relation, c, e)
			}
		}
		prev := math.Inf(1)
		for _, eps := range []float64{0.5, 1, 2, 4, 8} {
			s, err := calibrateSecAggSigma(relation, eps, delta, 20, 0.05, sens)
			if err != nil {
				t.Fatal(err)
			}
			if s > prev {
				t.Errorf("%s: sigma %v at eps %v above %v at a smaller eps", relation, s, eps, prev)
			}
			prev = s
		}
		prev = 0
		for _, rounds := range []int{1, 5, 20, 80} {
			s, _ := calibrateSecAggSigma(relation, 4, delta, rounds, 0.05, sens)
			if s < prev {
				t.Errorf("%s: sigma %v for %d rounds below %v for fewer", relation, s, rounds, prev)
			}
			prev = s
		}
		prev = 0
		for _, q := range []float64{0.01, 0.05, 0.2, 1} {
			s, _ := calibrateSecAggSigma(relation, 4, delta, 20, q, sens)
			if s < prev {
				t.Errorf("%s: sigma %v at q = %v below %v at a smaller q", relation, s, q, prev)
			}
			prev = s
		}
	}
	if _, err := calibrateSecAggSigma("swap", 4, delta, 20, 0.05, sens); err == nil {
		t.Error("unknown relation accepted")
	}
}

// TestCalibrateKnob: on known monotone functions the knob meets the
// target and lies within 0.5% of the exact boundary, from starts on
// either side, for increasing (a budget) and decreasing (a noise
// multiplier) curves; an unreachable target is an error.
func TestCalibrateKnob(t *testing.T) {
	calls := 0
	inc := func(x float64) (float64, error) { calls++; return 0.3 * x, nil } // eps = 0.3 x: boundary 4/0.3
	dec := func(x float64) (float64, error) { calls++; return 12 / x, nil }  // eps = 12/x: boundary 3
	for _, start := range []float64{0.01, 1, 13, 1000} {
		x, err := calibrateKnob(inc, 4, start, true)
		if err != nil {
			t.Fatal(err)
		}
		if e, _ := inc(x); e > 4 || x < (4/0.3)*0.995 {
			t.Errorf("increasing from %v: x = %v (eps %v), want the largest x with eps <= 4 (13.33) within 0.5%%", start, x, e)
		}
		y, err := calibrateKnob(dec, 4, start, false)
		if err != nil {
			t.Fatal(err)
		}
		if e, _ := dec(y); e > 4 || y > 3*1.005 {
			t.Errorf("decreasing from %v: x = %v (eps %v), want the smallest x with eps <= 4 (3) within 0.5%%", start, y, e)
		}
	}
	if calls > 4*2*80 {
		t.Errorf("%d evaluations for 8 calibrations", calls)
	}
	never := func(float64) (float64, error) { return 10, nil }
	if _, err := calibrateKnob(never, 4, 1, true); err == nil {
		t.Error("unreachable target accepted")
	}
}
