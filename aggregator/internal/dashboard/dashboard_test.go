package dashboard

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/accounting"
	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/shared/ledger"
	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/wire"
)

func topk() Settings {
	return Settings{Params: wire.Params{Protocol: wire.ProtocolSSTopk, Randomizer: wire.RandomizerLaplace, D: 7850, K: 157, L: 5,
		Width: 1, NP: 20, MinBatch: 20, EpsL: 78.5, Clip: 0.01, CheckInP: 1}, ExpectedN: 200, Timeout: time.Minute, ServerLR: 50,
		TargetEpsilon: 750, TargetDelta: 1e-5}
}

func item(items []string, name string) bool {
	for _, it := range items {
		if strings.HasPrefix(it, name) {
			return true
		}
	}
	return false
}

// TestConfigItems: a shuffle configuration shows its padding and local
// budget, secure summation its σ and none of those; rounds to run only
// when set.
func TestConfigItems(t *testing.T) {
	names := func(c Settings) []string {
		var out []string
		for _, it := range ConfigItems(c) {
			out = append(out, it.Name+"="+it.Value)
		}
		return out
	}
	s := names(topk())
	if !item(s, "padding n_p per dimension=20") || !item(s, "server learning rate=50") || !item(s, "round timeout=1m0s") || item(s, "rounds to run") {
		t.Errorf("ss-topk items %q", s)
	}
	c := topk()
	c.Params = wire.Params{Protocol: wire.ProtocolSecAgg, Randomizer: wire.RandomizerDiscreteGaussian, D: 7850, Sigma: 3.5,
		Clip: 1, CheckInP: 0.5, MinBatch: 3, Quota: 400}
	c.Rounds = 20
	s = names(c)
	if !item(s, "each server's σ (grid units)=3.5") || item(s, "padding n_p") || !item(s, "rounds to run=20") {
		t.Errorf("secagg items %q", s)
	}
	// The server's step: the optimiser right before the learning rate.
	c.ServerOptimizer, c.ServerMomentum, c.ServerLR = "momentum", 0.9, 2
	for _, set := range [][]string{names(c), names(topk())} {
		i := 0
		for i < len(set) && !strings.HasPrefix(set[i], "server optimiser=") {
			i++
		}
		if i+1 >= len(set) || !strings.HasPrefix(set[i+1], "server learning rate=") {
			t.Errorf("no server optimiser right before the learning rate: %q", set)
		}
	}
	if s := names(c); !item(s, "server optimiser=momentum (FedAvgM), β = 0.9") || !item(s, "server learning rate=2") {
		t.Errorf("secagg with momentum: %q", s)
	}
	if s := names(topk()); !item(s, "server optimiser=sgd") {
		t.Errorf("ss-topk: %q", s)
	}
}

// TestStateRoundsPending: the loop's state, the history's rows with their
// ε rows, and a pending configuration's description.
func TestStateRoundsPending(t *testing.T) {
	if State("budget", true) != "stopped" || State("", true) != "paused" || State("", false) != "running" {
		t.Error("State")
	}
	eps := 1.5
	v := Rounds([]checkpoint.RoundRecord{{Round: 4, Status: checkpoint.StatusOK, N: 7, NP: 20,
		Epsilon: []accounting.EpsilonRow{{Method: "pld", Epsilon: &eps, Valid: true, Tightest: true}}}})
	if len(v) != 1 || v[0].Round != 4 || v[0].N != 7 || len(v[0].Epsilon) != 1 || *v[0].Epsilon[0].Epsilon != 1.5 || !v[0].Epsilon[0].Tightest {
		t.Errorf("rounds %+v", v)
	}
	if p := Pending(topk().Params, 30*time.Second); !strings.Contains(p, "ss-topk, k = 157, l = 5, n_p = 20") || !strings.Contains(p, "timeout 30s") {
		t.Errorf("pending %q", p)
	}
	f := Form(topk(), func() (float64, error) { return 2, nil })
	if f.Protocol != "ss-topk" || f.K != "157" || f.NPRatio != "10" || f.ServerLR != "50" || f.RoundTimeout != "60" || len(f.Defaults) == 0 {
		t.Errorf("form %+v", f)
	}
}

