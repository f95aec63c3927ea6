package dashboard

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/shared/counts"
	"github.com/blanket-fl/blanket/shared/task"
)

// AbortFacts is what the pages know about a round that ended without a
// model update.
type AbortFacts struct {
	Round               int
	Status, Reason      string
	Received, CheckedIn int
	Expected, MinBatch  int
	Timeout             time.Duration
	// Simulated is how many of the volunteers are simulated on this
	// computer (make run's cohort), 0 if none.
	Simulated int
}

// LastAbort returns the facts of the latest aborted or abandoned round in
// history when no round updated the model after it (ok false otherwise).
func LastAbort(history []checkpoint.RoundRecord) (checkpoint.RoundRecord, bool) {
	for i := len(history) - 1; i >= 0; i-- {
		switch history[i].Status {
		case checkpoint.StatusAborted, checkpoint.StatusAbandoned:
			return history[i], true
		case checkpoint.StatusOK:
			return checkpoint.RoundRecord{}, false
		}
	}
	return checkpoint.RoundRecord{}, false
}

// ExplainAbort says in plain words why round a ended without a model
// update (message) and what the teacher can do about it (advice), for the
// dashboard and the terminal.
func ExplainAbort(a AbortFacts) (message, advice string) {
	secs := fmtSeconds(a.Timeout)
	nothing := " Nothing was charged to the privacy budget."
	switch {
	case a.Status == checkpoint.StatusAbandoned && strings.Contains(a.Reason, "the relay refused the round"):
		message = fmt.Sprintf("Round %d was not started: %s.", a.Round, strings.TrimSuffix(a.Reason, ".")) + nothing
		advice = "Training has stopped: the relay will refuse every further round until it is restarted with the same settings as the aggregator (its terminal output says which)."
	case a.Status == checkpoint.StatusAbandoned && strings.Contains(a.Reason, "relay answered"):
		// The relay is running and said why it did not open the round.
		message = fmt.Sprintf("Round %d was dropped: the relay did not open it (%s).", a.Round, relayWords(a.Reason)) + nothing
		advice = "The next round is announced by itself; if every round ends like this, restart both servers for the class (a relay that kept another class's rounds refuses this one's)."
	case a.Status == checkpoint.StatusAbandoned:
		message = fmt.Sprintf("Round %d was dropped: the relay sent neither the updates nor a reason within the time limit.", a.Round) + nothing
		advice = "Check that the relay is still running (its terminal window, or the volunteers count above)."
	case strings.Contains(a.Reason, "relay's own min batch"):
		message = fmt.Sprintf("Round %d was cancelled by the relay: %d updates passed verification, fewer than the relay's own minimum batch, "+
			"which the aggregator cannot lower.", a.Round, a.Received) + nothing
		advice = "If the class is smaller than the relay's minimum, restart the relay with a smaller -min-batch; otherwise the aggregator rejected reports the relay did not expect it to."
	case strings.Contains(a.Reason, "failed verification"):
		message = fmt.Sprintf("Round %d was cancelled by the relay: most of its %d updates were declared invalid, which honest volunteers' updates "+
			"almost never are, so the relay released nothing.", a.Round, a.Received) + nothing
		advice = "Look at the aggregator's output (-v) for the reasons of the rejections; a round in which most updates fail is a sign of a fault or an attack."
	case strings.Contains(a.Reason, "relay's own privacy budget"):
		message = fmt.Sprintf("Round %d was not released: the relay's own privacy budget is spent.", a.Round) + nothing
		advice = "The class has spent its privacy budget; start a new class to train again."
	case strings.Contains(a.Reason, "min batch"):
		who := "volunteers"
		if a.Expected > 0 {
			who = fmt.Sprintf("of the %d connected volunteers", a.Expected)
		}
		message = fmt.Sprintf("Round %d was cancelled: only %d %s sent an update within %s, and a round needs at least %d "+
			"(a small sum would say too much about each one).", a.Round, a.Received, who, secs, a.MinBatch) + nothing
		switch {
		case a.Simulated > 0 && a.Expected >= a.Simulated/2:
			fewer := max(10, a.Simulated/4)
			advice = fmt.Sprintf("This computer is probably too busy training %d simulated volunteers in %s: start with fewer "+
				"(go run ./scripts/runlocal -clients %d), or give rounds more time (round timeout on the operator page).",
				a.Simulated, secs, fewer)
		case a.Expected < a.MinBatch:
			advice = fmt.Sprintf("Fewer volunteers are connected (%d) than a round needs (%d): ask more students to open the join "+
				"link and press Start, or lower the minimum batch on the operator page.", a.Expected, a.MinBatch)
		default:
			advice = "Ask the students to press Start and keep the page open until their update is sent, or give rounds more " +
				"time (round timeout on the operator page)."
		}
	case strings.Contains(a.Reason, "relay restart"):
		message = fmt.Sprintf("Round %d was cancelled because the relay restarted during it.", a.Round) + nothing
		advice = "The next round starts by itself; the phones reconnect on their own."
	default:
		message = fmt.Sprintf("Round %d was cancelled by the relay (%s).", a.Round, a.Reason) + nothing
		advice = "The next round starts by itself; if every round ends like this, look at the relay's output (-v)."
	}
	return message, advice
}

