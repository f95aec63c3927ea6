package rounds

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/blanket-fl/blanket/aggregator/internal/accounting"
	"github.com/blanket-fl/blanket/aggregator/internal/outcome"
	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/ledger"
	"github.com/blanket-fl/blanket/shared/ledger/ledgertest"
	"github.com/blanket-fl/blanket/shared/wire"
)

func openDB(t *testing.T, dir string, fsys datastore.FileSystem) *datastore.Store {
	t.Helper()
	db, err := datastore.Open(dir, &datastore.Options{FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestImportOldFormat: a state directory written by the former code path
// (FileStore: state.json, secagg-collect.json, secagg-pending.json) opens
// on a datastore: the files are imported once and kept as NAME.imported,
// and the state resumes — the open round's chunks (the re-sent chunk gets
// its stored answer, the next chunk and the close follow), or the charged
// round awaiting its aggregate share (applied, charged once).
func TestImportOldFormat(t *testing.T) {
	t.Run("collecting", func(t *testing.T) {
		dir := t.TempDir()
		r := newRigIn(t, dir, secaggParams(), func(dir string) Store { return FileStore{Dir: dir} })
		round := r.announce()
		reps := r.reports(round, 4)
		h := r.helperSide(round)
		c1 := h.chunk(reps[:2])
		a1, err := r.m.SecAggChunkIntake(c1)
		if err != nil || a1.Outcome != outcome.Accepted {
			t.Fatalf("chunk 1: %+v %v", a1.Answer, err)
		}
		h.verdicts(a1.Frame)
		if _, err := os.Stat(filepath.Join(dir, CollectFile)); err != nil {
			t.Fatalf("the former code path wrote no %s: %v", CollectFile, err)
		}
		db := openDB(t, dir, nil)
		if err := ImportFiles(db, dir); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{CheckpointFile, CollectFile} {
			if _, err := os.Stat(filepath.Join(dir, f)); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("%s still there after the import: %v", f, err)
			}
			if _, err := os.Stat(filepath.Join(dir, f+".imported")); err != nil {
				t.Fatalf("%s.imported: %v", f, err)
			}
		}
		r.store = NewDBStore(db)
		r.open()
		again, err := r.m.SecAggChunkIntake(c1)
		if err != nil || again.Outcome != outcome.Duplicate || !bytes.Equal(again.Frame, a1.Frame) {
			t.Fatalf("re-sent chunk after the import: %+v %v", again.Answer, err)
		}
		a2, err := r.m.SecAggChunkIntake(h.chunk(reps[2:]))
		if err != nil || a2.Outcome != outcome.Accepted {
			t.Fatalf("chunk 2: %+v %v", a2.Answer, err)
		}
		h.verdicts(a2.Frame)
		ans, err := r.m.SecAggCloseIntake(h.close())
		if ch, perr := wire.ParseSecAggCharged(ans.Frame); err != nil || perr != nil || ch.Accepted != 4 {
			t.Fatalf("close: %+v %v %v", ans.Answer, err, perr)
		}
		// A second start imports nothing again.
		if err := ImportFiles(db, dir); err != nil {
			t.Fatal(err)
		}
		if st, _ := r.store.LoadState(); st == nil || st.Charging == nil {
			t.Fatalf("state after a second import: %+v", st)
		}
	})
	t.Run("charged", func(t *testing.T) {
		dir := t.TempDir()
		r := newRigIn(t, dir, secaggParams(), func(dir string) Store { return FileStore{Dir: dir} })
		round := r.announce()
		h, _ := r.charged(round, 3)
		db := openDB(t, dir, nil)
		if err := ImportFiles(db, dir); err != nil {
			t.Fatal(err)
		}
		r.store = NewDBStore(db)
		r.open()
		if r.m.PendingUntil(round).IsZero() {
			t.Fatal("the charged round was not resumed from the imported state")
		}
		if ans := r.m.SecAggAggregateIntake(h.aggregate()); ans.Outcome != outcome.Accepted {
			t.Fatalf("aggregate: %+v", ans)
		}
		if n := len(r.ledger.Releases()); n != 1 {
			t.Fatalf("%d releases", n)
		}
	})
}

// failingFS fails every fsync once armed (a disk that stops keeping
// writes).
type failingFS struct {
	datastore.OS
	armed atomic.Bool
}

type failingFile struct {
	datastore.File
	fs *failingFS
}

func (f *failingFS) OpenFile(name string, flag int, perm fs.FileMode) (datastore.File, error) {
	file, err := f.OS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return failingFile{file, f}, nil
}

func (f failingFile) Sync() error {
	if f.fs.armed.Load() {
		return errors.New("injected: fsync failed")
	}
	return f.File.Sync()
}

// TestFailingFsync: with the datastore's fsync failing at the collect
// step, the chunk is not answered accepted (no verdicts); at the pending
// step, the close is an error (answered 500) and nothing is charged, so
// nothing can be released.
func TestFailingFsync(t *testing.T) {
	t.Run("collect", func(t *testing.T) {
		ffs := &failingFS{}
		r := newRigIn(t, t.TempDir(), secaggParams(), func(dir string) Store { return NewDBStore(openDB(t, dir, ffs)) })
		round := r.announce()
		h := r.helperSide(round)
		ffs.armed.Store(true)
		ans, err := r.m.SecAggChunkIntake(h.chunk(r.reports(round, 2)))
		if err == nil && ans.Outcome == outcome.Accepted {
			t.Fatal("a chunk whose state was not durable was answered accepted")
		}
		if p, perr := wire.ParseSecAggPrep(ans.Frame); err == nil && (perr != nil || len(p.Msg) != 0) {
			t.Fatalf("the answer carries verdicts: %+v %v", p, perr)
		}
		if n := len(r.ledger.Releases()); n != 0 {
			t.Fatalf("%d releases", n)
		}
	})
	t.Run("pending", func(t *testing.T) {
		ffs := &failingFS{}
		r := newRigIn(t, t.TempDir(), secaggParams(), func(dir string) Store { return NewDBStore(openDB(t, dir, ffs)) })
		round := r.announce()
		h := r.streamed(round, r.reports(round, 4), 2)
		ffs.armed.Store(true)
		if ans, err := r.m.SecAggCloseIntake(h.close()); err == nil {
			t.Fatalf("close whose prepared round was not durable answered %+v", ans.Answer)
		}
		if n := len(r.ledger.Releases()); n != 0 {
			t.Fatalf("%d releases after a failed fsync", n)
		}
		if ans := r.m.SecAggAggregateIntake(h.aggregate()); ans.Outcome == outcome.Accepted {
			t.Fatal("an aggregate was applied for a round never charged")
		}
	})
}

// TestBytesPerReport streams n = 1,000 reports in chunks of 10 and
// measures what each store writes while collecting: the datastore's
// per-chunk records (Stats().BytesWritten, fsyncs) against the former
// file rewritten whole per chunk (the sum of its sizes). The datastore's
// last 100 reports must cost no more than 1.5 times its first 100 (the
// cost per report does not grow with n), the file's grows.
func TestBytesPerReport(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 reports")
	}
	const n, per = 1000, 10
	p := secaggParams()
	p.Quota = n
	var db *datastore.Store
	r := newRigIn(t, t.TempDir(), p, func(dir string) Store { db = openDB(t, dir, nil); return NewDBStore(db) })
	round := r.announce()
	reps := r.reports(round, n)
	h := r.helperSide(round)
	var dbFirst, dbLast, fileFirst, fileLast, dbTotal, fileTotal int64
	start := db.Stats()
	for lo := 0; lo < n; lo += per {
		before := db.Stats().BytesWritten
		ans, err := r.m.SecAggChunkIntake(h.chunk(reps[lo : lo+per]))
		if err != nil || ans.Outcome != outcome.Accepted {
			t.Fatalf("chunk at %d: %+v %v", lo, ans.Answer, err)
		}
		h.verdicts(ans.Frame)
		w := db.Stats().BytesWritten - before
		c, err := r.store.LoadCollect()
		if err != nil {
			t.Fatal(err)
		}
		old, err := jsonSize(c) // the former file's size after this chunk
		if err != nil {
			t.Fatal(err)
		}
		dbTotal += w
		fileTotal += old
		if lo < 100 {
			dbFirst, fileFirst = dbFirst+w, fileFirst+old
		}
		if lo >= n-100 {
			dbLast, fileLast = dbLast+w, fileLast+old
		}
	}
	end := db.Stats()
	t.Logf("datastore: %.0f bytes and %.3f fsyncs per report (n = %d, chunks of %d); first 100 reports %d bytes, last 100 %d",
		float64(dbTotal)/n, float64(end.Fsyncs-start.Fsyncs)/n, n, per, dbFirst, dbLast)
	t.Logf("former file rewritten per chunk: %.0f bytes per report; first 100 reports %d bytes, last 100 %d",
		float64(fileTotal)/n, fileFirst, fileLast)
	if float64(dbLast) > 1.5*float64(dbFirst) {
		t.Fatalf("datastore bytes per report grow with n: first 100 reports %d bytes, last 100 %d", dbFirst, dbLast)
	}
	if fileLast < 5*fileFirst {
		t.Fatalf("the former file did not grow as expected (first %d, last %d): the comparison is wrong", fileFirst, fileLast)
	}
}

// TestChargeIsOneTransaction: with the ledger in the machine's datastore
// (the aggregator's layout), a secure-summation round's prepared state,
// its Charging marker and the ledger's record are one transaction. When
// the charge's write fails (injected into the transaction that carries
// the ledger's record: a failed write, a torn one, a failed fsync), the
// close is an error and nothing is answered; after a restart on the same
// directory the charge and the prepared round are both there (an fsync
// that failed after the bytes reached the file: counted, never
// under-counted) or both absent, never one without the other. When it
// succeeds, both are there after a restart and the round resumes.
func TestChargeIsOneTransaction(t *testing.T) {
	for _, op := range []ledgertest.Op{ledgertest.Write, ledgertest.TornWrite, ledgertest.Sync} {
		t.Run(fmt.Sprint(op), func(t *testing.T) {
			dir := t.TempDir()
			fsys := &ledgertest.StoreFS{}
			r, db := newStoreLedgerRig(t, dir, fsys)
			if !r.m.chargeInTx() {
				t.Fatal("the machine does not charge in one transaction")
			}
			round := r.announce()
			h := r.streamed(round, r.reports(round, 4), 2)
			fsys.Arm(op, []byte(ledger.BucketRecords))
			if ans, err := r.m.SecAggCloseIntake(h.close()); err == nil {
				t.Fatalf("a close whose charge was not durable answered %+v", ans.Answer)
			}
			db.Close()
			// What a restart finds, before the machine reconciles it.
			n, p := durableCharge(t, dir)
			if (n == 0) != (p == nil) || n > 1 {
				t.Fatalf("after a failed charge: %d releases, prepared round %v", n, p != nil)
			}
			if op != ledgertest.Sync && n != 0 {
				t.Fatalf("a failed write is in the ledger after a restart")
			}
		})
	}
	t.Run("ok", func(t *testing.T) {
		dir := t.TempDir()
		r, db := newStoreLedgerRig(t, dir, nil)
		// A first round, applied: its record keeps its own epsilon when
		// the next one is resumed after a restart (reconcile).
		first := r.announce()
		h1 := r.streamed(first, r.reports(first, 4), 2)
		if ans, err := r.m.SecAggCloseIntake(h1.close()); err != nil || ans.Outcome != outcome.Accepted {
			t.Fatalf("close: %+v %v", ans.Answer, err)
		}
		if ans := r.m.SecAggAggregateIntake(h1.aggregate()); ans.Outcome != outcome.Accepted {
			t.Fatalf("aggregate: %+v", ans)
		}
		round := r.announce()
		h := r.streamed(round, r.reports(round, 4), 2)
		if ans, err := r.m.SecAggCloseIntake(h.close()); err != nil || ans.Outcome != outcome.Accepted {
			t.Fatalf("close: %+v %v", ans.Answer, err)
		}
		db.Close()
		if n, p := durableCharge(t, dir); n != 2 || p == nil || p.Round != round {
			t.Fatalf("after a charge: %d releases, prepared round %+v", n, p)
		}
		db2 := openDB(t, dir, nil)
		r2 := &rig{t: t, dir: dir, key: r.key, helper: r.helper, store: NewDBStore(db2), params: r.params, ledgerInStore: true}
		r2.open()
		if ans := r2.m.SecAggAggregateIntake(h.aggregate()); ans.Outcome != outcome.Accepted {
			t.Fatalf("the charged round does not resume: %+v", ans)
		}
		st, err := r2.store.LoadState()
		if err != nil || st == nil || len(st.History) != 2 {
			t.Fatalf("history after the resumed round: %+v %v", st, err)
		}
		// oneEach: the ledger's epsilon is its number of releases.
		for i, want := range []float64{1, 2} {
			if e := st.History[i].EpsilonTightest; e == nil || *e != want {
				t.Errorf("round %d's epsilon %v, want %v", st.History[i].Round, e, want)
			}
		}
	})
}

// durableCharge reads, without a machine, the charges in dir's datastore
// and its prepared secure-summation round.
func durableCharge(t *testing.T, dir string) (int, *Pending) {
	t.Helper()
	db, err := datastore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	return durableChargeIn(t, db)
}

// durableChargeIn is durableCharge on an open store.
func durableChargeIn(t *testing.T, db *datastore.Store) (int, *Pending) {
	t.Helper()
	p, err := NewDBStore(db).LoadPending()
	if err != nil {
		t.Fatal(err)
	}
	lo, err := accounting.New(oneEach).LedgerOptions(100, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.OpenStore(db, lo, ledger.Former{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return len(l.Releases()), p
}
