package server

import (
	"bytes"
	"github.com/blanket-fl/blanket/relay/internal/sumrelay"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blanket-fl/blanket/relay/internal/helper"
	"github.com/blanket-fl/blanket/relay/internal/intake"
	"github.com/blanket-fl/blanket/relay/internal/round"
	"github.com/blanket-fl/blanket/shared/envelope/envelopetest"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/wire"
)

// openProbe wraps the helper's opener: it records how many openings run
// at once, and in which order they finish; the opening of the report at
// index i (by its sealed helper share) first sleeps (n − i) ms on the
// bubble's clock, so that later reports finish before earlier ones.
type openProbe struct {
	mu       sync.Mutex
	index    map[string]int // sealed helper share → arrival index
	n        int
	inFlight int
	peak     int
	finished []int
}

func (o *openProbe) wrap(inner helper.Opener) helper.Opener {
	return func(round uint64, sealed []byte, want int) ([]byte, error) {
		o.mu.Lock()
		i, ok := o.index[string(sealed)]
		o.inFlight++
		o.peak = max(o.peak, o.inFlight)
		o.mu.Unlock()
		if ok {
			time.Sleep(time.Duration(o.n-i) * time.Millisecond)
		}
		pt, err := inner(round, sealed, want)
		o.mu.Lock()
		o.inFlight--
		o.finished = append(o.finished, i)
		o.mu.Unlock()
		return pt, err
	}
}

// TestSecAggStreamPreparesConcurrentlyInOrder: with four workers, a
// round's reports are opened and prepared concurrently, and finish out of
// order (the probe delays earlier ones longest), yet their leader shares
// reach the aggregator in arrival order, each with its own 'P' entry (the
// real leader accepts every honest report: a leader share paired with
// another report's 'P' fails verification), the report whose helper share
// does not open is dropped in its place without shifting the others, and
// every receipt says what happened to its report. Every accepted report is
// counted once: sent or unopened, none late.
func TestSecAggStreamPreparesConcurrentlyInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := secAggTestParams() // Quota 16
		key, _ := envelopetest.DeriveKey([32]byte{7})
		agg := &leaderAgg{t: t, key: key, p: p}
		h := newHarness(t, agg, "")
		defer h.close()
		const n, unopened = 12, 5
		probe := &openProbe{index: make(map[string]int), n: n}
		h.srv.sa.SetKnobs(sumrelay.Knobs{Workers: 4, ChunkReports: 4, WrapOpen: probe.wrap})
		spec, err := roundspec.New(p)
		if err != nil {
			t.Fatal(err)
		}
		pub := h.helperPub()
		leaderLen, helperLen, _ := spec.SharesSizes()
		clients := h.openSecAggRound(1, p, n)
		frames := make([][]byte, n)
		var wantLeaders [][]byte
		for i := range frames {
			seal := uint64(1)
			if i == unopened {
				seal = 2 // its helper share does not open for round 1
			}
			frames[i] = h.volunteerShares(spec, 1, seal, pub, honestX, uint64(i+1))
			sh, err := wire.ParseShares(frames[i], leaderLen, helperLen)
			if err != nil {
				t.Fatal(err)
			}
			probe.index[string(sh.Helper)] = i
			if i != unopened {
				wantLeaders = append(wantLeaders, sh.Leader)
			}
		}
		// Each frame in turn reaches the stream (its ack waits for its
		// chunk's answer), so that the arrival order is the clients'.
		for i, c := range clients {
			c.send(frames[i])
			synctest.Wait()
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		for _, c := range clients {
			if a := c.ack(); a.Status != wire.AckAccepted {
				t.Fatalf("shares ack %+v", a)
			}
		}

		probe.mu.Lock()
		peak, finished := probe.peak, probe.finished
		probe.mu.Unlock()
		if peak < 2 {
			t.Errorf("at most %d helper share opened at once: not prepared concurrently", peak)
		}
		if slices.IsSorted(finished) {
			t.Errorf("preparations finished in arrival order %v: the reordering was not exercised", finished)
		}
		agg.mu.Lock()
		defer agg.mu.Unlock()
		if len(agg.errs) != 0 {
			t.Fatalf("aggregator errors: %v", agg.errs)
		}
		var got [][]byte
		for i, c := range agg.chunks {
			if c.Seq != uint32(i+1) {
				t.Fatalf("chunk %d has Seq %d", i, c.Seq)
			}
			got = append(got, c.Leader...)
		}
		if !slices.EqualFunc(got, wantLeaders, bytes.Equal) {
			t.Fatalf("the aggregator got %d leader shares, not the %d sent in arrival order", len(got), len(wantLeaders))
		}
		if len(agg.rejected) != 0 || agg.result == nil || agg.result.Count != n-1 {
			t.Fatalf("leader rejections %v, result %+v: want every opened report accepted", agg.rejected, agg.result)
		}
		for i, f := range frames {
			_, hs, _ := wire.SharesHelper(f)
			want := ReceiptIncluded
			if i == unopened {
				want = ReceiptExcluded
			}
			if st, why := h.srv.sa.Receipts.Lookup(1, wire.ReportReceipt(hs), 1); st != want {
				t.Errorf("report %d: receipt %s (%s), want %s", i, st, why, want)
			}
		}
		s := h.srv.Metrics()
		if s.Accepted["shares"] != n || s.SecAgg.Dropped[DropUnopened] != 1 || s.SecAgg.Dropped[DropLate] != 0 ||
			s.LastRound == nil || s.LastRound.Reports != n-1 || s.LastRound.Outcome != SecAggForwarded {
			t.Fatalf("accepted %v, dropped %v, last %+v: want %d sent + 1 unopened", s.Accepted, s.SecAgg.Dropped, s.LastRound, n-1)
		}
		for _, c := range clients {
			c.ws.Close()
		}
	})
}

