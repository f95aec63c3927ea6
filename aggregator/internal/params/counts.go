package params

import (
	"fmt"

	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/task"
	"github.com/blanket-fl/blanket/shared/wire"
)

// CountBlocks are the announced count blocks of a task's counts plan
// (task.CountsPlan): the evaluation block first (R rows), then one
// question per survey question (its options), σ not yet calibrated.
func CountBlocks(p task.CountsPlan) []wire.CountBlock {
	var out []wire.CountBlock
	if p.EvalRows > 0 {
		out = append(out, wire.CountBlock{Kind: wire.CountEval, N: uint32(p.EvalRows)})
	}
	for _, q := range p.Questions {
		out = append(out, wire.CountBlock{Kind: wire.CountQuestion, N: uint32(len(q.Options))})
	}
	return out
}

// UpdateEpsilon is the part of the ledger's ε target the update's σ is
// calibrated to when the task has count blocks: (1 − share)·eps, the
// blocks costing at most share·eps more (WithCounts). Without blocks, or
// for a shuffle protocol, eps.
func UpdateEpsilon(proto string, p task.CountsPlan, eps float64) float64 {
	if proto != wire.ProtocolSecAgg.String() || !p.Any() {
		return eps
	}
	return (1 - p.EpsShare) * eps
}

// WithCounts announces a task's count blocks in secure-summation round
// parameters rp (returned unchanged for a shuffle protocol or a plan
// without blocks), each block's σ calibrated by roundspec.CalibrateCounts
// so that `rounds` joint rounds charge at most the update alone plus
// share·eps (replace-one, at delta, the ledger's row): with the update
// calibrated to (1 − share)·eps (UpdateEpsilon), the whole round fits eps.
func WithCounts(rp wire.Params, p task.CountsPlan, rounds int, eps, delta float64) (wire.Params, error) {
	if rp.Protocol != wire.ProtocolSecAgg || !p.Any() {
		return rp, nil
	}
	if rounds < 1 {
		return wire.Params{}, fmt.Errorf("count blocks: give -rounds to calibrate their noise to the privacy target")
	}
	out, err := roundspec.CalibrateCounts(rp, CountBlocks(p), rounds, delta, p.EpsShare*eps)
	if err != nil {
		return wire.Params{}, fmt.Errorf("count blocks: %w", err)
	}
	return out, nil
}
