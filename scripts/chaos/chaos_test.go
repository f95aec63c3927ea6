// Package chaos kills the relay and the aggregator at random points while
// native volunteers train over loopback (the real binaries in their own
// processes, as scripts/e2e runs them) and checks what must survive a
// crash of either server.
//
// The default run makes 4 kills (fixed seed 1; the first one the relay down
// past round timeout + batch grace) and takes about three minutes (166 s
// measured on 2 shared cores, plus the build);
// it is skipped with -short. BLANKET_CHAOS_KILLS=n runs n kills (the heavy
// variant), BLANKET_CHAOS_SEED another schedule, BLANKET_CHAOS_STRICT=1
// fails on rounds the aggregator records as lost (killed between the
// charge and the checkpoint; logged as known otherwise).
package chaos

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/scripts/internal/cohort"
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

// logLines collects both servers' log lines (they share the writer).
type logLines struct {
	mu      sync.Mutex
	partial []byte
	lines   []string
	echo    io.Writer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.echo != nil {
		l.echo.Write(p)
	}
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.lines = append(l.lines, string(l.partial[:i]))
		l.partial = l.partial[i+1:]
	}
	return len(p), nil
}

var (
	reClosed    = regexp.MustCompile(`msg="round closed" round=(\d+) .*reports=(\d+)`)
	rePersisted = regexp.MustCompile(`msg="batch persisted" round=(\d+) `)
)

// relayRounds returns the relay's complete reports per closed round and how
// many times it persisted (padded) a batch per round, from its logs.
func (l *logLines) relayRounds() (reports map[int]int, padded map[int]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	reports, padded = map[int]int{}, map[int]int{}
	for _, line := range l.lines {
		if m := reClosed.FindStringSubmatch(line); m != nil {
			r, _ := strconv.Atoi(m[1])
			n, _ := strconv.Atoi(m[2])
			reports[r] = n
		}
		if m := rePersisted.FindStringSubmatch(line); m != nil {
			r, _ := strconv.Atoi(m[1])
			padded[r]++
		}
	}
	return reports, padded
}

// epsilonWatch polls /api/status and records every epsilon it sees.
type epsilonWatch struct {
	mu       sync.Mutex
	max      float64
	lastOK   time.Time
	decrease []string
}

func (w *epsilonWatch) run(ctx context.Context, cl *localrun.Cluster) {
	for ctx.Err() == nil {
		var st localrun.Status
		if err := cl.GetJSON(ctx, "/api/status", &st); err == nil {
			w.mu.Lock()
			if st.Epsilon < w.max {
				w.decrease = append(w.decrease, fmt.Sprintf("epsilon %v after %v (round %d)", st.Epsilon, w.max, st.Round))
			}
			w.max = max(w.max, st.Epsilon)
			w.lastOK = time.Now()
			w.mu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func okRounds(cl *localrun.Cluster) (int, []localrun.Round) {
	rs, err := cl.Rounds(context.Background())
	if err != nil {
		return -1, nil
	}
	n := 0
	for _, r := range rs {
		if r.Status == "ok" {
			n++
		}
	}
	return n, rs
}

// waitOK waits until more than `before` rounds are ok, or fails.
func waitOK(t *testing.T, cl *localrun.Cluster, before int, within time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		n, rs := okRounds(cl)
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

	logs := &logLines{}
	if testing.Verbose() {
		logs.echo = os.Stderr
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
	watch := &epsilonWatch{}
	wg.Go(func() { watch.run(ctx, cl) })
	t.Cleanup(func() { cancel(); wg.Wait() })

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
		before, _ := okRounds(cl)
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
			before, _ = okRounds(cl)
		}
		waitOK(t, cl, before, recoverWithin, fmt.Sprintf("after kill %d (%s, down %v)", i+1, name, outage))
	}
	cancel()
	wg.Wait()

	watch.mu.Lock()
	if len(watch.decrease) > 0 {
		t.Errorf("epsilon decreased on /api/status: %v", watch.decrease)
	}
	watch.mu.Unlock()
	_, rs := okRounds(cl)
	reports, padded := logs.relayRounds()
	seen := map[int]bool{}
	prev := 0.0
	for _, r := range rs {
		if seen[r.Round] {
			t.Errorf("round %d recorded twice", r.Round)
		}
		seen[r.Round] = true
		if r.Status == "lost" {
			// The aggregator was killed between charging the round and
			// checkpointing it: charged (the ledger does not under-count)
			// but its acknowledged reports never reach the model, although
			// the relay resends the identical batch (answered obsolete).
			msg := fmt.Sprintf("round %d lost: %d acknowledged reports charged but not applied (%s)", r.Round, r.N, r.Detail)
			if os.Getenv("BLANKET_CHAOS_STRICT") != "" {
				t.Error(msg)
			} else {
				t.Log("KNOWN: " + msg)
			}
		}
		if r.Status != "ok" {
			continue
		}
		if got, ok := reports[r.Round]; ok && got != r.N {
			t.Errorf("round %d: the relay acknowledged %d complete reports, the aggregator aggregated %d", r.Round, got, r.N)
		}
		if r.EpsilonTightest == nil || *r.EpsilonTightest <= prev {
			t.Errorf("round %d: epsilon %v does not grow from %v", r.Round, r.EpsilonTightest, prev)
		} else {
			prev = *r.EpsilonTightest
		}
	}
	for r, n := range padded {
		if n > 1 {
			t.Errorf("round %d padded %d times", r, n)
		}
	}
	okN, _ := okRounds(cl)
	t.Logf("%d kills (seed %d): %d rounds, %d ok, %d batches padded", kills, seed, len(rs), okN, len(padded))
}
