package accounting

import (
	"errors"
	"math"
	"path/filepath"
	"testing"

	"github.com/blanket-fl/blanket/shared/ledger"
	"github.com/blanket-fl/blanket/shared/privacy"
)

// gaussianTopk is an SS-Topk release with the Gaussian randomizer whose
// local delta over the changed dimensions is just below the target 1e-5
// (2·k·l = 628 changed dimensions at delta0 = 1e-5/700): no shuffle method
// covers an (eps0, delta0)-LDP randomizer with delta0 > 0, the exact local
// Gaussian row does not cover SS-Topk (its index sets depend on the data),
// and SS-Topk's row without amplification (docs/privacy.md, "SS-Topk has
// no local row") charges 628·delta0 per round, so at the target delta 1e-5
// round 1 is certified and round 2 is not. (SS-Double at -deltal 1e-5,
// which made the aggregator exit after round 1, is now certified by the
// local Gaussian row: privacy.TestLocalGaussianRow.)
func gaussianTopk(round int) privacy.Release {
	return privacy.Release{Round: round, Protocol: privacy.ProtocolSSTopk, Randomizer: privacy.RandomizerGaussian,
		Eps0: 0.25, Delta0: 1e-5 / 700, D: 7850, K: 157, L: 2, N: 200, NP: 20}
}

// TestNoProvenMethodIsRefused: a round that no valid proven method
// certifies at the target delta is refused as past the budget (a
// *ledger.BudgetError, ErrBudgetExhausted, not ErrComposer), through the
// ledger's Session and through the Composer around an Accountant alike;
// nothing is charged and the ledger keeps answering. (The aggregator used
// to exit on such a round: "composer failed: round 2: no valid proven
// accounting method".)
func TestNoProvenMethodIsRefused(t *testing.T) {
	for _, a := range []*Accounting{New(nil), New(privacy.Account)} {
		o, err := a.LedgerOptions(1e6, 1e-5)
		if err != nil {
			t.Fatal(err)
		}
		l, err := ledger.Open(filepath.Join(t.TempDir(), "ledger.jsonl"), o)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Charge(gaussianTopk(1)); err != nil {
			t.Fatalf("session %v: round 1: %v", o.Session != nil, err)
		}
		spent, _, _ := l.Spent()
		for _, check := range []func() error{
			func() error { _, err := l.CanCharge(gaussianTopk(2)); return err },
			func() error { return l.Charge(gaussianTopk(2)) },
		} {
			err := check()
			var be *ledger.BudgetError
			if !errors.As(err, &be) || !errors.Is(err, ledger.ErrBudgetExhausted) || errors.Is(err, ledger.ErrComposer) {
				t.Fatalf("session %v: round 2: err = %v, want a budget refusal", o.Session != nil, err)
			}
			if be.Round != 2 || !math.IsInf(be.WouldBe, 1) || be.Method != ledger.NoProvenMethod {
				t.Fatalf("session %v: round 2: %+v", o.Session != nil, be)
			}
		}
		if eps, _, _ := l.Spent(); eps != spent || len(l.Releases()) != 1 {
			t.Fatalf("session %v: refusal charged something: eps %v -> %v, %d releases", o.Session != nil, spent, eps, len(l.Releases()))
		}
		l.Close()
	}
}
