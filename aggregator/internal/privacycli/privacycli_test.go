package privacycli

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/blanket-fl/blanket/aggregator/internal/experiment"
	"github.com/blanket-fl/blanket/aggregator/internal/params"
	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/pine"
	"github.com/blanket-fl/blanket/shared/privacy"
)

func run(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Main(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestPresets runs each preset (with overrides that keep the test fast
// where the preset is slow) in JSON and table form and checks that the
// row marked tightest is the minimum ε over valid uncaveated rows, that
// its δ meets the target, and that the table marks the same row with '*'.
func TestPresets(t *testing.T) {
	cases := []struct {
		name string
		args []string
		rows int // minimum number of valid rows
	}{
		{"flame-simple", []string{"-preset", "flame-simple"}, 5},
		{"flame-double", []string{"-preset", "flame-double"}, 10},
		{"flame-topk 3 rounds", []string{"-preset", "flame-topk", "-rounds", "3"}, 10},
		{"apes smaller n", []string{"-preset", "apes", "-n", "2000"}, 5},
		{"checkin", []string{"-preset", "checkin", "-rounds", "100"}, 2},
		{"custom rgb", []string{"-protocol", "ss-simple", "-randomizer", "rgb", "-b", "4", "-eps0", "1", "-n", "5000", "-d", "3", "-delta", "1e-6"}, 4},
		{"secagg", []string{"-preset", "secagg"}, 1},
		{"custom secagg", []string{"-protocol", "secagg", "-randomizer", "discrete-gaussian", "-sigma", "250", "-sensitivity", "137.8", "-rate", "0.05", "-n", "200", "-d", "7850", "-rounds", "20", "-delta", "1e-5"}, 1},
		{"dp-gaussian", []string{"-protocol", "dp-gaussian", "-randomizer", "gaussian", "-sigma", "1.1", "-n", "100", "-d", "10", "-rounds", "50", "-delta", "1e-5"}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := run(append(c.args, "-json")...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			var rep jsonReport
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("bad JSON: %v\n%s", err, out)
			}
			valid, best := 0, -1
			for i, r := range rep.Rows {
				if !r.Valid {
					if r.Reason == "" || r.Epsilon != nil {
						t.Errorf("invalid row %q: reason %q, epsilon %v", r.Method, r.Reason, r.Epsilon)
					}
					continue
				}
				valid++
				if *r.Delta > rep.Delta*(1+1e-9) || !(*r.Epsilon >= 0) {
					t.Errorf("row %q (%v, %v) misses delta %v", r.Method, *r.Epsilon, *r.Delta, rep.Delta)
				}
				if r.Caveat == "" && (best < 0 || *r.Epsilon < *rep.Rows[best].Epsilon) {
					best = i
				}
			}
			if valid < c.rows {
				t.Errorf("%d valid rows, want >= %d", valid, c.rows)
			}
			if rep.Tightest != best || best < 0 || !rep.Rows[best].Tightest {
				t.Fatalf("tightest = %d, want %d", rep.Tightest, best)
			}
			for i, r := range rep.Rows {
				if r.Tightest != (i == best) {
					t.Errorf("row %d tightest flag %v", i, r.Tightest)
				}
			}

			code, table, errs := run(c.args...)
			if code != 0 {
				t.Fatalf("table exit %d: %s", code, errs)
			}
			var starred []string
			for _, line := range strings.Split(table, "\n") {
				if strings.HasPrefix(line, "*") {
					starred = append(starred, line)
				}
			}
			if len(starred) != 1 || !strings.Contains(starred[0], rep.Rows[best].Method) {
				t.Fatalf("starred lines %q, want the row %q\n%s", starred, rep.Rows[best].Method, table)
			}
			f := strings.Fields(strings.TrimPrefix(starred[0], "*"))
			// The ε column is the second to last or third to last field.
			var got float64 = math.NaN()
			for j := len(f) - 1; j >= 0; j-- {
				if v, err := strconv.ParseFloat(f[j], 64); err == nil && j > 0 {
					if w, err2 := strconv.ParseFloat(f[j-1], 64); err2 == nil {
						got = w
						_ = v
						break
					}
				}
			}
			if want := *rep.Rows[best].Epsilon; math.Abs(got-want) > 1e-3*want+1e-12 {
				t.Errorf("table ε %v, JSON ε %v", got, want)
			}
		})
	}
}

// TestSecAggPreset: the secagg preset is the experiment runner's
// defaults, make run's (experiment.MakeRunSecAgg), with the aggregator's
// round: its release is the one the round spec gives the ledger (PINE's
// sensitivity, pine.ForBlanket(d, C)'s norm bound; the σ
// params.SecAggSigma calibrates for the aggregator's flags as
// scripts/runlocal passes them), its rows are privacy.Account of those
// releases, and its replace-one line, the ledger's charge, meets the
// target (4 at 1e-5).
func TestSecAggPreset(t *testing.T) {
	l, err := experiment.MakeRunSecAgg()
	if err != nil {
		t.Fatal(err)
	}
	pn, err := pine.ForBlanket(logreg.MNISTParams, l.Clip)
	if err != nil || l.Params.Sensitivity() != pn.Sensitivity() {
		t.Fatalf("PINE sensitivity %v, pine.ForBlanket's %v (%v)", l.Params.Sensitivity(), pn.Sensitivity(), err)
	}
	// The aggregator's own calibration for `make run` (aggregator main.go
	// with -protocol secagg -check-in 1 -expected-n 400 -rounds 5
	// -epsilon 4, default clip and delta).
	sigma, err := params.SecAggSigma(logreg.MNISTParams, 400, params.Choice{Protocol: "secagg", Randomizer: "laplace", CheckIn: 1}, 5, 4, 1e-5)
	if err != nil || sigma != l.Params.Sigma {
		t.Fatalf("preset sigma %v, the aggregator's %v (%v)", l.Params.Sigma, sigma, err)
	}
	code, out, errs := run("-preset", "secagg", "-json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep jsonReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	r := rep.Release
	if r.Protocol != privacy.ProtocolSecAgg || r.SecAggSigma != sigma || r.SecAggSensitivity != pn.Sensitivity() ||
		r.CheckInRate != 1 || r.N != 400 || rep.Rounds != 5 || rep.Delta != 1e-5 {
		t.Fatalf("preset release %+v (%d rounds, delta %v) is not make run's", r, rep.Rounds, rep.Delta)
	}
	rs := make([]privacy.Release, l.Rounds)
	for i := range rs {
		rs[i] = l.Spec.Release(i+1, l.Population, 0)
	}
	want, err := privacy.Account(rs, l.Delta)
	if err != nil || want.Tightest < 0 {
		t.Fatal(err)
	}
	charge := want.Rows[want.Tightest].Epsilon
	if rep.Tightest < 0 || *rep.Rows[rep.Tightest].Epsilon != charge {
		t.Errorf("preset's tightest row %v, privacy.Account %v", rep.Rows[rep.Tightest], charge)
	}
	if rep.ReplaceOne == nil || rep.ReplaceOne.Epsilon != charge || !(charge <= 4*(1+1e-9)) || rep.ReplaceOne.Delta != l.Delta {
		t.Errorf("replace-one %+v: want the ledger's charge %v <= 4 at delta %v", rep.ReplaceOne, charge, l.Delta)
	}
	_, table, _ := run("-preset", "secagg")
	if !strings.Contains(table, "replace-one: (") || !strings.Contains(table, "make run's secure summation") {
		t.Errorf("table lacks the replace-one line or the defaults:\n%s", table)
	}
}

// TestInvalidFlags: every malformed invocation exits 2 with a message.
func TestInvalidFlags(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"-preset", "nope"},
		{"-preset", "flame-topk", "-eps0", "-1"},
		{"-preset", "flame-topk", "-eps0", "NaN"},
		{"-preset", "flame-topk", "-delta", "0"},
		{"-preset", "flame-topk", "-delta", "2"},
		{"-preset", "flame-topk", "-rounds", "0"},
		{"-preset", "flame-topk", "-k", "9000"},
		{"-preset", "flame-topk", "-n", "abc"},
		{"-preset", "flame-simple", "extra"},
		{"-protocol", "bogus", "-eps0", "1", "-n", "10", "-d", "1"},
		{"-protocol", "ss-simple", "-randomizer", "bogus", "-eps0", "1", "-n", "10", "-d", "1"},
		{"-protocol", "dp-gaussian", "-randomizer", "gaussian", "-n", "10", "-d", "1"},
		{"-unknown-flag"},
	} {
		code, out, errs := run(args...)
		if code != 2 || errs == "" || out != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, out, errs)
		}
	}
	if code, _, _ := run("-h"); code != 0 {
		t.Errorf("-h exits %d", code)
	}
}

func Example() {
	Main(context.Background(), []string{"-protocol", "ldp", "-eps0", "0.5", "-n", "100", "-d", "4", "-rounds", "3"}, os.Stdout, os.Stderr)
	// Output:
	// protocol ldp, randomizer generic, eps0 0.5, n 100, d 4, k 4; 3 round(s), delta 1e-06
	//    method                                        epsilon  delta  note
	// *  local model (no shuffler), basic composition  6        0
	// tightest valid: local model (no shuffler), basic composition (6, 0)
}
