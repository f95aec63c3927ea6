package secagg

import (
	"errors"
	"math"
	"testing"

	"github.com/blanket-fl/blanket/shared/counts"
	"github.com/blanket-fl/blanket/shared/noise"
)

// countsRound is a PINE round of dimension dim with an evaluation block of
// rows rows and a 3-option question, per-server noise sigma on the update
// and countSigma on both blocks (0 and 0: noise-free).
func countsRound(t testing.TB, dim int, sigma, countSigma float64, rows int) *Round {
	t.Helper()
	ev, err := counts.NewEval(rows)
	if err != nil {
		t.Fatal(err)
	}
	q, err := counts.NewQuestion(3)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := counts.NewSpec(ev, q)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPineParams(dim, 1, sigma, 64)
	if err != nil {
		t.Fatal(err)
	}
	if p, err = p.WithCounts(spec, []float64{countSigma, countSigma}); err != nil {
		t.Fatal(err)
	}
	r, err := NewRound(p, 5)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// countReports shards n honest volunteers' updates and counts: volunteer
// i evaluated i % (rows+1) rows, got i/2 of them right, and answered i % 3.
func countReports(t testing.TB, r *Round, n, rows int) (reps []report, correct, evaluated float64, answers [3]float64) {
	t.Helper()
	data := noise.NewSeeded(41)
	for i := range n {
		e := i % (rows + 1)
		v := []counts.Value{{Correct: e / 2, Evaluated: e}, {Answer: i % 3}}
		l, h, err := r.ShardCounts(randomUpdate(data, r.p.Dim, 0.5), v, noise.NewSeeded(uint64(1000+i)))
		if err != nil {
			t.Fatal(err)
		}
		if len(l) != r.LeaderShareSize() || len(h) != r.HelperShareSize() {
			t.Fatalf("shares of %d and %d bytes, the round's are %d and %d", len(l), len(h), r.LeaderShareSize(), r.HelperShareSize())
		}
		reps = append(reps, report{leader: l, helper: h})
		correct += float64(e / 2)
		evaluated += float64(e)
		answers[i%3]++
	}
	return reps, correct, evaluated, answers
}

// TestCountsThroughEngines: honest volunteers' counts go through both
// servers' engines (the 'P' and 'M' messages encoded and decoded, the
// helper's running aggregate persisted and resumed) and, without noise,
// decode to exactly their sums over the same n as the update; a report
// whose count block was altered after sharding (a forged count: the
// leader's measurement share of the question block changed, which no
// proof covers) is rejected once, as RejectCountBlock, and neither its
// update nor its counts enter the sums; a report without its blocks, or
// with one block too many, has the wrong length; Shard without the counts
// is refused.
func TestCountsThroughEngines(t *testing.T) {
	const rows = 7
	r := countsRound(t, 12, 0, 0, rows)
	reps, correct, evaluated, answers := countReports(t, r, 9, rows)
	if _, _, err := r.Shard(make([]float64, 12), noise.NewSeeded(1)); err == nil {
		t.Fatal("a round with count blocks sharded an update without them")
	}

	forged := reps[3]
	forged.leader = append([]byte(nil), forged.leader...)
	// The last block's leader share: public (its length), then the
	// measurement share first; flip its first element's low byte.
	q := r.cl
	off := len(forged.leader) - q.lead[1]
	forged.leader[off] ^= 1
	all := append(append([]report(nil), reps...), forged)

	lead, help, verdicts := runEngines(t, r, all)
	for i, v := range verdicts[:len(reps)] {
		if v.Reason != Accepted {
			t.Fatalf("honest report %d: %v", i, v.Reason)
		}
	}
	if got := verdicts[len(reps)].Reason; got != RejectCountBlock {
		t.Fatalf("forged count block: verdict %v, want %v", got, RejectCountBlock)
	}
	rej := 0
	for _, v := range verdicts {
		if v.Reason != Accepted {
			rej++
		}
	}
	if rej != 1 {
		t.Fatalf("%d rejections, want the forged report once", rej)
	}

	// The helper's running aggregate survives persistence.
	enc, err := help.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if help, err = r.ParseAggregate(enc); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ParseAggregate(enc[:len(enc)-8]); err == nil {
		t.Fatal("a running aggregate without a block coordinate decoded")
	}
	ls, err := lead.Share()
	if err != nil {
		t.Fatal(err)
	}
	hs, err := help.Share()
	if err != nil {
		t.Fatal(err)
	}
	hmsg, err := hs.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Unshard(ls, hmsg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Count != len(reps) || res.Counts == nil || res.Counts.N != len(reps) {
		t.Fatalf("count %d, counts %+v", res.Count, res.Counts)
	}
	if got := res.Counts.Counts[0]; got[0] != correct || got[1] != evaluated {
		t.Fatalf("evaluation sums %v, want %v of %v", got, correct, evaluated)
	}
	for j := range 3 {
		if got := res.Counts.Counts[1][j]; got != answers[j] {
			t.Fatalf("option %d: %v, want %v", j, got, answers[j])
		}
	}
	if got := res.Counts.Counts[1][3]; got != 0 {
		t.Fatalf("the phantom option holds %v", got)
	}

	le, _ := NewEngine(r, true, testVK)
	short := reps[0].leader[:len(reps[0].leader)-q.pub[1]-q.lead[1]]
	if p := le.PrepInit(short); p.Reason != RejectWrongLength {
		t.Fatalf("a share without its last block: %v", p.Reason)
	}
	long := append(append([]byte(nil), reps[0].leader...), reps[0].leader[len(reps[0].leader)-q.pub[1]-q.lead[1]:]...)
	if p := le.PrepInit(long); p.Reason != RejectWrongLength {
		t.Fatalf("a share with a block too many: %v", p.Reason)
	}
}

// TestCountsNoised: with σ > 0 each server's AddNoise noises the blocks
// too, exactly once (a second AddNoise is refused); the 'A' message
// refuses a share without noise and one of another size; the decoded
// counts carry the two servers' noise: over 200 rounds (seed 77) the
// evaluated count's error has mean within 4 SE of 0 (false failure
// 6e-5 for the Gaussian-like error) and sample variance within 35% of
// CountSD² = 2σ²/(2·Scale)² (the sample variance of 200 draws has
// relative SD √(2/199) = 0.10: 3.5 SD, false failure below 5e-4).
func TestCountsNoised(t *testing.T) {
	const rows, n, rounds, cs = 7, 4, 200, 40.0
	src := noise.NewSeeded(77)
	var errs []float64
	var sd float64
	for k := range rounds {
		r := countsRound(t, 4, 5, cs, rows)
		if k == 0 {
			sd = r.CountSpec().Blocks()[0].CountSD(cs)
		}
		reps, _, evaluated, _ := countReports(t, r, n, rows)
		lead, help, _ := runEngines(t, r, reps)
		ls, err := lead.Share()
		if err != nil {
			t.Fatal(err)
		}
		hs, err := help.Share()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := hs.MarshalBinary(); err == nil {
			t.Fatal("an un-noised aggregate share encoded in a noised round")
		}
		if err := ls.AddNoise(src); err != nil {
			t.Fatal(err)
		}
		if err := hs.AddNoise(src); err != nil {
			t.Fatal(err)
		}
		if err := hs.AddNoise(src); err == nil {
			t.Fatal("noise added twice")
		}
		hmsg, err := hs.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.ParseAggregateShare(hmsg[:len(hmsg)-8]); !errors.Is(err, ErrMalformed) {
			t.Fatalf("an 'A' message short of one block coordinate: %v", err)
		}
		res, err := r.Unshard(ls, hmsg)
		if err != nil {
			t.Fatal(err)
		}
		errs = append(errs, res.Counts.Counts[0][1]-evaluated)
	}
	var m, v float64
	for _, e := range errs {
		m += e
	}
	m /= rounds
	for _, e := range errs {
		v += (e - m) * (e - m)
	}
	v /= rounds - 1
	if se := sd / math.Sqrt(rounds); math.Abs(m) > 4*se {
		t.Errorf("mean error %v, SE %v", m, se)
	}
	if math.Abs(v/(sd*sd)-1) > 0.35 {
		t.Errorf("error variance %v, CountSD² %v", v, sd*sd)
	}
	t.Logf("evaluated count error: mean %.3f, variance %.2f, CountSD² %.2f (%d rounds)", m, v, sd*sd, rounds)
}

// TestCountParams: the blocks' σ must match them and the update's noise.
func TestCountParams(t *testing.T) {
	q, _ := counts.NewQuestion(2)
	spec, _ := counts.NewSpec(q)
	p, err := NewPineParams(4, 1, 5, 10)
	if err != nil {
		t.Fatal(err)
	}
	for name, sig := range map[string][]float64{"none": nil, "two": {5, 5}, "3.9": {3.9}, "0 with noise": {0}, "NaN": {math.NaN()}} {
		if _, err := p.WithCounts(spec, sig); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	p0, _ := NewPineParams(4, 1, 0, 10)
	if _, err := p0.WithCounts(spec, []float64{5}); err == nil {
		t.Error("a block noised in a noise-free round")
	}
	if _, err := p0.WithCounts(spec, []float64{0}); err != nil {
		t.Error(err)
	}
}
