package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/scripts/internal/cohort"
	"github.com/blanket-fl/blanket/scripts/internal/invariant"
	"github.com/blanket-fl/blanket/scripts/internal/localrun"
	"github.com/blanket-fl/blanket/shared/client"
	"github.com/blanket-fl/blanket/shared/dataset/sample"
	"github.com/blanket-fl/blanket/shared/datastore"
)

// secaggKill is one kill at a step of a streamed secure-summation round
// (docs/secagg.md, "Crash safety"): the server killed as soon as the
// trigger is seen in the aggregator's (agg) or the relay's state
// directory: a file matching a glob, "store:BUCKET", a transaction of the
// directory's datastore writing to BUCKET, or "metrics:NAME", the relay's
// /api/metrics secagg.NAME growing.
type secaggKill struct {
	name    string
	relay   bool   // kill the relay (else the aggregator)
	agg     bool   // the trigger is in the aggregator's directory
	trigger string // a file name (glob) or "store:BUCKET" that marks the step
	// down is how long the server stays down (zero: one second).
	down time.Duration
}

var secaggKills = []secaggKill{
	// After a chunk's 'P' was prepared and its 'M' persisted (answered or
	// about to be): the aggregator resumes collecting.
	{"aggregator after a chunk ('P' in, 'M' persisted)", false, true, "store:secagg/collect", 0},
	// The relay in the middle of its chunks, before its close: the round
	// is aborted, nothing charged.
	{"relay between chunks, before the close", true, true, "store:secagg/collect", 0},
	// Around the charge ('M' of the close): the prepared round is written
	// just before the ledger's charge, so the kill lands before or after
	// it; either the round is resumed, or it was never charged.
	{"aggregator around the charge", false, true, "store:secagg/pending", 0},
	// After the relay persisted its close (before or after the charge).
	{"relay after its close is persisted", true, false, "metrics:closes_persisted", 0},
	// After the relay persisted its noised aggregate share (before or
	// after the aggregator unsharded it).
	{"relay after its aggregate share is persisted", true, false, "metrics:shares_persisted", 0},
	// After the relay persisted its close, down for longer than the batch
	// grace: the aggregator waits for the share while the relay does not
	// answer, and applies it when the restarted relay sends it.
	{"relay after its close is persisted, down past the batch grace", true, false, "metrics:closes_persisted", secaggGrace + 5*time.Second},
}

// relaySecAggCount is the relay's /api/metrics secagg.name (-1: unreadable).
func relaySecAggCount(relay, name string) float64 {
	resp, err := http.Get(relay + "/api/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var m struct {
		SecAgg map[string]any `json:"secagg"`
	}
	if json.NewDecoder(resp.Body).Decode(&m) != nil {
		return -1
	}
	if n, ok := m.SecAgg[name].(float64); ok {
		return n
	}
	return -1
}

// secaggGrace is TestSecAggChaos's -batch-grace.
const secaggGrace = 20 * time.Second

