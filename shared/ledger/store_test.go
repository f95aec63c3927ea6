package ledger_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/ledger"
	"github.com/blanket-fl/blanket/shared/ledger/ledgertest"
	"github.com/blanket-fl/blanket/shared/privacy"
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

// goldenStore is one server's golden directory: its former files and how
// that server opens its ledger in a store.
type goldenStore struct {
	server, ledgerFile, peerFile string
	open                         func(db *datastore.Store, dir string) (*ledger.Ledger, error)
}

var goldenStores = []goldenStore{
	{"aggregator", "ledger.jsonl", "relay-anchor.json", func(db *datastore.Store, dir string) (*ledger.Ledger, error) {
		s, _ := privacy.NewSession(1e-5)
		return ledger.OpenStore(db, ledger.Options{TargetEpsilon: 750, TargetDelta: 1e-5, Session: s},
			ledger.Former{Ledger: filepath.Join(dir, "ledger.jsonl"), Peer: filepath.Join(dir, "relay-anchor.json")})
	}},
	{"relay", ledger.NoiseFile, ledger.NoisePeerFile, func(db *datastore.Store, dir string) (*ledger.Ledger, error) {
		return ledger.OpenNoiseStore(db, dir, ledger.Options{TargetEpsilon: 750, TargetDelta: 1e-5})
	}},
}

// TestGoldenImportExport: each server's golden ledger file (and peer
// file) imports into a datastore with the old code's head, releases and
// peer head; the files are kept read-only as NAME.imported; the export
// (Ledger.WriteTo, and ExportDir on the directory) is byte-identical to
// the file; a charge after the import chains onto the imported records
// (the old head verifies after a reopen) and the export is the old file
// plus one line, which Open reads with the same head.
func TestGoldenImportExport(t *testing.T) {
	for _, gs := range goldenStores {
		t.Run(gs.server, func(t *testing.T) {
			dir, g := copyGolden(t, gs.server)
			file := filepath.Join(dir, gs.ledgerFile)
			orig, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			db := openDB(t, dir, nil)
			l, err := gs.open(db, dir)
			if err != nil {
				t.Fatal(err)
			}
			want := head(t, g.Count, g.Hash)
			if l.Head() != want || !reflect.DeepEqual(l.Releases(), g.Releases) {
				t.Fatalf("imported head %+v (want %+v), releases %+v", l.Head(), want, l.Releases())
			}
			if l.Peer() != head(t, g.PeerCount, g.PeerHash) || l.Anchor().Head() != l.Peer() {
				t.Fatalf("imported peer head %+v", l.Peer())
			}
			for _, name := range []string{gs.ledgerFile, gs.peerFile} {
				if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s still there after the import: %v", name, err)
				}
				st, err := os.Stat(filepath.Join(dir, name+ledger.ImportedSuffix))
				if err != nil || st.Mode().Perm() != 0o400 {
					t.Errorf("%s kept: %v, mode %v", name+ledger.ImportedSuffix, err, st.Mode().Perm())
				}
			}
			var exp bytes.Buffer
			if _, err := l.WriteTo(&exp); err != nil || !bytes.Equal(exp.Bytes(), orig) {
				t.Fatalf("export (%v) differs from the imported file:\n%s\nwant\n%s", err, exp.Bytes(), orig)
			}
			exp.Reset()
			if p, err := ledger.ExportDir(dir, &exp); err != nil || !bytes.Equal(exp.Bytes(), orig) || p != l.Peer() {
				t.Fatalf("ExportDir: %v, peer %+v, identical %v", err, p, bytes.Equal(exp.Bytes(), orig))
			}

			next := g.Releases[len(g.Releases)-1]
			next.Round++
			if err := l.Charge(next); err != nil {
				t.Fatal(err)
			}
			after := l.Head()
			l.Close()
			db.Close()
			db2 := openDB(t, dir, nil)
			l2, err := gs.open(db2, dir)
			if err != nil {
				t.Fatal(err)
			}
			defer l2.Close()
			if l2.Head() != after || l2.Verify(want) != nil || after.Count != g.Count+1 {
				t.Fatalf("reopened: head %+v, want %+v", l2.Head(), after)
			}
			exp.Reset()
			if _, err := l2.WriteTo(&exp); err != nil || !bytes.HasPrefix(exp.Bytes(), orig) || bytes.Count(exp.Bytes()[len(orig):], []byte("\n")) != 1 {
				t.Fatalf("export after a charge (%v):\n%s", err, exp.Bytes())
			}
			out := filepath.Join(t.TempDir(), "exported.jsonl")
			if err := os.WriteFile(out, exp.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
			s, _ := privacy.NewSession(1e-5)
			lf, err := ledger.Open(out, ledger.Options{TargetEpsilon: 750, TargetDelta: 1e-5, Session: s})
			if err != nil {
				t.Fatal(err)
			}
			defer lf.Close()
			if lf.Head() != after {
				t.Fatalf("the exported file opens with head %+v, the store's %+v", lf.Head(), after)
			}
		})
	}
}

