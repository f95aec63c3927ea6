package server

import (
	"testing"

	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/ledger"
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
