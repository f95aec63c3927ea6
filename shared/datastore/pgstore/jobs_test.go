package pgstore

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/shared/datastore/pgtest"
)

func openJobs(t *testing.T, c *pgtest.Cluster, schema string) *Jobs {
	t.Helper()
	j, err := OpenJobs(context.Background(), c.DSN, schema, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.Close)
	return j
}

// TestLeaseTakenOverOnce: a leased job is not leased again while its
// lease holds; once it expired, exactly one of four replicas racing for
// it takes it over (attempt 2); the first holder can no longer complete
// it (ErrLeaseLost), the second completes it once, its waiter is woken
// and the enqueuer reads the result; a removed job is gone.
func TestLeaseTakenOverOnce(t *testing.T) {
	c := pgtest.Get(t)
	schema := c.Schema(t)
	ctx := context.Background()
	a, b := openJobs(t, c, schema), openJobs(t, c, schema) // two replicas
	tk, err := a.Enqueue(ctx, "k", 3, []byte("chunk"))
	if err != nil {
		t.Fatal(err)
	}
	id := tk.ID
	first, err := b.Lease(ctx, "k", 300*time.Millisecond)
	if err != nil || first == nil || first.ID != id || first.Attempt != 1 || string(first.Payload) != "chunk" || first.Round != 3 {
		t.Fatalf("lease: %+v, %v", first, err)
	}
	if l, err := a.Lease(ctx, "k", time.Minute); l != nil || err != nil {
		t.Fatalf("a job leased twice while its lease holds: %+v, %v", l, err)
	}
	if l, err := a.Lease(ctx, "other", time.Minute); l != nil || err != nil {
		t.Fatalf("a job leased by another kind: %+v, %v", l, err)
	}
	time.Sleep(400 * time.Millisecond)
	var mu sync.Mutex
	var took []*Lease
	var wg sync.WaitGroup
	for i := range 4 {
		q := a
		if i%2 == 1 {
			q = b
		}
		wg.Go(func() {
			l, err := q.Lease(ctx, "k", time.Minute)
			if err != nil {
				t.Error(err)
			}
			if l != nil {
				mu.Lock()
				took = append(took, l)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(took) != 1 || took[0].Attempt != 2 {
		t.Fatalf("the expired lease was taken over %d times (%+v), want once at attempt 2", len(took), took)
	}
	done := a.Done(id)
	if err := b.Complete(ctx, first, []byte("stale")); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("the expired lease completed: %v", err)
	}
	if err := a.Complete(ctx, took[0], []byte("sum")); err != nil {
		t.Fatal(err)
	}
	if err := a.Complete(ctx, took[0], []byte("again")); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("a job completed twice: %v", err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the completion was not announced")
	}
	res, ok, err := a.Result(ctx, tk)
	if err != nil || !ok || string(res) != "sum" {
		t.Fatalf("result %q %v %v", res, ok, err)
	}
	if l, err := b.Lease(ctx, "k", time.Minute); l != nil || err != nil {
		t.Fatalf("a done job leased: %+v, %v", l, err)
	}
	if _, _, err := a.Result(ctx, Ticket{ID: id, tag: tk.tag + 1}); !errors.Is(err, ErrJobGone) {
		t.Fatalf("a job read with another tag (its id reused after a crash): %v", err)
	}
	if err := a.Remove(ctx, tk); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Result(ctx, tk); !errors.Is(err, ErrJobGone) {
		t.Fatalf("a removed job: %v", err)
	}
}

// TestJobsEachLeasedOnce: 40 jobs, enqueued while four workers on two
// replicas wait for them (Next): each is leased and completed exactly
// once; RemoveEarlierRounds keeps only the given round's.
func TestJobsEachLeasedOnce(t *testing.T) {
	c := pgtest.Get(t)
	schema := c.Schema(t)
	a, b := openJobs(t, c, schema), openJobs(t, c, schema)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	count := map[int64]int{}
	var wg sync.WaitGroup
	for i := range 4 {
		q := a
		if i%2 == 1 {
			q = b
		}
		wg.Go(func() {
			for {
				l, err := q.Next(ctx, "k", time.Minute)
				if err != nil {
					return
				}
				mu.Lock()
				count[l.ID]++
				mu.Unlock()
				if err := q.Complete(ctx, l, l.Payload); err != nil {
					t.Error(err)
				}
			}
		})
	}
	var ids []Ticket
	for i := range 40 {
		tk, err := a.Enqueue(ctx, "k", int64(1+i%2), []byte{byte(i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, tk)
	}
	for i, id := range ids {
		deadline := time.Now().Add(time.Minute)
		for {
			res, ok, err := b.Result(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				if len(res) != 1 || res[0] != byte(i) {
					t.Fatalf("job %d: result %v", i, res)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %d not done in a minute", i)
			}
			select {
			case <-b.Done(id.ID):
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	cancel()
	wg.Wait()
	for _, id := range ids {
		if count[id.ID] != 1 {
			t.Errorf("job %d leased %d times", id.ID, count[id.ID])
		}
	}
	if err := a.RemoveEarlierRounds(context.Background(), "k", 2); err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		_, _, err := a.Result(context.Background(), id)
		if gone := errors.Is(err, ErrJobGone); gone != (i%2 == 0) {
			t.Errorf("job %d of round %d: gone %v", i, 1+i%2, gone)
		}
	}
}
