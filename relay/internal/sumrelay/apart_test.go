package sumrelay

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/relay/internal/aggclient"
	"github.com/blanket-fl/blanket/relay/internal/prepjob"
	"github.com/blanket-fl/blanket/shared/secagg"
)

// TestStreamPreparedApart: a round whose helper preparation is done by
// the relay's replicas (-prep-jobs; here Execute and ParseResult through
// their bytes, the queue left out), in batches of up to 3 reports (a
// batch waits up to a second to fill, and the reports come at once),
// except one batch whose job fails and is prepared here, ends exactly as the same round prepared here (the
// volunteers' shares drawn from the same seeds): as many leader shares,
// the same unopened report dropped, the same charge, and the same noised
// aggregate share byte for byte (the relays' noise sources are seeded
// alike), which the leader unshards. Every report is counted prepared once, apart or here.
func TestStreamPreparedApart(t *testing.T) {
	const n = 11
	gate := make(chan struct{}) // the first batch waits for every report to be in
	run := func(f *fixture) {
		f.rl.SetKnobs(Knobs{Workers: 2, ChunkReports: 3, ChunkEvery: 10 * time.Millisecond, DrainBound: time.Minute, InFlight: 1,
			BatchLinger: time.Second})
		f.openRound(1, n, 4)
		close(gate)
		f.rl.Close(t.Context(), f.closed(1, n))
	}
	here := newFixture(t)
	run(here)
	gate = make(chan struct{})

	apart := newFixture(t)
	prep := prepjob.NewPreparer(apart.hk)
	var calls, failed, most atomic.Int32
	apart.apart = func(_ context.Context, r Apart, sealed [][]byte) ([]*secagg.Prep, error) {
		c := calls.Add(1)
		if c == 1 {
			<-gate
		}
		for m := most.Load(); int32(len(sealed)) > m && !most.CompareAndSwap(m, int32(len(sealed))); m = most.Load() {
		}
		if c == 2 {
			failed.Add(int32(len(sealed)))
			return nil, errors.New("the job was lost")
		}
		job, err := prepjob.Encode(prepjob.Fingerprint(apart.hk), prepjob.Round{Round: r.Num, Params: r.Params, VerifyKey: r.VerifyKey}, sealed)
		if err != nil {
			return nil, err
		}
		res, err := prep.Execute(job, 2)
		if err != nil {
			return nil, err
		}
		return prepjob.ParseResult(r.Round, res, len(sealed))
	}
	apart.rl = apart.newRelay()
	run(apart)

	if calls.Load() < 3 || failed.Load() == 0 || most.Load() != 3 {
		t.Fatalf("%d batches, the largest of %d reports, %d reports in the failed one: the test needs full batches and a failed one", calls.Load(), most.Load(), failed.Load())
	}
	sh, sa := here.m.Snapshot().SecAgg, apart.m.Snapshot().SecAgg
	if sa.Prepared["apart"]+sa.Prepared["here"] != n || sa.Prepared["here"] != uint64(failed.Load()) || sh.Prepared["here"] != n || sh.Prepared["apart"] != 0 {
		t.Fatalf("prepared %v apart-side and %v here-side, want %d in all, %d here after the failed job", sa.Prepared, sh.Prepared, n, failed.Load())
	}
	if !maps.Equal(sh.Dropped, sa.Dropped) || sa.Dropped[DropUnopened] != 1 {
		t.Errorf("dropped %v, prepared here %v", sa.Dropped, sh.Dropped)
	}
	if len(here.agg.leaders) != n-1 || len(apart.agg.leaders) != n-1 {
		t.Fatalf("leader shares %d and %d, want %d", len(here.agg.leaders), len(apart.agg.leaders), n-1)
	}
	if len(here.charged) != 1 || len(apart.charged) != 1 || here.charged[0] != apart.charged[0] || apart.charged[0] != n-1 {
		t.Fatalf("charged %v and %v, want [%d] once each", here.charged, apart.charged, n-1)
	}
	if len(here.agg.aggregates) != 1 || len(apart.agg.aggregates) != 1 || !bytes.Equal(here.agg.aggregates[0], apart.agg.aggregates[0]) {
		t.Fatal("the noised aggregate shares differ")
	}
	if here.agg.result == nil || apart.agg.result == nil {
		t.Fatal("no result")
	}
}

// TestStreamPreparedApartStops: the relay stopping while its replicas
// hold every batch (their jobs never answer) ends the stream at once: the
// batches in flight return, nothing more is prepared for the dead round,
// and End reports the stop.
func TestStreamPreparedApartStops(t *testing.T) {
	f := newFixture(t)
	var calls atomic.Int32
	f.apart = func(ctx context.Context, _ Apart, _ [][]byte) ([]*secagg.Prep, error) {
		calls.Add(1)
		<-ctx.Done() // a replica that never answers
		return nil, ctx.Err()
	}
	f.rl = f.newRelay()
	ctx, cancel := context.WithCancel(t.Context())
	f.rl.Start(ctx, nil)
	f.rl.SetKnobs(Knobs{ChunkReports: 2, DrainBound: time.Minute, BatchLinger: time.Millisecond})
	const n = 6
	f.openRound(1, n)
	for end := time.Now().Add(30 * time.Second); calls.Load() == 0 && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	st := f.rl.Take(1)
	cancel()
	done := make(chan Result, 1)
	go func() { done <- st.End(n) }()
	select {
	case r := <-done:
		if !errors.Is(r.End, aggclient.ErrStopped) || r.Sent != 0 {
			t.Fatalf("stream result %+v: want the stop and nothing sent", r)
		}
	case <-time.After(time.Minute):
		t.Fatal("the stream did not end after the relay stopped")
	}
	f.rl.Wait()
	if s := f.m.Snapshot().SecAgg; s.Prepared["here"] != 0 {
		t.Errorf("%d reports prepared here after the stop", s.Prepared["here"])
	}
}
