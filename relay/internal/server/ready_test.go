package server

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/readiness"
)

// TestReadyz: GET /readyz is 503, naming each condition that fails,
// until the relay has the aggregator's key and reaches the aggregator;
// and its noise ledger is checked; then 200, while GET /healthz is 200 throughout; a suspended noise
// ledger and a store that refuses writes make it 503 again.
func TestReadyz(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db, err := datastore.Open(t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		ledgerOpt, nl := withNoiseLedger(t, t.TempDir(), 100)
		agg := &statusAgg{keyAgg: keyAgg{key: pubKey(t, 1), fails: 1 << 20}}
		w := newWebRelay(t, agg, nil, time.Minute, ledgerOpt, func(c *Config) {
			c.Ready = []readiness.Check{readiness.Store(db), readiness.Ledger("noise ledger", nl)}
		})
		defer w.close()
		ready := func(want int, lines ...string) {
			t.Helper()
			resp, b := w.get("/readyz", nil)
			if resp.StatusCode != want {
				t.Errorf("GET /readyz: HTTP %d %q, want %d", resp.StatusCode, b, want)
			}
			for _, l := range lines {
				if !strings.Contains(string(b), "\n"+l) {
					t.Errorf("GET /readyz: %q lacks %q", b, l)
				}
			}
			if resp, _ := w.get("/healthz", nil); resp.StatusCode != http.StatusOK {
				t.Errorf("GET /healthz: HTTP %d", resp.StatusCode)
			}
		}
		synctest.Wait()
		// A noise ledger starts suspended until its head is checked
		// against the aggregator's copy (anchor.go; this aggregator has
		// no /v1/anchor: the test resumes it below).
		ready(http.StatusServiceUnavailable, "keys: the aggregator's public key is not fetched yet", "aggregator: unreachable",
			"noise ledger: suspended: ")
		nl.Resume()

		agg.mu.Lock()
		agg.fails, agg.status = 0, `{"round": 1}`
		agg.mu.Unlock()
		time.Sleep(2 * time.Second) // past the key's retry (RetryMax 1 s) and the status cache
		synctest.Wait()
		ready(http.StatusOK)

		nl.Suspend(errors.New("the anchor is not checked yet"))
		ready(http.StatusServiceUnavailable, "noise ledger: suspended: the anchor is not checked yet")
		nl.Resume()
		ready(http.StatusOK)

		db.Close()
		ready(http.StatusServiceUnavailable, "datastore: refuses writes: ")
	})
}
