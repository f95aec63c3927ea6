package attack

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/blanket-fl/blanket/shared/mechanism"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/roundspec"
)

// Test level shared by every attack in this package: each one-sided
// Clopper-Pearson bound at alphaCP, so a correct charge fails a test with
// probability at most 2·alphaCP = 2e-4; Detectable at power 1 − betaPower.
// The model check (the shipped code's rates against the exact law) fails
// a correct implementation with probability below 1e-6 (|z| > 5 on either
// rate).
const (
	alphaCP   = 1e-4
	betaPower = 0.1
	modelZ    = 5.0
	// underCharge is what every full-size run must detect: an accountant
	// charging less than exact/(1 + underCharge) at δ, with exact the ε of
	// the binned view, fails the test with probability ≥ 1 − betaPower.
	underCharge = 0.10
)

// scenario is one attack: a round configuration, the target's update
// under each hypothesis, everyone else's, and the exact model of the
// binned view of the dimensions the replacement changes.
type scenario struct {
	name   string
	spec   *roundspec.Spec
	target [2][]float64
	others [][]float64
	model  *Model
	delta  float64
	// trials per hypothesis at full size and under -short.
	trials, short int
	// maxTuples bounds the exact enumeration.
	maxTuples int
}

// result is what run measured.
type result struct {
	exact, lower, detect, charged float64
	tightest                      string
	th                            Threshold
	tp, fp, trials                int
}

func (r result) String() string {
	return fmt.Sprintf("exact ε(δ) of the binned view %.4g; threshold test at exact TPR %.4g, FPR %.4g; %d trials per hypothesis: TP %d, FP %d; empirical lower bound %.4g; detectable with probability ≥ %.2g: %.4g (%.1f%% under the exact); charged %.4g (%s)",
		r.exact, r.th.P0, r.th.P1, r.trials, r.tp, r.fp, r.lower, 1-betaPower, r.detect, 100*(1-r.detect/r.exact), r.charged, r.tightest)
}

// run attacks sc: exact law, threshold, simulation of the shipped encoder
// and relay round under both hypotheses, Clopper-Pearson lower bound, and
// the checks: the lower bound is at most the ledger's charge and every
// valid proven row's ε at δ; the shipped code's rates agree with the exact
// law; and (full size only) the run detects an under-charge of
// underCharge.
func run(t *testing.T, sc scenario, seed uint64) result {
	t.Helper()
	pld, err := sc.model.Exact(sc.maxTuples)
	if err != nil {
		t.Fatal(err)
	}
	trials := sc.trials
	if testing.Short() {
		trials = sc.short
	}
	res := result{trials: trials, exact: pld.Epsilon(sc.delta)}
	res.th = pld.ChooseThreshold(trials, alphaCP, betaPower, sc.delta)
	res.detect = res.th.Detect
	if math.IsInf(res.th.T, 1) {
		t.Fatalf("%s: no threshold reaches a positive bound with %d trials", sc.name, trials)
	}

	p := sc.spec.Params()
	rel := sc.spec.Release(1, len(sc.others)+1, int(p.NP))
	rep, err := privacy.Account([]privacy.Release{rel}, sc.delta)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Tightest < 0 {
		t.Fatalf("%s: no row charges the round", sc.name)
	}
	res.charged, res.tightest = rep.Rows[rep.Tightest].Epsilon, rep.Rows[rep.Tightest].Method

	enc, err := sc.spec.Encoder(0)
	if err != nil {
		t.Fatal(err)
	}
	src := noise.NewSeeded(seed)
	var keys []uint64
	count := func(h int) int {
		hits := 0
		for range trials {
			real := make([]mechanism.Message, 0, (len(sc.others)+1)*int(p.K*p.L))
			for i, x := range append([][]float64{sc.target[h]}, sc.others...) {
				msgs, err := enc.Encode(x, src)
				if err != nil {
					t.Fatalf("volunteer %d: %v", i, err)
				}
				real = append(real, msgs...)
			}
			b, _, err := sc.spec.Shuffle(real, src)
			if err != nil {
				t.Fatal(err)
			}
			keys = sc.model.Keys(b, keys)
			if sc.model.LogLR(keys) >= res.th.T {
				hits++
			}
		}
		return hits
	}
	res.tp, res.fp = count(0), count(1)
	res.lower = EpsLower(res.tp, res.fp, trials, alphaCP, sc.delta)
	t.Logf("%s: %v", sc.name, res)

	for h, c := range []struct {
		k int
		p float64
	}{{res.tp, res.th.P0}, {res.fp, res.th.P1}} {
		sd := math.Sqrt(float64(trials) * c.p * (1 - c.p))
		if z := (float64(c.k) - float64(trials)*c.p) / sd; math.Abs(z) > modelZ {
			t.Errorf("%s: hypothesis %d: %d hits in %d trials, the exact law says %.1f (z = %.1f): the shipped round is not the model", sc.name, h, c.k, trials, float64(trials)*c.p, z)
		}
	}
	if res.lower > res.charged {
		t.Errorf("%s: empirical ε ≥ %.4g at δ = %g exceeds the charge %.4g (%s)", sc.name, res.lower, sc.delta, res.charged, res.tightest)
	}
	var valid []string
	for _, row := range rep.Rows {
		if row.Valid && row.Proven && row.Delta <= sc.delta*(1+1e-9) {
			valid = append(valid, fmt.Sprintf("%s %.4g", row.Method, row.Epsilon))
		}
	}
	t.Logf("%s: valid proven rows checked: %s", sc.name, strings.Join(valid, "; "))
	for _, row := range rep.Rows {
		if row.Valid && row.Proven && row.Delta <= sc.delta*(1+1e-9) && res.lower > row.Epsilon {
			t.Errorf("%s: empirical ε ≥ %.4g exceeds the valid proven row %q (%.4g)", sc.name, res.lower, row.Method, row.Epsilon)
		}
	}
	if !testing.Short() && res.detect < res.exact/(1+underCharge) {
		t.Errorf("%s: under-sized: %d trials detect %.4g, below exact %.4g/(1+%g)", sc.name, trials, res.detect, res.exact, underCharge)
	}
	return res
}

// mustSpec builds the round parameters as the operator would
// (roundspec.Build) and the spec every party derives from them.
func mustSpec(t *testing.T, d, n int, o roundspec.Options) *roundspec.Spec {
	t.Helper()
	p, _, err := roundspec.Build(d, n, o)
	if err != nil {
		t.Fatal(err)
	}
	s, err := roundspec.New(p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// unit returns a d-vector with v at the given coordinates, 0 elsewhere.
func unit(d int, v float64, at ...int) []float64 {
	x := make([]float64, d)
	for _, j := range at {
		x[j] = v
	}
	return x
}
