package experiment

import (
	"fmt"

	"github.com/blanket-fl/blanket/shared/roundspec"
)

// tableRobust compares SumVec and PINE under poisoning at make run's
// settings.
const tableRobust = "robust"

// robustIDs are the robust table's rows in print order.
var robustIDs = []string{"secagg", "secagg-flip", "secagg-edge", "pine", "pine-flip", "pine-edge"}

// makeRunSecAgg are the secure-summation settings of `make run`
// (scripts/runlocal: 400 simulated volunteers of 20 digits, 5 rounds,
// ε = 4 replace-one at δ = 1e-5, every volunteer every round (-check-in
// 1); the aggregator's secagg defaults: roundspec.DefaultSecAggClip,
// DefaultBits, DefaultSecAggLR), over a population of pop volunteers.
func makeRunSecAgg(pop int, eps, delta float64) secaggParams {
	return secaggParams{Pop: pop, Q: 1, Rounds: 5, Clip: roundspec.DefaultSecAggClip, Bits: roundspec.DefaultBits,
		Eps: eps, Delta: delta, Relation: relationReplaceOne, ServerLR: roundspec.DefaultSecAggLR, Epochs: 10}
}

// robustMethods builds the robust table: SumVec and PINE at make run's
// settings (the world's users are the population: -per-user 20 gives
// make run's 400), each without attackers, with o.Attackers volunteers
// sending the strongest update PINE accepts (attackFlip: -u at norm C)
// and with o.Attackers sending the range-edge vector (attackEdge: SumVec
// accepts it, PINE must reject it). The same seed gives every row the
// same honest volunteers' updates in round 1.
func robustMethods(w *world, o Options) (map[string]*method, error) {
	d, pop := w.shape.NumParams(), len(w.users)
	if o.Attackers < 1 || o.Attackers > pop {
		return nil, fmt.Errorf("robust: %d attackers among %d volunteers", o.Attackers, pop)
	}
	out := map[string]*method{}
	for _, c := range []struct {
		id, name, attack string
	}{
		{"secagg", "SumVec", attackNone},
		{"secagg-flip", fmt.Sprintf("SumVec, %d flip", o.Attackers), attackFlip},
		{"secagg-edge", fmt.Sprintf("SumVec, %d edge", o.Attackers), attackEdge},
		{"pine", "PINE", attackNone},
		{"pine-flip", fmt.Sprintf("PINE, %d flip", o.Attackers), attackFlip},
		{"pine-edge", fmt.Sprintf("PINE, %d edge", o.Attackers), attackEdge},
	} {
		sp := makeRunSecAgg(pop, o.EqualEps, o.SecAgg.withDefaults().Delta)
		if c.attack != attackNone {
			sp.Attack, sp.Attackers = c.attack, o.Attackers
		}
		build := secaggMethod
		if c.id[:4] == "pine" {
			build = pineMethod
		}
		m, err := build(sp, d, pop, tableRobust)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.id, err)
		}
		m.id, m.name = c.id, c.name
		switch c.attack {
		case attackFlip:
			m.note = fmt.Sprintf("%d of %d volunteers send -u at L2 norm exactly C (the strongest update an L2 proof accepts); ", o.Attackers, pop) + m.note
		case attackEdge:
			m.note = fmt.Sprintf("%d of %d volunteers send every entry at the range edge with the opposite sign of u (SumVec: q = -B or B+1, accepted by the range proof; PINE: ±C per entry, L2 norm C sqrt(d), put in the leader's gradient share); ", o.Attackers, pop) + m.note
		}
		out[c.id] = m
	}
	return out, nil
}
