package secagg

import (
	"math"
	"testing"

	"github.com/blanket-fl/blanket/shared/internal/stattest"
	"github.com/blanket-fl/blanket/shared/noise"
)

// The statistical tests draw from fixed seeds, so each either always
// passes or always fails; each states the probability that a correct
// implementation would fail it for a random seed.

// TestDiscreteGaussianLaw: chi-square goodness of fit of 200,000 samples
// of N_Z(0, 3^2) against the exact pmf on the cells -12..12 plus the two
// merged tails (27 cells). False-failure probability about 1e-6
// (Wilson-Hilferty critical value at 1e-6).
func TestDiscreteGaussianLaw(t *testing.T) {
	const sigma, lim, n = 3.0, 12, 200000
	g, err := newDiscreteGaussian(sigma)
	if err != nil {
		t.Fatal(err)
	}
	// Exact pmf by normalising exp(-k^2/(2 sigma^2)) over |k| <= 200.
	var z float64
	w := func(k int) float64 { return math.Exp(-float64(k*k) / (2 * sigma * sigma)) }
	for k := -200; k <= 200; k++ {
		z += w(k)
	}
	probs := make([]float64, 2*lim+3)
	for k := -lim; k <= lim; k++ {
		probs[k+lim+1] = w(k) / z
	}
	var tail float64
	for k := lim + 1; k <= 200; k++ {
		tail += w(k) / z
	}
	probs[0], probs[len(probs)-1] = tail, tail
	counts := make([]int, len(probs))
	src := noise.NewSeeded(101)
	for range n {
		k := g.sample(src)
		switch {
		case k < -lim:
			counts[0]++
		case k > lim:
			counts[len(counts)-1]++
		default:
			counts[int(k)+lim+1]++
		}
	}
	// Drop tail cells with expectation below 5 from the statistic by
	// merging them into their neighbours.
	if probs[0]*n < 5 {
		probs[1] += probs[0]
		counts[1] += counts[0]
		probs[len(probs)-2] += probs[len(probs)-1]
		counts[len(counts)-2] += counts[len(counts)-1]
		probs, counts = probs[1:len(probs)-1], counts[1:len(counts)-1]
	}
	stat := stattest.ChiSquare(counts, probs)
	if crit := stattest.ChiSquareCritical(len(probs) - 1); stat > crit {
		t.Fatalf("chi-square %.1f > critical %.1f (df %d)", stat, crit, len(probs)-1)
	}
}

// TestNoisySumUnbiased runs the noise stage 2,000 times on one prepared
// batch (d = 16, 5 reports, Sigma = 20 per server) and checks the
// released noise Sum - exact sum over the 32,000 coordinates: its mean is
// within 4.753 standard errors (0.158) of 0 (variance 2 Sigma^2 per
// coordinate; false-failure probability 2e-6 two-sided), so a bias
// of one unit per server fails it, and its variance is within 4%
// of 2 Sigma^2 (5 standard errors of the sample variance, sqrt(2/N) =
// 0.79% for a Gaussian; below 1e-6).
func TestNoisySumUnbiased(t *testing.T) {
	const sigma, trials = 20.0, 2000
	r := testRound(t, 16, sigma, 8, 2)
	reps := honestReports(t, r, 5, 12)
	o := prepare(t, r, reps)
	want := sumOf(16, reps)
	src := noise.NewSeeded(77)
	var sum, sumsq float64
	var n int
	for range trials {
		la, ha := cloneShare(t, o.leader), cloneShare(t, o.helper)
		if err := la.AddNoise(src); err != nil {
			t.Fatal(err)
		}
		if err := ha.AddNoise(src); err != nil {
			t.Fatal(err)
		}
		if err := ha.AddNoise(src); err == nil {
			t.Fatal("noise added twice")
		}
		hnb, err := ha.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		res, err := o.leaderS.Unshard(la, hnb)
		if err != nil {
			t.Fatal(err)
		}
		if res.NoiseShares != 2 || res.Count != 5 {
			t.Fatalf("noise shares %d count %d", res.NoiseShares, res.Count)
		}
		for i, v := range res.Sum {
			e := float64(v - want[i])
			sum += e
			sumsq += e * e
			n++
		}
	}
	v := 2 * sigma * sigma
	mean := sum / float64(n)
	if se := math.Sqrt(v / float64(n)); math.Abs(mean) > stattest.ZAlpha1e6*se {
		t.Fatalf("noise mean %.3f, more than 4.75 standard errors (%.3f) from 0", mean, se)
	}
	variance := sumsq/float64(n) - mean*mean
	if math.Abs(variance/v-1) > 0.04 {
		t.Fatalf("noise variance %.1f, want %.1f within 4%%", variance, v)
	}
}

// cloneShare deep-copies an aggregate share (the noise stage mutates it).
func cloneShare(t *testing.T, a *AggregateShare) *AggregateShare {
	t.Helper()
	enc, err := a.pshare.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	ps, err := a.r.pn.ParseAggShare(enc, a.count)
	if err != nil {
		t.Fatal(err)
	}
	return &AggregateShare{r: a.r, count: a.count, noised: a.noised, pshare: ps}
}
