package sumrelay

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/relay/internal/aggclient"
	"github.com/blanket-fl/blanket/relay/internal/helperkey"
	"github.com/blanket-fl/blanket/relay/internal/metrics"
	"github.com/blanket-fl/blanket/relay/internal/outbox"
	"github.com/blanket-fl/blanket/relay/internal/round"
	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/envelope/envelopetest"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/secagg"
	"github.com/blanket-fl/blanket/shared/wire"
)

// These tests run the secure-summation steps without a network: the
// aggregator is an in-process Poster running the real Prio3 leader engine,
// the state an in-memory outbox.Store that can refuse a write.

const testToken = "sumrelay-test-token-0123456789"

// memStore is an outbox.Store in memory; failPut makes Put of a kind fail
// (a write or fsync error: nothing is stored).
type memStore struct {
	mu         sync.Mutex
	m          map[outbox.Entry][]byte
	failPut    map[outbox.Kind]bool
	failRemove map[outbox.Kind]bool // Remove of a kind fails (the database went away)
}

func newMemStore() *memStore { return &memStore{m: make(map[outbox.Entry][]byte)} }

func (s *memStore) Put(r uint64, k outbox.Kind, b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failPut[k] {
		return fmt.Errorf("mem: fsync of round %d %s: %w", r, k, errors.New("input/output error"))
	}
	s.m[outbox.Entry{Round: r, Kind: k}] = bytes.Clone(b)
	return nil
}

func (s *memStore) Get(r uint64, k outbox.Kind) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.m[outbox.Entry{Round: r, Kind: k}]
	if !ok {
		return nil, fmt.Errorf("mem: %w", fs.ErrNotExist)
	}
	return bytes.Clone(b), nil
}

func (s *memStore) Has(r uint64, k outbox.Kind) bool {
	_, err := s.Get(r, k)
	return err == nil
}

func (s *memStore) Remove(r uint64, k outbox.Kind) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failRemove[k] {
		return fmt.Errorf("mem: removing round %d %s: %w", r, k, errors.New("connection refused"))
	}
	delete(s.m, outbox.Entry{Round: r, Kind: k})
	return nil
}

func (s *memStore) List() ([]outbox.Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []outbox.Entry
	for e := range s.m {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b outbox.Entry) int {
		if c := cmp.Compare(a.Round, b.Round); c != 0 {
			return c
		}
		return cmp.Compare(a.Kind, b.Kind)
	})
	return out, nil
}

// leader is the aggregator as a Poster: chunks are prepared and decided by
// the real leader engine, the close is answered with the leader's count,
// the aggregate share is unsharded with the leader's. For every request it
// records whether the store held the exact bytes posted (durable holds
// them: a close or aggregate share must be persisted before it is sent).
type leader struct {
	t     *testing.T
	key   *envelopetest.Key
	p     wire.Params
	store *memStore
	// stopAt: answer the first request to this path with ErrStopped (the
	// relay killed while the request was out).
	stopAt string
	// lostAt: fold chunk lostAt, then answer it with ErrStopped (the relay
	// lost with the answer on its way); replies are every chunk's
	// answer by seq, sealed the first seq a resume found unfolded.
	lostAt     uint32
	lostBefore bool // lostAt's chunk is lost before it is folded
	// recorded, if set, tells whether chunk seq of round num has its
	// record: a chunk posted without one fails the test.
	recorded func(num uint64, seq uint32) bool
	replies  map[uint32][]byte
	sealed   uint32

	mu      sync.Mutex
	turn    *sync.Cond // on mu: a chunk ahead of next waits for its predecessors
	next    uint32
	paths   []string
	durable []bool
	seqs    []uint32
	leaders [][]byte // every chunk's leader shares, in order
	closes  [][]byte
	// aggregates are the aggregate shares posted, in order.
	aggregates [][]byte
	sr         *secagg.Round
	eng        secagg.Engine
	agg        *secagg.Aggregate
	result     *secagg.Result
}

