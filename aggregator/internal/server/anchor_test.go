package server

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/rounds"
	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/ledger"
	"github.com/blanket-fl/blanket/shared/wire"
)

// anchorRelay is a fakeRelay that also serves the relay's /v1/anchor:
// held is the aggregator's head it holds (updated by POSTs), own the
// relay's noise-ledger head; down answers every anchor request 503.
type anchorRelay struct {
	*fakeRelay
	srv       *httptest.Server
	mu        sync.Mutex
	held, own wire.Head
	down      bool
}

func newAnchorRelay(t *testing.T) *anchorRelay {
	a := &anchorRelay{fakeRelay: newFakeRelay(t)}
	inner := a.fakeRelay.srv.Config.Handler
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != anchorPath {
			inner.ServeHTTP(w, r)
			return
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.down {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			in, err := wire.ParseAnchor(b)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			a.held = in.Own
		}
		b, _ := (&wire.Anchor{Own: a.own, Held: a.held}).MarshalBinary()
		w.Write(b)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *anchorRelay) heldCount() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.held.Count
}

func anchored(a *anchorRelay) func(*Config) {
	return func(c *Config) { c.Anchor, c.RelayURL = true, a.srv.URL }
}

// copyDir copies the regular files of src into a new directory dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.RemoveAll(dst); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err == nil {
			err = os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestAnchorRefusesTampering (issue 18, item 2): after two charged rounds
// whose head the relay holds, each tampering case makes New refuse to
// start with ledger.ErrRollback — deleting the checkpoint and the
// ledger's last record from the datastore (the checkpoint's own check has
// nothing to compare), deleting the whole datastore, restoring the whole
// state directory from a copy taken after round 1 — while an untampered
// restart starts.
func TestAnchorRefusesTampering(t *testing.T) {
	for _, damage := range []string{"none", "the checkpoint and the ledger's last record", "the datastore (ledger, checkpoint, key)", "older copy"} {
		t.Run(damage, func(t *testing.T) {
			dir := t.TempDir()
			old := filepath.Join(t.TempDir(), "old")
			relay := newAnchorRelay(t)
			h := newHarness(t, dir, relay.fakeRelay, anchored(relay))
			relay.next(t)
			h.sendBatch(makeBatch(t, h.srv.PublicKey(), testParams(), batchSpec{round: 1, reports: 4, value: constValue(0.6)}))
			relay.next(t)
			copyDir(t, dir, old) // the ledger holds round 1 only
			h.sendBatch(makeBatch(t, h.srv.PublicKey(), testParams(), batchSpec{round: 2, reports: 4, value: constValue(0.6)}))
			relay.next(t)
			deadline := time.Now().Add(20 * time.Second)
			for relay.heldCount() != 2 && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if n := relay.heldCount(); n != 2 {
				t.Fatalf("the relay holds %d records of the aggregator's ledger, want 2", n)
			}
			h.stop()
			var err error
			switch damage {
			case "the checkpoint and the ledger's last record":
				editStore(t, dir, func(tx *datastore.Tx) {
					tx.DeleteBucket(rounds.BucketState)
					dropLastRecord(tx)
				})
			case "the datastore (ledger, checkpoint, key)":
				err = os.Remove(filepath.Join(dir, datastore.LogFile))
			case "older copy":
				copyDir(t, old, dir)
			}
			if err != nil {
				t.Fatal(err)
			}
			s, err := New(h.cfg)
			if damage == "none" {
				if err != nil {
					t.Fatalf("untampered restart refused: %v", err)
				}
				s.Close()
				return
			}
			if !errors.Is(err, ledger.ErrRollback) {
				if s != nil {
					s.Close()
				}
				t.Fatalf("New after %s: %v, want ErrRollback", damage, err)
			}
		})
	}
}

// TestAnchorUnreachableRelaySuspends: with the relay's anchor unreachable
// at start the aggregator starts, refuses every charge and announces
// nothing; once the relay answers, it checks the ledger and announces.
func TestAnchorUnreachableRelaySuspends(t *testing.T) {
	relay := newAnchorRelay(t)
	relay.down = true
	h := newHarness(t, t.TempDir(), relay.fakeRelay, anchored(relay))
	if _, err := h.srv.ledger.CanCharge(h.srv.Current().Proto.Release(1, 4, int(testParams().NP))); !errors.Is(err, ledger.ErrSuspended) {
		t.Fatalf("unchecked ledger admits a charge: %v", err)
	}
	relay.none(t, time.Second)
	relay.mu.Lock()
	relay.down = false
	relay.mu.Unlock()
	if a := relay.next(t); a.Round != 1 {
		t.Fatalf("announced round %d", a.Round)
	}
	if err := h.srv.ledger.Suspended(); err != nil {
		t.Fatal(err)
	}
}
