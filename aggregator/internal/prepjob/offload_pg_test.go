package prepjob

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/sealkey"
	"github.com/blanket-fl/blanket/shared/datastore/pgstore"
	"github.com/blanket-fl/blanket/shared/datastore/pgtest"
	"github.com/blanket-fl/blanket/shared/wire"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

// TestOffloadFailedJobPostgres: a replica that cannot prepare a job (it
// holds another key: a schema made afresh since it started) stores a
// failed result instead of a wrong one, and the owner's Prepare returns
// that error at once (the caller prepares the chunk itself), not after
// the lease's bound.
func TestOffloadFailedJobPostgres(t *testing.T) {
	c := pgtest.Get(t)
	schema := c.Schema(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	open := func() *pgstore.Jobs {
		j, err := pgstore.OpenJobs(ctx, c.DSN, schema, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(j.Close)
		return j
	}
	key, _ := sealkey.DeriveKey([32]byte{1})
	stale, _ := sealkey.DeriveKey([32]byte{2})
	quiet := slog.New(slog.DiscardHandler)
	replica := NewWorker(open(), NewPreparer(stale), 0, time.Minute, quiet)
	go replica.Run(ctx)
	prep := NewPreparer(key)
	owner := &Offload{JobOffload: pgstore.JobOffload{W: NewWorker(open(), prep, 0, time.Minute, quiet), HelpAfter: time.Hour}, Prep: prep}
	p := wire.Params{Protocol: wire.ProtocolSecAgg, Randomizer: wire.RandomizerDiscreteGaussian, D: 8, K: 1, L: 1, Width: 1,
		MinBatch: 3, Quota: 8, Clip: 1, CheckInP: 0.5, Sigma: 2}
	start := time.Now()
	_, err := owner.Prepare(ctx, Round{Round: 1, Params: p, VerifyKey: make([]byte, 16)}, [][]byte{{1, 2, 3}}, []byte{4})
	if err == nil || !strings.Contains(err.Error(), "this replica holds") {
		t.Fatalf("a job the replica could not prepare: %v", err)
	}
	if d := time.Since(start); d > 30*time.Second { // the bound is 2 minutes and 30 s
		t.Fatalf("the failure came after %v", d)
	}
	// The replica counts the job once its result is stored, which the
	// owner may read first.
	for end := time.Now().Add(10 * time.Second); replica.Failed() == 0 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	if replica.Failed() != 1 || replica.Done() != 0 {
		t.Fatalf("the replica failed %d jobs and prepared %d, want the one failed", replica.Failed(), replica.Done())
	}
}