// TestImportOnceAfterACrash: a crash between the import's Update and the
// renames leaves the former files in place; the next start finds the
// store already holding them (the head hash of its record n is the
// file's) and imports nothing twice, also after charges made since. A
// different ledger file in its place is refused (ErrRollback), leaving
// both the file and the store as they were.
func TestImportOnceAfterACrash(t *testing.T) {
	gs := goldenStores[0]
	dir, g := copyGolden(t, gs.server)
	file := filepath.Join(dir, gs.ledgerFile)
	peerFile := filepath.Join(dir, gs.peerFile)
	orig, _ := os.ReadFile(file)
	origPeer, _ := os.ReadFile(peerFile)
	restore := func() { // as if the renames had not happened
		t.Helper()
		for p, b := range map[string][]byte{file: orig, peerFile: origPeer} {
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	db := openDB(t, dir, nil)
	l, err := gs.open(db, dir)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	restore()
	l, err = gs.open(db, dir)
	if err != nil || l.Head().Count != g.Count {
		t.Fatalf("second import: %v, head %+v (want %d records)", err, l.Head(), g.Count)
	}
	next := g.Releases[len(g.Releases)-1]
	next.Round++
	if err := l.Charge(next); err != nil {
		t.Fatal(err)
	}
	if err := l.RecordPeer(wire.Head{Count: g.PeerCount + 2, Hash: [32]byte{7}}); err != nil {
		t.Fatal(err)
	}
	h := l.Head()
	l.Close()
	restore()
	l, err = gs.open(db, dir)
	if err != nil || l.Head() != h || l.Peer().Count != g.PeerCount+2 {
		t.Fatalf("import after charges: %v, head %+v (want %+v), peer %+v", err, l.Head(), h, l.Peer())
	}
	l.Close()
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the file was not renamed: %v", err)
	}

	// Another ledger (its first record rewritten: the chain differs).
	lines := bytes.SplitAfter(orig, []byte("\n"))
	other := filepath.Join(t.TempDir(), "other.jsonl")
	s, _ := privacy.NewSession(1e-5)
	lo, err := ledger.Open(other, ledger.Options{TargetEpsilon: 750, TargetDelta: 1e-5, Session: s})
	if err != nil {
		t.Fatal(err)
	}
	if err := lo.Charge(g.Releases[0]); err != nil { // another time: another line
		t.Fatal(err)
	}
	lo.Close()
	otherBytes, _ := os.ReadFile(other)
	if bytes.Equal(otherBytes, lines[0]) {
		t.Fatal("the other ledger is the same")
	}
	if err := os.WriteFile(file, otherBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	before := exportDB(t, db)
	if l, err := gs.open(db, dir); !errors.Is(err, ledger.ErrRollback) {
		if l != nil {
			l.Close()
		}
		t.Fatalf("a diverging former file: %v, want ErrRollback", err)
	}
	if now, _ := os.ReadFile(file); !bytes.Equal(now, otherBytes) || !bytes.Equal(exportDB(t, db), before) {
		t.Fatal("a refused import changed the file or the store")
	}
}

func exportDB(t *testing.T, db *datastore.Store) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := ledger.ExportDir(db.Dir(), &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestCorruptFormerFileRefuses: a former ledger file with a rewritten
// record, a broken chain or a bad peer file is refused with ErrCorrupt;
// nothing is imported and the files are left as they were (the ledger is
// never reset). A torn trailing fragment is not imported (its charge
// never completed) but the records before it are.
func TestCorruptFormerFileRefuses(t *testing.T) {
	gs := goldenStores[1]
	_, g := copyGolden(t, gs.server)
	orig, _ := os.ReadFile(filepath.Join("testdata", gs.server, gs.ledgerFile))
	lines := bytes.SplitAfter(orig, []byte("\n"))
	for name, c := range map[string]struct{ ledger, peer []byte }{
		"rewritten record": {bytes.Join([][]byte{lines[0], bytes.Replace(lines[1], []byte(`"eps":6.`), []byte(`"eps":1.`), 1), lines[2]}, nil), nil},
		"record deleted":   {bytes.Join([][]byte{lines[0], lines[2]}, nil), nil},
		"bad peer file":    {orig, []byte(`{"count":3,"hash":"zz"}`)},
	} {
		t.Run(name, func(t *testing.T) {
			dir, _ := copyGolden(t, gs.server)
			file := filepath.Join(dir, gs.ledgerFile)
			os.WriteFile(file, c.ledger, 0o600)
			if c.peer != nil {
				os.WriteFile(filepath.Join(dir, gs.peerFile), c.peer, 0o600)
			}
			db := openDB(t, dir, nil)
			if l, err := gs.open(db, dir); !errors.Is(err, ledger.ErrCorrupt) {
				if l != nil {
					l.Close()
				}
				t.Fatalf("%v, want ErrCorrupt", err)
			}
			if b, err := os.ReadFile(file); err != nil || !bytes.Equal(b, c.ledger) {
				t.Fatalf("the file changed or moved: %v", err)
			}
			if n := len(exportDB(t, db)); n != 0 {
				t.Fatalf("%d bytes of records imported", n)
			}
		})
	}
	t.Run("torn tail", func(t *testing.T) {
		dir, _ := copyGolden(t, gs.server)
		os.WriteFile(filepath.Join(dir, gs.ledgerFile), append(bytes.Clone(orig), lines[0][:len(lines[0])/2]...), 0o600)
		db := openDB(t, dir, nil)
		l, err := gs.open(db, dir)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if l.Head() != head(t, g.Count, g.Hash) || !bytes.Equal(exportDB(t, db), orig) {
			t.Fatalf("head %+v", l.Head())
		}
	})
}

// TestChargeWithIsOneTransaction: ChargeWith's writes and the record are
// durable together. Success: both are in the store after a reopen. A
// failed write: neither, the charge fails (ErrBroken wrapping
// datastore.ErrNotDurable and the injected failure), the ledger is
// unchanged and refuses later charges. A failed fsync: after a reopen,
// both or neither (never one without the other). also's own error:
// nothing written, the ledger not broken.
func TestChargeWithIsOneTransaction(t *testing.T) {
	rel := func(r int) privacy.Release {
		return privacy.Release{Round: r, Protocol: privacy.ProtocolSSSimple, Randomizer: privacy.RandomizerLaplace, Eps0: 0.25, D: 10, K: 10, N: 100, NP: 120}
	}
	open := func(t *testing.T, dir string, fsys datastore.FileSystem) (*datastore.Store, *ledger.Ledger) {
		db, err := datastore.Open(dir, &datastore.Options{FS: fsys})
		if err != nil {
			t.Fatal(err)
		}
		s, _ := privacy.NewSession(1e-5)
		l, err := ledger.OpenStore(db, ledger.Options{TargetEpsilon: 1e6, TargetDelta: 1e-5, Session: s}, ledger.Former{})
		if err != nil {
			t.Fatal(err)
		}
		return db, l
	}
	put := func(v string) func(tx *datastore.Tx) error {
		return func(tx *datastore.Tx) error { tx.Put("test/pending", "p", []byte(v)); return nil }
	}
	pending := func(db *datastore.Store) (v string, ok bool) {
		db.View(func(tx *datastore.ReadTx) error {
			b, found := tx.Get("test/pending", "p")
			v, ok = string(b), found
			return nil
		})
		return
	}

	dir := t.TempDir()
	db, l := open(t, dir, nil)
	if err := l.ChargeWith(rel(1), put("round 1")); err != nil {
		t.Fatal(err)
	}
	abort := errors.New("abort")
	if err := l.ChargeWith(rel(2), func(tx *datastore.Tx) error { tx.Put("test/pending", "p", []byte("x")); return abort }); !errors.Is(err, abort) || errors.Is(err, ledger.ErrBroken) {
		t.Fatalf("also's error: %v", err)
	}
	if l.Head().Count != 1 {
		t.Fatalf("an aborted charge counted: %+v", l.Head())
	}
	if err := l.ChargeWith(rel(2), put("round 2")); err != nil {
		t.Fatalf("after an aborted charge: %v", err)
	}
	h := l.Head()
	l.Close()
	db.Close()
	db, l = open(t, dir, nil)
	if v, ok := pending(db); l.Head() != h || !ok || v != "round 2" {
		t.Fatalf("reopened: head %+v (want %+v), pending %q %v", l.Head(), h, v, ok)
	}
	l.Close()
	db.Close()

	for _, op := range []ledgertest.Op{ledgertest.Write, ledgertest.TornWrite, ledgertest.Sync} {
		t.Run(op.String(), func(t *testing.T) {
			dir := t.TempDir()
			fsys := &ledgertest.StoreFS{}
			db, l := open(t, dir, fsys)
			if err := l.ChargeWith(rel(1), put("round 1")); err != nil {
				t.Fatal(err)
			}
			h := l.Head()
			fsys.Arm(op, nil)
			err := l.ChargeWith(rel(2), put("round 2"))
			if !errors.Is(err, ledger.ErrBroken) || !errors.Is(err, datastore.ErrNotDurable) || !errors.Is(err, ledgertest.ErrInjected) {
				t.Fatalf("charge with a failing %s: %v", op, err)
			}
			if l.Head() != h || l.LastRound() != 1 {
				t.Fatalf("the failed charge counted: %+v", l.Head())
			}
			if err := l.Charge(rel(3)); !errors.Is(err, ledger.ErrBroken) {
				t.Fatalf("a charge after the failure: %v", err)
			}
			l.Close()
			db.Close()
			db, l = open(t, dir, nil)
			defer db.Close()
			defer l.Close()
			v, _ := pending(db)
			switch n := l.Head().Count; {
			case n == 1 && v == "round 1":
			case n == 2 && v == "round 2" && op == ledgertest.Sync: // written, fsync unknown: an over-count
			default:
				t.Fatalf("reopened after a failed %s: %d records, pending %q", op, n, v)
			}
			if err := l.Verify(h); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRepeatChargeWithWritesAlsoOnly: in the relay's noise ledger a
// repeat of the last release writes no second record, but also's writes
// are committed.
func TestRepeatChargeWithWritesAlsoOnly(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir, nil)
	l, err := ledger.OpenNoiseStore(db, dir, ledger.Options{TargetEpsilon: 1e6, TargetDelta: 1e-5})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r := privacy.Release{Round: 1, Protocol: privacy.ProtocolSecAgg, Randomizer: privacy.RandomizerDiscreteGaussian, D: 10, K: 10, N: 20, SecAggSigma: 300, SecAggSensitivity: 138, CheckInRate: 1}
	if err := l.Charge(r); err != nil {
		t.Fatal(err)
	}
	h := l.Head()
	if err := l.ChargeWith(r, func(tx *datastore.Tx) error { tx.Put("test/share", "1", []byte("s")); return nil }); err != nil {
		t.Fatal(err)
	}
	var got bool
	db.View(func(tx *datastore.ReadTx) error { _, got = tx.Get("test/share", "1"); return nil })
	if l.Head() != h || !got {
		t.Fatalf("repeat: head %+v (want %+v), also's write stored %v", l.Head(), h, got)
	}
}

// TestFileLedgerRefusesChargeWith: ChargeWith needs a store.
func TestFileLedgerRefusesChargeWith(t *testing.T) {
	s, _ := privacy.NewSession(1e-5)
	l, err := ledger.Open(filepath.Join(t.TempDir(), "l.jsonl"), ledger.Options{TargetEpsilon: 10, TargetDelta: 1e-5, Session: s})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r := privacy.Release{Round: 1, Protocol: privacy.ProtocolSecAgg, Randomizer: privacy.RandomizerDiscreteGaussian, D: 10, K: 10, N: 20, SecAggSigma: 300, SecAggSensitivity: 138, CheckInRate: 1}
	if err := l.ChargeWith(r, func(*datastore.Tx) error { return nil }); !errors.Is(err, ledger.ErrInvalidOptions) || l.Head().Count != 0 {
		t.Fatalf("%v", err)
	}
}
