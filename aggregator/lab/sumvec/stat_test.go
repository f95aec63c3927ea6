package sumvec

import (
	"math"
	"testing"

	"github.com/blanket-fl/blanket/shared/noise"
)

// The statistical tests draw from fixed seeds, so each either always
// passes or always fails; each states the probability that a correct
// implementation would fail it for a random seed.

// TestNoisySumUnbiased runs the noise stage 2,000 times on one prepared
// batch (d = 16, 5 reports, Sigma = 20 per server) and checks the
// released noise Sum - exact sum over the 32,000 coordinates: its mean is
// within 4.753 standard errors (0.158) of 0 (variance 2 Sigma^2 per
// coordinate; false-failure probability 2e-6 two-sided), so an offset
// error of one unit per server fails it, and its variance is within 4%
// of 2 Sigma^2 (5 standard errors of the sample variance, sqrt(2/N) =
// 0.79% for a Gaussian; below 1e-6).
func TestNoisySumUnbiased(t *testing.T) {
	const sigma, trials = 20.0, 2000
	r := testRound(t, 16, 6, sigma, 8, 2)
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
	if se := math.Sqrt(v / float64(n)); math.Abs(mean) > zAlpha1e6*se {
		t.Fatalf("noise mean %.3f, more than 4.75 standard errors (%.3f) from 0", mean, se)
	}
	variance := sumsq/float64(n) - mean*mean
	if math.Abs(variance/v-1) > 0.04 {
		t.Fatalf("noise variance %.1f, want %.1f within 4%%", variance, v)
	}
}

// TestQuantizeUnbiased: 20,000 conditional roundings of one update at the
// clip norm (d = 64, 8 bits, c = 127, defaultBeta) with every scaled
// entry non-integer. Per coordinate z_i = (mean_i - y_i) /
// sqrt(p_i (1 - p_i) / T) is approximately standard normal if E[q_i] = y_i
// (the conditional bias bound, 64^(1/2) 2^-20 / (1 - 2^-20) < 1e-5 in L2,
// is far below the test's resolution of about 0.0035 per coordinate), so
// sum z_i^2 is compared with the chi-square(64) quantile at 1e-6
// (false-failure probability about 1e-6).
func TestQuantizeUnbiased(t *testing.T) {
	const d, trials = 64, 20000
	p, err := NewParams(d, 1, 8, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	x := randomUpdate(noise.NewSeeded(5), d, 1) // norm about 4.6: clipped to 1
	y, err := clipScale(p, x)
	if err != nil {
		t.Fatal(err)
	}
	src := noise.NewSeeded(6)
	sums := make([]float64, d)
	for range trials {
		q, err := Quantize(p, x, src)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range q {
			if f := math.Floor(y[i]); float64(v) != f && float64(v) != f+1 {
				t.Fatalf("q[%d] = %d is not a neighbour of %v", i, v, y[i])
			}
			sums[i] += float64(v)
		}
	}
	var stat float64
	for i := range d {
		pi := y[i] - math.Floor(y[i])
		if pi == 0 {
			t.Fatalf("scaled entry %d is an integer; pick another seed", i)
		}
		z := (sums[i]/trials - y[i]) / math.Sqrt(pi*(1-pi)/trials)
		stat += z * z
	}
	if crit := chiSquareCritical(d); stat > crit {
		t.Fatalf("sum of z^2 = %.1f > chi-square(%d) critical %.1f: rounding biased", stat, d, crit)
	}
}

// cloneShare deep-copies an aggregate share (the noise stage mutates it).
func cloneShare(t *testing.T, a *AggregateShare) *AggregateShare {
	t.Helper()
	enc, err := a.share.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	c := &AggregateShare{r: a.r, count: a.count, noised: a.noised, share: a.r.vdaf.AggregateInit()}
	if err := c.share.UnmarshalBinary(enc); err != nil {
		t.Fatal(err)
	}
	return c
}

// zAlpha1e6 is the standard normal quantile at 1 - 1e-6 (one-sided), as
// shared/internal/stattest's (internal to shared/, so repeated here).
const zAlpha1e6 = 4.753424

// chiSquareCritical is the Wilson-Hilferty approximation of the
// chi-square(k) quantile at 1 - 1e-6 (shared/internal/stattest's).
func chiSquareCritical(k int) float64 {
	kf := float64(k)
	c := 1 - 2/(9*kf) + zAlpha1e6*math.Sqrt(2/(9*kf))
	return kf * c * c * c
}
