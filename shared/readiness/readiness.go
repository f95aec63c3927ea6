// Package readiness answers a server's GET /readyz: 200 when every
// condition it needs to do its work holds (its datastore open and
// writable, its keys loaded, its peer or its task there), 503 with one
// short line per failed condition otherwise. GET /healthz, beside it, only
// says the process is alive: a load balancer sends traffic on /readyz,
// a supervisor restarts on /healthz (docs/deploy.md).
package readiness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/ledger"
)

// Check is one condition: Probe returns nil when it holds, else why not.
type Check struct {
	Name  string
	Probe func(ctx context.Context) error
}

// Timeout bounds each probe of one request.
const Timeout = 3 * time.Second

// Run probes every check in order and returns one line per failed check
// ("name: reason"); none when the server is ready.
func Run(ctx context.Context, checks []Check) []string {
	var failed []string
	for _, c := range checks {
		pctx, cancel := context.WithTimeout(ctx, Timeout)
		err := c.Probe(pctx)
		cancel()
		if err != nil {
			failed = append(failed, c.Name+": "+strings.ReplaceAll(err.Error(), "\n", " "))
		}
	}
	return failed
}

// Handler serves GET /readyz for checks: "ready" (200), or "not ready"
// and the failed checks' lines (503).
func Handler(checks ...Check) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		failed := Run(r.Context(), checks)
		if len(failed) == 0 {
			io.WriteString(w, "ready\n")
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "not ready\n"+strings.Join(failed, "\n")+"\n")
	})
}

// errProbe is what the store probe's transaction returns to roll back.
var errProbe = errors.New("readiness probe")

// Store checks that db takes writes: a read-write transaction that
// writes nothing and rolls back, so that a closed store (ErrClosed) and
// one that refuses every write after a commit of unknown outcome
// (datastore.ErrNotDurable) are not ready, and a PostgreSQL store's
// connection is tried, without adding a commit to the log.
func Store(db *datastore.Store) Check {
	return Check{Name: "datastore", Probe: func(context.Context) error {
		err := db.Update(func(*datastore.Tx) error { return errProbe })
		switch {
		case errors.Is(err, errProbe):
			return nil
		case err == nil:
			return errors.New("the probe transaction committed")
		}
		return fmt.Errorf("refuses writes: %w", err)
	}}
}

// Fact is a check of a condition the server knows or asks (a key loaded,
// a task given, a peer answering): ok false is not ready, for reason.
func Fact(name, reason string, ok func(context.Context) bool) Check {
	return Check{Name: name, Probe: func(ctx context.Context) error {
		if !ok(ctx) {
			return errors.New(reason)
		}
		return nil
	}}
}

// Ledger checks that l (a privacy or noise ledger) is not suspended: a
// ledger whose head was not yet checked against the one its peer holds,
// or that found a rollback (ledger.ErrRollback), refuses every charge
// (docs/threat-model.md), so its server cannot finish a round.
func Ledger(name string, l *ledger.Ledger) Check {
	return Check{Name: name, Probe: func(context.Context) error {
		if err := l.Suspended(); err != nil {
			return fmt.Errorf("suspended: %w", err)
		}
		return nil
	}}
}
