package client

import (
	"errors"
	"fmt"

	"github.com/blanket-fl/blanket/shared/counts"
	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/secagg"
	"github.com/blanket-fl/blanket/shared/wire"
)

// ErrNoAnswers: a round announces survey question blocks and the
// volunteer gave no answers (Config.Answers), or not one per question.
var ErrNoAnswers = errors.New("client: the round counts survey answers this volunteer did not give")

// countValues returns the values of the round's count blocks (nil for a
// round without blocks): for the evaluation block, the announced model's
// correct and evaluated rows among at most R of the volunteer's rows (a
// uniformly random subset when it holds more; EventEvaluated shows the
// result to the volunteer, never sent in the clear); for each question,
// the volunteer's answer.
func (c *Client) countValues(a *wire.Announcement, setup *roundSetup) ([]counts.Value, error) {
	if setup.spec == nil || a.Params.Counts.Len() == 0 {
		return nil, nil
	}
	bs := a.Params.Counts.Blocks()
	vals := make([]counts.Value, len(bs))
	q := 0
	for i, b := range bs {
		switch b.Kind {
		case wire.CountEval:
			correct, evaluated, err := evaluate(a.Model, c.data, int(b.N), c.src)
			if err != nil {
				return nil, fmt.Errorf("evaluating the announced model: %w", err)
			}
			vals[i] = counts.Value{Correct: correct, Evaluated: evaluated}
			c.emit(Event{Kind: EventEvaluated, Round: a.Round, Correct: correct, Evaluated: evaluated, Accuracy: float64(correct) / float64(max(evaluated, 1))})
		case wire.CountQuestion:
			if q >= len(c.answers) {
				return nil, fmt.Errorf("%w: question %d of the round", ErrNoAnswers, q+1)
			}
			ans := c.answers[q]
			if ans < 0 || ans >= int(b.N) {
				return nil, fmt.Errorf("%w: answer %d to question %d of %d options", ErrNoAnswers, ans, q+1, b.N)
			}
			vals[i] = counts.Value{Answer: ans}
			q++
		default:
			return nil, fmt.Errorf("count block %d of unknown kind %d", i, b.Kind)
		}
	}
	if q != len(c.answers) && len(c.answers) != 0 {
		return nil, fmt.Errorf("%w: %d answers for %d questions", ErrNoAnswers, len(c.answers), q)
	}
	return vals, nil
}

// evaluate counts the rows of data, at most rows of them (a uniformly
// random subset drawn from src when data holds more), that model
// classifies correctly.
func evaluate(model []float64, data logreg.Dataset, rows int, src noise.Source) (correct, evaluated int, err error) {
	d := data
	if data.Len() > rows {
		idx := make([]int, data.Len())
		for i := range idx {
			idx[i] = i
		}
		noise.Shuffle(src, len(idx), func(a, b int) { idx[a], idx[b] = idx[b], idx[a] })
		if d, err = data.Subset(idx[:rows]); err != nil {
			return 0, 0, err
		}
	}
	acc, err := logreg.Accuracy(model, d)
	if err != nil {
		return 0, 0, err
	}
	evaluated = d.Len()
	// Accuracy is correct/evaluated in float64, exact to far below 1/2
	// row for any evaluated ≤ 2^20: rounding recovers the count.
	correct = int(acc*float64(evaluated) + 0.5)
	return correct, evaluated, nil
}

// shard is secagg's Shard, or ShardCounts with the blocks' values when the
// round has count blocks.
func shard(r *secagg.Round, update []float64, vals []counts.Value, src noise.Source) (leader, helper []byte, err error) {
	if r.CountSpec() == nil {
		return r.Shard(update, src)
	}
	return r.ShardCounts(update, vals, src)
}
