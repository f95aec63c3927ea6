package sumrelay

import (
	"bytes"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/relay/internal/acklog"
	"github.com/blanket-fl/blanket/relay/internal/outbox"
	"github.com/blanket-fl/blanket/relay/internal/round"
	"github.com/blanket-fl/blanket/shared/wire"
)

// memLog is an acklog.Log in memory.
type memLog struct {
	mu       sync.Mutex
	m        map[uint64]map[uint64]map[string][]byte
	failures int // the next Appends that fail (the store restarting)
}

func (l *memLog) Append(num, conn uint64, key string, frame []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failures > 0 {
		l.failures--
		return errors.New("mem: FATAL: terminating connection due to administrator command")
	}
	if l.m == nil {
		l.m = make(map[uint64]map[uint64]map[string][]byte)
	}
	if l.m[num] == nil {
		l.m[num] = make(map[uint64]map[string][]byte)
	}
	if l.m[num][conn] == nil {
		l.m[num][conn] = make(map[string][]byte)
	}
	l.m[num][conn][key] = bytes.Clone(frame)
	return nil
}

func (l *memLog) Frames(num uint64) (map[uint64]map[string][]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[uint64]map[string][]byte)
	for c, recs := range l.m[num] {
		out[c] = maps.Clone(recs)
	}
	return out, nil
}

func (l *memLog) Rounds() ([]uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Sorted(maps.Keys(l.m)), nil
}

func (l *memLog) Drop(num uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.m, num)
	return nil
}

var _ acklog.Log = (*memLog)(nil)

