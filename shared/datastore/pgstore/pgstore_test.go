package pgstore

// The contract's tests run on this engine from package datastore
// (backends_test.go); these are PostgreSQL's own.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/datastore/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

func open(t *testing.T, c *pgtest.Cluster, schema string) *datastore.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Open(ctx, c.DSN, schema, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestCrashDuringUpdates kills the server (pg_ctl stop -m immediate: no
// shutdown checkpoint, as a crash) while 4 goroutines commit Updates of
// two rows each, in two buckets. After the restart every Update that
// returned nil is there, whole, and every other one is there whole or not
// at all: a key is in both buckets or in neither.
func TestCrashDuringUpdates(t *testing.T) {
	c := pgtest.Get(t)
	if !c.Owned() {
		t.Skip("the server of BLANKET_PG_DSN is not the tests' to kill")
	}
	schema := c.Schema(t)
	s := open(t, c, schema)
	const writers = 4
	var acked atomic.Int64
	type result struct {
		acked   []string
		failed  string
		failErr error
	}
	results := make([]result, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				k := fmt.Sprintf("%d-%06d", w, i)
				err := s.Update(func(tx *datastore.Tx) error {
					if i%2 == 1 {
						tx.Get("x", k) // half of them read first: an explicit transaction
					}
					tx.Put("x", k, []byte(k))
					tx.Put("y", k, []byte(k))
					return nil
				})
				if err != nil {
					results[w].failed, results[w].failErr = k, err
					return
				}
				results[w].acked = append(results[w].acked, k)
				acked.Add(1)
			}
		}()
	}
	deadline := time.Now().Add(5 * time.Minute)
	for acked.Load() < 200 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d Updates in 5 minutes", acked.Load())
		}
		time.Sleep(time.Millisecond)
	}
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	r := open(t, c, schema)
	var x, y map[string]string
	if err := r.View(func(tx *datastore.ReadTx) error {
		x, y = map[string]string{}, map[string]string{}
		for _, k := range tx.Keys("x") {
			v, _ := tx.Get("x", k)
			x[k] = string(v)
		}
		for _, k := range tx.Keys("y") {
			v, _ := tx.Get("y", k)
			y[k] = string(v)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	unknown := 0
	for w, res := range results {
		for _, k := range res.acked {
			if x[k] != k || y[k] != k {
				t.Errorf("writer %d: acknowledged Update %s lost after the crash", w, k)
			}
		}
		if errors.Is(res.failErr, datastore.ErrNotDurable) {
			unknown++
		}
		_, inX := x[res.failed]
		_, inY := y[res.failed]
		if inX != inY {
			t.Errorf("writer %d: the failed Update %s is half there (x %v, y %v)", w, res.failed, inX, inY)
		}
		t.Logf("writer %d: %d acknowledged; the failed one (%v after restart): %v", w, len(res.acked), inX, res.failErr)
	}
	if len(x) != len(y) {
		t.Errorf("%d keys in x, %d in y: an Update is half there", len(x), len(y))
	}
	want := 0
	for _, res := range results {
		want += len(res.acked)
	}
	if len(x) < want || len(x) > want+writers {
		t.Errorf("%d Updates there after restart, want %d acknowledged and at most %d in doubt", len(x), want, writers)
	}
	t.Logf("%d Updates acknowledged before the kill, %d failed with their outcome unknown (ErrNotDurable)", want, unknown)
}

// TestTwoStoresOneSchema: a second store on a schema, as a second server
// process would be, is refused with ErrLocked while the first one is
// open (after waiting LockWait), and opens once it is closed, reading
// what the first one committed.
func TestTwoStoresOneSchema(t *testing.T) {
	c := pgtest.Get(t)
	schema := c.Schema(t)
	first := open(t, c, schema)
	if err := first.Update(func(tx *datastore.Tx) error { tx.Put("b", "k", []byte("first")); return nil }); err != nil {
		t.Fatal(err)
	}
	defer func(w time.Duration) { LockWait = w }(LockWait)
	LockWait = 300 * time.Millisecond
	if s, err := Open(context.Background(), c.DSN, schema, nil); !errors.Is(err, datastore.ErrLocked) {
		if err == nil {
			s.Close()
		}
		t.Fatalf("a second store on an open schema: %v, want ErrLocked", err)
	}
	if err := first.Update(func(tx *datastore.Tx) error { tx.Put("b", "k2", []byte("still")); return nil }); err != nil {
		t.Fatalf("the first store after a refused second one: %v", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	second := open(t, c, schema)
	if got := dumpB(t, second); got["k"] != "first" || got["k2"] != "still" {
		t.Fatalf("the second store reads %v", got)
	}
}

// dumpB returns bucket "b".
func dumpB(t *testing.T, s *datastore.Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := s.View(func(tx *datastore.ReadTx) error {
		for _, k := range tx.Keys("b") {
			v, _ := tx.Get("b", k)
			out[k] = string(v)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// terminate ends the sessions holding schema's owner lock, from outside
// (as a network failure or an operator would).
func terminate(t *testing.T, c *pgtest.Cluster, schema string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	k := uint64(OwnerKey(schema))
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND classid = $1 AND objid = $2 AND objsubid = 1`,
		uint32(k>>32), uint32(k)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("%d sessions held the owner lock, want 1", n)
	}
	// pg_terminate_backend signals; the session ends a moment later.
	for deadline := time.Now().Add(time.Minute); ; {
		var held int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = $1 AND objid = $2 AND objsubid = 1`,
			uint32(k>>32), uint32(k)).Scan(&held); err != nil {
			t.Fatal(err)
		}
		if held == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the terminated session still holds the owner lock after a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFencedAfterAnotherOwner: a store whose session was ended (its owner
// lock lost) and whose schema another store opened meanwhile writes no
// more: its next Update fails with ErrLocked, and so does every later one,
// and the other store's writes are intact. A store whose session was ended
// without another owner in between reconnects transparently.
func TestFencedAfterAnotherOwner(t *testing.T) {
	c := pgtest.Get(t)
	defer func(d time.Duration) { IdleCheck = d }(IdleCheck)
	IdleCheck = 0
	schema := c.Schema(t)
	s := open(t, c, schema)
	put := func(s *datastore.Store, k, v string) error {
		return s.Update(func(tx *datastore.Tx) error { tx.Put("b", k, []byte(v)); return nil })
	}
	if err := put(s, "a", "s"); err != nil {
		t.Fatal(err)
	}
	terminate(t, c, schema)
	if err := put(s, "b", "s"); err != nil {
		t.Fatalf("after its session was ended, with no other owner: %v, want a transparent reconnection", err)
	}
	terminate(t, c, schema)
	other := open(t, c, schema)
	if err := put(other, "a", "other"); err != nil {
		t.Fatal(err)
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := put(s, "a", "stale"); !errors.Is(err, datastore.ErrLocked) {
			t.Fatalf("Update %d of a store whose schema another store opened: %v, want ErrLocked", i, err)
		}
	}
	s.Close()
	r := open(t, c, schema)
	if got := dumpB(t, r); got["a"] != "other" || got["b"] != "s" {
		t.Fatalf("state %v, want a=other (the later owner's) and b=s", got)
	}
}

// TestRestartBetweenUpdates: PostgreSQL restarted (pg_ctl restart -m
// fast) between two Updates: the next Update finds the connection lost
// before it sends anything, reconnects and commits; nothing acknowledged
// is lost.
func TestRestartBetweenUpdates(t *testing.T) {
	c := pgtest.Get(t)
	if !c.Owned() {
		t.Skip("the server of BLANKET_PG_DSN is not the tests' to restart")
	}
	defer func(d time.Duration) { IdleCheck = d }(IdleCheck)
	IdleCheck = 0
	schema := c.Schema(t)
	s := open(t, c, schema)
	for i, read := range []bool{false, true, false} {
		k := fmt.Sprint(i)
		if err := s.Update(func(tx *datastore.Tx) error {
			if read {
				tx.Get("b", "0") // an explicit transaction
			}
			tx.Put("b", k, []byte(k))
			return nil
		}); err != nil {
			t.Fatalf("Update %d after a restart: %v", i, err)
		}
		if err := c.Restart(); err != nil {
			t.Fatal(err)
		}
	}
	if got := dumpB(t, s); len(got) != 3 || got["0"] != "0" || got["2"] != "2" {
		t.Fatalf("state after restarts %v, want 3 keys", got)
	}
}

// TestRestartDuringUpdate: PostgreSQL restarted while an Update's
// function runs (after its first read, so its transaction is open): the
// Update fails. Either its outcome is unknown (ErrNotDurable: the store
// refuses every later write, and a reopened store has everything
// acknowledged) or it provably wrote nothing (a plain error: the key is
// absent and the next Update reconnects and commits).
func TestRestartDuringUpdate(t *testing.T) {
	c := pgtest.Get(t)
	if !c.Owned() {
		t.Skip("the server of BLANKET_PG_DSN is not the tests' to restart")
	}
	schema := c.Schema(t)
	s := open(t, c, schema)
	if err := s.Update(func(tx *datastore.Tx) error { tx.Put("b", "acked", []byte("1")); return nil }); err != nil {
		t.Fatal(err)
	}
	err := s.Update(func(tx *datastore.Tx) error {
		tx.Get("b", "acked")
		if err := c.Restart(); err != nil {
			t.Error(err)
		}
		tx.Put("b", "during", []byte("1"))
		return nil
	})
	if err == nil {
		t.Fatal("an Update whose connection was lost under it returned nil")
	}
	t.Logf("the Update under the restart: %v", err)
	if errors.Is(err, datastore.ErrNotDurable) {
		if err := s.Update(func(tx *datastore.Tx) error { tx.Put("b", "after", nil); return nil }); !errors.Is(err, datastore.ErrNotDurable) {
			t.Fatalf("after a commit of unknown outcome, an Update returned %v, want ErrNotDurable", err)
		}
		s.Close()
		s = open(t, c, schema)
	} else {
		if err := s.Update(func(tx *datastore.Tx) error { tx.Put("b", "after", nil); return nil }); err != nil {
			t.Fatalf("after a failure that wrote nothing, the next Update: %v", err)
		}
	}
	got := dumpB(t, s)
	if got["acked"] != "1" {
		t.Fatalf("the acknowledged write is lost: %v", got)
	}
	if _, ok := got["during"]; ok && !errors.Is(err, datastore.ErrNotDurable) {
		t.Fatalf("an Update that returned a plain error (%v) wrote: %v", err, got)
	}
}

// TestSchemasAreSeparate: a relay and an aggregator sharing a cluster
// (one schema each) do not see each other's keys.
func TestSchemasAreSeparate(t *testing.T) {
	c := pgtest.Get(t)
	a, b := open(t, c, c.Schema(t)), open(t, c, c.Schema(t))
	if err := a.Update(func(tx *datastore.Tx) error { tx.Put("outbox", "1", []byte("relay")); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := b.Update(func(tx *datastore.Tx) error { tx.DeleteBucket("outbox"); return nil }); err != nil {
		t.Fatal(err)
	}
	a.View(func(tx *datastore.ReadTx) error {
		if v, ok := tx.Get("outbox", "1"); !ok || string(v) != "relay" {
			t.Errorf("another schema's DeleteBucket reached this one: %q %v", v, ok)
		}
		return nil
	})
	b.View(func(tx *datastore.ReadTx) error {
		if ks := tx.Keys("outbox"); len(ks) != 0 {
			t.Errorf("another schema's keys are seen: %q", ks)
		}
		return nil
	})
}

func TestOpenRefusesABadSchemaName(t *testing.T) {
	for _, s := range []string{"", "Relay", "a-b", "a;drop", `a"b`, "1abc", "x234567890123456789012345678901234567890123456789012345678901234"} {
		if _, err := Open(context.Background(), "postgres://127.0.0.1:1/x", s, nil); err == nil {
			t.Errorf("schema %q accepted", s)
		}
	}
}

type notSent struct{}

func (notSent) Error() string     { return "not sent" }
func (notSent) SafeToRetry() bool { return true }

// TestOutcomeUnknown: which failures of a commit may have committed.
func TestOutcomeUnknown(t *testing.T) {
	for _, tc := range []struct {
		err     error
		unknown bool
	}{
		{&pgconn.PgError{Severity: "ERROR", Code: "23505"}, false},
		{fmt.Errorf("wrapped: %w", &pgconn.PgError{Severity: "ERROR", Code: "40001"}), false},
		{&pgconn.PgError{Severity: "FATAL", Code: "57P01"}, true},
		{&pgconn.PgError{Severity: "PANIC", Code: "XX000"}, true},
		{io.ErrUnexpectedEOF, true},
		{fmt.Errorf("write: %w", notSent{}), false},
	} {
		if got := outcomeUnknown(tc.err); got != tc.unknown {
			t.Errorf("outcomeUnknown(%v) = %v, want %v", tc.err, got, tc.unknown)
		}
	}
}

// TestRefusedCommitIsNotSticky: a commit the server refuses with an
// ERROR (here a trigger refuses one of its rows) writes nothing, is not
// ErrNotDurable, and the store goes on.
func TestRefusedCommitIsNotSticky(t *testing.T) {
	c := pgtest.Get(t)
	schema := c.Schema(t)
	s := open(t, c, schema)
	if err := s.Update(func(tx *datastore.Tx) error { tx.Put("b", "ok", []byte("1")); return nil }); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conn, err := pgconn.Connect(ctx, c.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	ddl := fmt.Sprintf(`CREATE FUNCTION %[1]s.refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF NEW.key = 'no' THEN RAISE EXCEPTION 'refused'; END IF; RETURN NEW; END $$;
		CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON %[1]s.kv FOR EACH ROW EXECUTE FUNCTION %[1]s.refuse()`, schema)
	if err := conn.Exec(ctx, ddl).Close(); err != nil {
		t.Fatal(err)
	}
	err = s.Update(func(tx *datastore.Tx) error {
		tx.Put("b", "yes", []byte("1"))
		tx.Put("b", "no", []byte("1"))
		return nil
	})
	if err == nil || errors.Is(err, datastore.ErrNotDurable) {
		t.Fatalf("a refused commit returned %v, want an error that is not ErrNotDurable", err)
	}
	if err := s.Update(func(tx *datastore.Tx) error { tx.Put("b", "after", []byte("1")); return nil }); err != nil {
		t.Fatalf("the store refuses writes after a refused commit: %v", err)
	}
	s.View(func(tx *datastore.ReadTx) error {
		if _, ok := tx.Get("b", "yes"); ok {
			t.Error("half of a refused commit is there")
		}
		if _, ok := tx.Get("b", "after"); !ok {
			t.Error("the commit after a refused one is lost")
		}
		return nil
	})
}
