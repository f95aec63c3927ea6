package accounting

import (
	"errors"
	"math"
	"path/filepath"
	"testing"

	"github.com/blanket-fl/blanket/aggregator/internal/ledger"
	"github.com/blanket-fl/blanket/shared/privacy"
)

// gaussianDouble is the release of `-protocol ss-double -randomizer
// gaussian -deltal 1e-5` at the defaults (d = 7850, k = 157, n = 200,
// n_p = 20): eps0 = 78.5/157, delta0 = 1e-5/157. No shuffle method covers
// an (eps0, delta0)-LDP randomizer with delta0 > 0, and the local row's
// delta is round·1e-5: at the target delta 1e-5 round 1 is certified and
// round 2 is not.
func gaussianDouble(round int) privacy.Release {
	return privacy.Release{Round: round, Protocol: privacy.ProtocolSSDouble, Randomizer: privacy.RandomizerGaussian,
		Eps0: 0.5, Delta0: 1e-5 / 157, D: 7850, K: 157, N: 200, NP: 20}
}

// TestNoProvenMethodIsRefused: a round that no valid proven method
// certifies at the target delta is refused as past the budget (a
// *ledger.BudgetError, ErrBudgetExhausted, not ErrComposer), through the
// ledger's Session and through the Composer around an Accountant alike;
// nothing is charged and the ledger keeps answering. (The aggregator used
// to exit after round 1 of this configuration: "composer failed: round
// 2: no valid proven accounting method".)
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
		if err := l.Charge(gaussianDouble(1)); err != nil {
			t.Fatalf("session %v: round 1: %v", o.Session != nil, err)
		}
		spent, _, _ := l.Spent()
		for _, check := range []func() error{
			func() error { _, err := l.CanCharge(gaussianDouble(2)); return err },
			func() error { return l.Charge(gaussianDouble(2)) },
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