// TestProtocolDefaultsEveryProtocol: the operator's protocol select gets
// defaults for every shuffle protocol, APES and S-APES included, from a
// FLAME configuration and from an APES one (the randomizer follows the
// protocol: clip-laplace for APES, laplace for the others); secure
// summation's needs σ, which this test does not give.
func TestProtocolDefaultsEveryProtocol(t *testing.T) {
	noSigma := func() (float64, error) { return 0, errTest }
	apes := topk()
	apes.Params.Protocol, apes.Params.Randomizer, apes.Params.K, apes.Params.L, apes.Params.NP = wire.ProtocolAPES, wire.RandomizerClipLaplace, 7850, 1, 200
	for _, s := range []Settings{topk(), apes} {
		got := map[string]bool{}
		for _, d := range ProtocolDefaults(s, noSigma) {
			got[d.Protocol] = true
		}
		for _, want := range []string{"ss-simple", "ss-double", "ss-topk", "apes", "s-apes"} {
			if !got[want] {
				t.Errorf("from %v: no defaults for %s (got %v)", s.Params.Protocol, want, got)
			}
		}
	}
}

var errTest = errors.New("no sigma in this test")

// TestSecAggAddRemoveNotShown: two secure-summation rounds charged through
// the aggregator's accounting (the ledger's privacy.Session), at check-in
// rate 1 (where adding a volunteer always changes the released count) and
// 0.5 (where the add/remove proof covers the sum, not the count): the
// served rows mark the add/remove row not applicable (no ε), the charged
// row is replace-one, and the dashboard lists only rows with an ε, so no
// add/remove ε is shown.
func TestSecAggAddRemoveNotShown(t *testing.T) {
	for _, q := range []float64{1, 0.5} {
		a := accounting.New(nil)
		o, err := a.LedgerOptions(1e6, 1e-5)
		if err != nil {
			t.Fatal(err)
		}
		l, err := ledger.Open(filepath.Join(t.TempDir(), "ledger.jsonl"), o)
		if err != nil {
			t.Fatal(err)
		}
		var history []checkpoint.RoundRecord
		for r := 1; r <= 2; r++ {
			rel := privacy.Release{Round: r, Protocol: privacy.ProtocolSecAgg, Randomizer: privacy.RandomizerDiscreteGaussian,
				D: 100, N: 50, SecAggSigma: 300, SecAggSensitivity: 138, CheckInRate: q}
			if err := l.Charge(rel); err != nil {
				t.Fatal(err)
			}
			rep, err := a.Report(l, 1e-5)
			if err != nil {
				t.Fatal(err)
			}
			rows := accounting.RowsOf(rep)
			found := false
			for _, row := range rows {
				if strings.Contains(row.Method, "add/remove") {
					found = true
					if row.Valid || row.Epsilon != nil || row.Tightest {
						t.Fatalf("q = %v round %d: add/remove row served as %+v", q, r, row)
					}
				}
				if row.Tightest && !strings.Contains(row.Method, "replace-one") {
					t.Fatalf("q = %v round %d: charged row %q", q, r, row.Method)
				}
			}
			if !found {
				t.Fatalf("q = %v: no add/remove row to say why it does not apply", q)
			}
			history = append(history, checkpoint.RoundRecord{Round: r, Status: checkpoint.StatusOK, Epsilon: rows})
		}
		l.Close()
		for _, v := range Rounds(history) {
			if len(v.Epsilon) == 0 {
				t.Fatalf("q = %v round %d: no ε shown", q, v.Round)
			}
			for _, e := range v.Epsilon {
				if strings.Contains(e.Method, "add/remove") || e.Epsilon == nil {
					t.Errorf("q = %v round %d: shown %+v", q, v.Round, e)
				}
			}
		}
	}
}