func (a *leader) Post(_ context.Context, num uint64, path string, body []byte, limit int64,
	check func([]byte) error) (outbox.Outcome, []byte, string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.paths = append(a.paths, path)
	held := true
	switch {
	case a.store == nil:
	case path == ClosePath:
		b, err := a.store.Get(num, outbox.SecAggClose)
		var rc resumeClose
		held = err == nil && json.Unmarshal(b, &rc) == nil && bytes.Equal(rc.Close, body)
	case path == AggregatePath:
		b, err := a.store.Get(num, outbox.SecAggAggregate)
		held = err == nil && bytes.Equal(b, body)
	}
	a.durable = append(a.durable, held)
	if a.stopAt == path {
		a.stopAt = ""
		return outbox.Retry, nil, "", aggclient.ErrStopped
	}
	spec, err := roundspec.New(a.p)
	if err != nil {
		a.t.Fatal(err)
	}
	var reply []byte
	switch path {
	case ChunkPath:
		lead, _, _ := spec.SharesSizes()
		c, err := wire.ParseSecAggChunk(body, lead, int(a.p.Quota))
		if err != nil {
			a.t.Fatal(err)
		}
		// Several chunks may be in flight: take them in seq order, as the
		// aggregator does.
		if a.turn == nil {
			a.turn = sync.NewCond(&a.mu)
		}
		if a.recorded != nil && !a.recorded(c.Round, c.Seq) {
			a.t.Errorf("chunk %d posted before its record was written", c.Seq)
		}
		for c.Seq > 1 && c.Seq > a.next {
			a.turn.Wait()
		}
		if c.Seq == a.lostAt && a.lostBefore {
			return outbox.Retry, nil, "", aggclient.ErrStopped
		}
		a.next = c.Seq + 1
		a.turn.Broadcast()
		a.seqs = append(a.seqs, c.Seq)
		if c.Seq == 1 {
			a.sr, _ = spec.SecAggRound(c.Round)
			vk, _ := secagg.DeriveVerifyKey([]byte(testToken), c.Round)
			if a.eng, err = secagg.NewEngine(a.sr, true, vk); err != nil {
				a.t.Fatal(err)
			}
			a.agg = a.eng.NewAggregate()
		}
		ps, err := a.sr.ParsePrep(c.Prep)
		if err != nil || len(ps) != len(c.Leader) {
			a.t.Fatalf("prep of %d entries for %d reports: %v", len(ps), len(c.Leader), err)
		}
		var ms []secagg.Entry
		for i, sealed := range c.Leader {
			a.leaders = append(a.leaders, sealed)
			pt, err := a.key.OpenLeaderShare(c.Round, [32]byte{}, sealed, a.sr.LeaderShareSize())
			if err != nil {
				pt = sealed
			}
			m, out := a.eng.Decide(a.eng.PrepInit(pt), ps[i])
			if out != nil {
				a.agg.Fold(out)
			}
			ms = append(ms, m)
		}
		msg, err := a.sr.MarshalVerdicts(ms)
		if err != nil {
			a.t.Fatal(err)
		}
		reply, _ = (&wire.SecAggPrep{Round: c.Round, Status: wire.BatchStatusOK, Msg: msg}).MarshalBinary()
		if a.replies == nil {
			a.replies = make(map[uint32][]byte)
		}
		a.replies[c.Seq] = reply
		if c.Seq == a.lostAt {
			return outbox.Retry, nil, "", aggclient.ErrStopped
		}
	case ResumePath:
		rs, err := wire.ParseSecAggResume(body)
		if err != nil {
			a.t.Fatal(err)
		}
		if r, ok := a.replies[rs.Seq]; ok {
			reply = r
		} else {
			if a.sealed == 0 || rs.Seq < a.sealed {
				a.sealed = rs.Seq
			}
			reply, _ = (&wire.SecAggPrep{Round: rs.Round, Status: wire.BatchStatusInvalid}).MarshalBinary()
		}
	case ClosePath:
		cl, err := wire.ParseSecAggClose(body)
		if err != nil {
			a.t.Fatal(err)
		}
		a.closes = append(a.closes, bytes.Clone(body))
		reply, _ = (&wire.SecAggCharged{Round: cl.Round, Status: wire.BatchStatusOK, Accepted: uint32(a.agg.Count())}).MarshalBinary()
	case AggregatePath:
		for _, prev := range a.aggregates {
			if bytes.Equal(prev, body) { // the identical share again: applied already
				a.aggregates = append(a.aggregates, bytes.Clone(body))
				return outbox.Duplicate, nil, "HTTP 208", nil
			}
		}
		a.aggregates = append(a.aggregates, bytes.Clone(body))
		ag, err := wire.ParseSecAggAggregate(body)
		if err != nil {
			a.t.Fatal(err)
		}
		own, err := a.agg.Share()
		if err == nil {
			err = own.AddNoise(noise.NewSeeded(424242))
		}
		if err == nil {
			a.result, err = a.sr.Unshard(own, ag.Share)
		}
		if err != nil {
			a.t.Fatal(err)
		}
	}
	if check != nil {
		if err := check(reply); err != nil {
			a.t.Fatalf("%s: reply refused: %v", path, err)
		}
	}
	return outbox.Accepted, reply, "HTTP 200", nil
}

