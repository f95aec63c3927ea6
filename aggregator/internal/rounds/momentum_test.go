package rounds

import (
	"math"
	"slices"
	"testing"

	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/task"
	"github.com/blanket-fl/blanket/shared/wire"
)

// twoRounds runs two secure-summation rounds of 4 reports each with the
// optimiser opt (server lr 1), restarting the machine from its store
// between them if restart, with the aggregator's noise of round r drawn
// from noise.NewSeeded(r) (so that a restarted machine draws the same
// noise as one that was not); it returns the state after each round.
func twoRounds(t *testing.T, opt Optimizer, restart bool) (after1, after2 checkpoint.State) {
	t.Helper()
	r := newRig(t, &memStore{})
	r.optimizer = opt
	r.open()
	for i := 1; i <= 2; i++ {
		if i == 2 && restart {
			r.open()
		}
		r.m.opt.Noise = noise.NewSeeded(uint64(i))
		round := r.announce()
		h, _ := r.charged(round, 4)
		if ans := r.m.SecAggAggregateIntake(h.aggregate()); ans.Outcome != "accepted" {
			t.Fatalf("round %d aggregate: %+v", round, ans)
		}
		if i == 1 {
			after1 = r.state()
		} else {
			after2 = r.state()
		}
	}
	return after1, after2
}

// TestMomentumSurvivesRestart: the server momentum is checkpointed with the
// model, so a restart between two rounds gives bit for bit the model and
// momentum of a run without restart; and the step is FedAvgM's: after
// round 1 the momentum is the noisy mean Δ1 (x1 = η Δ1, η = 1), after
// round 2 it is β Δ1 + Δ2, where Δ2 is what plain SGD adds in round 2 from
// the same x1 and the same noise.
func TestMomentumSurvivesRestart(t *testing.T) {
	mom := Optimizer{Kind: OptimizerMomentum, Beta: 0.9}
	a1, a2 := twoRounds(t, mom, false)
	b1, b2 := twoRounds(t, mom, true)
	if !slices.Equal(a1.Model, b1.Model) || !slices.Equal(a2.Model, b2.Model) || !slices.Equal(a2.Momentum, b2.Momentum) {
		t.Fatal("a restart between rounds changed the next model or momentum")
	}
	if !slices.Equal(a1.Momentum, a1.Model) {
		t.Fatal("after round 1 the momentum is not the first noisy mean (the model from 0 at lr 1)")
	}
	_, s2 := twoRounds(t, Optimizer{Kind: OptimizerSGD}, false)
	if s2.Momentum != nil {
		t.Fatalf("sgd stored a momentum of %d coordinates", len(s2.Momentum))
	}
	changed := false
	for j := range a2.Model {
		delta2 := s2.Model[j] - a1.Model[j]
		if want := 0.9*a1.Model[j] + delta2; math.Abs(a2.Momentum[j]-want) > 1e-9 {
			t.Fatalf("coordinate %d: momentum %v, want 0.9·%v + %v", j, a2.Momentum[j], a1.Model[j], delta2)
		}
		if math.Abs(a2.Model[j]-(a1.Model[j]+a2.Momentum[j])) > 1e-12 {
			t.Fatalf("coordinate %d: model %v, want %v + %v", j, a2.Model[j], a1.Model[j], a2.Momentum[j])
		}
		changed = changed || a2.Model[j] != s2.Model[j]
	}
	if !changed {
		t.Fatal("momentum and sgd gave the same second model")
	}
}

// TestModelResetClearsMomentum: the operator's model reset zeroes the
// model and forgets the momentum.
func TestModelResetClearsMomentum(t *testing.T) {
	r := newRig(t, &memStore{})
	r.optimizer = Optimizer{Kind: OptimizerMomentum, Beta: 0.9}
	r.open()
	round := r.announce()
	h, _ := r.charged(round, 4)
	if ans := r.m.SecAggAggregateIntake(h.aggregate()); ans.Outcome != "accepted" {
		t.Fatalf("aggregate: %+v", ans)
	}
	if len(r.state().Momentum) == 0 {
		t.Fatal("no momentum stored")
	}
	r.m.mu.Lock()
	r.m.ctl.PendingReset = true
	r.m.mu.Unlock()
	if err := r.m.applyPending(); err != nil {
		t.Fatal(err)
	}
	if st := r.state(); len(st.Momentum) != 0 || slices.ContainsFunc(st.Model, func(v float64) bool { return v != 0 }) {
		t.Fatalf("after a reset: momentum of %d coordinates, model not zero", len(st.Momentum))
	}
}

// TestOptimizerOf: a task's recipe sets secure summation's optimiser; the
// shuffle protocols and a server without a task use sgd; a bad β is
// refused.
func TestOptimizerOf(t *testing.T) {
	tk, err := task.Digits()
	if err != nil {
		t.Fatal(err)
	}
	if o := OptimizerOf(tk, wire.Params{Protocol: wire.ProtocolSecAgg}); o != (Optimizer{Kind: OptimizerMomentum, Beta: 0.9}) {
		t.Fatalf("digits, secagg: %+v", o)
	}
	if o := OptimizerOf(tk, wire.Params{Protocol: wire.ProtocolSSTopk}); o.Kind != OptimizerSGD {
		t.Fatalf("digits, ss-topk: %+v", o)
	}
	if o := OptimizerOf(nil, wire.Params{Protocol: wire.ProtocolSecAgg}); o.Kind != OptimizerSGD {
		t.Fatalf("no task: %+v", o)
	}
	for _, o := range []Optimizer{{Kind: OptimizerMomentum}, {Kind: OptimizerMomentum, Beta: 1}, {Kind: "adam"}} {
		if o.validate() == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}
