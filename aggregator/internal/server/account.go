package server

import (
	"errors"
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/aggregator/internal/ledger"
	"github.com/blanket-fl/blanket/shared/privacy"
)

// Accountant returns every method's central (epsilon, delta) for the
// adaptive composition of releases at total delta. Config.Accountant nil
// (the default) means the incremental privacy.Session, which the ledger
// composes round by round (a charge costs the same at every round, so
// releases are accounted exactly as realized: no memo and no coarsening
// of n or n_p is needed). A non-nil Accountant (tests inject fakes, or
// privacy.Account) is called on every charge with all charged releases.
type Accountant func(releases []privacy.Release, delta float64) (privacy.Report, error)

// accounting connects the server to the ledger's accountant.
type accounting struct {
	fn Accountant // nil: privacy.Session inside the ledger
}

func newAccounting(fn Accountant) *accounting { return &accounting{fn: fn} }

// ledgerOptions returns the ledger's options: an empty privacy.Session at
// delta (fn nil) or a Composer calling fn.
func (a *accounting) ledgerOptions(target, delta float64) (ledger.Options, error) {
	o := ledger.Options{TargetEpsilon: target, TargetDelta: delta}
	if a.fn != nil {
		o.Composer = a.composer()
		return o, nil
	}
	s, err := privacy.NewSession(delta)
	if err != nil {
		return o, fmt.Errorf("server: accounting session: %w", err)
	}
	o.Session = s
	return o, nil
}

// report returns every method's rows for the ledger's charged releases:
// the ledger's own report (kept from its last charge) or fn's.
func (a *accounting) report(l *ledger.Ledger, delta float64) (privacy.Report, error) {
	if rep, ok := l.Report(); ok {
		return rep, nil
	}
	if a.fn == nil {
		return privacy.Report{}, errors.New("server: the ledger has no report")
	}
	return a.fn(l.Releases(), delta)
}

// composer is the ledger's Composer for a non-nil Accountant: the epsilon
// of the report's tightest valid method without a caveat
// (privacy.Report.Tightest). Caveated rows are never used to admit a
// round.
func (a *accounting) composer() ledger.Composer {
	return func(releases []privacy.Release, delta float64) (float64, string, error) {
		rep, err := a.fn(releases, delta)
		if err != nil {
			return 0, "", err
		}
		if rep.Tightest < 0 || rep.Tightest >= len(rep.Rows) {
			return 0, "", errors.New("server: no valid accounting method without caveat applies to these releases")
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

func finitePtr(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// rowsOf converts a report to EpsilonRows.
func rowsOf(rep privacy.Report) []EpsilonRow {
	out := make([]EpsilonRow, len(rep.Rows))
	for i, r := range rep.Rows {
		out[i] = EpsilonRow{Method: r.Method, Valid: r.Valid, Caveated: r.Caveat != "", Tightest: i == rep.Tightest,
			Family: string(r.Family), Amplification: string(r.Amplification), Composition: string(r.Composition), Proven: r.Proven}
		if r.Valid {
			out[i].Epsilon, out[i].Delta = finitePtr(r.Epsilon), finitePtr(r.Delta)
		}
	}
	return out
}
