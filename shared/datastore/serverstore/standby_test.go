package serverstore

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/datastore/pgstore"
	"github.com/blanket-fl/blanket/shared/datastore/pgtest"
	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

// A standby needs PostgreSQL: the embedded store has no one to take over
// from.
func TestStandbyNeedsPostgres(t *testing.T) {
	err := Config{Dir: t.TempDir(), Standby: true}.Validate()
	if err == nil {
		t.Fatal("-standby with the embedded store accepted")
	}
}

// takeOver does what a standby's takeover does to the owner of schema:
// its session ended (as a SIGKILL of its process would), the owner lock
// taken by another session (the returned connection's, held until the
// test ends) and the owner epoch moved on.
func takeOver(t *testing.T, dsn, schema string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	k := uint64(pgstore.OwnerKey(schema))
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_locks WHERE locktype = 'advisory'
		AND granted AND classid = $1 AND objid = $2 AND objsubid = 1`, uint32(k>>32), uint32(k)).Scan(&n); err != nil || n != 1 {
		t.Fatalf("ending the owner's session: %d ended, %v", n, err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		var got bool
		if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", int64(k)).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the owner lock was not free within a minute of ending its session")
		}
	}
	if _, err := conn.Exec(ctx, "UPDATE "+pgx.Identifier{schema, pgstore.OwnerTable}.Sanitize()+" SET epoch = epoch + 1"); err != nil {
		t.Fatal(err)
	}
}

// TestWatchdogStopsAFencedServer: a server's store whose schema another
// store took (its session ended, the lock and the epoch taken) is
// reported lost (OnLost, once, with an error wrapping ErrLocked) by the
// watchdog within a few WatchEvery, without the server writing anything.
func TestWatchdogStopsAFencedServer(t *testing.T) {
	c := pgtest.Get(t)
	schema := c.Schema(t)
	lost := make(chan error, 2)
	cfg := Config{Dir: t.TempDir(), URL: c.DSN, Schema: schema, OnLost: func(err error) { lost <- err }}
	s, err := Open(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	takeOver(t, c.DSN, schema)
	select {
	case err := <-lost:
		if !errors.Is(err, datastore.ErrLocked) {
			t.Fatalf("OnLost(%v), want an error wrapping ErrLocked", err)
		}
	case <-time.After(30 * WatchEvery):
		t.Fatal("the watchdog did not report the fenced store")
	}
	select {
	case err := <-lost:
		t.Fatalf("OnLost called twice (second: %v)", err)
	case <-time.After(3 * WatchEvery):
	}
}

// TestOwnerKeepsItsSchemaAcrossARestart: PostgreSQL restarts while a
// standby waits (grace 3 × WatchEvery): the owner's watchdog takes its
// lock back before the grace ends, so the standby does not take over and
// the owner's writes go on.
func TestOwnerKeepsItsSchemaAcrossARestart(t *testing.T) {
	c := pgtest.Get(t)
	if !c.Owned() {
		t.Skip("the server of BLANKET_PG_DSN is not the tests' to restart")
	}
	schema := c.Schema(t)
	lost := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := Open(ctx, Config{Dir: t.TempDir(), URL: c.DSN, Schema: schema, OnLost: func(err error) { lost <- err }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	took := make(chan error, 1)
	go func() {
		turn, err := AwaitTurn(ctx, Config{Dir: t.TempDir(), URL: c.DSN, Schema: schema, Standby: true, StandbyGrace: 3 * WatchEvery}, nil)
		if err == nil {
			turn.Release()
		}
		took <- err
	}()
	time.Sleep(2 * WatchEvery) // the standby lined up
	if err := c.Restart(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-took:
		t.Fatalf("the standby took over (err %v) from a live owner across a restart", err)
	case err := <-lost:
		t.Fatalf("the owner lost its store across a restart: %v", err)
	case <-time.After(10 * WatchEvery):
	}
	if err := s.Update(func(tx *datastore.Tx) error { tx.Put("b", "k", []byte("v")); return nil }); err != nil {
		t.Fatalf("the owner's write after the restart: %v", err)
	}
}