// fixture is a relay's secure-summation side over a memStore and a leader.
type fixture struct {
	t       *testing.T
	p       wire.Params
	spec    *roundspec.Spec
	hk      *helperkey.Key
	store   *memStore
	agg     *leader
	m       *metrics.Metrics
	aborts  []wire.Abort
	queued  []outbox.Entry
	charged []int
	rl      *Relay
	// apart, if set, is the relays' Config.PrepareApart.
	apart func(context.Context, Apart, [][]byte) ([]*secagg.Prep, error)
}

func newFixture(t *testing.T) *fixture {
	p := wire.Params{Protocol: wire.ProtocolSecAgg, Randomizer: wire.RandomizerDiscreteGaussian,
		D: 8, K: 1, L: 1, Width: 1, Sigma: 20000, Clip: 1, CheckInP: 1, MinBatch: 2, Quota: 16}
	spec, _, _, err := round.SecAggSpec(p)
	if err != nil {
		t.Fatal(err)
	}
	hk, err := helperkey.Unmarshal(bytes.Repeat([]byte{9}, 32))
	if err != nil {
		t.Fatal(err)
	}
	key, err := envelopetest.DeriveKey([32]byte{7})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, p: p, spec: spec, hk: hk, store: newMemStore(),
		m: metrics.New(nil, Outcomes, []string{DropUnopened})}
	f.agg = &leader{t: t, key: key, p: p, store: f.store}
	f.rl = f.newRelay()
	return f
}

// newRelay is a relay (a fresh process) over the fixture's store and
// aggregator.
func (f *fixture) newRelay() *Relay { return f.newRelayOn(f.store) }

// newRelayOn is a relay over store.
func (f *fixture) newRelayOn(store outbox.Store) *Relay {
	seed := uint64(0)
	return New(Config{Store: store, Post: f.agg, Metrics: f.m, Token: testToken, Open: f.hk.OpenHelperShare, PrepareApart: f.apart,
		Floor:  roundspec.Floor{MinBatch: 1, MaxRejectedShare: roundspec.DefaultMaxRejectedShare},
		Logger: slog.New(slog.DiscardHandler),
		NewSource: func() noise.Source {
			seed++
			return noise.NewSeeded(seed)
		},
		Charge: func(_ context.Context, _ uint64, _ wire.Params, accepted int) error {
			f.charged = append(f.charged, accepted)
			return nil
		},
		Abort: func(c *round.Closed, _ metrics.RoundReport, reason uint8, _ string) (outbox.Entry, bool) {
			a := c.AbortFor(reason)
			b, _ := a.MarshalBinary()
			if err := store.Put(c.Num, outbox.Abort, b); err != nil {
				return outbox.Entry{}, false
			}
			f.aborts = append(f.aborts, a)
			return outbox.Entry{Round: c.Num, Kind: outbox.Abort}, true
		},
		Enqueue: func(e outbox.Entry) { f.queued = append(f.queued, e) },
	})
}

