package rounds

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/prepjob"
	"github.com/blanket-fl/blanket/shared/datastore/pgstore"
	"github.com/blanket-fl/blanket/shared/datastore/pgtest"
)

// TestChunksPreparedByReplicasPostgres: the aggregator's replicas share a
// round's chunk preparation through PostgreSQL (Options.PrepareApart with
// prepjob.Offload). A replica leases the first chunk's job and dies (it
// never completes it); its lease (300 ms) expires and the job is taken
// over exactly once; a live replica and the owner (helping after 1 s)
// prepare the others. The round's model is exactly the one of a round
// prepared by the intake alone, every chunk but a replay is folded from a
// result prepared apart, and the chunk that replays a report accepted in
// an earlier chunk is prepared by the intake (its report rejected as a
// duplicate, nothing of it folded twice).
func TestChunksPreparedByReplicasPostgres(t *testing.T) {
	c := pgtest.Get(t)
	schema := c.Schema(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	openJobs := func() *pgstore.Jobs {
		j, err := pgstore.OpenJobs(ctx, c.DSN, schema, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(j.Close)
		return j
	}
	const lease = 300 * time.Millisecond
	key, h := rigKeys(t)
	prep := prepjob.NewPreparer(key)
	owner := prepjob.NewWorker(openJobs(), prep, 2, lease, slog.New(slog.DiscardHandler))
	r := &rig{t: t, dir: t.TempDir(), key: key, helper: h, store: &memStore{}, params: secaggParams(),
		prepApart: (&prepjob.Offload{JobOffload: pgstore.JobOffload{W: owner, HelpAfter: time.Second}, Prep: prep}).Prepare}
	r.open()

	dead := openJobs()
	died := make(chan int64, 1)
	go func() {
		l, err := dead.Next(ctx, prepjob.Kind, lease)
		if err != nil {
			return
		}
		died <- l.ID // and never completes it
	}()
	live := prepjob.NewWorker(openJobs(), prepjob.NewPreparer(key), 1, lease, slog.New(slog.DiscardHandler))
	round := r.announce()
	reps := r.reports(round, 6)
	hs := r.helperSide(round)
	post := func(reps []report) {
		ans, err := r.m.SecAggChunkIntake(hs.chunk(reps))
		if err != nil || ans.Outcome != "accepted" {
			t.Fatalf("chunk %d: %+v %v", hs.chunks, ans.Answer, err)
		}
		hs.verdicts(ans.Frame)
	}
	first := make(chan struct{})
	go func() { defer close(first); post(reps[:2]) }()
	select {
	case id := <-died:
		t.Logf("a replica leased job %d and died", id)
	case <-time.After(time.Minute):
		t.Fatal("the first chunk's job was not leased by the replica waiting for it")
	}
	<-first
	go live.Run(ctx)
	for lo := 2; lo < 6; lo += 2 {
		post(reps[lo:][:2])
	}
	post([]report{reps[5], reps[3]}) // replays of reports accepted earlier (the quota: 8)
	model := r.finish(hs, 6)
	if want := sequentialModel(t, 6, 2); !slices.Equal(model, want) {
		t.Fatalf("the model of chunks prepared apart differs from the intake's:\n%v\n%v", model, want)
	}
	apart, here := r.m.ChunksPrepared()
	if apart != 3 || here != 1 {
		t.Errorf("%d chunks folded from results prepared apart, %d prepared here; want 3 and 1", apart, here)
	}
	// A replica counts a job once its result is stored, which the owner
	// may read first.
	for end := time.Now().Add(10 * time.Second); owner.Done()+live.Done() < 4 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := owner.TakenOver() + live.TakenOver(); n != 1 {
		t.Errorf("the dead replica's job was taken over %d times, want once", n)
	}
	if n := owner.Done() + live.Done(); n != 4 {
		t.Errorf("%d jobs completed, want 4 (one per chunk)", n)
	}
	t.Logf("jobs completed: owner %d, live replica %d", owner.Done(), live.Done())
	if rec := r.lastRecord(); rec.RejectedValue != 2 || rec.Reports != 8 {
		t.Errorf("record %+v: want the 2 replays rejected", rec)
	}
}