// marker is round num's open-round marker, as the relay's server writes it.
func (f *fixture) marker(num uint64, population uint32) []byte {
	a := &wire.Announcement{Round: num, Deadline: time.Now().Add(time.Minute), Params: f.p, Model: make([]float64, f.p.D), RelayPub: f.hk.Public()}
	ann, err := a.MarshalBinary()
	if err != nil {
		f.t.Fatal(err)
	}
	b, err := acklog.MarshalMarker(acklog.Marker{Ann: ann, Population: population})
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

// TestRebuildAfterLoss: the relay is lost mid-round while chunk 3 is at
// the aggregator (chunks of 2, one at the aggregator at a time): folded
// there, its answer lost ("folded"), or lost before the aggregator folded
// it ("unfolded"). Either way only the reports of the chunks answered (1
// and 2) were acknowledged; the others were told they are not in. The
// relay that starts next on the same store finds the chunk records, asks
// for each chunk's verdicts again in order, re-prepares the chunks the
// aggregator folded and closes the round with exactly them (the first
// unfolded chunk seals the aggregator's round there): 6 or 4 reports,
// charged and released once, the unsharded sum exactly that of a round of
// the same reports never lost; no chunk is posted again, and at the end
// nothing is owed. A relay without chunk records has nothing to rebuild.
func TestRebuildAfterLoss(t *testing.T) {
	for _, c := range []struct {
		name   string
		before bool
		folded int // chunks the aggregator folded
	}{{"folded", false, 3}, {"unfolded", true, 2}} {
		t.Run(c.name, func(t *testing.T) { testRebuildAfterLoss(t, c.before, c.folded) })
	}
}

func testRebuildAfterLoss(t *testing.T, lostBefore bool, folded int) {
	f := newFixture(t)
	log := &memLog{}
	withLog := func(rl *Relay) *Relay {
		rl.cfg.Chunks = log
		rl.cfg.CheckedIn = func(uint64) uint32 { return 9 }
		return rl
	}
	f.rl = withLog(f.newRelay())
	f.rl.SetKnobs(Knobs{Workers: 2, ChunkReports: 2, InFlight: 1, ChunkEvery: time.Hour, DrainBound: time.Minute})
	f.agg.lostAt, f.agg.lostBefore = 3, lostBefore
	marker := f.marker(1, 9)
	f.store.Put(1, outbox.OpenRound, marker)
	f.rl.OpenStream(&round.Round{Num: 1, Params: f.p, SecAgg: f.spec})
	const n = 8
	var fates []<-chan bool
	for i := range n {
		r := f.report(1, 1, x0, uint64(100+i))
		fates = append(fates, f.rl.Report(1, &r))
	}
	st := f.rl.Take(1) // the relay is lost: the stream ends on the lost answer, nothing is closed
	if r := st.End(n); r.End == nil || r.Chunks != 2 {
		t.Fatalf("the lost relay's stream: %+v, want ended after 2 chunks applied", r)
	}
	var told []bool
	for _, c := range fates {
		select {
		case k := <-c:
			told = append(told, k)
		case <-time.After(time.Minute):
			t.Fatal("a report's fate was never told")
		}
	}
	if !slices.Equal(told, []bool{true, true, true, true, false, false, false, false}) { // chunks 1 and 2
		t.Fatalf("fates %v: want the 4 reports of the answered chunks acknowledged, no other", told)
	}
	if len(f.agg.closes) != 0 || len(f.charged) != 0 {
		t.Fatal("the lost relay closed the round")
	}

	// The next relay on the same store.
	if f.newRelay().Resumable(1, marker) {
		t.Fatal("a relay without chunk records found a round to rebuild")
	}
	f.rl = withLog(f.newRelay())
	f.rl.SetKnobs(Knobs{Workers: 2})
	if !f.rl.Resumable(1, marker) {
		t.Fatal("the round with chunk records is not resumable")
	}
	before := len(f.agg.leaders)
	f.rl.StartRebuild(t.Context(), 1, marker)
	f.rl.Wait()
	if len(f.agg.leaders) != before {
		t.Errorf("the rebuild posted %d leader shares more: it must post no chunk", len(f.agg.leaders)-before)
	}
	if len(f.agg.closes) != 1 {
		t.Fatalf("%d closes posted, want 1", len(f.agg.closes))
	}
	cl, err := wire.ParseSecAggClose(f.agg.closes[0])
	if err != nil {
		t.Fatal(err)
	}
	in := 2 * folded
	if int(cl.Chunks) != folded || int(cl.Reports) != in || int(cl.Accepted) != in || cl.CheckedIn != 9 || cl.Population != 9 {
		t.Fatalf("close %+v: want the %d chunks folded, their %d reports accepted, 9 checked in of 9", cl, folded, in)
	}
	if !slices.Equal(f.charged, []int{in}) || f.agg.result == nil || len(f.agg.aggregates) != 1 {
		t.Fatalf("charged %v, %d aggregate shares, result %v: want one release of %d", f.charged, len(f.agg.aggregates), f.agg.result, in)
	}
	// The unsharded sum is exactly that of a round of the same 6 reports
	// never lost (the same noise seeds at both servers): the relay's
	// share was rebuilt from the reports the leader folded.
	g := newFixture(t)
	g.rl.SetKnobs(Knobs{Workers: 2, ChunkReports: 2})
	g.openRound(1, in)
	g.rl.Close(t.Context(), g.closed(1, uint32(in)))
	if g.agg.result == nil || !slices.Equal(f.agg.result.Sum, g.agg.result.Sum) || f.agg.result.Count != in {
		t.Errorf("the rebuilt round's sum differs from that of the same %d reports never lost (count %d)", in, f.agg.result.Count)
	}
	// The aggregator is sealed at the first chunk it did not fold: 3 (its
	// record persisted before it was posted), or 4, which has no record
	// (one chunk at the aggregator at a time) but is asked all the same.
	if want := uint32(folded + 1); f.agg.sealed != want {
		t.Errorf("the aggregator was asked to seal at %d, want %d (the first chunk it did not fold)", f.agg.sealed, want)
	}
	if l, _ := f.store.List(); len(l) != 0 {
		t.Errorf("store after the rebuilt round: %v, want empty", l)
	}
	if r, _ := log.Rounds(); len(r) != 0 {
		t.Errorf("chunk records left for rounds %v", r)
	}
}

// TestChunkRecordRetried: the store fails the first two chunk records (a
// PostgreSQL restart): the stream retries them and the round completes
// with every report, nothing posted before its record was written.
func TestChunkRecordRetried(t *testing.T) {
	f := newFixture(t)
	log := &memLog{failures: 2}
	f.rl.cfg.Chunks = log
	f.agg.recorded = func(num uint64, seq uint32) bool {
		fr, _ := log.Frames(num)
		return fr[ChunkConn][chunkKey(seq)] != nil
	}
	f.rl.SetKnobs(Knobs{Workers: 2, ChunkReports: 2})
	f.store.Put(1, outbox.OpenRound, nil)
	f.openRound(1, 4)
	f.rl.Close(t.Context(), f.closed(1, 4))
	if !slices.Equal(f.charged, []int{4}) || f.agg.result == nil || f.agg.result.Count != 4 {
		t.Fatalf("charged %v, result %+v: want the round of 4 released", f.charged, f.agg.result)
	}
	if log.failures != 0 {
		t.Fatalf("%d failures left: the records were not retried", log.failures)
	}
	if r, _ := log.Rounds(); len(r) != 0 {
		t.Errorf("chunk records left for rounds %v after the close", r)
	}
}
