package server

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/blanket-fl/blanket/aggregator/internal/rounds"
	"github.com/blanket-fl/blanket/aggregator/internal/sealkey"
	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/ledger"
	"github.com/blanket-fl/blanket/shared/wire"
)

// openStateLedger opens the ledger in the datastore of a stopped server's
// state directory; done closes it and the store (before a server opens
// the directory again).
func openStateLedger(t *testing.T, dir string, o ledger.Options) (l *ledger.Ledger, done func()) {
	t.Helper()
	db, err := datastore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err = ledger.OpenStore(db, o, ledger.Former{})
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	return l, func() { l.Close(); db.Close() }
}

// editStore changes a stopped server's datastore (tampering, in tests).
func editStore(t *testing.T, dir string, fn func(tx *datastore.Tx)) {
	t.Helper()
	db, err := datastore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *datastore.Tx) error { fn(tx); return nil }); err != nil {
		t.Fatal(err)
	}
}

// dropLastRecord deletes the ledger's last record (a ledger cut by one).
func dropLastRecord(tx *datastore.Tx) {
	if keys := tx.Keys(ledger.BucketRecords); len(keys) > 0 {
		tx.Delete(ledger.BucketRecords, keys[len(keys)-1])
	}
}

// TestFormerDirectoryImports (issue 24): a class directory in the format
// before the datastore (key.bin, ledger.jsonl, relay-anchor.json,
// state.json) opens on the first start with the same key, the same
// ledger head and spent epsilon, the same rounds and the relay's head;
// its files are kept read-only as NAME.imported, and a second start does
// not import again.
func TestFormerDirectoryImports(t *testing.T) {
	dir := t.TempDir()
	relay := newFakeRelay(t)
	h := newHarness(t, dir, relay, nil)
	relay.next(t)
	h.sendBatch(makeBatch(t, h.srv.PublicKey(), testParams(), batchSpec{round: 1, reports: 4, value: constValue(0.6)}))
	relay.next(t)
	fp, head, st := h.srv.Fingerprint(), h.srv.ledger.Head(), h.srv.Status()
	peer := wire.Head{Count: 3, Hash: [32]byte{5}}
	if err := h.srv.peer.Record(peer); err != nil {
		t.Fatal(err)
	}
	h.stop()

	// The same state, as files.
	old := t.TempDir()
	var lines bytes.Buffer
	if _, err := ledger.ExportDir(dir, &lines); err != nil {
		t.Fatal(err)
	}
	var key []byte
	db, err := datastore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.View(func(tx *datastore.ReadTx) error {
		k, _ := tx.Get(sealkey.BucketKeys, sealkey.KeyName)
		key = bytes.Clone(k)
		return nil
	})
	db.Close()
	ck := loadCheckpoint(t, dir)
	p, _ := ledger.OpenPeer(filepath.Join(old, RelayAnchorFile))
	for name, b := range map[string][]byte{KeyFile: key, LedgerFile: lines.Bytes()} {
		if err := os.WriteFile(filepath.Join(old, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := errors.Join(p.Record(peer), rounds.FileStore{Dir: old}.SaveState(ck)); err != nil {
		t.Fatal(err)
	}

	for i := range 2 {
		cfg := h.cfg
		cfg.StateDir = old
		s, err := New(cfg)
		if err != nil {
			t.Fatalf("start %d: %v", i+1, err)
		}
		got := s.Status()
		if s.Fingerprint() != fp || s.ledger.Head() != head || s.peerHead() != peer || got.Epsilon != st.Epsilon || got.Round != st.Round {
			t.Fatalf("start %d: fingerprint %s (want %s), head %+v (want %+v), peer %+v, status %+v (want %+v)",
				i+1, s.Fingerprint(), fp, s.ledger.Head(), head, s.peerHead(), got, st)
		}
		s.Close()
		for _, name := range []string{KeyFile, LedgerFile, RelayAnchorFile, CheckpointFile} {
			if fi, err := os.Stat(filepath.Join(old, name+ledger.ImportedSuffix)); err != nil || fi.Mode().Perm() != 0o400 {
				t.Fatalf("%s not kept read-only: %v", name, err)
			}
		}
	}
	var again bytes.Buffer
	if _, err := ledger.ExportDir(old, &again); err != nil || !bytes.Equal(again.Bytes(), lines.Bytes()) {
		t.Fatalf("the imported ledger's export differs (%v)", err)
	}
}
