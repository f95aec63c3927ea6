package server

import (
	"bytes"
	"testing"

	"github.com/blanket-fl/blanket/aggregator/internal/api"
	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/secagg"
	"github.com/blanket-fl/blanket/shared/wire"
)

// streamHelper is the relay's helper in these tests, one report at a
// time through the engine.
type streamHelper struct {
	r     *secagg.Round
	eng   secagg.Engine
	agg   *secagg.Aggregate
	preps []secagg.Prep
}

func newStreamHelper(t *testing.T, a *wire.Announcement) *streamHelper {
	t.Helper()
	r := secaggRound(t, a)
	vk, err := secagg.DeriveVerifyKey([]byte(testToken), a.Round)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := secagg.NewEngine(r, false, vk)
	if err != nil {
		t.Fatal(err)
	}
	return &streamHelper{r: r, eng: eng, agg: eng.NewAggregate()}
}

// chunk prepares vs and returns the chunk frame seq.
func (sh *streamHelper) chunk(t *testing.T, relay *secaggRelay, round uint64, seq uint32, vs []volunteer) []byte {
	t.Helper()
	var ls [][]byte
	var es []secagg.Entry
	for _, v := range vs {
		pt, err := relay.key.OpenHelperShare(round, v.helper, sh.r.HelperShareSize())
		if err != nil {
			t.Fatal(err)
		}
		p := sh.eng.PrepInit(pt)
		sh.preps = append(sh.preps, p)
		ls, es = append(ls, v.leader), append(es, p.Entry)
	}
	prep, err := sh.r.MarshalPrep(es)
	if err != nil {
		t.Fatal(err)
	}
	f, err := (&wire.SecAggChunk{Round: round, Seq: seq, Leader: ls, Prep: prep}).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// verdicts folds a chunk's answer into the helper's aggregate.
func (sh *streamHelper) verdicts(t *testing.T, body []byte) {
	t.Helper()
	p, err := wire.ParseSecAggPrep(body)
	if err != nil || p.Status != wire.BatchStatusOK {
		t.Fatalf("chunk answer %+v %v", p, err)
	}
	ms, err := sh.r.ParseVerdicts(p.Msg)
	if err != nil {
		t.Fatal(err)
	}
	done := len(sh.preps) - len(ms)
	for i, m := range ms {
		out, err := sh.eng.Next(sh.preps[done+i], m)
		if err != nil {
			t.Fatal(err)
		}
		if out != nil {
			sh.agg.Fold(out)
		}
	}
}

// TestSecAggStreamedRoundSurvivesRestarts: chunks are prepared as they
// arrive and nothing is charged before the close; an aggregator restart
// between two chunks resumes the round from its persisted state (the
// re-sent chunk gets its answer again); the close charges once and the
// relay's aggregate share moves the model by the honest mean.
func TestSecAggStreamedRoundSurvivesRestarts(t *testing.T) {
	dir := t.TempDir()
	relay := newSecAggRelay(t)
	h := newSecAggHarness(t, dir, relay, nil)
	a := relay.next(t)
	var vs []volunteer
	for i := range 5 {
		vs = append(vs, relay.shardAndSeal(t, a, honestUpdate(uint64(i+1), 8), uint64(100+i)))
	}
	sh := newStreamHelper(t, a)
	c1 := sh.chunk(t, relay, a.Round, 1, vs[:2])
	in, body := h.postSecAgg("/v1/secagg/chunk", c1)
	if in != api.IntakeAccepted {
		t.Fatalf("chunk 1: %s %s", in, body)
	}
	sh.verdicts(t, body)
	if n := len(h.srv.ledger.Releases()); n != 0 {
		t.Fatalf("%d releases before the close", n)
	}
	h.stop()

	h = newSecAggHarness(t, dir, relay, nil)
	if in, again := h.postSecAgg("/v1/secagg/chunk", c1); in != api.IntakeDuplicate || !bytes.Equal(again, body) {
		t.Fatalf("chunk 1 re-sent after the restart: %s", in)
	}
	// Chunk 3 arriving before chunk 2 waits for it (the relay has a few
	// chunks in flight), then both are folded in order.
	c2 := sh.chunk(t, relay, a.Round, 2, vs[2:4])
	c3 := sh.chunk(t, relay, a.Round, 3, vs[4:5])
	got3 := make(chan api.Intake, 1)
	go func() { in, _ := h.postSecAgg("/v1/secagg/chunk", c3); got3 <- in }()
	if in, body := h.postSecAgg("/v1/secagg/chunk", c2); in != api.IntakeAccepted {
		t.Fatalf("chunk 2 after chunk 3: %s %s", in, body)
	}
	if in := <-got3; in != api.IntakeAccepted {
		t.Fatalf("chunk 3 before chunk 2: %s", in)
	}
	if rec := h.srv.Rounds(); len(rec) != 0 {
		t.Fatalf("records after an out-of-order chunk: %+v", rec)
	}
}

// TestSecAggStreamedRound: chunks of 2, 2 and 1 reports, then the close:
// charged once with the accepted count, answered SecAggCharged; counts
// that disagree with the leader's are refused before any charge; the
// aggregate share applies.
func TestSecAggStreamedRound(t *testing.T) {
	dir := t.TempDir()
	relay := newSecAggRelay(t)
	h := newSecAggHarness(t, dir, relay, nil)
	a := relay.next(t)
	var vs []volunteer
	for i := range 5 {
		vs = append(vs, relay.shardAndSeal(t, a, honestUpdate(uint64(i+1), 8), uint64(100+i)))
	}
	sh := newStreamHelper(t, a)
	for i, part := range [][]volunteer{vs[:2], vs[2:4], vs[4:]} {
		in, body := h.postSecAgg("/v1/secagg/chunk", sh.chunk(t, relay, a.Round, uint32(i+1), part))
		if in != api.IntakeAccepted {
			t.Fatalf("chunk %d: %s %s", i+1, in, body)
		}
		sh.verdicts(t, body)
		if i == 1 {
			h.stop() // a restart in the middle: the round resumes
			h = newSecAggHarness(t, dir, relay, nil)
		}
	}
	if n := len(h.srv.ledger.Releases()); n != 0 {
		t.Fatalf("%d releases before the close", n)
	}
	cl := wire.SecAggClose{Round: a.Round, Chunks: 3, Reports: 5, Accepted: 5, CheckedIn: 6, Population: 8}
	close, err := cl.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	in, body := h.postSecAgg("/v1/secagg/close", close)
	ch, err := wire.ParseSecAggCharged(body)
	if in != api.IntakeAccepted || err != nil || ch.Status != wire.BatchStatusOK || ch.Accepted != 5 {
		t.Fatalf("close: %s %+v %v", in, ch, err)
	}
	if rels := h.srv.ledger.Releases(); len(rels) != 1 || rels[0].N != 5 {
		t.Fatalf("releases after the close: %+v", rels)
	}
	if in, again := h.postSecAgg("/v1/secagg/close", close); in != api.IntakeDuplicate || !bytes.Equal(again, body) {
		t.Fatalf("re-sent close: %s", in)
	}
	own, err := sh.agg.Share()
	if err != nil {
		t.Fatal(err)
	}
	if err := own.AddNoise(noise.NewSeeded(7)); err != nil {
		t.Fatal(err)
	}
	share, _ := own.MarshalBinary()
	af, _ := (&wire.SecAggAggregate{Round: a.Round, Share: share}).MarshalBinary()
	if in, body := h.postSecAgg("/v1/secagg/aggregate", af); in != api.IntakeAccepted {
		t.Fatalf("aggregate: %s %s", in, body)
	}
	checkNear(t, h.srv.Model(), wantMean(vs), 5)
	if rec := h.srv.Rounds()[0]; rec.Status != checkpoint.StatusOK || rec.N != 5 || rec.Reports != 5 || rec.CheckedIn != 6 {
		t.Fatalf("record %+v", rec)
	}
	if n := len(h.srv.ledger.Releases()); n != 1 {
		t.Fatalf("%d releases after the round", n)
	}

	// Round 2: a close whose counts differ from the leader's charges
	// nothing.
	a2 := relay.next(t)
	sh2 := newStreamHelper(t, a2)
	var vs2 []volunteer
	for i := range 3 {
		vs2 = append(vs2, relay.shardAndSeal(t, a2, honestUpdate(uint64(i+11), 8), uint64(200+i)))
	}
	if in, body := h.postSecAgg("/v1/secagg/chunk", sh2.chunk(t, relay, a2.Round, 1, vs2)); in != api.IntakeAccepted {
		t.Fatalf("round 2 chunk: %s %s", in, body)
	}
	bad, _ := (&wire.SecAggClose{Round: a2.Round, Chunks: 1, Reports: 3, Accepted: 2, CheckedIn: 3, Population: 3}).MarshalBinary()
	in, body = h.postSecAgg("/v1/secagg/close", bad)
	if ch, err := wire.ParseSecAggCharged(body); in != api.IntakeInvalid || err != nil || ch.Status != wire.BatchStatusInvalid {
		t.Fatalf("close with another accepted count: %s %+v %v", in, ch, err)
	}
	if n := len(h.srv.ledger.Releases()); n != 1 {
		t.Fatalf("%d releases after a refused close, want 1", n)
	}
}