// report is volunteer seed's report of x for round num, its helper share
// sealed for round sealRound.
func (f *fixture) report(num, sealRound uint64, x []float64, seed uint64) round.SharesReport {
	sr, err := f.spec.SecAggRound(sealRound)
	if err != nil {
		f.t.Fatal(err)
	}
	l, h, err := sr.Shard(x, noise.NewSeeded(seed))
	if err != nil {
		f.t.Fatal(err)
	}
	sl, err := envelope.SealShare(f.agg.key.Public().HPKE, num, envelope.ShareLeader, [32]byte{}, l)
	if err != nil {
		f.t.Fatal(err)
	}
	sh, err := envelope.SealShare(f.hk.Public(), sealRound, envelope.ShareHelper, [32]byte{}, h)
	if err != nil {
		f.t.Fatal(err)
	}
	return round.SharesReport{Leader: sl, Helper: sh}
}

var x0 = []float64{0.1, 0.2, 0, 0, 0, 0, 0, 0}

// openRound opens round num's stream, feeds n honest reports (and bad ones
// whose helper share does not open), and returns them in arrival order.
func (f *fixture) openRound(num uint64, n int, bad ...int) []round.SharesReport {
	f.rl.OpenStream(&round.Round{Num: num, Params: f.p, SecAgg: f.spec})
	var reps []round.SharesReport
	for i := range n {
		seal := num
		if slices.Contains(bad, i) {
			seal = num + 1
		}
		r := f.report(num, seal, x0, uint64(100+i))
		reps = append(reps, r)
		f.rl.Report(num, &r)
	}
	return reps
}

func (f *fixture) closed(num uint64, reports uint32) *round.Closed {
	return &round.Closed{Num: num, Params: f.p, Population: reports + 1, CheckedIn: reports, Reports: reports, SecAgg: f.spec}
}

// TestStreamChunksInArrivalOrder: with four workers preparing in parallel
// and chunks of two, every report whose helper share opens reaches the
// aggregator exactly once, in the order it arrived, in chunks numbered
// 1, 2, 3, ... without a gap; the one that does not open is counted and
// never sent.
func TestStreamChunksInArrivalOrder(t *testing.T) {
	f := newFixture(t)
	f.rl.SetKnobs(Knobs{Workers: 4, ChunkReports: 2, ChunkEvery: time.Hour, DrainBound: time.Minute})
	const n = 9
	reps := f.openRound(1, n, 4)
	st := f.rl.Take(1)
	r := st.End(n)
	if r.End != nil || r.SetupErr != nil || r.Received != n || r.Unopened != 1 || r.Sent != n-1 || r.Accepted != n-1 || r.Late != 0 {
		t.Fatalf("stream result %+v: want %d received, 1 unopened, %d sent and accepted", r, n, n-1)
	}
	var want [][]byte
	for i, rep := range reps {
		if i != 4 {
			want = append(want, rep.Leader)
		}
	}
	if !slices.EqualFunc(f.agg.leaders, want, bytes.Equal) {
		t.Errorf("the aggregator got %d leader shares, not the %d opened ones in arrival order", len(f.agg.leaders), len(want))
	}
	for i, s := range f.agg.seqs {
		if s != uint32(i+1) {
			t.Fatalf("chunk sequence %v, want 1, 2, 3, ...", f.agg.seqs)
		}
	}
	if int(r.Chunks) != len(f.agg.seqs) || len(f.agg.seqs) != (n-1+1)/2 {
		t.Errorf("%d chunks counted, %d posted, want %d", r.Chunks, len(f.agg.seqs), (n-1+1)/2)
	}
}

