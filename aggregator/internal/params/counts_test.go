package params

import (
	"testing"

	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/task"
	"github.com/blanket-fl/blanket/shared/wire"
)

// TestWithCounts: the class survey (a form task: evaluation of each
// volunteer's one row, and its categorical questions and label as counts)
// at ε = 4 over 5 rounds: the update's σ is calibrated to 0.9·4, the
// blocks to the remaining 0.4, and the ledger charges the 5 joint rounds
// at most 4 in all (and more than the update alone).
func TestWithCounts(t *testing.T) {
	tk, _, err := task.Load("../../../tasks/class-survey/task.json")
	if err != nil {
		t.Fatal(err)
	}
	const eps, delta, rounds, n = 4, 1e-5, 5, 30
	plan := tk.CountsPlan()
	if !plan.Any() {
		t.Fatal("the class survey has no count blocks")
	}
	c := Choice{Protocol: wire.ProtocolSecAgg.String(), Randomizer: wire.RandomizerLaplace.String(), Clip: 0.3}
	ue := UpdateEpsilon(c.Protocol, plan, eps)
	if ue != 0.9*eps {
		t.Fatalf("update epsilon %v", ue)
	}
	if c.Sigma, err = SecAggSigma(tk.D(), n, c, rounds, ue, delta); err != nil {
		t.Fatal(err)
	}
	rp, _, err := Build(tk.D(), n, c)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := WithCounts(rp, plan, rounds, eps, delta)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Counts.Len() != len(CountBlocks(plan)) || cp.Counts.At(0).Kind != wire.CountEval || cp.Counts.At(0).N != 1 {
		t.Fatalf("blocks %+v", cp.Counts.Blocks())
	}
	charge := func(p wire.Params) float64 {
		s, err := roundspec.New(p)
		if err != nil {
			t.Fatal(err)
		}
		rels := make([]privacy.Release, rounds)
		for i := range rels {
			rels[i] = s.Release(i+1, n, 0)
		}
		rep, err := privacy.Account(rels, delta)
		if err != nil {
			t.Fatal(err)
		}
		return rep.Rows[rep.Tightest].Epsilon
	}
	alone, joint := charge(rp), charge(cp)
	if !(alone <= ue && joint > alone && joint <= eps) {
		t.Fatalf("update alone %v (target %v), joint %v (target %v)", alone, ue, joint, eps)
	}
	t.Logf("update alone %.4f, joint %.4f; blocks %+v", alone, joint, cp.Counts.Blocks())
	if same, err := WithCounts(rp, task.CountsPlan{}, rounds, eps, delta); err != nil || same != rp {
		t.Fatalf("no plan: %v", err)
	}
}
