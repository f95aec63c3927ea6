package audit

import (
	"math"
	"testing"

	"github.com/blanket-fl/blanket/shared/mechanism"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/randomizer"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/wire"
)

// unshuffledRelay forwards the real messages in arrival order (the
// target's first), then the dummies: a relay that forgot to shuffle.
func unshuffledRelay(spec *roundspec.Spec, real []mechanism.Message, src noise.Source) (mechanism.Batch, error) {
	b, _, err := spec.Shuffle(real, src)
	if err != nil {
		return b, err
	}
	inReal := map[*float64]bool{}
	for i := range real {
		inReal[&real[i].Values[0]] = true
	}
	var dummies []mechanism.Message
	for _, m := range b.Messages {
		if !inReal[&m.Values[0]] {
			dummies = append(dummies, m)
		}
	}
	b.Messages = append(append([]mechanism.Message(nil), real...), dummies...)
	return b, nil
}

// ssSimpleGaussian is SS-Simple with the Gaussian randomizer at d = 24,
// n = n_p = 2 volunteers (cheap trials), local budget epsL.
func ssSimpleGaussian(t *testing.T, epsL float64) *roundspec.Spec {
	t.Helper()
	p, _, err := roundspec.Build(24, 2, roundspec.Options{Protocol: wire.ProtocolSSSimple, Randomizer: wire.RandomizerGaussian, NP: 2, EpsL: epsL, Clip: 0.5, MinBatch: 1})
	if err != nil {
		t.Fatal(err)
	}
	s, err := roundspec.New(p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// chargeOf is the per-round ε the ledger charges for spec with n = n_p = 2
// (what Run reports as Charged).
func chargeOf(t *testing.T, spec *roundspec.Spec, delta float64) float64 {
	t.Helper()
	rep, err := privacy.Account([]privacy.Release{spec.Release(1, 2, 2)}, delta)
	if err != nil || rep.Tightest < 0 {
		t.Fatalf("no proven charge: %v", err)
	}
	return rep.Rows[rep.Tightest].Epsilon
}

// unitChargeBudget is the local budget ε_l at which the ledger charges
// SS-Simple/Gaussian (d = 24, n = n_p = 2) exactly 1 per round (the
// accountant composes the Gaussian reports exactly, so the charge is far
// below ε_l).
func unitChargeBudget(t *testing.T, delta float64) float64 {
	t.Helper()
	lo, hi := 0.5, 64.0
	for hi-lo > 1e-4 {
		mid := (lo + hi) / 2
		if chargeOf(t, ssSimpleGaussian(t, mid), delta) < 1 {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// unshuffledTruth is the exact ε at delta of the unshuffled canary with
// the encoder of spec: the target's 24 values are Gaussian shifts by 1
// (normalized +C against −C) with the randomizer's σ, identifiable by
// position, so the view is μ-GDP with μ = √24/σ and gdpEpsilon is exact
// (the others' reports and the dummies do not depend on the target).
func unshuffledTruth(t *testing.T, spec *roundspec.Spec, delta float64) float64 {
	t.Helper()
	g, ok := spec.Randomizer().Unwrap().(*randomizer.Gaussian)
	if !ok {
		t.Fatal("not the Gaussian randomizer")
	}
	return gdpEpsilon(math.Sqrt(24)/g.Sigma(), delta)
}

// TestAuditCatchesUndercharge: the shuffle audit's machinery (all 12
// attacks, thresholds on calibration trials, Clopper-Pearson on fresh
// ones, Alpha = 1e-3 per bound) catches a leak whose true ε is k times the
// charge, at the trial count power.go's Detectable says suffices with a
// margin (the smallest T on a doubling grid from 500 with Detectable(T)
// below 0.9 times the leak's true ε: Detectable(T) alone is where an
// optimal test catches a Gaussian-shaped leak with probability >= 1/2,
// and the attacks pick their thresholds on calibration trials; the seed is
// fixed, so the outcome is deterministic). The canary: SS-Simple with the
// Gaussian randomizer (d = 24, n = n_p = 2, ε_l chosen so that the ledger
// charges 1: unitChargeBudget), a relay
// that does not shuffle (the target's values first) and volunteers whose
// randomizer runs at the larger budget ε_l' that makes the view's exact ε
// k times the charge (unshuffledTruth: μ-GDP, exact). k = 5 and k = 2;
// the trials each needed are logged (docs/privacy.md quotes them).
func TestAuditCatchesUndercharge(t *testing.T) {
	if testing.Short() {
		t.Skip("the audit tier runs without -short")
	}
	const alpha, delta, margin = 1e-3, 1e-5, 0.9
	base := unitChargeBudget(t, delta)
	spec := ssSimpleGaussian(t, base)
	t.Logf("the honest randomizer's unshuffled view: true eps %.3f", unshuffledTruth(t, spec, delta))
	for _, k := range []float64{5, 2} {
		// ε_l' with unshuffledTruth = k·charge (the charge is 1 here;
		// checked below).
		lo, hi := base, 256.0
		for hi-lo > 1e-3 {
			mid := (lo + hi) / 2
			if unshuffledTruth(t, ssSimpleGaussian(t, mid), delta) < k {
				lo = mid
			} else {
				hi = mid
			}
		}
		leaky := ssSimpleGaussian(t, hi)
		truth := unshuffledTruth(t, leaky, delta)
		enc, err := leaky.Encoder(0)
		if err != nil {
			t.Fatal(err)
		}
		trials := 500
		for {
			if d, ok := Detectable(trials, alpha, delta, 1); ok && d < margin*truth {
				break
			}
			trials *= 2
		}
		res, err := Run(spec, Options{Volunteers: 2, Trials: trials, Alpha: alpha, Seed: 7, Pipeline: unshuffledRelay, Encoder: enc})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("k = %v: randomizer at eps_l' = %.3g, true eps %.3f against the charge %.3f; %d trials (detectable %.3f): lower bound %.3f", k, hi, truth, res.Charged, trials, res.Detectable, res.EpsLower)
		if math.Abs(res.Charged-1) > 1e-3 {
			t.Fatalf("charged %v, want 1 (unitChargeBudget)", res.Charged)
		}
		if res.EpsLower <= res.Charged {
			t.Errorf("k = %v: a %vx under-charge passed: lower bound %.3f, charge %.3f", k, k, res.EpsLower, res.Charged)
		}
		if res.EpsLower > truth {
			t.Errorf("k = %v: lower bound %.3f above the truth %.3f", k, res.EpsLower, truth)
		}
	}
}