// TestCloseIsDurableBeforeSent: a full round: the close and the noised
// aggregate share are each in the store, byte for byte, when they are
// posted; the release is charged once, for the leader's count; at the end
// nothing is owed (the store is empty) and the leader unshards the sum.
func TestCloseIsDurableBeforeSent(t *testing.T) {
	f := newFixture(t)
	f.rl.SetKnobs(Knobs{Workers: 2, ChunkReports: 2})
	f.store.Put(1, outbox.OpenRound, nil)
	f.openRound(1, 3)
	f.rl.Close(t.Context(), f.closed(1, 3))
	if !slices.Equal(f.agg.paths[len(f.agg.paths)-2:], []string{ClosePath, AggregatePath}) {
		t.Fatalf("posted %v, want the chunks, then the close, then the aggregate", f.agg.paths)
	}
	for i, d := range f.agg.durable {
		if !d {
			t.Errorf("%s posted without its bytes in the store", f.agg.paths[i])
		}
	}
	if !slices.Equal(f.charged, []int{3}) || f.agg.result == nil {
		t.Errorf("charged %v (want [3] once), result %v", f.charged, f.agg.result)
	}
	if l, _ := f.store.List(); len(l) != 0 {
		t.Errorf("store after the round: %v, want empty", l)
	}
	if s := f.m.Snapshot(); s.SecAgg.Rounds[SecAggForwarded] != 1 || s.SecAgg.Aggregated != 3 || s.SecAgg.Closes != 1 || s.SecAgg.Shares != 1 {
		t.Errorf("metrics %+v", s.SecAgg)
	}
}

// TestNothingSentThatIsNotDurable: when the store refuses the close, the
// close is never posted and the round is aborted (nothing charged); when it
// refuses the noised aggregate share, the share is never posted (the
// aggregator is told no release instead, through a persisted abort).
func TestNothingSentThatIsNotDurable(t *testing.T) {
	t.Run("close", func(t *testing.T) {
		f := newFixture(t)
		f.store.failPut = map[outbox.Kind]bool{outbox.SecAggClose: true}
		f.openRound(1, 3)
		f.rl.Close(t.Context(), f.closed(1, 3))
		if slices.Contains(f.agg.paths, ClosePath) || slices.Contains(f.agg.paths, AggregatePath) {
			t.Fatalf("posted %v although the close was not persisted", f.agg.paths)
		}
		if len(f.aborts) != 1 || f.aborts[0].Reason != wire.AbortOverflow || len(f.charged) != 0 {
			t.Errorf("aborts %+v, charged %v: want one overflow abort, nothing charged", f.aborts, f.charged)
		}
	})
	t.Run("aggregate", func(t *testing.T) {
		f := newFixture(t)
		f.store.failPut = map[outbox.Kind]bool{outbox.SecAggAggregate: true}
		f.openRound(1, 3)
		f.rl.Close(t.Context(), f.closed(1, 3))
		if slices.Contains(f.agg.paths, AggregatePath) {
			t.Fatalf("posted %v although the aggregate share was not persisted", f.agg.paths)
		}
		if !f.store.Has(1, outbox.Abort) || !slices.Equal(f.queued, []outbox.Entry{{Round: 1, Kind: outbox.Abort}}) {
			t.Errorf("no persisted, queued no-release abort: queued %v", f.queued)
		}
		if s := f.m.Snapshot(); s.SecAgg.Rounds[SecAggFailed] != 1 {
			t.Errorf("rounds %v, want one failed", s.SecAgg.Rounds)
		}
	})
}

// TestFailedRemovalNeverLeavesALoneClose: the round's share was sent and
// applied, then the removal of its state fails part way (PostgreSQL
// restarting): whichever removal fails, the close is never left without
// the share, so a restart resends the identical share and never noises the
// sum a second time (one release, one share posted, in every case).
func TestFailedRemovalNeverLeavesALoneClose(t *testing.T) {
	for _, failing := range []outbox.Kind{outbox.OpenRound, outbox.SecAggClose, outbox.SecAggAggregate} {
		t.Run(string(failing), func(t *testing.T) {
			f := newFixture(t)
			f.store.Put(1, outbox.OpenRound, nil)
			f.store.failRemove = map[outbox.Kind]bool{failing: true}
			f.openRound(1, 3)
			f.rl.Close(t.Context(), f.closed(1, 3))
			if f.store.Has(1, outbox.SecAggClose) && !f.store.Has(1, outbox.SecAggAggregate) {
				t.Fatal("the close is left without its aggregate share")
			}
			sent := f.agg.aggregates
			f.store.failRemove = nil
			ents, _ := f.store.List()
			plan := outbox.Recover(ents)
			for _, num := range plan.Released {
				f.store.Remove(num, outbox.SecAggClose)
			}
			f.rl = f.newRelay()
			f.rl.Start(t.Context(), plan.Resume)
			f.rl.Wait()
			if !slices.Equal(f.charged, []int{3}) {
				t.Errorf("charged %v after the restart, want one release of 3", f.charged)
			}
			for _, b := range f.agg.aggregates[len(sent):] {
				if !bytes.Equal(b, sent[len(sent)-1]) {
					t.Fatal("after the restart a share other than the one sent was posted: the sum noised twice")
				}
			}
		})
	}
}

