package privacy

import (
	"math"
	"testing"
)

// discreteGaussianHockey returns q·H_{e^eps}(N_Z(0, σ²) ‖ N_Z(shift, σ²)),
// summed exactly over the integers within 40σ (the tails beyond are below
// 1e-300): the δ(ε) of a release that is N_Z(0, σ²) with probability q and
// otherwise identical in both worlds.
func discreteGaussianHockey(sigma, shift, q, eps float64) float64 {
	lo, hi := -40*sigma, 40*sigma+shift
	var norm float64
	for z := math.Floor(lo); z <= hi; z++ {
		norm += math.Exp(-z * z / (2 * sigma * sigma))
	}
	var d float64
	for z := math.Floor(lo); z <= hi; z++ {
		p := math.Exp(-z*z/(2*sigma*sigma)) / norm
		p2 := math.Exp(-(z-shift)*(z-shift)/(2*sigma*sigma)) / norm
		d += max(0, p-math.Exp(eps)*p2)
	}
	return q * d
}

// TestSecAggCountNotAmplified: the released pair (noisy sum, exact count)
// of one secure-summation round with no other volunteer is, under
// replacing the volunteer's data, (count 0, N_Z(0, σ²)) or, with
// probability q, (count 1, x + N_Z(0, σ²)) against x' + N_Z(0, σ²): the
// count says when the volunteer took part, and then nothing is amplified.
// Its exact δ at the charged ε (Account's replace-one row) is within the
// target; at the ε that group privacy on the Poisson-amplified add/remove
// curve gives (the route an earlier build also used at q < 1) it is far
// above it, so that route is not a guarantee of what is released at
// q < 1. (Sample size: exact sums, no sampling.)
func TestSecAggCountNotAmplified(t *testing.T) {
	const (
		sigma, sens, q, delta = 300.0, 138.0, 0.1, 1e-5
	)
	r := Release{Round: 1, Protocol: ProtocolSecAgg, Randomizer: RandomizerDiscreteGaussian, D: 1, N: 1,
		SecAggSigma: sigma, SecAggSensitivity: sens, CheckInRate: q}
	rep, err := Account([]Release{r}, delta)
	if err != nil || rep.Tightest < 0 {
		t.Fatalf("account: %v, tightest %d", err, rep.Tightest)
	}
	charged := rep.Rows[rep.Tightest].Epsilon
	if d := discreteGaussianHockey(sigma, 2*sens, q, charged); d > delta {
		t.Errorf("charged eps %v: exact delta of the released pair %v > %v", charged, d, delta)
	}
	c, err := secAggRoundCurve(r)
	if err != nil {
		t.Fatal(err)
	}
	group := secAggReplaceRow(c.Eps, secAggReplaceCurve(r), nil, 1, delta, true)
	if !group.Valid || !(group.Epsilon < charged) {
		t.Fatalf("group-privacy route %+v, charged %v", group.Bound, charged)
	}
	if d := discreteGaussianHockey(sigma, 2*sens, q, group.Epsilon); d <= 100*delta {
		t.Errorf("group-privacy route eps %v: exact delta %v, expected far above %v", group.Epsilon, d, delta)
	} else {
		t.Logf("q = %v: charged eps %.4g (exact delta %.3g); group-privacy route eps %.4g has exact delta %.3g", q, charged,
			discreteGaussianHockey(sigma, 2*sens, q, charged), group.Epsilon, d)
	}
	// The same holds inside a Session (what the ledger uses).
	s, err := NewSession(delta)
	if err != nil {
		t.Fatal(err)
	}
	_, srep, err := s.With(r)
	if err != nil || srep.Tightest < 0 || srep.Rows[srep.Tightest].Epsilon < charged*(1-1e-9) {
		t.Fatalf("session: %v, %+v", err, srep)
	}
}
