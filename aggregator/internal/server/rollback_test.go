package server

import (
	"bytes"
	"errors"
	"testing"

	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/ledger"
)

// TestRestartRefusesRolledBackLedger: after two charged rounds, deleting
// the ledger's last record from the datastore, deleting all its records
// or rewriting one (its recorded epsilon: the chain still links, its hash
// differs) makes New refuse to start (ledger.ErrRollback: the checkpoint
// holds the head) instead of restarting with a lower epsilon.
func TestRestartRefusesRolledBackLedger(t *testing.T) {
	for _, damage := range []string{"last record", "all records", "a record rewritten"} {
		t.Run(damage, func(t *testing.T) {
			dir := t.TempDir()
			relay := newFakeRelay(t)
			h := newHarness(t, dir, relay, nil)
			relay.next(t)
			h.sendBatch(makeBatch(t, h.srv.PublicKey(), testParams(), batchSpec{round: 1, reports: 4, value: constValue(0.6)}))
			relay.next(t)
			h.sendBatch(makeBatch(t, h.srv.PublicKey(), testParams(), batchSpec{round: 2, reports: 4, value: constValue(0.6)}))
			relay.next(t)
			h.stop()
			editStore(t, dir, func(tx *datastore.Tx) {
				switch damage {
				case "last record":
					dropLastRecord(tx)
				case "all records":
					tx.DeleteBucket(ledger.BucketRecords)
				case "a record rewritten":
					k := ledger.RecordKey(2)
					v, _ := tx.Get(ledger.BucketRecords, k)
					w := bytes.Replace(v, []byte(`"eps":`), []byte(`"eps":0.00`), 1)
					if bytes.Equal(v, w) {
						t.Fatalf("record 2 has no eps: %s", v)
					}
					tx.Put(ledger.BucketRecords, k, w)
				}
			})
			cfg := h.cfg
			if _, err := New(cfg); !errors.Is(err, ledger.ErrRollback) {
				t.Fatalf("New after the ledger's %s: %v, want ErrRollback", damage, err)
			}
		})
	}
}
