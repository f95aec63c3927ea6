package datastore_test

// The datastore's contract, tested on every engine through one table
// (backends): the embedded log and PostgreSQL (package pgstore). The
// log's own tests (torn tails, compaction, file system faults, group
// commit) are in datastore_test.go; PostgreSQL's crash test is in
// pgstore.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/datastore/pgstore"
	"github.com/blanket-fl/blanket/shared/datastore/pgtest"
	"github.com/blanket-fl/blanket/shared/internal/benchclock"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

// fixture is one empty store of a backend.
type fixture struct {
	// open opens the store (again: a reopened store reads what the
	// earlier ones committed); the test closes it.
	open func(t *testing.T) *datastore.Store
	// fail runs update, an Update of s, so that its commit fails with
	// its outcome unknown, and returns update's error.
	fail func(t *testing.T, s *datastore.Store, update func() error) error
}

type backend struct {
	name    string
	fixture func(t *testing.T) fixture
}

var backends = []backend{
	{"log", logFixture},
	{"postgres", pgFixture},
}

// forEach runs test on each backend.
func forEach(t *testing.T, test func(t *testing.T, f fixture)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { test(t, b.fixture(t)) })
	}
}

// syncFailFS fails the log's fsyncs while armed.
type syncFailFS struct {
	datastore.OS
	armed atomic.Bool
}

type syncFailFile struct {
	datastore.File
	fs *syncFailFS
}

func (f *syncFailFS) OpenFile(name string, flag int, perm fs.FileMode) (datastore.File, error) {
	h, err := f.OS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return syncFailFile{h, f}, nil
}

func (f syncFailFile) Sync() error {
	if f.fs.armed.Load() {
		return errors.New("injected fsync failure")
	}
	return f.File.Sync()
}

