package relaystore

// The relay's store tests run on both engines: the embedded store in a
// state directory and PostgreSQL (shared/datastore/pgtest: one throwaway
// cluster for this test binary, a schema per test; skipped with its
// reason where there is none, failed under BLANKET_REQUIRE_POSTGRES=1).

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/relay/internal/outbox"
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

// engine is where a test's store is: config returns the settings of one
// fresh store (a state directory, and a schema for PostgreSQL) that every
// open of the test reopens.
type engine struct {
	name    string
	config  func(t *testing.T, dir string) serverstore.Config
	cluster func(t *testing.T) *pgtest.Cluster
}

var engines = []engine{
	{name: "log", config: func(t *testing.T, dir string) serverstore.Config { return serverstore.Config{Dir: dir} }},
	{name: "postgres", config: func(t *testing.T, dir string) serverstore.Config {
		c := pgtest.Get(t)
		return serverstore.Config{Dir: dir, URL: c.DSN, Schema: c.Schema(t)}
	}},
}

// forEachEngine runs test on each engine with the state directory dir
// (a fresh one if "") and an open function for its store.
func forEachEngine(t *testing.T, dir string, test func(t *testing.T, dir string, open func(opt *datastore.Options) (*Store, error))) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			d := dir
			if d == "" {
				d = t.TempDir()
			}
			c := e.config(t, d)
			test(t, d, func(opt *datastore.Options) (*Store, error) { return OpenIn(context.Background(), c, opt) })
		})
	}
}

// TestPostgresRestart: PostgreSQL restarted between two of the relay's
// writes (the second reconnects: pgstore.IdleCheck elapsed) and killed
// under one (its outcome unknown: ErrNotDurable, and every later write is
// refused); after a reopen, every acknowledged record is there.
func TestPostgresRestart(t *testing.T) {
	c := pgtest.Get(t)
	if !c.Owned() {
		t.Skip("the server of BLANKET_PG_DSN is not the tests' to restart")
	}
	cfg := serverstore.Config{Dir: t.TempDir(), URL: c.DSN, Schema: c.Schema(t)}
	s, err := OpenIn(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	if err := s.Put(1, outbox.Batch, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(); err != nil {
		t.Fatal(err)
	}
	// The restart took longer than pgstore.IdleCheck? Not necessarily:
	// wait it out, so that the lost connection is found before sending.
	waitIdle()
	if err := s.Put(2, outbox.Batch, []byte("two")); err != nil {
		t.Fatalf("a write after PostgreSQL restarted between two writes: %v", err)
	}
	err = c.FailCommit(t, cfg.Schema, func() error { return s.Put(3, outbox.Batch, []byte("three")) })
	if !errors.Is(err, datastore.ErrNotDurable) {
		t.Fatalf("a write killed in its commit: %v, want ErrNotDurable", err)
	}
	if err := s.Put(4, outbox.Batch, []byte("four")); !errors.Is(err, datastore.ErrNotDurable) {
		t.Fatalf("a write after a commit of unknown outcome: %v, want ErrNotDurable", err)
	}
	s.Close()
	if s, err = OpenIn(context.Background(), cfg, nil); err != nil {
		t.Fatal(err)
	}
	l, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(l, outbox.Entry{Round: 1, Kind: outbox.Batch}) || !slices.Contains(l, outbox.Entry{Round: 2, Kind: outbox.Batch}) ||
		slices.Contains(l, outbox.Entry{Round: 4, Kind: outbox.Batch}) {
		t.Fatalf("after the restarts: %v, want rounds 1 and 2 (acknowledged), perhaps 3 (unknown), never 4 (refused)", l)
	}
}

// TestSecondRelayOnASchema: a second relay on the same schema is refused
// (ErrLocked), as a second one on a state directory is (flock).
func TestSecondRelayOnASchema(t *testing.T) {
	forEachEngine(t, "", func(t *testing.T, dir string, open func(*datastore.Options) (*Store, error)) {
		old := pgstore.LockWait
		defer func() { pgstore.LockWait = old }()
		pgstore.LockWait = 0
		s, err := open(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if s2, err := open(nil); !errors.Is(err, datastore.ErrLocked) {
			if err == nil {
				s2.Close()
			}
			t.Fatalf("a second relay on the same store: %v, want ErrLocked", err)
		}
	})
}

// waitIdle waits until pgstore's idle check applies to the next Update.
func waitIdle() { time.Sleep(pgstore.IdleCheck + 50*time.Millisecond) }
