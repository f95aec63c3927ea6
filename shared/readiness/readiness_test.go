package readiness

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/ledger/ledgertest"
)

func get(t *testing.T, h http.Handler) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(b)
}

// TestStoreProbe: an open store is ready and the probe adds no commit;
// after a commit whose fsync failed (ErrNotDurable: the store refuses
// every later write) and after Close, it is not, with the reason.
func TestStoreProbe(t *testing.T) {
	fsys := &ledgertest.StoreFS{}
	db, err := datastore.Open(t.TempDir(), &datastore.Options{FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	h := Handler(Store(db))
	for range 3 {
		if code, body := get(t, h); code != http.StatusOK || body != "ready\n" {
			t.Fatalf("open store: %d %q", code, body)
		}
	}
	if st := db.Stats(); st.Commits != 0 || st.BytesWritten != 0 {
		t.Fatalf("the probes wrote: %+v", st)
	}
	fsys.Arm(ledgertest.Sync, nil)
	err = db.Update(func(tx *datastore.Tx) error { tx.Put("b", "k", []byte("v")); return nil })
	if !errors.Is(err, datastore.ErrNotDurable) {
		t.Fatalf("write under a failing fsync: %v", err)
	}
	code, body := get(t, h)
	if code != http.StatusServiceUnavailable || !strings.HasPrefix(body, "not ready\ndatastore: refuses writes: ") || !strings.Contains(body, "not durable") {
		t.Fatalf("store after a failed fsync: %d %q", code, body)
	}

	db2, err := datastore.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	db2.Close()
	if code, body := get(t, Handler(Store(db2))); code != http.StatusServiceUnavailable || !strings.Contains(body, "datastore: refuses writes: ") {
		t.Fatalf("closed store: %d %q", code, body)
	}
}

// TestEveryFailedCheckListed: each failed check has its line, in order;
// passing checks have none; the probe's context carries a deadline.
func TestEveryFailedCheckListed(t *testing.T) {
	key, task := false, false
	h := Handler(
		Fact("keys", "the key is not loaded", func(context.Context) bool { return key }),
		Check{Name: "deadline", Probe: func(ctx context.Context) error {
			if _, ok := ctx.Deadline(); !ok {
				return errors.New("no deadline")
			}
			return nil
		}},
		Fact("task", "no task", func(context.Context) bool { return task }),
	)
	if code, body := get(t, h); code != http.StatusServiceUnavailable || body != "not ready\nkeys: the key is not loaded\ntask: no task\n" {
		t.Fatalf("%d %q", code, body)
	}
	key = true
	if code, body := get(t, h); code != http.StatusServiceUnavailable || body != "not ready\ntask: no task\n" {
		t.Fatalf("%d %q", code, body)
	}
	task = true
	if code, body := get(t, h); code != http.StatusOK || body != "ready\n" {
		t.Fatalf("%d %q", code, body)
	}
}
