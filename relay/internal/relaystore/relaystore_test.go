package relaystore

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/blanket-fl/blanket/relay/internal/acklog"
	"github.com/blanket-fl/blanket/relay/internal/helperkey"
	"github.com/blanket-fl/blanket/relay/internal/outbox"
	"github.com/blanket-fl/blanket/shared/datastore"
)

// TestImportFormerState: a state directory in the former format (one file
// per outbox record, helper.key) opens with the same records, byte for
// byte, and the same key; the files are renamed NAME.imported and never
// imported again (a record removed after the import stays removed).
func TestImportFormerState(t *testing.T) {
	forEachEngine(t, "", func(t *testing.T, dir string, open func(*datastore.Options) (*Store, error)) {
		ob, err := outbox.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		records := map[outbox.Entry][]byte{
			{Round: 1, Kind: outbox.Batch}:       []byte("batch one"),
			{Round: 2, Kind: outbox.SecAggClose}: []byte(`{"close":"AQI="}`),
			{Round: 3, Kind: outbox.OpenRound}:   {},
		}
		for e, b := range records {
			if err := ob.Put(e.Round, e.Kind, b); err != nil {
				t.Fatal(err)
			}
		}
		hk, _, err := helperkey.LoadOrCreate(filepath.Join(dir, helperkey.File))
		if err != nil {
			t.Fatal(err)
		}
		s, err := open(nil)
		if err != nil {
			t.Fatal(err)
		}
		l, err := s.List()
		if err != nil || !slices.Equal(l, []outbox.Entry{{Round: 1, Kind: outbox.Batch}, {Round: 2, Kind: outbox.SecAggClose}, {Round: 3, Kind: outbox.OpenRound}}) {
			t.Fatalf("imported %v, %v", l, err)
		}
		for e, want := range records {
			if got, err := s.Get(e.Round, e.Kind); err != nil || !bytes.Equal(got, want) {
				t.Errorf("%v: %q, %v; want %q", e, got, err, want)
			}
		}
		k, created, err := s.HelperKey()
		if err != nil || created || k.Public() != hk.Public() {
			t.Fatalf("helper key: created %v, same %v, %v", created, err == nil && k.Public() == hk.Public(), err)
		}
		for _, name := range []string{outbox.Name(1, outbox.Batch), outbox.Name(2, outbox.SecAggClose), outbox.Name(3, outbox.OpenRound), helperkey.File} {
			if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s still there: %v", name, err)
			}
			if _, err := os.Stat(filepath.Join(dir, name+ImportedSuffix)); err != nil {
				t.Errorf("%s: %v", name+ImportedSuffix, err)
			}
		}
		if err := s.Remove(1, outbox.Batch); err != nil {
			t.Fatal(err)
		}
		s.Close()
		s, err = open(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if l, _ := s.List(); !slices.Equal(l, []outbox.Entry{{Round: 2, Kind: outbox.SecAggClose}, {Round: 3, Kind: outbox.OpenRound}}) {
			t.Errorf("after a reopen: %v", l)
		}
		if k2, created, err := s.HelperKey(); err != nil || created || k2.Public() != hk.Public() {
			t.Errorf("helper key after a reopen: created %v, %v", created, err)
		}
	})
}

