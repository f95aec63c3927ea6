package rounds

// DBStore on PostgreSQL (shared/datastore/pgtest: one throwaway cluster
// for this test binary, a schema per test; skipped with its reason where
// there is none, failed under BLANKET_REQUIRE_POSTGRES=1): the charge is
// one transaction there too, and a restart of PostgreSQL between two
// steps loses nothing.

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/outcome"
	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/datastore/pgstore"
	"github.com/blanket-fl/blanket/shared/datastore/pgtest"
	"github.com/blanket-fl/blanket/shared/datastore/serverstore"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

// pgConfig is a fresh PostgreSQL store's settings (a schema of the
// test binary's cluster), with the state directory dir.
func pgConfig(t *testing.T, c *pgtest.Cluster, dir string) serverstore.Config {
	return serverstore.Config{Dir: dir, URL: c.DSN, Schema: c.Schema(t)}
}

// openDBIn opens the aggregator's store as the server does (OpenDBIn).
func openDBIn(t *testing.T, c serverstore.Config) *datastore.Store {
	t.Helper()
	db, _, err := OpenDBIn(context.Background(), c, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// newPGLedgerRig is newStoreLedgerRig on PostgreSQL.
func newPGLedgerRig(t *testing.T, c serverstore.Config) (*rig, *datastore.Store) {
	t.Helper()
	key, h := rigKeys(t)
	db := openDBIn(t, c)
	r := &rig{t: t, dir: c.Dir, key: key, helper: h, store: NewDBStore(db), params: secaggParams(), ledgerInStore: true}
	r.open()
	return r, db
}

// TestChargeIsOneTransactionPostgres: TestChargeIsOneTransaction with
// PostgreSQL killed while the close's writes wait for their commit
// (pgtest.FailCommit): the close is an error, and after the restart the
// charge and the prepared round are both there (the commit's outcome was
// unknown: counted, never under-counted) or both absent. A charge that
// succeeded survives a restart of PostgreSQL (pg_ctl restart) before the
// aggregate share arrives, and the round resumes on the same store, which
// reconnects.
func TestChargeIsOneTransactionPostgres(t *testing.T) {
	c := pgtest.Get(t)
	t.Run("killed", func(t *testing.T) {
		cfg := pgConfig(t, c, t.TempDir())
		r, db := newPGLedgerRig(t, cfg)
		round := r.announce()
		h := r.streamed(round, r.reports(round, 4), 2)
		var ans outcome.SecAggAnswer
		err := c.FailCommit(t, cfg.Schema, func() (err error) {
			ans, err = r.m.SecAggCloseIntake(h.close())
			return err
		})
		if err == nil {
			t.Fatalf("a close whose charge was not durable answered %+v", ans)
		}
		t.Logf("the close under the kill: %v", err)
		db.Close()
		n, p := durableChargeIn(t, openDBIn(t, cfg))
		if (n == 0) != (p == nil) || n > 1 {
			t.Fatalf("after a failed charge: %d releases, prepared round %v", n, p != nil)
		}
	})
	t.Run("restarted", func(t *testing.T) {
		if !c.Owned() {
			t.Skip("the server of BLANKET_PG_DSN is not the tests' to restart")
		}
		cfg := pgConfig(t, c, t.TempDir())
		r, _ := newPGLedgerRig(t, cfg)
		round := r.announce()
		h := r.streamed(round, r.reports(round, 4), 2)
		if ans, err := r.m.SecAggCloseIntake(h.close()); err != nil || ans.Outcome != outcome.Accepted {
			t.Fatalf("close: %+v %v", ans.Answer, err)
		}
		if err := c.Restart(); err != nil {
			t.Fatal(err)
		}
		waitIdle()
		if ans := r.m.SecAggAggregateIntake(h.aggregate()); ans.Outcome != outcome.Accepted {
			t.Fatalf("the charged round does not complete after PostgreSQL restarted: %+v", ans)
		}
		st, err := r.store.LoadState()
		if err != nil || st == nil || len(st.History) != 1 {
			t.Fatalf("history after the round: %+v %v", st, err)
		}
	})
}

// TestSecondAggregatorOnASchema: a second aggregator on the same schema
// is refused (ErrLocked), and so is the embedded store for a state
// directory whose store is in PostgreSQL (and the other way round), so a
// state is never started afresh on the other engine.
func TestSecondAggregatorOnASchema(t *testing.T) {
	c := pgtest.Get(t)
	old := pgstore.LockWait
	defer func() { pgstore.LockWait = old }()
	pgstore.LockWait = 0
	cfg := pgConfig(t, c, t.TempDir())
	openDBIn(t, cfg)
	if _, _, err := OpenDBIn(context.Background(), cfg, nil, nil); !errors.Is(err, datastore.ErrLocked) {
		t.Fatalf("a second aggregator on the schema: %v, want ErrLocked", err)
	}
	if _, _, err := OpenDB(cfg.Dir, nil, nil); err == nil {
		t.Fatal("the embedded store opened in a directory whose store is in PostgreSQL")
	}
	other := pgConfig(t, c, cfg.Dir)
	if _, _, err := OpenDBIn(context.Background(), other, nil, nil); err == nil {
		t.Fatal("another schema opened for a directory that records one")
	}
	dir := t.TempDir()
	db := openDB(t, dir, nil)
	if err := db.Update(func(tx *datastore.Tx) error { tx.Put("x", "y", nil); return nil }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, _, err := OpenDBIn(context.Background(), pgConfig(t, c, dir), nil, nil); err == nil {
		t.Fatal("PostgreSQL opened for a directory whose embedded store holds state")
	}
}

// waitIdle waits until pgstore's idle check applies to the next Update
// (a connection lost while idle is then found before anything is sent).
func waitIdle() { time.Sleep(pgstore.IdleCheck + 50*time.Millisecond) }
