package accounting

import (
	"path/filepath"
	"testing"

	"github.com/blanket-fl/blanket/shared/ledger"
	"github.com/blanket-fl/blanket/shared/privacy"
)

// TestAccountingSessionExact: with no Accountant configured the ledger
// composes through a privacy.Session on the releases exactly as realized
// (the former memo rounded n and n_p down to four significant bits) and
// serves the report's structured rows.
func TestAccountingSessionExact(t *testing.T) {
	a := New(nil)
	o, err := a.LedgerOptions(1000, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	if o.Session == nil || o.Composer != nil {
		t.Fatalf("options %+v: want a session", o)
	}
	l, err := ledger.Open(filepath.Join(t.TempDir(), "ledger.jsonl"), o)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var rels []privacy.Release
	for i, np := range []int{74, 67, 66, 65} {
		r := privacy.Release{Round: i + 1, Protocol: privacy.ProtocolSSTopk, Randomizer: privacy.RandomizerLaplace,
			Eps0: 0.5, D: 7850, K: 157, L: 16, N: 200, NP: np}
		rels = append(rels, r)
		if err := l.Charge(r); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := a.Report(l, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	rows := RowsOf(rep)
	tight := -1
	for i, r := range rows {
		if r.Tightest {
			tight = i
		}
		if r.Family == "" || r.Composition == "" || r.Amplification == "" {
			t.Errorf("row %q lacks its structured identity: %+v", r.Method, r)
		}
	}
	if tight < 0 || !rows[tight].Proven || rows[tight].Caveated {
		t.Fatalf("tightest row %d", tight)
	}
	// The full recomputation of the same releases agrees within the
	// session's grid slack (it is never coarsened now).
	full, err := privacy.Account(rels, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	got, want := *rows[tight].Epsilon, full.Rows[full.Tightest].Epsilon
	if got < 0.99*want || got > 1.01*want {
		t.Errorf("session eps %v, Account %v", got, want)
	}
	if eps, _, _ := l.Spent(); eps != got {
		t.Errorf("ledger spent %v, report tightest %v", eps, got)
	}
}