func logFixture(t *testing.T) fixture {
	dir := t.TempDir()
	ffs := &syncFailFS{}
	return fixture{
		open: func(t *testing.T) *datastore.Store {
			t.Helper()
			s, err := datastore.Open(dir, &datastore.Options{FS: ffs})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		fail: func(t *testing.T, s *datastore.Store, update func() error) error {
			ffs.armed.Store(true)
			defer ffs.armed.Store(false)
			return update()
		},
	}
}

func pgFixture(t *testing.T) fixture {
	c := pgtest.Get(t)
	schema := c.Schema(t)
	return fixture{
		open: func(t *testing.T) *datastore.Store {
			t.Helper()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			s, err := pgstore.Open(ctx, c.DSN, schema, nil)
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		// The Update's lock and writes are sent while another session
		// holds the schema's lock; the server is killed while the Update
		// waits for its answer, and started again.
		fail: func(t *testing.T, s *datastore.Store, update func() error) error {
			t.Helper()
			return c.FailCommit(t, schema, update)
		},
	}
}

// dump returns the committed contents of buckets as bucket -> key -> value
// (an empty bucket is left out), read in one View.
func dump(t *testing.T, s *datastore.Store, buckets ...string) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	if err := s.View(func(tx *datastore.ReadTx) error {
		for _, b := range buckets {
			for _, k := range tx.Keys(b) {
				v, ok := tx.Get(b, k)
				if !ok {
					t.Errorf("Keys(%s) lists %q, Get does not find it", b, k)
				}
				if out[b] == nil {
					out[b] = map[string]string{}
				}
				out[b][k] = string(v)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// equalState compares two dumps, bucket by bucket.
func equalState(a, b map[string]map[string]string) bool {
	return maps.EqualFunc(a, b, maps.Equal)
}

var buckets = []string{"rounds", "keys", "empty", "other"}

// TestRoundTripAndReopen: commits, their own reads, an aborted Update
// that writes nothing, ErrClosed after Close, and the same state after
// reopening.
func TestRoundTripAndReopen(t *testing.T) {
	forEach(t, func(t *testing.T, f fixture) {
		s := f.open(t)
		err := s.Update(func(tx *datastore.Tx) error {
			tx.Put("rounds", "00000000000000000001", []byte("announced"))
			tx.Put("rounds", "00000000000000000002", []byte("collecting"))
			tx.Put("keys", "helper", []byte{0, 1, 2})
			tx.Put("empty", "e", nil)
			if v, ok := tx.Get("rounds", "00000000000000000001"); !ok || string(v) != "announced" {
				t.Errorf("a transaction does not see its own write: %q %v", v, ok)
			}
			if v, ok := tx.Get("empty", "e"); !ok || len(v) != 0 {
				t.Errorf("an empty value reads %q %v, want present and empty", v, ok)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		err = s.Update(func(tx *datastore.Tx) error {
			tx.Delete("rounds", "00000000000000000001")
			tx.Put("rounds", "00000000000000000002", []byte("closed"))
			if ks := tx.Keys("rounds"); !slices.Equal(ks, []string{"00000000000000000002"}) {
				t.Errorf("keys inside the transaction: %v", ks)
			}
			if _, ok := tx.Get("rounds", "00000000000000000001"); ok {
				t.Error("a transaction sees a key it deleted")
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		sentinel := errors.New("abort")
		if err := s.Update(func(tx *datastore.Tx) error {
			tx.DeleteBucket("rounds")
			tx.Put("other", "x", []byte("never"))
			return sentinel
		}); !errors.Is(err, sentinel) {
			t.Fatalf("fn's error not returned: %v", err)
		}
		want := map[string]map[string]string{
			"rounds": {"00000000000000000002": "closed"},
			"keys":   {"helper": "\x00\x01\x02"},
			"empty":  {"e": ""},
		}
		if got := dump(t, s, buckets...); !equalState(got, want) {
			t.Fatalf("state %v, want %v", got, want)
		}
		if st := s.Stats(); st.Commits != 2 || st.BytesWritten == 0 {
			t.Fatalf("stats %+v, want 2 commits and some bytes", st)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := s.Update(func(*datastore.Tx) error { return nil }); !errors.Is(err, datastore.ErrClosed) {
			t.Fatalf("Update after Close: %v", err)
		}
		if err := s.View(func(*datastore.ReadTx) error { return nil }); !errors.Is(err, datastore.ErrClosed) {
			t.Fatalf("View after Close: %v", err)
		}
		s = f.open(t)
		defer s.Close()
		if got := dump(t, s, buckets...); !equalState(got, want) {
			t.Fatalf("after reopen %v, want %v", got, want)
		}
	})
}

// TestKeysOrder: Keys sorts bytewise, as Go sorts strings, on keys of any
// bytes (zero bytes, invalid UTF-8, multi-byte characters), committed
// and merged with a transaction's own writes.
func TestKeysOrder(t *testing.T) {
	keys := []string{"b", "a", "\x00", "\xff\xfe", "é", "Z", "a\x00", "00000000000000000010", "00000000000000000009", "", "\x7f"}
	want := slices.Clone(keys)
	slices.Sort(want)
	forEach(t, func(t *testing.T, f fixture) {
		s := f.open(t)
		defer s.Close()
		if err := s.Update(func(tx *datastore.Tx) error {
			for _, k := range keys[:6] {
				tx.Put("k", k, []byte(k))
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := s.Update(func(tx *datastore.Tx) error {
			for _, k := range keys[6:] {
				tx.Put("k", k, []byte(k))
			}
			tx.Put("k", "gone", nil)
			tx.Delete("k", "gone")
			if got := tx.Keys("k"); !slices.Equal(got, want) {
				t.Errorf("Keys inside the transaction %q, want %q", got, want)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		s.View(func(tx *datastore.ReadTx) error {
			if got := tx.Keys("k"); !slices.Equal(got, want) {
				t.Errorf("Keys %q, want %q", got, want)
			}
			for _, k := range keys {
				if v, ok := tx.Get("k", k); !ok || string(v) != k {
					t.Errorf("Get(%q) = %q %v", k, v, ok)
				}
			}
			if ks := tx.Keys("none"); len(ks) != 0 {
				t.Errorf("an absent bucket has keys %q", ks)
			}
			return nil
		})
	})
}

// TestDeleteBucket: DeleteBucket empties one bucket, its own later Puts
// stay, other buckets are untouched, and a Delete of an absent key is
// nothing.
func TestDeleteBucket(t *testing.T) {
	forEach(t, func(t *testing.T, f fixture) {
		s := f.open(t)
		defer s.Close()
		if err := s.Update(func(tx *datastore.Tx) error {
			for i := range 5 {
				tx.Put("rounds", fmt.Sprint(i), []byte("r"))
				tx.Put("other", fmt.Sprint(i), []byte("o"))
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := s.Update(func(tx *datastore.Tx) error {
			tx.Delete("rounds", "absent")
			tx.DeleteBucket("rounds")
			if ks := tx.Keys("rounds"); len(ks) != 0 {
				t.Errorf("keys after DeleteBucket: %v", ks)
			}
			if _, ok := tx.Get("rounds", "1"); ok {
				t.Error("a key of a deleted bucket is still read")
			}
			tx.Put("rounds", "x", []byte("y"))
			tx.Delete("rounds", "3") // deleted already
			if ks := tx.Keys("rounds"); !slices.Equal(ks, []string{"x"}) {
				t.Errorf("keys after DeleteBucket and Put: %v", ks)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		want := map[string]map[string]string{
			"rounds": {"x": "y"},
			"other":  {"0": "o", "1": "o", "2": "o", "3": "o", "4": "o"},
		}
		if got := dump(t, s, buckets...); !equalState(got, want) {
			t.Fatalf("state %v, want %v", got, want)
		}
		// Put, then DeleteBucket in the same transaction: nothing is left.
		if err := s.Update(func(tx *datastore.Tx) error {
			tx.Put("rounds", "z", []byte("z"))
			tx.DeleteBucket("rounds")
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if got := dump(t, s, "rounds"); len(got) != 0 {
			t.Fatalf("bucket not emptied: %v", got)
		}
	})
}

// TestJSON: PutJSON and GetJSON round trip; an absent key is false; a
// value that is not JSON is an error naming the key.
func TestJSON(t *testing.T) {
	type rec struct {
		Round int
		Names []string
	}
	forEach(t, func(t *testing.T, f fixture) {
		s := f.open(t)
		defer s.Close()
		in := rec{Round: 7, Names: []string{"a", "b"}}
		if err := s.Update(func(tx *datastore.Tx) error {
			if err := datastore.PutJSON(tx, "j", "r", in); err != nil {
				return err
			}
			tx.Put("j", "bad", []byte("{"))
			var back rec
			if ok, err := datastore.GetJSON(tx, "j", "r", &back); !ok || err != nil || back.Round != 7 {
				t.Errorf("GetJSON inside the transaction: %+v %v %v", back, ok, err)
			}
			return datastore.PutJSON(tx, "j", "chan", make(chan int))
		}); err == nil {
			t.Fatal("PutJSON of a channel did not fail")
		}
		if err := s.Update(func(tx *datastore.Tx) error {
			if err := datastore.PutJSON(tx, "j", "r", in); err != nil {
				return err
			}
			tx.Put("j", "bad", []byte("{"))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		s.View(func(tx *datastore.ReadTx) error {
			var out rec
			if ok, err := datastore.GetJSON(tx, "j", "r", &out); !ok || err != nil || out.Round != 7 || !slices.Equal(out.Names, in.Names) {
				t.Errorf("GetJSON: %+v %v %v", out, ok, err)
			}
			if ok, err := datastore.GetJSON(tx, "j", "absent", &out); ok || err != nil {
				t.Errorf("an absent key: %v %v", ok, err)
			}
			if ok, err := datastore.GetJSON(tx, "j", "bad", &out); !ok || err == nil {
				t.Errorf("malformed JSON: %v %v", ok, err)
			}
			return nil
		})
	})
}

// TestConcurrentUpdates: 8 goroutines each add 1 to a counter 25 times by
// read-modify-write, and append their own key: no Update is lost (the
// counter is 200, 200 keys) and a View never sees the counter and the
// keys disagree (each Update changes both).
func TestConcurrentUpdates(t *testing.T) {
	const workers, each = 8, 25
	forEach(t, func(t *testing.T, f fixture) {
		s := f.open(t)
		defer s.Close()
		var wg sync.WaitGroup
		stop := make(chan struct{})
		viewer := make(chan error, 1)
		go func() {
			for {
				select {
				case <-stop:
					viewer <- nil
					return
				default:
				}
				// A pause, not a busy loop: under js/wasm the file writes complete
				// only when every goroutine waits.
				time.Sleep(200 * time.Microsecond)
				var bad error
				if err := s.View(func(tx *datastore.ReadTx) error {
					var n int
					if _, err := datastore.GetJSON(tx, "c", "n", &n); err != nil {
						return err
					}
					if k := len(tx.Keys("done")); k != n {
						bad = fmt.Errorf("a view saw counter %d and %d keys", n, k)
					}
					return nil
				}); err != nil || bad != nil {
					viewer <- errors.Join(err, bad)
					return
				}
			}
		}()
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					if err := s.Update(func(tx *datastore.Tx) error {
						var n int
						if _, err := datastore.GetJSON(tx, "c", "n", &n); err != nil {
							return err
						}
						tx.Put("done", fmt.Sprintf("%02d-%03d", w, i), nil)
						return datastore.PutJSON(tx, "c", "n", n+1)
					}); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(stop)
		if err := <-viewer; err != nil {
			t.Fatal(err)
		}
		var n int
		s.View(func(tx *datastore.ReadTx) error { _, err := datastore.GetJSON(tx, "c", "n", &n); return err })
		if n != workers*each || len(dump(t, s, "done")["done"]) != workers*each {
			t.Fatalf("counter %d, want %d: an Update was lost", n, workers*each)
		}
		if st := s.Stats(); st.Commits != workers*each {
			t.Fatalf("%d commits, want %d", st.Commits, workers*each)
		}
	})
}

// TestIsolation: a View while an Update is under way does not see its
// writes; once it returns nil, every View does.
func TestIsolation(t *testing.T) {
	forEach(t, func(t *testing.T, f fixture) {
		s := f.open(t)
		defer s.Close()
		inFn, release := make(chan struct{}), make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- s.Update(func(tx *datastore.Tx) error {
				tx.Put("a", "1", []byte("x"))
				tx.Get("a", "0") // a read, so that PostgreSQL's transaction is open
				close(inFn)
				<-release
				return nil
			})
		}()
		<-inFn
		if got := dump(t, s, "a"); len(got) != 0 {
			t.Fatalf("a view sees an Update under way: %v", got)
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := dump(t, s, "a"); got["a"]["1"] != "x" {
			t.Fatalf("a committed write is not seen: %v", got)
		}
	})
}

// TestNotDurableIsSticky: a commit that fails with its outcome unknown
// returns ErrNotDurable, and so does every later Update (the server
// restarts to re-read the state); readers go on; after reopening, the
// acknowledged write is there and the refused ones are not.
func TestNotDurableIsSticky(t *testing.T) {
	forEach(t, func(t *testing.T, f fixture) {
		s := f.open(t)
		put := func(k string) error {
			return s.Update(func(tx *datastore.Tx) error { tx.Put("reports", k, []byte("accepted")); return nil })
		}
		if err := put("a"); err != nil {
			t.Fatal(err)
		}
		if err := f.fail(t, s, func() error { return put("b") }); !errors.Is(err, datastore.ErrNotDurable) {
			t.Fatalf("the failing commit returned %v, want ErrNotDurable", err)
		}
		if err := put("c"); !errors.Is(err, datastore.ErrNotDurable) {
			t.Fatalf("a commit after the failure returned %v, want ErrNotDurable", err)
		}
		if err := s.Update(func(tx *datastore.Tx) error { return nil }); !errors.Is(err, datastore.ErrNotDurable) {
			t.Fatalf("a read-only Update after the failure returned %v", err)
		}
		if got := dump(t, s, "reports")["reports"]; got["a"] != "accepted" {
			t.Fatalf("readers lost the acknowledged record: %v", got)
		}
		s.Close()
		r := f.open(t)
		defer r.Close()
		got := dump(t, r, "reports")["reports"]
		if got["a"] != "accepted" {
			t.Fatalf("the acknowledged record is lost: %v", got)
		}
		if _, ok := got["c"]; ok {
			t.Fatalf("a refused commit is present after restart: %v", got)
		}
		if err := r.Update(func(tx *datastore.Tx) error { tx.Put("reports", "d", nil); return nil }); err != nil {
			t.Fatalf("the reopened store refuses writes: %v", err)
		}
	})
}

// BenchmarkUpdate: one Update with one Put, of a small value (a report's
// verdict: 40 bytes) or of 64 KB (a running aggregate), on each engine.
// cpu-ns/op is this process's CPU time per Update (the log engine's whole
// cost); for PostgreSQL server-cpu-ns/op adds its server's processes'
// (from /proc, in 10 ms ticks: meaningful over a few hundred Updates).
func BenchmarkUpdate(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int
	}{{"small", 40}, {"64KB", 64 << 10}} {
		for _, be := range []string{"log", "postgres"} {
			b.Run(be+"/"+size.name, func(b *testing.B) {
				var s *datastore.Store
				var c *pgtest.Cluster
				var err error
				if be == "log" {
					s, err = datastore.Open(b.TempDir(), nil)
				} else {
					c = pgtest.Get(b)
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					s, err = pgstore.Open(ctx, c.DSN, c.Schema(b), nil)
				}
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				v := make([]byte, size.n)
				var clk benchclock.Clock
				var server0 time.Duration
				if c != nil && c.Owned() {
					server0, _ = c.ServerCPU()
				}
				b.ResetTimer()
				clk.Start()
				for i := 0; b.Loop(); i++ {
					v[0] = byte(i)
					if err := s.Update(func(tx *datastore.Tx) error {
						tx.Put("bench", fmt.Sprintf("%020d", i%1024), v)
						return nil
					}); err != nil {
						b.Fatal(err)
					}
				}
				clk.Report(b)
				if c != nil && c.Owned() {
					if server1, err := c.ServerCPU(); err == nil {
						b.ReportMetric(float64((server1-server0).Nanoseconds())/float64(b.N), "server-cpu-ns/op")
					}
				}
			})
		}
	}
}

// TestPostgresTier says whether the PostgreSQL tier runs here, with
// which server, or why not (make test prints this line).
func TestPostgresTier(t *testing.T) {
	how, err := pgtest.Check()
	if err != nil {
		if os.Getenv("BLANKET_REQUIRE_POSTGRES") == "1" && runtime.GOOS != "js" {
			t.Fatalf("PostgreSQL tier: %v; BLANKET_REQUIRE_POSTGRES=1 requires it", err)
		}
		t.Skipf("PostgreSQL tier skipped: %v", err)
	}
	t.Logf("PostgreSQL tier runs on %s", how)
}
