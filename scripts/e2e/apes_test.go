package e2e

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/scripts/internal/cohort"
	"github.com/blanket-fl/blanket/scripts/internal/localrun"
	"github.com/blanket-fl/blanket/shared/dataset/sample"
)

// TestAPESOverLoopback: APES through the real relay and aggregator
// (docs/privacy.md, "APES and S-APES"): 20 native volunteers, every other
// one at privacy level 0.5 (its own budget half the announced one), send
// their 7,850 coordinates and their level as 7,851 width-1 messages; the
// relay shuffles the columns and the aggregator reads the budget column,
// calibrates and charges the announced maximum. The announced budget is
// deliberately large (8 per coordinate: this checks the pipeline, not a
// useful privacy level) so that 20 volunteers move the model; every
// volunteer seals 7,851 messages, hence the long round timeout on a
// loaded machine. Every round
// must be ok with all 20 reports and n_p = 20 (no dummies), charged by a
// generic shuffle or APES closed-form row (never a Laplace-specific one),
// the charged epsilon must grow each round, and the model must learn
// (chance is 10%; a run of this test reached 0.86 after one ok round and
// 0.87 after two, charged 62,592 and 125,064 by the PLD of the FMT'23
// generic pair — about the local 62,800 a round, as ε* = 8 amplifies
// nothing — so 0.3 leaves a wide margin).
func TestAPESOverLoopback(t *testing.T) {
	const clients, rounds = 20, 2
	cl := deployment(t, clients, "-protocol", "apes", "-epsl", strconv.Itoa(8*7850), "-rounds", strconv.Itoa(rounds),
		"-epsilon", "1e7", "-check-in", "1", "-min-batch", "10", "-round-timeout", "150s")
	ctx, cancel := context.WithCancel(context.Background())
	key, err := cohort.FetchKey(ctx, nil, cl.AggregatorURL(), "")
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		cohort.Run(ctx, cohort.Config{Relay: cl.WebSocketURL(), Key: key, Clients: clients, PerUser: 8000 / clients,
			Dataset: sample.Name, Seed: 7, SeededNoise: true, Logger: logger,
			Personal: func(i int) float64 { return []float64{0, 0.5}[i%2] }})
	}()
	t.Cleanup(func() { cancel(); <-done })
	var rs []localrun.Round
	for deadline, want := time.Now().Add(9*time.Minute), rounds; time.Now().Before(deadline) && len(rs) < rounds; want++ {
		rs = ok(waitRounds(t, cl, want, time.Until(deadline)))
	}
	if len(rs) < rounds {
		t.Fatalf("%d rounds ok, want %d: %+v", len(rs), rounds, rs)
	}
	prev := 0.0
	for _, r := range rs {
		t.Logf("round %d: n %d, n_p %d, accuracy %v, epsilon %v by %s", r.Round, r.N, r.NP, deref(r.Accuracy), deref(r.EpsilonTightest), r.Method)
		if r.N != clients || r.NP != clients {
			t.Errorf("round %d: %d reports, n_p %d, want %d and %d", r.Round, r.N, r.NP, clients, clients)
		}
		if m := strings.ToLower(r.Method); strings.Contains(m, "laplace)") || strings.Contains(m, "r_{") || strings.Contains(m, "bennett") {
			t.Errorf("round %d: charged by the randomizer-specific %q", r.Round, r.Method)
		}
		if r.EpsilonTightest == nil || *r.EpsilonTightest <= prev {
			t.Errorf("round %d: epsilon %v not above the previous %v", r.Round, r.EpsilonTightest, prev)
			continue
		}
		prev = *r.EpsilonTightest
	}
	if last := rs[len(rs)-1]; last.Accuracy == nil || *last.Accuracy < 0.3 {
		t.Errorf("accuracy after %d rounds = %v, want >= 0.3", rounds, deref(last.Accuracy))
	}
}

func deref(p *float64) float64 {
	if p == nil {
		return -1
	}
	return *p
}