// TestImportRefusesAnotherKey: a helper.key beside a store that already
// holds a different key is refused, never silently replaced (the key opens
// every volunteer's helper share).
func TestImportRefusesAnotherKey(t *testing.T) {
	forEachEngine(t, "", func(t *testing.T, dir string, open func(*datastore.Options) (*Store, error)) {
		s, err := open(nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, created, err := s.HelperKey(); err != nil || !created {
			t.Fatalf("first key: created %v, %v", created, err)
		}
		s.Close()
		if _, _, err := helperkey.LoadOrCreate(filepath.Join(dir, helperkey.File)); err != nil {
			t.Fatal(err)
		}
		if s, err := open(nil); err == nil {
			s.Close()
			t.Fatal("opened with a second helper key beside the store")
		}
	})
}

// TestOutboxSemantics: what outbox.Store promises, across a reopen.
func TestOutboxSemantics(t *testing.T) {
	forEachEngine(t, "", func(t *testing.T, dir string, open func(*datastore.Options) (*Store, error)) {
		s, err := open(nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(4, outbox.Abort); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("missing record: %v", err)
		}
		if err := s.Remove(4, outbox.Abort); err != nil {
			t.Errorf("removing a missing record: %v", err)
		}
		if err := s.Put(4, outbox.Kind("other"), nil); err == nil {
			t.Error("an unknown kind was stored")
		}
		for _, e := range []outbox.Entry{{Round: 12, Kind: outbox.Abort}, {Round: 3, Kind: outbox.SecAggAggregate}, {Round: 3, Kind: outbox.Batch}} {
			if err := s.Put(e.Round, e.Kind, []byte(e.Kind)); err != nil {
				t.Fatal(err)
			}
		}
		s.Close()
		s, err = open(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if l, _ := s.List(); !slices.Equal(l, []outbox.Entry{{Round: 3, Kind: outbox.Batch}, {Round: 3, Kind: outbox.SecAggAggregate}, {Round: 12, Kind: outbox.Abort}}) {
			t.Errorf("after a reopen: %v", l)
		}
		if !s.Has(12, outbox.Abort) || s.Has(12, outbox.Batch) {
			t.Error("Has")
		}
	})
}

// failFS fails every fsync once armed.
type failFS struct {
	datastore.OS
	armed *atomic.Bool
}

type failFile struct {
	datastore.File
	armed *atomic.Bool
}

func (f failFS) OpenFile(name string, flag int, perm fs.FileMode) (datastore.File, error) {
	file, err := f.OS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return failFile{file, f.armed}, nil
}

func (f failFile) Sync() error {
	if f.armed.Load() {
		return errors.New("fsync: input/output error")
	}
	return f.File.Sync()
}

// TestFailedFsyncIsNotDurable: a Put whose fsync fails returns an error
// (datastore.ErrNotDurable) and every later write is refused; reads keep
// the last durable state, and a reopen finds exactly it.
func TestFailedFsyncIsNotDurable(t *testing.T) {
	dir := t.TempDir()
	armed := new(atomic.Bool)
	s, err := Open(dir, &datastore.Options{FS: failFS{armed: armed}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(1, outbox.Batch, []byte("kept")); err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	if err := s.Put(2, outbox.Batch, []byte("lost")); !errors.Is(err, datastore.ErrNotDurable) {
		t.Fatalf("Put with a failing fsync: %v", err)
	}
	armed.Store(false)
	if err := s.Put(3, outbox.Batch, []byte("after")); err == nil {
		t.Error("a write after a failed fsync succeeded")
	}
	if l, _ := s.List(); !slices.Equal(l, []outbox.Entry{{Round: 1, Kind: outbox.Batch}}) {
		t.Errorf("reads after the failure: %v", l)
	}
	s.Close()
	s, err = Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if b, err := s.Get(1, outbox.Batch); err != nil || string(b) != "kept" {
		t.Errorf("after a reopen: %q, %v", b, err)
	}
}

// TestFrameRecords: acklog's records, written by 64 concurrent Appends
// (connections acknowledging at once: the store may group their fsyncs),
// read back by round and connection across a reopen, each one commit;
// Drop removes one round's only.
func TestFrameRecords(t *testing.T) {
	forEachEngine(t, "", func(t *testing.T, dir string, open func(*datastore.Options) (*Store, error)) {
		s, err := open(nil)
		if err != nil {
			t.Fatal(err)
		}
		const n = 64
		start := make(chan struct{})
		errs := make(chan error, n)
		for i := range n {
			go func() {
				<-start
				errs <- s.Append(7, uint64(i%8), ReportKeyFor(i/8), []byte{byte(i)})
			}()
		}
		before := s.DB().Stats()
		close(start)
		for range n {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		after := s.DB().Stats()
		if commits := after.Commits - before.Commits; commits != n {
			t.Errorf("%d commits, want %d", commits, n)
		}
		if err := s.Append(9, 1, "c", []byte("check-in")); err != nil {
			t.Fatal(err)
		}
		s.Close()
		if s, err = open(nil); err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if r, err := s.Rounds(); err != nil || !slices.Equal(r, []uint64{7, 9}) {
			t.Fatalf("rounds %v, %v", r, err)
		}
		f, err := s.Frames(7)
		if err != nil || len(f) != 8 {
			t.Fatalf("round 7: %d connections, %v", len(f), err)
		}
		for i := range n {
			if b := f[uint64(i%8)][ReportKeyFor(i/8)]; !bytes.Equal(b, []byte{byte(i)}) {
				t.Fatalf("record %d: %v", i, b)
			}
		}
		if err := s.Drop(7); err != nil {
			t.Fatal(err)
		}
		if r, _ := s.Rounds(); !slices.Equal(r, []uint64{9}) {
			t.Errorf("after Drop(7): rounds %v", r)
		}
		if f, _ := s.Frames(9); string(f[1]["c"]) != "check-in" {
			t.Errorf("round 9 after Drop(7): %v", f)
		}
	})
}

// ReportKeyFor is acklog.ReportKey (the key format the relay uses).
var ReportKeyFor = acklog.ReportKey
