package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/scripts/internal/cohort"
	"github.com/blanket-fl/blanket/scripts/internal/localrun"
	"github.com/blanket-fl/blanket/shared/dataset/sample"
	"github.com/blanket-fl/blanket/shared/datastore/pgtest"
)

// TestRelayPrepWorkerPostgres: the relay on PostgreSQL with -prep-jobs
// and one `relay prep-worker` process beside it, the relay leaving its
// batches to the replicas for 3 s before it helps. A round is ok with all
// 20 reports, every one of them prepared as a job (the relay's
// secagg.prepared.apart), and the prep-worker's own /metrics counts the
// jobs it prepared. Then the prep-worker is killed (SIGKILL): a later
// round is again ok with all 20, the relay completing its own jobs (its
// secagg.prep_jobs_completed).
func TestRelayPrepWorkerPostgres(t *testing.T) {
	if _, err := pgtest.Check(); err != nil {
		if os.Getenv("BLANKET_REQUIRE_POSTGRES") == "1" {
			t.Fatalf("PostgreSQL: %v; BLANKET_REQUIRE_POSTGRES=1 requires it", err)
		}
		t.Skipf("PostgreSQL tier skipped: %v", err)
	}
	pg, err := pgtest.StartCluster()
	if err != nil {
		t.Fatalf("PostgreSQL: %v", err)
	}
	t.Cleanup(func() { pg.Close() })
	const clients = 20
	schema := fmt.Sprintf("e2e_relay_%d", os.Getpid())
	var logs io.Writer = io.Discard
	if testing.Verbose() {
		logs = os.Stderr
	}
	n := strconv.Itoa(clients)
	cl, err := localrun.Start(context.Background(), bins, localrun.Options{Dir: t.TempDir(), Stdout: logs, Stderr: logs,
		AggregatorArgs: []string{"-protocol", "secagg", "-expected-n", n, "-quota", n, "-min-batch", "20", "-rounds", "4",
			"-epsilon", "50", "-check-in", "1", "-round-timeout", scaled(40 * time.Second).String(), "-batch-grace", scaled(time.Minute).String()},
		RelayArgs: []string{"-store", pg.DSN, "-store-schema", schema, "-prep-jobs", "-prep-help-after", "3s"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Stop() })

	// The prep-worker, with its operator's endpoint on a free port.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ops := ln.Addr().String()
	ln.Close()
	worker := exec.Command(bins.Relay, "prep-worker", "-store", pg.DSN, "-store-schema", schema, "-listen", ops, "-log-level", "warn")
	worker.Stdout, worker.Stderr = logs, logs
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { worker.Process.Kill(); worker.Wait() })
	workerJobs := func() float64 {
		resp, err := http.Get("http://" + ops + "/metrics")
		if err != nil {
			return -1
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), `blanket_relay_prep_jobs_total{result="ok"} `); ok {
				f, _ := strconv.ParseFloat(v, 64)
				return f
			}
		}
		return -1
	}
	// prepared is the relay's reports prepared as jobs and outside them,
	// and the jobs it completed itself.
	prepared := func() (apart, here, own float64) {
		var m struct {
			SecAgg struct {
				Prepared map[string]float64 `json:"prepared"`
				PrepJobs float64            `json:"prep_jobs_completed"`
			} `json:"secagg"`
		}
		if err := cl.GetJSONFrom(context.Background(), cl.RelayURL(), "/api/metrics", &m); err != nil {
			t.Fatal(err)
		}
		return m.SecAgg.Prepared["apart"], m.SecAgg.Prepared["here"], m.SecAgg.PrepJobs
	}

	ctx, cancel := context.WithCancel(context.Background())
	key, err := cohort.FetchKey(ctx, nil, cl.AggregatorURL(), "")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		cohort.Run(ctx, cohort.Config{Relay: cl.WebSocketURL(), Clients: clients, Seed: 5, Key: key, PerUser: 8000 / clients,
			Dataset: sample.Name, SeededNoise: true, Logger: slog.New(slog.DiscardHandler)})
		close(done)
	}()
	t.Cleanup(func() { cancel(); <-done })
	if err := cl.WaitVolunteers(ctx, clients, scaled(3*time.Minute)); err != nil {
		t.Fatal(err)
	}
	before, _ := cl.Rounds(ctx)
	rs := waitOK(t, cl, len(ok(before))+1, 4*time.Minute)
	if r := rs[len(rs)-1]; r.N != clients {
		t.Fatalf("round %d: %d reports accepted, want %d", r.Round, r.N, clients)
	}
	apart, here, ownBefore := prepared()
	if apart < clients || here != 0 {
		t.Errorf("reports prepared as jobs %v, outside them %v: want every report (%d or more) as jobs", apart, here, clients)
	}
	if j := workerJobs(); j <= 0 {
		t.Errorf("the prep-worker's /metrics counts %v jobs prepared, want some", j)
	}
	t.Logf("before the kill: %v reports prepared as jobs, the prep-worker completed %v jobs", apart, workerJobs())

	// The prep-worker dies: the relay prepares its jobs itself after 3 s.
	worker.Process.Kill()
	worker.Wait()
	before, _ = cl.Rounds(ctx)
	rs = waitOK(t, cl, len(ok(before))+1, 4*time.Minute)
	if r := rs[len(rs)-1]; r.N != clients {
		t.Fatalf("round %d after the prep-worker's kill: %d reports accepted, want %d", r.Round, r.N, clients)
	}
	if _, here, own := prepared(); here != 0 || own <= ownBefore {
		t.Errorf("after the kill: %v reports prepared outside the jobs, the relay completed %v jobs itself (%v before): want it to do its own jobs", here, own, ownBefore)
	}
}
