package chaos

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/scripts/internal/cohort"
	"github.com/blanket-fl/blanket/scripts/internal/invariant"
	"github.com/blanket-fl/blanket/scripts/internal/localrun"
	"github.com/blanket-fl/blanket/shared/client"
	"github.com/blanket-fl/blanket/shared/dataset/sample"
	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/ledger"
)

// copyState replaces dst with a copy of src's regular files (modes kept).
func copyState(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.RemoveAll(dst); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	filepath.WalkDir(dst, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			os.Chmod(p, 0o600) // CopyFS writes 0644; the keys must stay private
		}
		return err
	})
}

// TestAnchorTampering (issue 18, item 2) runs secure summation with the
// real binaries until both ledgers hold charges past a saved copy, then
// tampers with one server's state while the other runs and checks that
// the tampered server refuses to start (its output names the rollback):
// the aggregator after deleting its checkpoint and its ledger's last
// record from its datastore (store.log), after deleting the datastore
// (checkpoint, ledger, key), after restoring its whole
// state directory from the older copy; the relay after restoring its
// state directory from the older copy. Untampered, both start again and
// a round completes.
func TestAnchorTampering(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos tier: real binaries")
	}
	const (
		clients      = 16
		roundTimeout = 15 * time.Second
		grace        = 20 * time.Second
	)
	logs := &invariant.Logs{}
	if testing.Verbose() {
		logs.Echo = os.Stderr
	}
	dir := t.TempDir()
	n := strconv.Itoa(clients)
	cl, err := localrun.Start(context.Background(), bins, localrun.Options{Dir: dir,
		AggregatorArgs: []string{"-protocol", "secagg", "-sigma", "300", "-expected-n", n, "-quota", n, "-min-batch", "8", "-epsilon", "1e9",
			"-check-in", "1", "-round-timeout", roundTimeout.String(), "-batch-grace", grace.String()},
		RelayArgs: []string{"-target-epsilon", "1e9"},
		Stdout:    logs, Stderr: logs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Stop() })
	ctx, cancel := context.WithCancel(context.Background())
	key, err := cohort.FetchKey(ctx, nil, cl.AggregatorURL(), "")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		cohort.Run(ctx, cohort.Config{Relay: cl.WebSocketURL(), Key: key, Clients: clients, PerUser: 8000 / clients,
			Dataset: sample.Name, Seed: 3, SeededNoise: true, Backoff: client.Backoff{Initial: 200 * time.Millisecond, Max: 2 * time.Second},
			Logger: slog.New(slog.DiscardHandler)})
	})
	t.Cleanup(func() { cancel(); wg.Wait() })

	aggDir, relayDir := cl.AggregatorDir(), filepath.Join(dir, "relay")
	saved := t.TempDir()
	aggOld, relayOld := filepath.Join(saved, "agg-old"), filepath.Join(saved, "relay-old")
	aggGood, relayGood := filepath.Join(saved, "agg-good"), filepath.Join(saved, "relay-good")
	stopBoth := func() {
		t.Helper()
		if err := cl.StopAggregator(); err != nil {
			t.Fatal(err)
		}
		if err := cl.StopRelay(); err != nil {
			t.Fatal(err)
		}
	}
	startBoth := func() {
		t.Helper()
		if err := cl.StartRelay(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := cl.StartAggregator(context.Background()); err != nil {
			t.Fatal(err)
		}
	}

	waitOK(t, cl, 0, 4*roundTimeout, "first round")
	stopBoth()
	copyState(t, aggDir, aggOld)
	copyState(t, relayDir, relayOld)
	startBoth()
	before, _ := invariant.OKRounds(context.Background(), cl)
	waitOK(t, cl, before, 6*roundTimeout+grace, "a round after the saved copy")
	time.Sleep(3 * time.Second) // the heads' exchange (every second, and after each noise)
	stopBoth()
	copyState(t, aggDir, aggGood)
	copyState(t, relayDir, relayGood)
	if err := cl.StartRelay(context.Background()); err != nil {
		t.Fatal(err)
	}

	refused := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: the server started", what)
		}
		if !strings.Contains(err.Error(), "rollback") && !strings.Contains(err.Error(), "behind") {
			t.Fatalf("%s: failed for another reason: %v", what, err)
		}
		t.Logf("%s: refused", what)
	}
	// The aggregator's datastore holds its checkpoint, its ledger (one
	// record per key in ledger/records), the relay's head and its key.
	cutLast := func() { // the checkpoint and the ledger's last record
		db, err := datastore.Open(aggDir, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = db.Update(func(tx *datastore.Tx) error {
			tx.DeleteBucket("aggregator/checkpoint")
			keys := tx.Keys(ledger.BucketRecords)
			if len(keys) == 0 {
				return errors.New("no ledger records in the aggregator's datastore")
			}
			tx.Delete(ledger.BucketRecords, keys[len(keys)-1])
			return nil
		})
		if err := errors.Join(err, db.Close()); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name   string
		tamper func()
	}{
		{"aggregator: its checkpoint and the ledger's last record deleted from its datastore", cutLast},
		{"aggregator: its datastore (checkpoint, ledger, key) deleted", func() {
			os.Remove(filepath.Join(aggDir, datastore.LogFile))
		}},
		{"aggregator: state directory restored from the older copy", func() { copyState(t, aggOld, aggDir) }},
	} {
		copyState(t, aggGood, aggDir)
		c.tamper()
		err := cl.StartAggregator(context.Background())
		if err == nil {
			cl.StopAggregator()
		}
		refused(c.name, err)
	}
	copyState(t, aggGood, aggDir)
	if err := cl.StartAggregator(context.Background()); err != nil {
		t.Fatalf("untampered aggregator: %v", err)
	}
	if err := cl.StopRelay(); err != nil {
		t.Fatal(err)
	}
	copyState(t, relayOld, relayDir)
	err = cl.StartRelay(context.Background())
	if err == nil {
		cl.StopRelay()
	}
	refused("relay: state directory restored from the older copy", err)
	copyState(t, relayGood, relayDir)
	if err := cl.StartRelay(context.Background()); err != nil {
		t.Fatalf("untampered relay: %v", err)
	}
	before, _ = invariant.OKRounds(context.Background(), cl)
	waitOK(t, cl, before, 6*roundTimeout+grace, "a round after the untampered restarts")
}