// TestSecAggStreamStopsAfterAnInvalidChunk: the aggregator holds the
// first chunk until every report is in the relay's pipeline (chunks
// prepared behind it), then finds the second invalid: the round ends
// invalid with nothing more posted — no later chunk, no close, no
// aggregate share — and nothing owed.
func TestSecAggStreamStopsAfterAnInvalidChunk(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := secAggTestParams()
		key, _ := envelopetest.DeriveKey([32]byte{7})
		hold := make(chan struct{})
		agg := &leaderAgg{t: t, key: key, p: p, invalidSeq: 2, hold: hold}
		h := newHarness(t, agg, "")
		defer h.close()
		h.srv.sa.SetKnobs(sumrelay.Knobs{Workers: 2, ChunkReports: 2, InFlight: 1}) // one chunk at the aggregator at a time
		spec, _ := roundspec.New(p)
		pub := h.helperPub()
		const n = 12
		clients := h.openSecAggRound(1, p, n)
		for i, c := range clients {
			c.send(h.volunteerShares(spec, 1, 1, pub, honestX, uint64(i+1)))
		}
		synctest.Wait() // chunk 1 at the aggregator, the next ones prepared behind it
		close(hold)
		time.Sleep(time.Minute)
		synctest.Wait()
		// Acknowledged: the reports of chunk 1 only, the one the aggregator
		// folded; the others were lost with the round, and their
		// volunteers are told so (too late), never that they are in.
		acks := map[uint8]int{}
		for _, c := range clients {
			acks[c.ack().Status]++
		}
		if acks[wire.AckAccepted] != 2 || acks[wire.AckTooLate] != n-2 {
			t.Fatalf("acks by status %v: want 2 accepted (chunk 1) and %d too late", acks, n-2)
		}

		agg.mu.Lock()
		var seqs []uint32
		for _, c := range agg.chunks {
			seqs = append(seqs, c.Seq)
		}
		nc, na := len(agg.attempts[secAggClosePath]), len(agg.attempts[secAggAggregatePath])
		agg.mu.Unlock()
		if !slices.Equal(seqs, []uint32{1, 2}) || nc != 0 || na != 0 {
			t.Fatalf("chunks %v, %d closes, %d aggregate shares posted: want chunks 1 and 2 only", seqs, nc, na)
		}
		s := h.srv.Metrics()
		if s.SecAgg.Rounds[SecAggInvalid] != 1 || s.LastRound == nil || s.LastRound.Outcome != SecAggInvalid {
			t.Fatalf("metrics %+v, last %+v", s.SecAgg, s.LastRound)
		}
		if l, _ := h.srv.cfg.Outbox.List(); len(l) != 0 {
			t.Fatalf("outbox after an invalid round: %v", l)
		}
		for _, c := range clients {
			c.ws.Close()
		}
	})
}

