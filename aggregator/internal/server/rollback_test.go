package server

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/blanket-fl/blanket/shared/ledger"
)

// TestRestartRefusesRolledBackLedger: after two charged rounds, deleting
// the ledger's last line, emptying it or deleting it makes New refuse to
// start (ledger.ErrRollback) instead of restarting with a lower epsilon.
func TestRestartRefusesRolledBackLedger(t *testing.T) {
	for _, damage := range []string{"last line", "emptied", "deleted"} {
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
			path := filepath.Join(dir, LedgerFile)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			switch damage {
			case "last line":
				lines := bytes.SplitAfter(data, []byte("\n"))
				err = os.WriteFile(path, bytes.Join(lines[:1], nil), 0o600)
			case "emptied":
				err = os.WriteFile(path, nil, 0o600)
			case "deleted":
				err = os.Remove(path)
			}
			if err != nil {
				t.Fatal(err)
			}
			cfg := h.cfg
			if _, err := New(cfg); !errors.Is(err, ledger.ErrRollback) {
				t.Fatalf("New after the ledger's %s: %v, want ErrRollback", damage, err)
			}
		})
	}
}
