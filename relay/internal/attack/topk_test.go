package attack

import (
	"testing"

	"github.com/blanket-fl/blanket/shared/privacy"

	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/wire"
)

// topkOverflow is the worst case the issue describes for SS-Topk with
// l = 1: the target's top-1 coordinate is a (normalized 1) under H0 and b
// under H1; n_p other volunteers have their top-1 at a and n_p at b, all
// at normalized 0 (update −C), so a and b each overflow under the
// hypothesis that puts the target there and the relay's truncation keeps
// a uniform n_p of n_p + 1: the target's report replaces one of the
// others' instead of a dummy. Everyone else (n − 2n_p − 1 volunteers) has
// its top-1 elsewhere, the same under both.
func topkOverflow(t *testing.T, o roundspec.Options, d, n int, cuts func(*roundspec.Spec) []float64) scenario {
	t.Helper()
	o.Protocol, o.L, o.K = wire.ProtocolSSTopk, 1, 1
	spec := mustSpec(t, d, n, o)
	p := spec.Params()
	np, c := int(p.NP), p.Clip
	if n < 2*np+1 {
		t.Fatalf("n = %d too small for two overflowing dimensions at n_p = %d", n, np)
	}
	const a, b = 0, 1
	sc := scenario{spec: spec, target: [2][]float64{unit(d, c, a), unit(d, c, b)}, delta: 1e-5, maxTuples: 4 << 20}
	for i := range n - 1 {
		switch {
		case i < np:
			sc.others = append(sc.others, unit(d, -c, a))
		case i < 2*np:
			sc.others = append(sc.others, unit(d, -c, b))
		default:
			sc.others = append(sc.others, unit(d, -c, 2+i%(d-2)))
		}
	}
	bins, r1, r0, om := laws(t, spec, cuts(spec))
	here := []Msg{{Law: r1, Count: 1}, {Law: r0, Count: np}}
	away := []Msg{{Law: r0, Count: np}}
	var err error
	sc.model, err = NewModel([]uint32{a, b}, np, bins, om,
		[]Config{{Weight: 1, Dims: [][]Msg{here, away}}},
		[]Config{{Weight: 1, Dims: [][]Msg{away, here}}})
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// laplaceCuts bins Laplace values by the sign of y and of y − 1 (where the
// density ratio of R(1) against R(0) is constant) and m equal steps in
// between.
func laplaceCuts(m int) func(*roundspec.Spec) []float64 {
	return func(*roundspec.Spec) []float64 { return laplaceCutsN(m) }
}

func laplaceCutsN(m int) []float64 {
	cuts := []float64{0}
	for i := 1; i < m; i++ {
		cuts = append(cuts, float64(i)/float64(m))
	}
	return append(cuts, 1)
}

// TestTopkLocalRowAttack is the regression test of the SS-Topk local row
// (docs/privacy.md, "SS-Topk has no local row"). Round: SS-Topk, Laplace,
// d = 15, n = 10 (n_p = ⌈10/3⌉ = 4, k = 1) and l = 1, as the issue's, at
// ε_l = 2 (the operator's -epsl; at FLAME's 0.5 the same violation needs
// millions of trials to show); neighbours topkOverflow. The local row
// charged k·ε0 = 2 at every δ; the exact ε(3·10⁻³) of the binned view is
// 2.22, and the test measures a lower bound above 2 on the shipped code,
// so it fails on the accountant that charged that row. The charge now is
// a shuffle row (PLD, about 2lk·ε0 = 4 here).
//
// Size: 500,000 trials per hypothesis (50,000 under -short, which skips
// the sizing check). False failure of a correct charge ≤ 2·10⁻⁴ (two
// Clopper-Pearson bounds at 10⁻⁴). Detects, with probability ≥ 0.9, any
// charge below 2.03 (Detectable from the exact binomial laws: 8.5% under
// the exact ε of 2.22), so it catches the old local row (2) at least 90%
// of the time.
func TestTopkLocalRowAttack(t *testing.T) {
	sc := topkOverflow(t, roundspec.Options{Randomizer: wire.RandomizerLaplace, EpsL: 2}, 15, 10, laplaceCuts(4))
	sc.name, sc.delta, sc.trials, sc.short = "ss-topk laplace l=1 overflow", 3e-3, 500_000, 50_000
	res := run(t, sc, 1)
	if res.tightest == "local model (no shuffler), basic composition" {
		t.Errorf("SS-Topk charged by the local row")
	}
}

// TestTopkDefaultExact: at the default budget of a d = 15 task (ε_l = 0.5,
// k = 1, ε0 = 0.5; n = 10, n_p = 4) and l = 1, the exact ε(10⁻⁵) of the
// binned view under topkOverflow's neighbours exceeds the k·ε0 = 0.5 the
// local row charged, and is below today's charge. (Exact computation only:
// at this ε0 the violation needs millions of trials to show empirically;
// TestTopkLocalRowAttack shows it at ε_l = 2.)
func TestTopkDefaultExact(t *testing.T) {
	sc := topkOverflow(t, roundspec.Options{Randomizer: wire.RandomizerLaplace}, 15, 10, laplaceCuts(4))
	pld, err := sc.model.Exact(sc.maxTuples)
	if err != nil {
		t.Fatal(err)
	}
	const delta = 1e-5
	p := sc.spec.Params()
	rep, err := privacy.Account([]privacy.Release{sc.spec.Release(1, 10, int(p.NP))}, delta)
	if err != nil || rep.Tightest < 0 {
		t.Fatalf("account: %v", err)
	}
	exact, charged := pld.Epsilon(delta), rep.Rows[rep.Tightest].Epsilon
	t.Logf("ε_l %g, n_p %d, l %d: exact ε(%g) %.4f, local sum k·ε0 %g, charged %.4f (%s)", p.EpsL, p.NP, p.L, delta, exact, float64(p.K)*p.EpsL/float64(p.K), charged, rep.Rows[rep.Tightest].Method)
	if exact <= p.EpsL {
		t.Errorf("exact %v does not exceed the local sum %v", exact, p.EpsL)
	}
	if exact > charged {
		t.Errorf("exact %v exceeds the charge %v", exact, charged)
	}
}