// TestSecAggStreamCountsEveryReportOnce: at the close, the stream is told
// of two reports more than it received (accepted by the round machine,
// never handed over): it waits DrainBound for them, then counts them late;
// of those it received, one is unopened and every other one is sent —
// each received report counted exactly once, and the late ones never
// reach the aggregator.
func TestSecAggStreamCountsEveryReportOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := secAggTestParams()
		key, _ := envelopetest.DeriveKey([32]byte{7})
		agg := &leaderAgg{t: t, key: key, p: p}
		h := newHarness(t, agg, "")
		defer h.close()
		h.srv.sa.SetKnobs(sumrelay.Knobs{Workers: 2, ChunkReports: 3, DrainBound: 5 * time.Second})
		spec, leaderLen, helperLen, err := round.SecAggSpec(p)
		if err != nil {
			t.Fatal(err)
		}
		pub := h.helperPub()
		const n, late = 7, 2
		h.srv.sa.OpenStream(&round.Round{Num: 1, Params: p, SecAgg: spec, LeaderLen: leaderLen, HelperLen: helperLen})
		st := h.srv.sa.Take(1)
		for i := range n {
			seal := uint64(1)
			if i == 3 {
				seal = 2 // does not open
			}
			sh, err := wire.ParseShares(h.volunteerShares(spec, 1, seal, pub, honestX, uint64(i+1)), leaderLen, helperLen)
			if err != nil {
				t.Fatal(err)
			}
			st.Feed(round.SharesReport{Leader: sh.Leader, Helper: sh.Helper})
		}
		start := time.Now()
		r := st.End(n + late)
		if waited := time.Since(start); waited < 5*time.Second {
			t.Errorf("the stream gave the missing reports %v, want the drain bound (5s)", waited)
		}
		if r.End != nil || r.Received != n || r.Late != late || r.Unopened != 1 || r.Sent != n-1 {
			t.Fatalf("end %v, received %d, late %d, unopened %d, sent %d: want %d received, %d late, 1 unopened, %d sent",
				r.End, r.Received, r.Late, r.Unopened, r.Sent, n, late, n-1)
		}
		agg.mu.Lock()
		defer agg.mu.Unlock()
		if agg.chunkReports() != n-1 || len(agg.errs) != 0 || len(agg.rejected) != 0 {
			t.Fatalf("the aggregator got %d reports (errors %v, rejected %v), want %d", agg.chunkReports(), agg.errs, agg.rejected, n-1)
		}
	})
}

// TestSecAggBackPressure: with one slot for large frames and the
// aggregator holding the first chunk, the relay's pipeline and its stream
// buffer fill, and the next volunteers' Shares frames wait unread for the
// slot (their acks wait too) instead of piling up in the relay's memory:
// at most one large frame is held outside the stream at any time. Once the
// aggregator answers, every report is accepted, forwarded and counted:
// none late, none dropped.
func TestSecAggBackPressure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := secAggTestParams()
		p.D, p.Quota = 512, 48 // Shares frames past intake.SmallFrame; room for n
		key, _ := envelopetest.DeriveKey([32]byte{7})
		agg := &leaderAgg{t: t, key: key, p: p, hold: make(chan struct{})}
		h := newHarness(t, agg, "", func(c *Config) { c.LargeFrames = 1 })
		defer h.close()
		h.srv.sa.SetKnobs(sumrelay.Knobs{Workers: 2, ChunkReports: 2})
		spec, err := roundspec.New(p)
		if err != nil {
			t.Fatal(err)
		}
		pub := h.helperPub()
		const n = 40
		x := make([]float64, p.D)
		copy(x, honestX)
		clients := h.openSecAggRound(1, p, n)
		var acks sync.WaitGroup
		for i, c := range clients {
			f := h.volunteerShares(spec, 1, 1, pub, x, uint64(i+1))
			if len(f) <= intake.SmallFrame {
				t.Fatalf("a Shares frame of %d bytes at d = %d: not a large frame", len(f), p.D)
			}
			acks.Go(func() { c.sendShares(f) })
		}
		synctest.Wait() // chunk 1 held at the aggregator; the rest wait
		if s := h.srv.Metrics(); s.LargeFrames.Waits == 0 || s.Accepted["shares"] >= n {
			t.Fatalf("no volunteer waited (large frames %+v, %d shares accepted of %d)", s.LargeFrames, s.Accepted["shares"], n)
		}
		close(agg.hold)
		acks.Wait()
		time.Sleep(time.Minute)
		synctest.Wait()
		s := h.srv.Metrics()
		if s.LargeFrames.MaxHeld != 1 {
			t.Errorf("%d large frames held at once, budget 1", s.LargeFrames.MaxHeld)
		}
		if s.Accepted["shares"] != n || s.SecAgg.Dropped[DropLate] != 0 || s.LastRound == nil ||
			s.LastRound.Reports != n || s.LastRound.Outcome != SecAggForwarded {
			t.Fatalf("accepted %v, dropped %v, last %+v: want all %d forwarded", s.Accepted, s.SecAgg.Dropped, s.LastRound, n)
		}
		agg.mu.Lock()
		defer agg.mu.Unlock()
		if agg.result == nil || agg.result.Count != n {
			t.Fatalf("aggregate of %+v, want %d reports", agg.result, n)
		}
		for _, c := range clients {
			c.ws.Close()
		}
	})
}
