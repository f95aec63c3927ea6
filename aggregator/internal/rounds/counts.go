package rounds

import (
	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/shared/counts"
	"github.com/blanket-fl/blanket/shared/secagg"
)

// countsRecord is the round record of a secure-summation result's count
// blocks (nil without blocks): the decoded noisy sums with each block's σ,
// Δ, dimension and per-count noise SD (both servers' noise, σ per server:
// counts.Block.CountSD).
func countsRecord(r *secagg.Round, res *secagg.Result) *checkpoint.CountsRecord {
	spec := r.CountSpec()
	if spec == nil || res == nil || res.Counts == nil {
		return nil
	}
	sigmas := r.Params().CountSigmas
	out := &checkpoint.CountsRecord{N: res.Counts.N}
	for i, b := range spec.Blocks() {
		br := checkpoint.CountBlockRecord{Kind: b.Kind().String(), Sigma: sigmas[i], Sensitivity: b.Sensitivity(), D: b.Dim(),
			CountSD: b.CountSD(sigmas[i]), Counts: append([]float64(nil), res.Counts.Counts[i]...)}
		if b.Kind() == counts.KindEval {
			br.Rows = b.Rows()
		} else {
			br.Options = b.Options()
		}
		out.Blocks = append(out.Blocks, br)
	}
	return out
}
