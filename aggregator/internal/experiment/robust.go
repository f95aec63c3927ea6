package experiment

import (
	"fmt"
)

// tableRobust runs secure summation (PINE) under poisoning at make run's
// settings.
const tableRobust = "robust"

// robustIDs are the robust table's rows in print order.
var robustIDs = []string{"secagg", "secagg-flip", "secagg-edge"}

// robustMethods builds the robust table: secure summation (PINE) at
// o.SecAgg's settings, make run's by default (w is the secure-summation
// world: its users are the population), without attackers, with
// o.Attackers volunteers sending the strongest update PINE accepts
// (attackFlip: -u at norm C) and with o.Attackers sending the
// range-edge vector (attackEdge: PINE must reject it). The same seed gives
// every row the same honest volunteers' updates in round 1.
func robustMethods(w *world, o Options) (map[string]*method, error) {
	d, pop := w.shape.NumParams(), o.SecAgg.withDefaults().Pop
	if o.Attackers < 1 || o.Attackers > pop {
		return nil, fmt.Errorf("robust: %d attackers among %d volunteers", o.Attackers, pop)
	}
	out := map[string]*method{}
	for _, c := range []struct {
		id, name, attack string
	}{
		{"secagg", "PINE", attackNone},
		{"secagg-flip", fmt.Sprintf("PINE, %d flip", o.Attackers), attackFlip},
		{"secagg-edge", fmt.Sprintf("PINE, %d edge", o.Attackers), attackEdge},
	} {
		sp := o.SecAgg.withDefaults()
		if c.attack != attackNone {
			sp.Attack, sp.Attackers = c.attack, o.Attackers
		}
		m, err := secaggMethod(sp, d, pop, tableRobust)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.id, err)
		}
		m.id, m.name, m.world = c.id, c.name, w
		switch c.attack {
		case attackFlip:
			m.note = fmt.Sprintf("%d of %d volunteers send -u at L2 norm exactly C (the strongest update an L2 proof accepts); ", o.Attackers, pop) + m.note
		case attackEdge:
			m.note = fmt.Sprintf("%d of %d volunteers send ±C per entry with the opposite sign of u (L2 norm C sqrt(d)), put in the leader's gradient share; ", o.Attackers, pop) + m.note
		}
		out[c.id] = m
	}
	return out, nil
}
