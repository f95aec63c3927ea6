package dashboard

import (
	"strings"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
)

// TestExplainAbort: a round cancelled below the minimum batch is said in
// numbers (received of expected, the time limit, the minimum), with advice
// that fits the cause: a busy computer with simulated volunteers, too few
// connected, or students who did not press Start.
func TestExplainAbort(t *testing.T) {
	base := AbortFacts{Round: 7, Status: checkpoint.StatusAborted, Reason: "below min batch", Received: 12, CheckedIn: 40,
		Expected: 400, MinBatch: 200, Timeout: 30 * time.Second}
	busy := base
	busy.Simulated = 400
	msg, adv := ExplainAbort(busy)
	for _, want := range []string{"Round 7", "only 12 of the 400 connected volunteers", "within 30 s", "at least 200", "Nothing was charged"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if !strings.Contains(adv, "-clients 100") || !strings.Contains(adv, "busy") {
		t.Errorf("advice for a busy computer: %q", adv)
	}
	few := base
	few.Expected, few.Received = 4, 3
	if _, adv := ExplainAbort(few); !strings.Contains(adv, "Fewer volunteers are connected (4) than a round needs (200)") {
		t.Errorf("advice for too few connected: %q", adv)
	}
	idle := base
	if _, adv := ExplainAbort(idle); !strings.Contains(adv, "press Start") {
		t.Errorf("advice for a class that did not send: %q", adv)
	}
	ab := AbortFacts{Round: 3, Status: checkpoint.StatusAbandoned, Reason: "no batch"}
	if msg, adv := ExplainAbort(ab); !strings.Contains(msg, "Round 3 was dropped") || !strings.Contains(adv, "relay") {
		t.Errorf("abandoned: %q / %q", msg, adv)
	}
	// Issue 23: a running relay that said no is not "maybe not running";
	// the words name the real cause.
	for _, c := range []struct {
		facts   AbortFacts
		want    []string
		notWant string
	}{
		{AbortFacts{Round: 1, Status: checkpoint.StatusAbandoned,
			Reason: "announcement not delivered before the deadline: relay answered 409 Conflict: round: round number not after the last one: round 1 is not after round 5"},
			[]string{"did not open it", "round 1 is not after round 5"}, "still running"},
		{AbortFacts{Round: 6, Status: checkpoint.StatusAbandoned,
			Reason: "the relay refused the round: its own privacy budget is spent (round 6 would bring epsilon to 4.2, target 4)"},
			[]string{"privacy budget is spent", "4.2"}, "still running"},
		{AbortFacts{Round: 2, Status: checkpoint.StatusAborted, Received: 3,
			Reason: "the relay released nothing: more than half of the round's reports failed verification (honest reports almost never do)"},
			[]string{"declared invalid", "released nothing"}, "at least"},
		{AbortFacts{Round: 2, Status: checkpoint.StatusAborted, Received: 1, MinBatch: 1,
			Reason: "below the relay's own min batch: fewer reports passed verification than the relay's minimum, which no announcement lowers"},
			[]string{"relay's own minimum batch"}, "at least 1"},
	} {
		msg, adv := ExplainAbort(c.facts)
		for _, w := range c.want {
			if !strings.Contains(msg+" "+adv, w) {
				t.Errorf("%q: %q / %q lacks %q", c.facts.Reason, msg, adv, w)
			}
		}
		if strings.Contains(msg+" "+adv, c.notWant) {
			t.Errorf("%q: %q / %q says %q", c.facts.Reason, msg, adv, c.notWant)
		}
	}
}

// TestLastAbort: the latest cancelled round counts only while no round
// updated the model after it.
func TestLastAbort(t *testing.T) {
	h := []checkpoint.RoundRecord{{Round: 1, Status: checkpoint.StatusOK}, {Round: 2, Status: checkpoint.StatusAborted}}
	if r, ok := LastAbort(h); !ok || r.Round != 2 {
		t.Errorf("LastAbort = %d, %v; want round 2", r.Round, ok)
	}
	h = append(h, checkpoint.RoundRecord{Round: 3, Status: checkpoint.StatusOK})
	if _, ok := LastAbort(h); ok {
		t.Error("LastAbort after an ok round")
	}
	if _, ok := LastAbort(nil); ok {
		t.Error("LastAbort of no rounds")
	}
}

// TestExplainChance: below twice chance the note says why; above it, or
// without an accuracy, nothing.
func TestExplainChance(t *testing.T) {
	low, high := 0.09, 0.71
	s := ExplainChance(ChanceFacts{Accuracy: &low, Classes: 10, Reports: 5, TargetEpsilon: 4})
	for _, want := range []string{"no better than guessing", "10 %", "ε = 4", "about 5 updates", "-epsilon 50"} {
		if !strings.Contains(s, want) {
			t.Errorf("chance note %q lacks %q", s, want)
		}
	}
	if s := ExplainChance(ChanceFacts{Accuracy: &high, Classes: 10, Reports: 400, TargetEpsilon: 4}); s != "" {
		t.Errorf("note at 71%%: %q", s)
	}
	if s := ExplainChance(ChanceFacts{Classes: 10}); s != "" {
		t.Errorf("note without accuracy: %q", s)
	}
	// A study of two unbalanced classes: 60 % is no better than always
	// answering the majority class (63 %), though above 1/2; 70 % is
	// better. The digits are not mentioned.
	mid, better := 0.60, 0.70
	s = ExplainChance(ChanceFacts{Accuracy: &mid, Classes: 2, Reports: 20, TargetEpsilon: 4, Majority: 0.63, MajorityClass: "benign"})
	for _, want := range []string{"no better than guessing", "60.0 %", `always answering "benign" is right on 63.0 %`} {
		if !strings.Contains(s, want) {
			t.Errorf("study chance note %q lacks %q", s, want)
		}
	}
	if strings.Contains(s, "digits") {
		t.Errorf("study chance note speaks of digits: %q", s)
	}
	if s := ExplainChance(ChanceFacts{Accuracy: &better, Classes: 2, Majority: 0.63, MajorityClass: "benign"}); s != "" {
		t.Errorf("note at 70%% against a 63%% majority: %q", s)
	}
	if m := MeanReports([]checkpoint.RoundRecord{{Status: checkpoint.StatusOK, N: 4}, {Status: checkpoint.StatusAborted, N: 1}, {Status: checkpoint.StatusOK, N: 6}}); m != 5 {
		t.Errorf("MeanReports = %v, want 5", m)
	}
}

// TestNoiseWarning: the warning follows √(2d)·σ/(n·Δ) against 4, from the
// rounds' mean reports once there are some (else the expected ones); at
// the digits' d = 7,850 with σ = 4.84 Δ (make run's ε = 4 over 5 rounds)
// 400 volunteers give 1.52 (no warning) and 20 give 30.3, which warns and
// names the crowd (152) from which the ratio falls below 4.
func TestNoiseWarning(t *testing.T) {
	f := NoiseFacts{D: 7850, Sigma: 4.84, Sensitivity: 1, Expected: 400, TargetEpsilon: 4}
	if s := NoiseWarning(f); s != "" {
		t.Errorf("400 volunteers: %q, want no warning (ratio 1.52)", s)
	}
	f.Reports = 20
	s := NoiseWarning(f)
	for _, want := range []string{"about 20 updates", "ε = 4", "30.3 times", "From about 152 volunteers"} {
		if !strings.Contains(s, want) {
			t.Errorf("20 volunteers: %q lacks %q", s, want)
		}
	}
	f.Reports, f.Expected = 0, 20
	if NoiseWarning(f) != s {
		t.Errorf("before any round the expected 20 reports should give the same warning")
	}
	f.Sigma = 0
	if s := NoiseWarning(f); s != "" {
		t.Errorf("a shuffle round (no σ): %q", s)
	}
}