// TestResumeAfterRestart: the relay is killed while its close is at the
// aggregator; a new relay over the same store (outbox.Recover) resends the
// identical close bytes, releases the share and posts it: one release, the
// round finished, the store empty.
func TestResumeAfterRestart(t *testing.T) {
	f := newFixture(t)
	f.agg.stopAt = ClosePath
	f.openRound(1, 3)
	f.rl.Close(t.Context(), f.closed(1, 3))
	if l, _ := f.store.List(); !slices.Equal(l, []outbox.Entry{{Round: 1, Kind: outbox.SecAggClose}}) || len(f.charged) != 0 {
		t.Fatalf("after the kill: store %v, charged %v; want the close alone, nothing charged", l, f.charged)
	}
	first := f.agg.closes
	f.agg.closes = nil
	ents, _ := f.store.List()
	plan := outbox.Recover(ents)
	f.rl = f.newRelay()
	f.rl.Start(t.Context(), plan.Resume)
	f.rl.Wait()
	if len(first) != 0 || len(f.agg.closes) != 1 {
		t.Fatalf("closes answered before %d, after %d", len(first), len(f.agg.closes))
	}
	if !slices.Equal(f.charged, []int{3}) || f.agg.result == nil {
		t.Errorf("charged %v, result %v: want one release of 3", f.charged, f.agg.result)
	}
	if l, _ := f.store.List(); len(l) != 0 {
		t.Errorf("store after the resume: %v", l)
	}
}

// TestDecide: what a closed round gets, from its stream's result alone.
func TestDecide(t *testing.T) {
	floor := roundspec.Floor{MinBatch: 5, MaxRejectedShare: 0.5}
	c := &round.Closed{Num: 3, Params: wire.Params{MinBatch: 2}, Reports: 9, CheckedIn: 10, Population: 12}
	for _, tc := range []struct {
		name  string
		r     Result
		floor error
		check func(closeStep) bool
	}{
		{"setup", Result{SetupErr: errors.New("x"), Sent: 9}, nil,
			func(s closeStep) bool { return s.close == nil && s.reason == wire.AbortOverflow && s.setup }},
		{"ended by the aggregator", Result{End: &endError{SecAggInvalid, "chunk"}, Sent: 9}, nil,
			func(s closeStep) bool { return s.close == nil && s.outcome == SecAggInvalid }},
		{"stopped", Result{End: aggclient.ErrStopped, Sent: 9}, nil,
			func(s closeStep) bool {
				return s.close == nil && s.outcome == "" && errors.Is(s.stopped, aggclient.ErrStopped)
			}},
		{"below the announced minimum", Result{Sent: 1, Accepted: 1}, nil,
			func(s closeStep) bool { return s.close == nil && s.reason == wire.AbortBelowMinBatch }},
		{"relay floor", Result{Sent: 4, Accepted: 4}, roundspec.ErrBelowFloor,
			func(s closeStep) bool { return s.close == nil && s.reason == wire.AbortRelayFloor && s.floor }},
		{"too many rejected", Result{Sent: 9, Accepted: 2}, roundspec.ErrTooManyRejected,
			func(s closeStep) bool { return s.close == nil && s.reason == wire.AbortRejected }},
		{"close", Result{Sent: 8, Chunks: 3, Accepted: 7}, nil,
			func(s closeStep) bool {
				return s.close != nil && *s.close == wire.SecAggClose{Round: 3, Chunks: 3, Reports: 8, Accepted: 7, CheckedIn: 10, Population: 12}
			}},
	} {
		if s := decide(c, tc.r, tc.floor, floor); !tc.check(s) {
			t.Errorf("%s: %+v", tc.name, s)
		}
	}
}