// TestSecAggChaos kills the relay or the aggregator (SIGKILL) at each step
// of a streamed secure-summation round, restarts it on its state, and
// checks after each that a round completes, and at the end that no round
// was charged and lost (strict: every charged round resumes or was aborted
// before its charge), no round is recorded twice, every ok round holds the
// reports the relay acknowledged, and epsilon never decreased.
func TestSecAggChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos tier: real binaries")
	}
	const (
		clients      = 24
		roundTimeout = 15 * time.Second
		grace        = secaggGrace
		warmup       = 5 * time.Second
	)
	logs := &invariant.Logs{}
	if testing.Verbose() {
		logs.Echo = os.Stderr
	}
	dir := t.TempDir()
	n := strconv.Itoa(clients)
	// sigma in PINE fixed-point units (the default clip 0.3 is 39,322
	// units): small enough to learn, large enough that epsilon grows
	// visibly every round (at 300 it saturates near 1.7e5).
	cl, err := localrun.Start(context.Background(), bins, localrun.Options{Dir: dir,
		AggregatorArgs: []string{"-protocol", "secagg", "-sigma", "23000", "-expected-n", n, "-quota", n, "-min-batch", "10", "-epsilon", "1e9",
			"-check-in", "1", "-round-timeout", roundTimeout.String(), "-batch-grace", grace.String()},
		Stdout: logs, Stderr: logs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Stop() })
	ctx, cancel := context.WithCancel(context.Background())
	key, err := cohort.FetchKey(ctx, nil, cl.AggregatorURL(), "")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var sums []cohort.RoundSummary // the volunteers' view, once they stopped
	wg.Go(func() {
		sums, _ = cohort.Run(ctx, cohort.Config{Relay: cl.WebSocketURL(), Key: key, Clients: clients, PerUser: 8000 / clients,
			Dataset: sample.Name, Seed: 3, SeededNoise: true, Backoff: client.Backoff{Initial: 200 * time.Millisecond, Max: 2 * time.Second},
			Logger: slog.New(slog.DiscardHandler)})
	})
	watch := &invariant.EpsilonWatch{}
	wg.Go(func() { watch.Run(ctx, cl) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	waitOK(t, cl, 0, 4*roundTimeout, "first round")
	recoverWithin := 3*roundTimeout + grace + warmup
	for i, k := range secaggKills {
		where := cl.AggregatorDir()
		if !k.agg {
			where = filepath.Join(dir, "relay")
		}
		before, _ := invariant.OKRounds(context.Background(), cl)
		// Wait for the step (at most two rounds), then kill at once.
		found, base := false, -1.0
		w := newStepWatch(where, k.trigger)
		for end := time.Now().Add(2 * recoverWithin); time.Now().Before(end) && !found; time.Sleep(10 * time.Millisecond) {
			if name, ok := strings.CutPrefix(k.trigger, "metrics:"); ok {
				n := relaySecAggCount(cl.RelayURL(), name)
				found = base >= 0 && n > base
				if base < 0 {
					base = n
				}
				continue
			}
			found = w.reached()
		}
		if !found {
			t.Fatalf("kill %d (%s): the step was never reached", i+1, k.name)
		}
		if k.relay {
			err = cl.KillRelay()
		} else {
			err = cl.KillAggregator()
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("kill %d: %s (ok rounds so far %d)", i+1, k.name, before)
		time.Sleep(max(k.down, time.Second))
		if k.relay {
			err = cl.StartRelay(context.Background())
		} else {
			err = cl.StartAggregator(context.Background())
		}
		if err != nil {
			t.Fatal(err)
		}
		waitOK(t, cl, before, recoverWithin, fmt.Sprintf("after kill %d (%s)", i+1, k.name))
	}
	cancel()
	wg.Wait()

	if d := watch.Decreases(); len(d) > 0 {
		t.Errorf("epsilon decreased on /api/status: %v", d)
	}
	_, rs := invariant.OKRounds(context.Background(), cl)
	reports, padded := logs.RelayRounds()
	res := invariant.CheckRounds(rs, reports, padded)
	for _, v := range res.Violations {
		t.Error(v)
	}
	for _, msg := range res.Lost {
		t.Error("a charged secure-summation round was lost: " + msg)
	}
	for _, v := range invariant.CheckAcked(rs, ackedByRound(sums), 10) { // -min-batch 10
		t.Error(v)
	}
	if t.Failed() {
		logBadRounds(t, logs, rs)
	}
	okN, _ := invariant.OKRounds(context.Background(), cl)
	t.Logf("%d kills at secure-summation steps: %d rounds, %d ok", len(secaggKills), len(rs), okN)
	for _, r := range rs {
		eps := "-"
		if r.EpsilonTightest != nil {
			eps = fmt.Sprintf("%.6g (%s)", *r.EpsilonTightest, r.Method)
		}
		t.Logf("round %d: %s n=%d epsilon %s %s", r.Round, r.Status, r.N, eps, r.Detail)
	}
}

// stepWatch watches a state directory for a kill's trigger.
type stepWatch struct {
	dir, glob, bucket string
	off               int64
	file              os.FileInfo
}

func newStepWatch(dir, trigger string) *stepWatch {
	w := &stepWatch{dir: dir, glob: trigger}
	if b, ok := strings.CutPrefix(trigger, "store:"); ok {
		w.glob, w.bucket = "", b
		// Only transactions from now on count.
		w.file, _ = os.Stat(filepath.Join(dir, datastore.LogFile))
		w.off, _ = datastore.Scan(dir, 0, func([]datastore.Op) error { return nil })
	}
	return w
}

// reached reports whether the trigger was seen: the glob matches a file,
// or a transaction committed since the watch began writes to the bucket
// (a log rewritten by a compaction is read again from its start: its
// snapshot holds the bucket only while the step's state exists).
func (w *stepWatch) reached() bool {
	if w.bucket == "" {
		m, _ := filepath.Glob(filepath.Join(w.dir, w.glob))
		return len(m) > 0
	}
	fi, err := os.Stat(filepath.Join(w.dir, datastore.LogFile))
	if err != nil {
		return false
	}
	if w.file == nil || !os.SameFile(w.file, fi) {
		w.file, w.off = fi, 0
	}
	found := false
	w.off, _ = datastore.Scan(w.dir, w.off, func(ops []datastore.Op) error {
		for _, o := range ops {
			if o.Kind == "put" && o.Bucket == w.bucket {
				found = true
			}
		}
		return nil
	})
	return found
}
