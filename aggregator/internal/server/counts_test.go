package server

import (
	"math"
	"testing"

	"github.com/blanket-fl/blanket/aggregator/internal/api"
	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/shared/counts"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/secagg"
	"github.com/blanket-fl/blanket/shared/wire"
)

// countsTestParams is secaggTestParams with an evaluation block of R = 3
// rows and a 2-option question, each server's σ 4 on the update and on
// both blocks: the decoded
// counts' noise SD is 0.044 rows (evaluation, Scale 64) and 0.011
// (question, Scale 256), so an error of 0.5 is 11 SD: rounding recovers
// the exact sums (false failure below 1e-27).
func countsTestParams() wire.Params {
	p := secaggTestParams()
	p.Sigma = 4 // the joint release needs every σ >= 4
	p.Counts = wire.NewCountList(wire.CountBlock{Kind: wire.CountEval, N: 3, Sigma: 4}, wire.CountBlock{Kind: wire.CountQuestion, N: 2, Sigma: 4})
	return p
}

// TestSecAggCountsRound: a secure-summation round with count blocks
// through the aggregator's HTTP intake and a relay playing the real helper
// engine: 4 honest volunteers (their counts known) and one whose question
// block was forged after sharding (its measurement share changed: no
// proof covers it). The forged report is rejected once, under "invalid
// count block", and neither its update nor its counts enter the sums; the
// round record holds the 4 honest volunteers' exact counts (after both
// servers' noise, rounded) over n = 4 with each block's σ, Δ and noise
// SD; the ledger's one charge is privacy.SecAggJoint's release of the
// update and the blocks, with the parts recorded.
func TestSecAggCountsRound(t *testing.T) {
	relay := newSecAggRelay(t)
	h := newSecAggHarness(t, t.TempDir(), relay, func(c *Config) { c.Params = countsTestParams() })
	a := relay.next(t)
	if a.Params != countsTestParams() {
		t.Fatalf("announced %+v", a.Params)
	}
	r := secaggRound(t, a)
	var honest, all []volunteer
	var correct, evaluated, yes float64
	for i := range 4 {
		x := honestUpdate(uint64(i+10), 8)
		v := []counts.Value{{Correct: i % 3, Evaluated: min(i%3+1, 3)}, {Answer: i % 2}}
		l, hs, err := r.ShardCounts(x, v, noise.NewSeeded(uint64(200+i)))
		if err != nil {
			t.Fatal(err)
		}
		vol := relay.seal(t, a, x, l, hs)
		honest, all = append(honest, vol), append(all, vol)
		correct += float64(v[0].Correct)
		evaluated += float64(v[0].Evaluated)
		yes += float64(v[1].Answer)
	}
	x := honestUpdate(77, 8)
	fl, fh, err := r.ShardCounts(x, []counts.Value{{Correct: 3, Evaluated: 3}, {Answer: 1}}, noise.NewSeeded(7))
	if err != nil {
		t.Fatal(err)
	}
	// The question block is the leader share's last part: its PINE leader
	// share starts with the measurement share (one Field64 element for
	// k = 2), then the proofs and seeds.
	qb := r.CountSpec().Blocks()[1].Pine()
	fl[len(fl)-qb.LeaderShareSize()] ^= 1
	all = append(all[:2], append([]volunteer{relay.seal(t, a, nil, fl, fh)}, all[2:]...)...)

	rs, ch, in := relay.streamRound(t, h, a, all, 2)
	if in != api.IntakeAccepted || ch.Status != wire.BatchStatusOK || ch.Accepted != 4 || rs.accepted() != 4 {
		t.Fatalf("close: %s %+v, the helper accepted %d", in, ch, rs.accepted())
	}
	if in, body := h.postSecAgg("/v1/secagg/aggregate", rs.aggregateFrame(t)); in != api.IntakeAccepted {
		t.Fatalf("aggregate: %s %s", in, body)
	}
	// The model moves by the honest mean: the noise is σ/Scale per server
	// and coordinate (6 SD of both servers' noise on the mean of 4, plus
	// one grid unit of rounding).
	tol := 6*math.Sqrt2*4/(4*r.Params().Scale) + 1/r.Params().Scale
	for j, w := range wantMean(honest) {
		if got := h.srv.Model()[j]; math.Abs(got-w) > tol {
			t.Fatalf("model[%d] = %v, want %v ± %v", j, got, w, tol)
		}
	}
	rec := h.srv.Rounds()[0]
	if rec.Status != checkpoint.StatusOK || rec.N != 4 || rec.Reports != 5 || rec.RejectedValue != 1 ||
		len(rec.Rejections) != 1 || rec.Rejections[secagg.RejectCountBlock.String()] != 1 {
		t.Fatalf("round record %+v", rec)
	}
	c := rec.Counts
	if c == nil || c.N != 4 || len(c.Blocks) != 2 || c.Blocks[0].Kind != "eval" || c.Blocks[0].Rows != 3 || c.Blocks[1].Options != 2 {
		t.Fatalf("counts record %+v", c)
	}
	want := [][]float64{{correct, evaluated}, {4 - yes, yes}}
	for i, w := range want {
		b := c.Blocks[i]
		for j := range w {
			if got := b.Counts[j]; math.Abs(got-w[j]) >= 0.5 {
				t.Fatalf("block %d count %d: %v, want %v", i, j, got, w[j])
			}
		}
		spec := r.CountSpec().Blocks()[i]
		if b.Sigma != 4 || b.Sensitivity != spec.Sensitivity() || b.D != spec.Dim() || b.CountSD != spec.CountSD(4) {
			t.Fatalf("block %d record %+v", i, b)
		}
	}
	parts := []privacy.SecAggPart{{Sigma: 4, Sensitivity: r.Params().Sensitivity(), D: 8},
		{Sigma: 4, Sensitivity: c.Blocks[0].Sensitivity, D: c.Blocks[0].D}, {Sigma: 4, Sensitivity: c.Blocks[1].Sensitivity, D: c.Blocks[1].D}}
	sigma, sens, d, err := privacy.SecAggJoint(parts)
	if err != nil {
		t.Fatal(err)
	}
	rels := h.srv.ledger.Releases()
	if len(rels) != 1 || rels[0].N != 4 || rels[0].SecAggSigma != sigma || rels[0].SecAggSensitivity != sens || rels[0].D != d ||
		len(rels[0].SecAggParts) != 3 || rels[0].SecAggParts[1] != parts[1] {
		t.Fatalf("ledger %+v, want the joint release sigma %v sensitivity %v d %d", rels, sigma, sens, d)
	}
}
