// Package accounting connects the aggregator to the privacy ledger's
// accountant: the ledger's options (an incremental privacy.Session, or a
// Composer around an injected Accountant that admits rounds by the
// report's tightest row without caveat), the report of every method's
// cumulative guarantee, and its rows as the API and the round history
// serve them (EpsilonRow).
package accounting

import (
	"errors"
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/shared/ledger"
	"github.com/blanket-fl/blanket/shared/privacy"
)

// Accountant returns every method's central (epsilon, delta) for the
// adaptive composition of releases at total delta. A nil Accountant
// (the default) means the incremental privacy.Session, which the ledger
// composes round by round (a charge costs the same at every round, so
// releases are accounted exactly as realized: no memo and no coarsening
// of n or n_p is needed). A non-nil Accountant (tests inject fakes, or
// privacy.Account) is called on every charge with all charged releases.
type Accountant func(releases []privacy.Release, delta float64) (privacy.Report, error)

// Accounting connects the aggregator to the ledger's accountant.
type Accounting struct {
	fn Accountant // nil: privacy.Session inside the ledger
}

// New returns the accounting with fn (nil: privacy.Session inside the
// ledger).
func New(fn Accountant) *Accounting { return &Accounting{fn: fn} }

// LedgerOptions returns the ledger's options: an empty privacy.Session at
// delta (fn nil) or a Composer calling fn.
func (a *Accounting) LedgerOptions(target, delta float64) (ledger.Options, error) {
	o := ledger.Options{TargetEpsilon: target, TargetDelta: delta}
	if a.fn != nil {
		o.Composer = a.Composer()
		return o, nil
	}
	s, err := privacy.NewSession(delta)
	if err != nil {
		return o, fmt.Errorf("accounting: accounting session: %w", err)
	}
	o.Session = s
	return o, nil
}

// Report returns every method's rows for the ledger's charged releases:
// the ledger's own report (kept from its last charge) or fn's.
func (a *Accounting) Report(l *ledger.Ledger, delta float64) (privacy.Report, error) {
	if rep, ok := l.Report(); ok {
		return rep, nil
	}
	if a.fn == nil {
		return privacy.Report{}, errors.New("accounting: the ledger has no report")
	}
	return a.fn(l.Releases(), delta)
}

// Composer is the ledger's Composer for a non-nil Accountant: the epsilon
// of the report's tightest valid method without a caveat
// (privacy.Report.Tightest). Caveated rows are never used to admit a
// round; without a valid proven row the answer is +Inf
// (ledger.NoProvenMethod), which the ledger refuses as past the budget.
func (a *Accounting) Composer() ledger.Composer {
	return func(releases []privacy.Release, delta float64) (float64, string, error) {
		rep, err := a.fn(releases, delta)
		if err != nil {
			return 0, "", err
		}
		if rep.Tightest < 0 || rep.Tightest >= len(rep.Rows) {
			// No valid proven row at delta: the ledger refuses the round
			// as past the budget (a *ledger.BudgetError), not as a
			// composer failure, so the server stops announcing instead of
			// exiting.
			return math.Inf(1), ledger.NoProvenMethod, nil
		}
		row := rep.Rows[rep.Tightest]
		return row.Epsilon, row.Method, nil
	}
}

// EpsilonRow is one accounting method's cumulative guarantee, as served by
// the API and kept in the round history. Epsilon and Delta are null when
// the method does not apply. Family, Amplification and Composition
// identify the method in structured form (privacy.AccountRow), so that
// clients never parse Method, which is for display.
type EpsilonRow struct {
	Method        string   `json:"method"`
	Epsilon       *float64 `json:"epsilon"`
	Delta         *float64 `json:"delta"`
	Valid         bool     `json:"valid"`
	Caveated      bool     `json:"caveated,omitempty"`
	Tightest      bool     `json:"tightest,omitempty"`
	Family        string   `json:"family,omitempty"`
	Amplification string   `json:"amplification,omitempty"`
	Composition   string   `json:"composition,omitempty"`
	Proven        bool     `json:"proven,omitempty"`
}

// FinitePtr returns &v, or nil for a NaN or infinite v (JSON null).
func FinitePtr(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// RowsOf converts a report to EpsilonRows.
func RowsOf(rep privacy.Report) []EpsilonRow {
	out := make([]EpsilonRow, len(rep.Rows))
	for i, r := range rep.Rows {
		out[i] = EpsilonRow{Method: r.Method, Valid: r.Valid, Caveated: r.Caveat != "", Tightest: i == rep.Tightest,
			Family: string(r.Family), Amplification: string(r.Amplification), Composition: string(r.Composition), Proven: r.Proven}
		if r.Valid {
			out[i].Epsilon, out[i].Delta = FinitePtr(r.Epsilon), FinitePtr(r.Delta)
		}
	}
	return out
}
