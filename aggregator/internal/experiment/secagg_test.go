package experiment

import (
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/blanket-fl/blanket/aggregator/internal/accounting"
	"github.com/blanket-fl/blanket/aggregator/internal/params"
	"github.com/blanket-fl/blanket/shared/ledger"
	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/pine"
	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/wire"
)

// tinySecAgg is a small secure-summation run: 800 volunteers of 10 digits
// (the run's partition), q = 1 (all 800 every round, as the product), 2
// rounds, sigma calibrated to replace-one eps 4 over the 2 rounds.
func tinySecAgg() Options {
	o := smallOptions("secagg")
	o.SecAgg = secaggParams{Pop: 800, PerUser: 10, Q: 1, Rounds: 2}.withDefaults()
	return o
}

// TestSecAggLearnsAndAccounts: two rounds of the secagg method (PINE) on
// the embedded digits beat chance (10 classes: 10%) by far, every
// volunteer takes part at q = 1, and the claim is exactly the
// accountant's: no add/remove ε is claimed (the row is not applicable:
// the released count is not covered), the replace-one ε is
// privacy.Account's tightest row of the round spec's releases built here
// from the run's rounds, and meets the calibration target.
func TestSecAggLearnsAndAccounts(t *testing.T) {
	o := tinySecAgg()
	res := simulateJSON(t, o)
	if len(res) != 1 {
		t.Fatalf("got %d results", len(res))
	}
	r := res[0]
	if r.Final < 0.5 {
		t.Errorf("secagg accuracy after 2 rounds = %.3f, want >= 0.5 (chance 0.1)", r.Final)
	}
	if len(r.Rounds) != 2 || r.Pop != 800 {
		t.Fatalf("rounds %d, population %d", len(r.Rounds), r.Pop)
	}
	spec, _, err := secaggSpec(o.SecAgg, logreg.MNISTParams, 800)
	if err != nil {
		t.Fatal(err)
	}
	var rs []privacy.Release
	for _, rec := range r.Rounds {
		if rec.Participants != 800 {
			t.Errorf("round %d: %d participants of 800 at q = 1", rec.Round, rec.Participants)
		}
		rs = append(rs, spec.Release(rec.Round, rec.Participants, 0))
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
	if !(r.Claim.Total <= 4*(1+1e-9) && r.Claim.Delta == 1e-5) {
		t.Errorf("claim %+v: want replace-one <= 4 at delta 1e-5", r.Claim)
	}
}

// TestSecAggDeterministic: a fixed seed gives the same run whatever the
// number of workers; another seed does not; -protocols pine is the same
// method (an alias).
func TestSecAggDeterministic(t *testing.T) {
	o := tinySecAgg()
	o.SecAgg.Rounds = 1
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
	o.Protocols = []string{secaggAlias}
	b := strip(simulateJSON(t, o))
	if len(b) != 1 || b[0].ID != "secagg" || a[0].Final != b[0].Final || !slices.Equal(a[0].Rounds, b[0].Rounds) || a[0].Claim != b[0].Claim {
		t.Errorf("same seed, different runs:\n%+v\n%+v", a[0], b[0])
	}
	o.Seed++
	c := strip(simulateJSON(t, o))
	if slices.Equal(a[0].Rounds, c[0].Rounds) {
		t.Error("different seeds gave identical runs")
	}
}

// TestSecAggIsTheProducts is the equivalence of the runner's secure
// summation with the product's at make run's settings (scripts/runlocal
// starts the aggregator with -protocol secagg -check-in 1 -expected-n 400
// -rounds 5 -epsilon 4 and the default clip, delta and server learning
// rate):
//
//   - the runner's defaults are those settings;
//   - σ is the aggregator's own calibration (params.SecAggSigma for
//     those flags), the server learning rate its roundspec default, and
//     the PINE instance the volunteers and servers use is
//     pine.ForBlanket(7850, C) (same configuration);
//   - the ε the runner claims for a run of 5 full rounds equals what the
//     aggregator's ledger (ledger.Open with accounting's options, the
//     incremental privacy.Session) has spent after charging the same 5
//     rounds, and is at most 4; a 6th round is refused by the ledger;
//   - the charge lies between an upper and a lower bound written here
//     from their formulas (below);
//   - at 0.99 σ the claim exceeds 4 (σ is the smallest).
func TestSecAggIsTheProducts(t *testing.T) {
	const d = logreg.MNISTParams
	sp := defaultSecAggParams()
	if sp.Pop != 400 || sp.Q != 1 || sp.Rounds != 5 || sp.Eps != 4 || sp.Delta != 1e-5 ||
		sp.Clip != roundspec.DefaultSecAggClip || sp.ServerLR != roundspec.DefaultSecAggLR || sp.perVolunteer(8000) != 20 {
		t.Fatalf("defaults %+v are not make run's", sp)
	}
	sr, err := newSecAggRun(sp, d, sp.Pop)
	if err != nil {
		t.Fatal(err)
	}
	agg := params.Choice{Protocol: wire.ProtocolSecAgg.String(), Randomizer: "laplace", CheckIn: 1} // the aggregator's flag defaults
	sigma, err := params.SecAggSigma(d, 400, agg, 5, 4, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	agg.Sigma = sigma
	_, lr, err := params.Build(d, 400, agg)
	if err != nil {
		t.Fatal(err)
	}
	pn, err := pine.ForBlanket(d, roundspec.DefaultSecAggClip)
	if err != nil {
		t.Fatal(err)
	}
	if sr.sigma != sigma || sr.lr != lr || sr.pn.Config() != pn.Config() || sr.sens != pn.Sensitivity() {
		t.Fatalf("runner: sigma %v, lr %v, sensitivity %v, PINE %+v; aggregator: sigma %v, lr %v, sensitivity %v, PINE %+v",
			sr.sigma, sr.lr, sr.sens, sr.pn.Config(), sigma, lr, pn.Sensitivity(), pn.Config())
	}
	m, err := secaggMethod(sp, d, sp.Pop, tableSecAgg)
	if err != nil {
		t.Fatal(err)
	}
	run := &runResult{Users: 400, Pop: 400}
	for r := range 5 {
		run.Rounds = append(run.Rounds, roundRecord{Round: r + 1, Participants: 400, CheckInRate: 1})
	}
	claim := m.claim(run)
	lo, err := accounting.New(nil).LedgerOptions(4, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.Open(filepath.Join(t.TempDir(), "ledger"), lo)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for r := 1; r <= 5; r++ {
		if err := l.Charge(sr.spec.Release(r, 400, 0)); err != nil {
			t.Fatalf("the ledger refuses round %d: %v", r, err)
		}
	}
	spent, _, _ := l.Spent()
	if math.Abs(claim.Total-spent) > 1e-9*spent || !(claim.Total <= 4*(1+1e-9)) {
		t.Fatalf("runner claims eps %v, the ledger spent %v (target 4)", claim.Total, spent)
	}
	if err := l.Charge(sr.spec.Release(6, 400, 0)); err == nil {
		t.Error("the ledger admits a 6th round")
	}
	// The charge lies between two computations written in pine_test.go
	// from their formulas, for the better of the ledger's two replace-one
	// routes (sensitivity 2Δ; or group privacy, 2ε' at δ' = δ/(1 + e^ε'),
	// of add/remove Δ): at most Balle et al.'s conversion of the discrete
	// Gaussian's RDP curve α·R·s²/(2σ²) on integer orders, at least the
	// exact ε of the continuous Gaussian with the same RDP curve.
	const delta = 1e-5
	rho := func(s float64) float64 { return 5 * s * s / (2 * sigma * sigma) }
	upper1 := balleEpsilon(rho(2*sr.sens), delta)
	e2 := balleEpsilon(rho(sr.sens), delta/2)
	for range 200 {
		e := balleEpsilon(rho(sr.sens), delta/(1+math.Exp(e2)))
		if math.Abs(e-e2) < 1e-12 {
			break
		}
		e2 = e
	}
	upper := math.Min(upper1, 2*e2)
	lower := math.Min(gaussEpsilon(math.Sqrt(2*rho(2*sr.sens)), delta), 2*gaussEpsilon(math.Sqrt(2*rho(sr.sens)), delta))
	t.Logf("sigma %.1f units (%.3f x sensitivity %.0f = %.5f C): eps %.6f, Balle (formula) %.6f, exact Gaussian %.6f",
		sigma, sigma/sr.sens, sr.sens, sr.sens/sr.pn.Scale()/sp.Clip, claim.Total, upper, lower)
	if !(lower <= claim.Total && claim.Total <= upper*(1+1e-9)) {
		t.Errorf("charged eps %v outside [%v, %v]", claim.Total, lower, upper)
	}
	sp2 := sp
	sp2.Sigma = 0.99 * sigma
	m2, err := secaggMethod(sp2, d, sp.Pop, tableSecAgg)
	if err != nil {
		t.Fatal(err)
	}
	if c := m2.claim(run); !(c.Total > 4) {
		t.Errorf("0.99 sigma still meets eps 4 (claim %v): not the smallest", c.Total)
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
