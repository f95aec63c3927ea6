package dashboard

import (
	"fmt"
	"strconv"

	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/shared/counts"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/task"
	"github.com/blanket-fl/blanket/shared/wire"
	"github.com/blanket-fl/blanket/web/console"
)

// Accuracy sources (api.Status.AccuracySource, the export's
// accuracy_source).
const (
	AccuracyHoldout = "public_holdout"
	// AccuracyPrivate: the volunteers' own rows, counted by a private
	// evaluation block (shared/counts) of the secure-summation rounds.
	AccuracyPrivate = "volunteers_private"
	AccuracyNone    = "none"
)

// countLevel is the confidence level of every interval shown.
const countLevel = 0.95

// AccuracySource is where the dashboard's accuracy comes from: the
// public holdout when there is one, else the rounds' private evaluation
// block when the current round announces one, else none.
func AccuracySource(holdout bool, p wire.Params) string {
	switch {
	case holdout:
		return AccuracyHoldout
	case p.Counts.Len() > 0 && p.Counts.At(0).Kind == wire.CountEval:
		return AccuracyPrivate
	}
	return AccuracyNone
}

// Counts is the dashboard's view of the rounds' private counts (nil when
// no round released any and the current round counts nothing): every
// round's private accuracy with its 95% interval (counts.Accuracy, from
// the round record's noisy sums and their noise SD), the latest round's
// survey answers per question with their intervals (counts.Count; the
// questions named by the task's counts plan), and the current round's
// blocks whose noise dominates (RoundNoise).
func Counts(history []checkpoint.RoundRecord, tk *task.Task, spec *roundspec.Spec, reports float64, expected int) *console.CountsView {
	v := &console.CountsView{}
	var plan task.CountsPlan
	if tk != nil {
		plan = tk.CountsPlan()
	}
	var last *checkpoint.CountsRecord
	for i := range history {
		rec := &history[i]
		if rec.Status != checkpoint.StatusOK || rec.Counts == nil {
			continue
		}
		last = rec.Counts
		v.SurveyRound = rec.Round
		for _, b := range rec.Counts.Blocks {
			if b.Kind != counts.KindEval.String() || len(b.Counts) != 2 {
				continue
			}
			iv, err := counts.Accuracy(b.Counts[0], b.Counts[1], b.CountSD, countLevel)
			if err != nil {
				continue
			}
			v.Accuracy = append(v.Accuracy, console.CountAccuracy{Round: rec.Round, Estimate: iv.Estimate, Lo: iv.Lo, Hi: iv.Hi,
				Evaluated: b.Counts[1], Volunteers: float64(rec.Counts.N), Dominated: iv.Dominated})
		}
	}
	if last != nil {
		q := 0
		for _, b := range last.Blocks {
			if b.Kind != counts.KindQuestion.String() {
				continue
			}
			v.Questions = append(v.Questions, surveyQuestion(b, plan, q))
			q++
		}
	}
	_, v.Warnings = RoundNoise(spec, tk, reports, expected, 0)
	if last == nil && len(v.Warnings) == 0 {
		return nil
	}
	return v
}

// surveyQuestion is question block b (the q-th question of the plan):
// its real options with their intervals, and the phantom options whose
// interval excludes 0.
func surveyQuestion(b checkpoint.CountBlockRecord, plan task.CountsPlan, q int) console.SurveyQuestion {
	sq := console.SurveyQuestion{Name: "question " + strconv.Itoa(q+1), Question: "Question " + strconv.Itoa(q+1)}
	var names []string
	if q < len(plan.Questions) && len(plan.Questions[q].Options) == b.Options {
		pq := plan.Questions[q]
		sq.Name, sq.Question, sq.Label, names = pq.Name, pq.Question, pq.Label, pq.Options
	}
	for j, c := range b.Counts {
		iv, err := counts.Count(c, b.CountSD, countLevel)
		if err != nil {
			continue
		}
		bar := console.SurveyBar{Count: iv.Estimate, Lo: iv.Lo, Hi: iv.Hi}
		switch {
		case j < len(names):
			bar.Option = names[j]
			sq.Bars = append(sq.Bars, bar)
		case j < b.Options:
			bar.Option = "option " + strconv.Itoa(j+1)
			sq.Bars = append(sq.Bars, bar)
		case iv.Lo > 0 || iv.Hi < 0:
			bar.Option = "impossible answer " + strconv.Itoa(j+1-b.Options)
			sq.Phantom = append(sq.Phantom, bar)
		}
	}
	return sq
}

// RoundNoise is the current round's noise notes from public parameters
// only (counts.NoiseDominates, one computation for the update and every
// count block): the update's note (NoiseWarning's text, "" when the noise
// does not dominate or the round is not secure summation) and one note
// per count block whose noise dominates its signal. The evaluation's
// ratio assumes every volunteer evaluates the full R rows (optimistic:
// volunteers with fewer rows make the noise weigh more). targetEps is
// only for the update's note.
func RoundNoise(spec *roundspec.Spec, tk *task.Task, reports float64, expected int, targetEps float64) (update string, blocks []string) {
	if spec == nil {
		return "", nil
	}
	p := spec.Params()
	sa, err := spec.SecAgg()
	if err != nil || p.Protocol != wire.ProtocolSecAgg {
		return "", nil
	}
	n := reportsOrExpected(reports, expected)
	if n < 1 {
		return "", nil
	}
	cs, sigmas := spec.Counts()
	rows := 1.0
	if cs != nil && cs.Blocks()[0].Kind() == counts.KindEval {
		rows = float64(cs.Blocks()[0].Rows())
	}
	ws, err := counts.NoiseDominates(int(p.D), sa.Sigma, sa.Sensitivity(), cs, sigmas, n, rows)
	if err != nil {
		return "", nil
	}
	var plan task.CountsPlan
	if tk != nil {
		plan = tk.CountsPlan()
	}
	q := 0
	for _, w := range ws {
		if w.Block < 0 {
			if w.Dominates {
				update = noiseText(n, w.Ratio, targetEps)
			}
			continue
		}
		b := cs.Blocks()[w.Block]
		name := "question " + strconv.Itoa(q+1)
		if b.Kind() == counts.KindQuestion {
			if q < len(plan.Questions) {
				name = "“" + plan.Questions[q].Question + "”"
			}
			q++
		}
		if !w.Dominates {
			continue
		}
		sd := b.CountSD(sigmas[w.Block])
		if b.Kind() == counts.KindEval {
			blocks = append(blocks, fmt.Sprintf("Private accuracy mostly noise: with about %d volunteers evaluating up to %d rows each, "+
				"the noise that hides each volunteer's count (±%.1f rows at 95%%) leaves the accuracy unreadable (noise ratio %.2f, readable below %.1f). "+
				"More volunteers, or more rows each, make it readable.", n, b.Rows(), 1.96*sd, w.Ratio, w.Threshold))
		} else {
			blocks = append(blocks, fmt.Sprintf("Survey answers to %s mostly noise: the noise that hides each answer (±%.1f answers at 95%%) "+
				"is large against about %.1f answers per option with %d volunteers.", name, 1.96*sd, float64(n)/float64(b.Options()), n))
		}
	}
	return update, blocks
}
