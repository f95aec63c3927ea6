package e2e

import (
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/scripts/internal/cohort"
	"github.com/blanket-fl/blanket/shared/task"
)

// TestAPESOverLoopback: APES through the real relay and aggregator
// (docs/privacy.md, "APES and S-APES"): 20 native volunteers, every other
// one at privacy level 0.5 (its own budget half the announced one), send
// their d coordinates (the digits task's: 8,340 with scatter1) and their
// level as d+1 width-1 messages; the relay shuffles the columns and the
// aggregator reads the budget column, calibrates and charges the announced
// maximum. The announced budget is deliberately large (8 per coordinate:
// this checks the pipeline, not a useful privacy level) so that 20
// volunteers move the model; every volunteer seals d+1 messages, hence the
// long round timeout on a loaded machine. Every round
// must be ok with all 20 reports and n_p = 20 (no dummies), charged by a
// generic shuffle or APES closed-form row (never a Laplace-specific one),
// the charged epsilon must grow each round, and the model must learn
// (chance is 10%; a run of this test at d = 8,340, `go test -v -run
// TestAPESOverLoopback ./scripts/e2e`, reached 0.9245 after one ok round
// and 0.925 after two, charged 66,496 and 132,862 by the PLD of the FMT'23
// generic pair — about the local 8 x 8,340 = 66,720 a round, as ε* = 8
// amplifies nothing — so 0.3 leaves a wide margin).
func TestAPESOverLoopback(t *testing.T) {
	const clients, rounds = 20, 2
	digits, err := task.Digits()
	if err != nil {
		t.Fatal(err)
	}
	cl := deployment(t, clients, "-protocol", "apes", "-epsl", strconv.Itoa(8*digits.D()), "-rounds", strconv.Itoa(rounds),
		"-epsilon", "1e7", "-check-in", "1", "-min-batch", "10", "-round-timeout", scaled(45*time.Second).String())
	c := cohort.Config{Clients: clients, Seed: 7, Personal: func(i int) float64 { return []float64{0, 0.5}[i%2] }}
	if testing.Verbose() {
		c.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	startCohort(t, cl, c, nil)
	rs := waitOK(t, cl, rounds, 9*time.Minute)
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
