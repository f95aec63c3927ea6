// Package e2e runs Blanket end to end over loopback: the relay and the
// aggregator as the real binaries in their own processes, and a cohort of
// native volunteers over real websockets.
package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/scripts/internal/cohort"
	"github.com/blanket-fl/blanket/scripts/internal/localrun"
	"github.com/blanket-fl/blanket/shared/dataset/sample"
	"github.com/blanket-fl/blanket/shared/envelope"
)

var bins localrun.Binaries

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "blanket-e2e-bin")
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
	if err := measureSpeed(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// deployment starts relay and aggregator for a test with nClients expected
// reporters per round and the given extra aggregator flags.
func deployment(t *testing.T, nClients int, aggArgs ...string) *localrun.Cluster {
	t.Helper()
	var logs io.Writer = io.Discard
	if testing.Verbose() {
		logs = os.Stderr
	}
	n := strconv.Itoa(nClients)
	// The aggregator's default round timeout (60 s) and grace, scaled;
	// a test's own -round-timeout comes later and wins.
	args := append([]string{"-expected-n", n, "-quota", n, "-min-batch", "20",
		"-round-timeout", scaled(time.Minute).String(), "-batch-grace", scaled(time.Minute).String()}, aggArgs...)
	cl, err := localrun.Start(context.Background(), bins, localrun.Options{Dir: t.TempDir(), AggregatorArgs: args, Stdout: logs, Stderr: logs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Stop() })
	return cl
}

// startCohort runs c.Clients native volunteers on the embedded digits
// (c's relay, key, shard size, data set and seeded noise filled in; seed 3
// unless c.Seed is set) and, if extra is not nil, one more volunteer of the
// test's own making, until the test ends.
func startCohort(t *testing.T, cl *localrun.Cluster, c cohort.Config, extra func(ctx context.Context, relay string, key envelope.PublicKey) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	key, err := cohort.FetchKey(ctx, nil, cl.AggregatorURL(), "")
	if err != nil {
		t.Fatal(err)
	}
	c.Relay, c.Key, c.PerUser, c.Dataset, c.SeededNoise = cl.WebSocketURL(), key, 8000/c.Clients, sample.Name, true
	if c.Seed == 0 {
		c.Seed = 3
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		cohort.Run(ctx, c)
	}()
	// The volunteers map their digits (the digits task's feature map)
	// before connecting; rounds counted by the tests start once they are in.
	if err := cl.WaitVolunteers(ctx, c.Clients, scaled(3*time.Minute)); err != nil {
		cancel()
		<-done
		t.Fatal(err)
	}
	extraDone := make(chan struct{})
	go func() {
		defer close(extraDone)
		if extra != nil {
			extra(ctx, cl.WebSocketURL(), key)
		}
	}()
	t.Cleanup(func() { cancel(); <-done; <-extraDone })
}

// waitOK waits up to within (scaled) for `rounds` ok rounds (a round may abort, the
// first while the volunteers connect, so it keeps waiting for one more
// finished round until enough are ok) and returns the ok rounds, failing
// the test if there are fewer.
func waitOK(t *testing.T, cl *localrun.Cluster, rounds int, within time.Duration) []localrun.Round {
	t.Helper()
	var rs []localrun.Round
	for deadline, want := time.Now().Add(scaled(within)), rounds; time.Now().Before(deadline) && len(rs) < rounds; want++ {
		rs = ok(waitRounds(t, cl, want, time.Until(deadline)))
	}
	if len(rs) < rounds {
		t.Fatalf("%d rounds ok, want %d: %+v", len(rs), rounds, rs)
	}
	return rs
}

// waitRounds polls the aggregator until at least `want` rounds have
// finished (any status) or the timeout (scaled) passes, and returns the
// history.
func waitRounds(t *testing.T, cl *localrun.Cluster, want int, timeout time.Duration) []localrun.Round {
	t.Helper()
	timeout = scaled(timeout)
	deadline := time.Now().Add(timeout)
	for {
		rs, err := cl.Rounds(context.Background())
		if err == nil {
			finished := 0
			for _, r := range rs {
				if r.Status != "open" {
					finished++
				}
			}
			if finished >= want {
				return rs
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %v after %v, want %d finished rounds", rs, timeout, want)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// finished is the aggregator's rounds that have ended (any status).
func finished(t *testing.T, cl *localrun.Cluster) []localrun.Round {
	t.Helper()
	rs, err := cl.Rounds(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []localrun.Round
	for _, r := range rs {
		if r.Status != "open" {
			out = append(out, r)
		}
	}
	return out
}

func ok(rs []localrun.Round) []localrun.Round {
	var out []localrun.Round
	for _, r := range rs {
		if r.Status == "ok" {
			out = append(out, r)
		}
	}
	return out
}

// TestTrainingOverLoopback: 60 volunteers train SS-Topk (the live
// defaults: width-1 messages, n_p = n/10 = 6, so 47,100 sealed messages a
// round) for 6 rounds through the real relay and aggregator. The model
// must learn (10 classes: chance is 10%; 120 volunteers reached 34% after
// one round and 69% after five in a run of this test, so 30% after 6
// rounds of 60 leaves a wide margin), every round must be charged, and the
// epsilon spent must grow round by round.
func TestTrainingOverLoopback(t *testing.T) {
	const clients, rounds = 60, 6
	// Two rounds of slack: a round announced while the volunteers connect aborts.
	cl := deployment(t, clients, "-rounds", strconv.Itoa(rounds+2))
	startCohort(t, cl, cohort.Config{Clients: clients}, nil)
	rs := waitOK(t, cl, rounds, 5*time.Minute)[:rounds]
	if len(rs) < rounds {
		t.Fatalf("%d rounds ok, want %d: %+v", len(rs), rounds, rs)
	}
	last := rs[len(rs)-1]
	if last.Accuracy == nil || *last.Accuracy < 0.30 {
		t.Errorf("accuracy after %d rounds = %v, want >= 0.30", rounds, last.Accuracy)
	}
	prev := 0.0
	for _, r := range rs {
		if r.N != clients {
			t.Errorf("round %d: %d reports, want %d", r.Round, r.N, clients)
		}
		if r.EpsilonTightest == nil || *r.EpsilonTightest <= prev {
			t.Errorf("round %d: epsilon %v not above the previous %v", r.Round, r.EpsilonTightest, prev)
			continue
		}
		prev = *r.EpsilonTightest
	}
}

// TestAggregatorRestartResumes stops the aggregator after two rounds and
// starts it again on the same state: it resumes after the last round,
// keeps the model and never under-counts the ledger.
func TestAggregatorRestartResumes(t *testing.T) {
	const clients = 60
	cl := deployment(t, clients, "-rounds", "6") // 4 ok, with slack for rounds announced while the volunteers connect
	startCohort(t, cl, cohort.Config{Clients: clients}, nil)
	before := waitOK(t, cl, 2, 3*time.Minute)
	if err := cl.StopAggregator(); err != nil {
		t.Fatal(err)
	}
	var st localrun.Status
	if err := cl.StartAggregator(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := cl.GetJSON(context.Background(), "/api/status", &st); err != nil {
		t.Fatal(err)
	}
	spentBefore := *before[len(before)-1].EpsilonTightest
	if st.Epsilon < spentBefore {
		t.Errorf("after restart the ledger shows epsilon %v, below %v spent before", st.Epsilon, spentBefore)
	}
	waitOK(t, cl, 4, 3*time.Minute)
	after, err := cl.Rounds(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, r := range after {
		if seen[r.Round] {
			t.Errorf("round %d recorded twice", r.Round)
		}
		seen[r.Round] = true
	}
	good := ok(after)
	if len(good) < 4 {
		t.Fatalf("%d rounds ok after restart, want 4: %+v", len(good), after)
	}
	if e := *good[len(good)-1].EpsilonTightest; e <= spentBefore {
		t.Errorf("epsilon after more rounds %v not above %v", e, spentBefore)
	}
}

// TestRelayKilledMidRound kills the relay (SIGKILL, as a crash) while a
// round is open and restarts it: that round either completes (the relay
// resends a persisted batch) or is abandoned/aborted without a charge, no
// round is counted twice, and training continues.
func TestRelayKilledMidRound(t *testing.T) {
	const clients = 60
	// A quota the cohort cannot reach and a volunteer who checks in but
	// never reports keep each round open until its deadline, so the kill
	// lands mid-round.
	roundTime := scaled(6 * time.Second)
	cl := deployment(t, clients, "-rounds", "3", "-quota", "1000", "-round-timeout", roundTime.String(), "-batch-grace", scaled(5*time.Second).String())
	startCohort(t, cl, cohort.Config{Clients: clients}, silentVolunteer)
	// Rounds announced while the volunteers mapped their digits ended
	// before they connected: count three more from here.
	early := len(finished(t, cl))
	time.Sleep(roundTime / 2)
	if err := cl.KillRelay(); err != nil {
		t.Fatal(err)
	}
	if err := cl.StartRelay(context.Background()); err != nil {
		t.Fatal(err)
	}
	rs := waitRounds(t, cl, early+3, 4*time.Minute)
	seen := map[int]bool{}
	charged := 0.0
	for _, r := range rs {
		if seen[r.Round] {
			t.Errorf("round %d recorded twice", r.Round)
		}
		seen[r.Round] = true
		switch r.Status {
		case "ok":
			if r.EpsilonTightest == nil || *r.EpsilonTightest <= charged {
				t.Errorf("round %d ok but epsilon %v does not grow from %v", r.Round, r.EpsilonTightest, charged)
			} else {
				charged = *r.EpsilonTightest
			}
		default:
			if r.EpsilonTightest != nil && *r.EpsilonTightest > charged {
				t.Errorf("round %d (%s) charged epsilon %v", r.Round, r.Status, *r.EpsilonTightest)
			}
		}
	}
	if len(ok(rs)) == 0 {
		t.Errorf("no round completed after the relay restart: %+v", rs)
	}
}
