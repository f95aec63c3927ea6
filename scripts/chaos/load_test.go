package chaos

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/scripts/internal/cohort"
	"github.com/blanket-fl/blanket/scripts/internal/localrun"
	"github.com/blanket-fl/blanket/scripts/internal/procmem"
	"github.com/blanket-fl/blanket/shared/dataset/sample"
)

// TestSecAggLoad measures secure summation with the real binaries on
// loopback (skipped unless BLANKET_SECAGG_LOAD is set): n native volunteers
// (BLANKET_SECAGG_LOAD=n), two ok rounds, and prints the peak resident
// memory (VmHWM) of the relay and the aggregator and each round's
// close-to-model time (the aggregator's finished_at minus closed_at, when
// the relay's close reached it; a baseline without closed_at: the deadline).
// BLANKET_BASELINE_ROOT=<a checkout of another commit> runs the same load
// against that commit's binaries first, in the same run, for the ratio
// (this commit's volunteers drive both, so the baseline must speak the
// same wire format: since PINE went on the wire, a commit with PINE
// frames; the SumVec commit below no longer does):
//
//	git archive 4130593 | (mkdir -p /tmp/base && tar -x -C /tmp/base)
//	BLANKET_SECAGG_LOAD=100 BLANKET_BASELINE_ROOT=/tmp/base go test -count=1 -run SecAggLoad -v ./scripts/chaos/
//
// It asserts nothing about speed (docs: speed only in measurements); it
// fails only if the rounds do not complete.
func TestSecAggLoad(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("BLANKET_SECAGG_LOAD"))
	if n <= 0 || testing.Short() {
		t.Skip("BLANKET_SECAGG_LOAD=n (volunteers) runs it")
	}
	type result struct {
		name             string
		relayHWM, aggHWM int64
		close            []time.Duration
	}
	var rs []result
	run := func(name string, b localrun.Binaries) {
		relayHWM, aggHWM, closes := loadRun(t, b, n)
		rs = append(rs, result{name, relayHWM, aggHWM, closes})
	}
	if root := os.Getenv("BLANKET_BASELINE_ROOT"); root != "" {
		dir := t.TempDir()
		b, err := localrun.Build(context.Background(), root, dir)
		if err != nil {
			t.Fatal(err)
		}
		run("baseline", b)
	}
	run("this commit", bins)
	for _, r := range rs {
		t.Logf("%-12s n=%d: relay peak RSS %d MiB, aggregator peak RSS %d MiB, close-to-model %v",
			r.name, n, r.relayHWM>>20, r.aggHWM>>20, r.close)
	}
}

// loadRun runs n volunteers against binaries b until two rounds are ok
// and returns both servers' VmHWM and the ok rounds' close-to-model times.
func loadRun(t *testing.T, b localrun.Binaries, n int) (relayHWM, aggHWM int64, closes []time.Duration) {
	t.Helper()
	// The quota is above n: a round closes when everyone who checked in
	// has reported, or at its deadline.
	ns := strconv.Itoa(n)
	cl, err := localrun.Start(context.Background(), b, localrun.Options{Dir: t.TempDir(), AggregatorArgs: []string{
		"-protocol", "secagg", "-expected-n", ns, "-quota", strconv.Itoa(2 * n), "-min-batch", "20", "-rounds", "4", "-epsilon", "50",
		"-check-in", "1", "-round-timeout", strconv.Itoa(30+n/10) + "s"}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	key, err := cohort.FetchKey(ctx, nil, cl.AggregatorURL(), "")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		cohort.Run(ctx, cohort.Config{Clients: n, Relay: cl.WebSocketURL(), Key: key, PerUser: max(8000/n, 1),
			Dataset: sample.Name, SeededNoise: true, Seed: 3, Logger: slog.New(slog.DiscardHandler)})
	})
	defer func() { cancel(); wg.Wait() }()
	type rec struct {
		Round      int       `json:"round"`
		Status     string    `json:"status"`
		N          int       `json:"n"`
		Deadline   time.Time `json:"deadline"`
		FinishedAt time.Time `json:"finished_at"`
		ClosedAt   time.Time `json:"closed_at"`
	}
	deadline := time.Now().Add(time.Duration(8+n/20) * time.Minute)
	for time.Now().Before(deadline) {
		time.Sleep(2 * time.Second)
		var recs struct {
			Rounds []rec `json:"rounds"`
		}
		if err := cl.GetJSON(ctx, "/api/rounds", &recs); err != nil {
			continue
		}
		closes = closes[:0]
		for _, r := range recs.Rounds {
			// Rounds where every volunteer took part (the first may start
			// while they connect).
			if r.Status == "ok" && r.N >= n*9/10 {
				// From the relay's close reaching the aggregator (the
				// round may close before its deadline, when everyone who
				// checked in has reported) to the model.
				closed := r.ClosedAt
				if closed.IsZero() { // a baseline without closed_at
					closed = r.Deadline
				}
				closes = append(closes, r.FinishedAt.Sub(closed).Round(time.Millisecond))
			}
		}
		if len(closes) >= 2 {
			return hwmOf(b.Relay), hwmOf(b.Aggregator), closes
		}
	}
	t.Fatalf("fewer than 2 full ok rounds within the time: %v", closes)
	return 0, 0, nil
}

// hwmOf returns the peak resident set (VmHWM) of the running process
// whose argv[0] is bin, in bytes, or -1.
func hwmOf(bin string) int64 {
	pid := procmem.PIDOf(bin)
	if pid == 0 {
		return -1
	}
	return procmem.OfPID(pid, procmem.Peak)
}
