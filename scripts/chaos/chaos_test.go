// Package chaos kills the relay and the aggregator at random points while
// native volunteers train over loopback (the real binaries in their own
// processes, as scripts/e2e runs them) and checks what must survive a
// crash of either server.
//
// The default run makes 4 kills (fixed seed 1; the first one the relay down
// past round timeout + batch grace) and takes about three minutes (166 s
// measured on 2 shared cores, plus the build);
// it is skipped with -short. BLANKET_CHAOS_KILLS=n runs n kills (the heavy
// variant), BLANKET_CHAOS_SEED another schedule. A round the aggregator
// records as lost (charged, never applied) fails it: a relay re-sends a
// charged round's identical batch until it is applied (seeds 1 to 3 with
// 4 kills, and 4 and 5 with 8 kills beside a busy loop, passed so).
//
// TestSecAggChaos kills one server at each step of a streamed
// secure-summation round, and the relay once for longer than the batch
// grace (secagg_test.go; 83 s measured on 2 quiet cores, build included),
// and fails on any charged round lost. TestSecAggLoad (skipped
// unless BLANKET_SECAGG_LOAD is set) measures peak RSS and close-to-model
// time (load_test.go). TestReplicasFailover (replicas_test.go) runs two
// replicas of each party on PostgreSQL (one a hot standby) and two edge
// relays behind HAProxy, and kills an edge, each active server, both at
// once, and restarts PostgreSQL, mid-round.
package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/scripts/internal/cohort"
	"github.com/blanket-fl/blanket/scripts/internal/invariant"
	"github.com/blanket-fl/blanket/scripts/internal/localrun"
	"github.com/blanket-fl/blanket/shared/client"
	"github.com/blanket-fl/blanket/shared/dataset/sample"
)

var bins localrun.Binaries

func TestMain(m *testing.M) {
	if !shortFlag() {
		dir, err := os.MkdirTemp("", "blanket-chaos-bin")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		bins, err = localrun.Build(context.Background(), root, dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		code := m.Run()
		os.RemoveAll(dir)
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// shortFlag reports -short before testing.Init parses it in m.Run.
func shortFlag() bool {
	for _, a := range os.Args[1:] {
		if a == "-test.short" || a == "-test.short=true" || a == "-short" {
			return true
		}
	}
	return false
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// waitOK waits until more than `before` rounds are ok, or fails.
// logBadRounds prints what both servers logged about every round not ok
// (CI keeps no server logs: this is how a failure there explains itself).
func logBadRounds(t *testing.T, logs *invariant.Logs, rs []localrun.Round) {
	t.Helper()
	for _, r := range rs {
		if r.Status == "ok" {
			continue
		}
		t.Logf("round %d (%s): what the servers logged about it:", r.Round, r.Status)
		for _, l := range logs.RoundLines(r.Round) {
			t.Log("  " + l)
		}
	}
}

func waitOK(t *testing.T, cl *localrun.Cluster, before int, within time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		n, rs := invariant.OKRounds(context.Background(), cl)
		if n > before {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no round completed within %v (ok rounds %d): %+v", what, within, before, rs)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestChaos: the relay and the aggregator are killed (SIGKILL) at random
// points, each down for a random outage (the first, and a quarter of the
// others, longer than round timeout + batch grace: the case that used to
// wedge training), then
// restarted on their state. After every restart a round must complete
// within 2 round timeouts + grace + the relay's warm-up; at the end: epsilon
// on /api/status never decreased (so the ledger never under-counted across
// aggregator restarts), no round is recorded twice, every ok round holds
// exactly the reports the relay acknowledged for it (no acknowledged report
// lost outside aborted/abandoned rounds), and the relay padded each round
// at most once (a restart resends the persisted batch).
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos tier: real binaries, about two minutes")
	}
	const (
		clients      = 30
		roundTimeout = 12 * time.Second
		grace        = 6 * time.Second
		warmup       = 5 * time.Second // the relay's default -warmup
	)
	kills := envInt("BLANKET_CHAOS_KILLS", 4)
	seed := uint64(envInt("BLANKET_CHAOS_SEED", 1))
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))

	logs := &invariant.Logs{}
	if testing.Verbose() {
		logs.Echo = os.Stderr
	}
	n := strconv.Itoa(clients)
	cl, err := localrun.Start(context.Background(), bins, localrun.Options{Dir: t.TempDir(),
		// SS-Double with k = 20 and n_p = 3: 20 sealed messages per
		// volunteer and about 23,000 sealed dummies per batch, so that a
		// round of 30 volunteers (in this process) is padded, sent and
		// opened well within its timeout on 2 shared cores.
		AggregatorArgs: []string{"-protocol", "ss-double", "-k", "20", "-np", "3", "-expected-n", n, "-quota", n, "-min-batch", "10", "-epsilon", "1e9",
			"-round-timeout", roundTimeout.String(), "-batch-grace", grace.String()},
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
	wg.Go(func() {
		cohort.Run(ctx, cohort.Config{Relay: cl.WebSocketURL(), Key: key, Clients: clients, PerUser: 8000 / clients,
			Dataset: sample.Name, Seed: 3, SeededNoise: true, Backoff: client.Backoff{Initial: 200 * time.Millisecond, Max: 2 * time.Second},
			Logger: slog.New(slog.DiscardHandler)})
	})
	watch := &invariant.EpsilonWatch{}
	wg.Go(func() { watch.Run(ctx, cl) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	// The volunteers map their digits before connecting (the digits
	// task's feature map): the chaos starts once they are in.
	if err := cl.WaitVolunteers(ctx, clients, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	waitOK(t, cl, 0, 3*roundTimeout, "first round")
	recoverWithin := 2*roundTimeout + grace + warmup
	for i := range kills {
		time.Sleep(time.Duration(rng.Int64N(int64(roundTimeout))))
		relay := rng.IntN(2) == 0
		outage := 500*time.Millisecond + time.Duration(rng.Int64N(int64(2500*time.Millisecond)))
		if i == 0 || rng.IntN(4) == 0 {
			// The first kill is always the wedge the chaos tester found: the
			// relay down past round timeout + batch grace.
			relay, outage = i == 0 || relay, roundTimeout+grace+2*time.Second
		}
		name := "aggregator"
		if relay {
			name = "relay"
		}
		before, _ := invariant.OKRounds(context.Background(), cl)
		t.Logf("kill %d: %s, down %v (ok rounds so far %d)", i+1, name, outage, before)
		if relay {
			err = cl.KillRelay()
		} else {
			err = cl.KillAggregator()
		}
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(outage)
		if relay {
			err = cl.StartRelay(context.Background())
		} else {
			err = cl.StartAggregator(context.Background())
		}
		if err != nil {
			t.Fatal(err)
		}
		if before < 0 {
			before, _ = invariant.OKRounds(context.Background(), cl)
		}
		waitOK(t, cl, before, recoverWithin, fmt.Sprintf("after kill %d (%s, down %v)", i+1, name, outage))
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
		t.Error("a charged round was lost: " + msg)
	}
	if t.Failed() {
		logBadRounds(t, logs, rs)
	}
	okN, _ := invariant.OKRounds(context.Background(), cl)
	t.Logf("%d kills (seed %d): %d rounds, %d ok, %d batches padded", kills, seed, len(rs), okN, len(padded))
}