// swapPoster is the aggregator with several chunks in flight: it prepares
// the chunks in seq order (as the aggregator folds them) but answers each
// odd chunk only after the next one's answer (when there is a next one),
// so the relay receives chunk 2's verdicts before chunk 1's, 4's before
// 3's, and so on.
type swapPoster struct {
	*leader
	total    uint32 // the round's chunks
	mu       sync.Mutex
	turn     *sync.Cond
	next     uint32
	returned map[uint32]bool
	order    []uint32 // seqs in the order answered
}

func (p *swapPoster) Post(ctx context.Context, num uint64, path string, body []byte, limit int64,
	check func([]byte) error) (outbox.Outcome, []byte, string, error) {
	if path != ChunkPath {
		return p.leader.Post(ctx, num, path, body, limit, check)
	}
	spec, _ := roundspec.New(p.leader.p)
	ls, _, _ := spec.SharesSizes()
	c, err := wire.ParseSecAggChunk(body, ls, int(p.leader.p.Quota))
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	for p.next != c.Seq {
		p.turn.Wait()
	}
	p.mu.Unlock()
	out, reply, why, err := p.leader.Post(ctx, num, path, body, limit, check)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next++
	p.turn.Broadcast()
	for c.Seq%2 == 1 && c.Seq < p.total && !p.returned[c.Seq+1] {
		p.turn.Wait()
	}
	p.returned[c.Seq] = true
	p.order = append(p.order, c.Seq)
	p.turn.Broadcast()
	return out, reply, why, err
}

// TestChunksInFlightApplyInOrder: with 4 chunks in flight answered out of
// order (swapPoster), the relay applies the verdicts in seq order (the
// helper accepts every report: verdicts applied to the wrong reports
// contradict it) and closes the round with the same counts, and the
// leader unshards the same sum, as with one chunk at a time.
func TestChunksInFlightApplyInOrder(t *testing.T) {
	const n = 10 // one unopened: 9 sent in chunks of 2, the last one partial
	run := func(inFlight int) (*fixture, *swapPoster) {
		f := newFixture(t)
		var sp *swapPoster
		if inFlight > 1 {
			sp = &swapPoster{leader: f.agg, total: 5, next: 1, returned: make(map[uint32]bool)}
			sp.turn = sync.NewCond(&sp.mu)
			f.rl = f.newRelay()
			f.rl.cfg.Post = sp
		}
		f.rl.SetKnobs(Knobs{Workers: 2, ChunkReports: 2, ChunkEvery: time.Hour, InFlight: inFlight})
		f.store.Put(1, outbox.OpenRound, nil)
		f.openRound(1, n, 4)
		f.rl.Close(t.Context(), f.closed(1, n))
		return f, sp
	}
	one, _ := run(1)
	four, sp := run(4)
	if slices.IsSorted(sp.order) || len(sp.order) != 5 {
		t.Fatalf("chunks answered in the order %v: the reordering was not exercised", sp.order)
	}
	if len(one.agg.closes) != 1 || len(four.agg.closes) != 1 || !bytes.Equal(one.agg.closes[0], four.agg.closes[0]) {
		t.Fatalf("closes %x (one in flight) and %x (four): want one each, identical", one.agg.closes, four.agg.closes)
	}
	cl, err := wire.ParseSecAggClose(four.agg.closes[0])
	if err != nil || cl.Chunks != 5 || cl.Reports != n-1 || cl.Accepted != n-1 {
		t.Fatalf("close %+v %v: want 5 chunks, %d reports, all accepted", cl, err, n-1)
	}
	if !slices.Equal(one.charged, four.charged) || one.agg.result == nil || four.agg.result == nil ||
		one.agg.result.Count != four.agg.result.Count {
		t.Fatalf("charged %v and %v, results %+v and %+v", one.charged, four.charged, one.agg.result, four.agg.result)
	}
	s1, s4 := one.m.Snapshot(), four.m.Snapshot()
	if s4.SecAgg.Rounds[SecAggForwarded] != 1 || s4.SecAgg.Aggregated != s1.SecAgg.Aggregated {
		t.Fatalf("metrics %+v with four in flight, %+v with one", s4.SecAgg, s1.SecAgg)
	}
}