// relayWords returns the relay's own words in an abandoned round's reason
// ("... relay answered 409 Conflict: round: ... round 1 is not after
// round 5"), or the reason itself.
func relayWords(reason string) string {
	if _, after, ok := strings.Cut(reason, "relay answered "); ok {
		return "it answered " + strings.TrimSpace(after)
	}
	return reason
}

// fmtSeconds writes a round timeout as "30 s" or "2 min".
func fmtSeconds(d time.Duration) string {
	if d <= 0 {
		return "the time limit"
	}
	if d >= 2*time.Minute && d%time.Minute == 0 {
		return fmt.Sprintf("%d min", int(d/time.Minute))
	}
	return fmt.Sprintf("%.0f s", math.Round(d.Seconds()))
}

// ChanceFacts is what the chance explanation needs.
type ChanceFacts struct {
	// Accuracy after the last model update and Classes the model's
	// classes (chance is 1/Classes).
	Accuracy *float64
	Classes  int
	// Reports is the mean number of updates summed per ok round,
	// TargetEpsilon the run's privacy target, Simulated the simulated
	// volunteers (0: the class alone).
	Reports       float64
	TargetEpsilon float64
	Simulated     int
	// Majority, for a study (a task other than the built-in digits), is
	// the fraction of its public holdout's rows in the most common class,
	// MajorityClass, what always answering that class scores: the bar a
	// model must clear to be better than guessing, which 1/Classes is not
	// when the classes are unbalanced. MajorityClass "" is the digits.
	Majority      float64
	MajorityClass string
}

// ExplainChance says, when the model is no better than guessing (test
// accuracy below twice chance), why in words: the noise that keeps the
// whole run within the privacy target is the same however many volunteers
// share it, so a few updates cannot rise above it. It returns "" while the
// model does better or has no accuracy yet.
//
// For a study (MajorityClass set) the bar is the majority-class rate
// instead: the model is no better than guessing when its accuracy on the
// public holdout is at most what always answering the most common class
// scores there.
func ExplainChance(c ChanceFacts) string {
	if c.Accuracy == nil || c.Classes < 2 {
		return ""
	}
	var s string
	if c.MajorityClass != "" {
		if *c.Accuracy > c.Majority {
			return ""
		}
		s = fmt.Sprintf("The model is no better than guessing: it is right on %.1f %% of the public test rows, and always answering %q is right on %.1f %% of them. ",
			100**c.Accuracy, c.MajorityClass, 100*c.Majority)
	} else {
		chance := 1 / float64(c.Classes)
		if *c.Accuracy >= 2*chance {
			return ""
		}
		s = fmt.Sprintf("The model is no better than guessing (%.0f %% is what picking one of %d digits at random scores). ",
			100*chance, c.Classes)
	}
	s += fmt.Sprintf("To keep every volunteer's privacy within ε = %s, noise is added that hides any one of them; "+
		"with about %.0f updates per round, it is larger than what they learned together. ",
		strconv.FormatFloat(c.TargetEpsilon, 'g', 4, 64), c.Reports)
	if c.Simulated > 0 {
		s += "More volunteers (go run ./scripts/runlocal -clients 400) or a larger ε (-epsilon 50, less private) let it learn."
	} else {
		s += "This is the price of privacy for a small class: with 400 simulated volunteers (go run ./scripts/runlocal) or a " +
			"larger ε (-epsilon 50, less private) it learns."
	}
	return s
}

// MeanReports is the mean number of updates per round that updated the
// model (N of the ok rounds), 0 if none.
func MeanReports(history []checkpoint.RoundRecord) float64 {
	n, sum := 0, 0
	for _, r := range history {
		if r.Status == checkpoint.StatusOK {
			n++
			sum += r.N
		}
	}
	if n == 0 {
		return 0
	}
	return float64(sum) / float64(n)
}

// NoiseFacts is what the noise warning needs: public parameters of the
// current secure-summation round only (no report, no statistic of data).
type NoiseFacts struct {
	// D is the model's parameters; Sigma each server's noise and
	// Sensitivity the largest accepted update's L2 norm, both in PINE's
	// fixed-point units (privacy.Release's SecAggSigma and
	// SecAggSensitivity).
	D                  int
	Sigma, Sensitivity float64
	// Reports is the mean number of updates summed per ok round (0
	// before the first), Expected the configured reports per round: the
	// warning uses Reports once a round has counted them.
	Reports       float64
	Expected      int
	TargetEpsilon float64
}

// NoiseWarning says, for every task (with or without public test rows),
// when the two servers' noise on the round's mean update dominates the
// largest signal the volunteers can send together: the ratio
// counts.UpdateNoiseRatio (√(2d)·σ/(n·Δ), aggregator task plan's) at or
// above counts.UpdateDominates. "" when it does not, or when the round is
// not secure summation (Sigma 0). The ratio falls as 1/n, so the note
// also gives the crowd from which it falls below the threshold.
func NoiseWarning(f NoiseFacts) string {
	n := reportsOrExpected(f.Reports, f.Expected)
	if n < 1 || !(f.Sigma > 0) {
		return ""
	}
	r, err := counts.UpdateNoiseRatio(f.D, n, f.Sigma, f.Sensitivity)
	if err != nil || r < counts.UpdateDominates {
		return ""
	}
	return noiseText(n, r, f.TargetEpsilon)
}

// reportsOrExpected is the crowd a noise ratio is computed for: the mean
// reports per ok round once there is one, else the expected.
func reportsOrExpected(reports float64, expected int) int {
	if n := int(math.Round(reports)); n >= 1 {
		return n
	}
	return expected
}

// noiseText is the update's noise note at n reports and ratio r
// (NoiseWarning, RoundNoise).
func noiseText(n int, r, targetEps float64) string {
	need := int(math.Ceil(r * float64(n) / counts.UpdateDominates))
	return fmt.Sprintf("Mostly noise: with about %d updates per round, the noise that keeps every volunteer within ε = %s is %.1f times "+
		"the largest change they can make together: what the model shows is mostly that noise, not what they know. "+
		"From about %d volunteers per round the noise falls below that (aggregator task plan computes it before recruiting).",
		n, strconv.FormatFloat(targetEps, 'g', 4, 64), r, need)
}

// ExplainStudyChance is ExplainChance for the task t (nil: the built-in
// digits): a study other than the built-in digits is measured against its
// holdout's majority class (majority gives its rate and name), not 1/C,
// and without a holdout (majority's class "") there is no accuracy to
// explain.
func ExplainStudyChance(c ChanceFacts, t *task.Task, majority func() (float64, string)) string {
	if t != nil && t.Source != task.SourceBuiltin {
		if c.Majority, c.MajorityClass = majority(); c.MajorityClass == "" {
			return ""
		}
	}
	return ExplainChance(c)
}
