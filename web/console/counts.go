package console

import (
	"math"
	"strconv"
)

// CountsView is a study's private counts (shared/counts, docs/counts.md):
// the model's accuracy measured on the volunteers' own rows and the
// survey's answers, both released as noisy sums by the two servers, shown
// with the noise's uncertainty. Nil when the study counts nothing.
type CountsView struct {
	// Accuracy has one entry per round that released an evaluation, in
	// round order.
	Accuracy []CountAccuracy
	// SurveyRound is the round whose answers Questions show (the latest
	// with counts).
	SurveyRound int
	Questions   []SurveyQuestion
	// Warnings are the blocks whose noise dominates their signal
	// (counts.NoiseDominates), shown next to the update's noise note.
	Warnings []string
}

// CountAccuracy is one round's private accuracy: the estimate and its
// 95% interval (counts.Accuracy), over Evaluated rows (noisy), of the
// model announced for the round (before its volunteers trained).
type CountAccuracy struct {
	Round                 int
	Estimate, Lo, Hi      float64
	Evaluated, Volunteers float64
	Dominated             bool
}

// SurveyQuestion is one question's answers: a bar per option with its
// 95% interval (counts.Count), and the phantom options (padding of the
// encoding no honest volunteer can pick) only when one is significantly
// non-zero, a sign of cheating volunteers.
type SurveyQuestion struct {
	Name, Question string
	Label          bool
	Bars           []SurveyBar
	Phantom        []SurveyBar
}

// SurveyBar is one option's count with its interval.
type SurveyBar struct {
	Option        string
	Count, Lo, Hi float64
}

// Latest is the last round's accuracy (nil if none).
func (c *CountsView) Latest() *CountAccuracy {
	if c == nil || len(c.Accuracy) == 0 {
		return nil
	}
	return &c.Accuracy[len(c.Accuracy)-1]
}

// HasAccuracy reports whether a private accuracy was released.
func (c *CountsView) HasAccuracy() bool { return c.Latest() != nil }

// pctOf formats a fraction as a percentage with one decimal.
func pctOf(v float64) string { return strconv.FormatFloat(100*v, 'f', 1, 64) + "%" }

// countText formats a count to one decimal.
func countText(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// Survey bar geometry (the coefficient bars' style: label column, then
// bars from zero to the right, the interval as a whisker).
const (
	surveyLabelW = 150.0
	surveyBarW   = 360.0
	surveyRowH   = 22.0
)

// scale is the largest interval end of q's bars (at least 1).
func (q SurveyQuestion) scale() float64 {
	m := 1.0
	for _, b := range append(q.Bars, q.Phantom...) {
		m = max(m, b.Hi, b.Count)
	}
	return m
}

func (q SurveyQuestion) rows() int { return len(q.Bars) + len(q.Phantom) }

func (q SurveyQuestion) viewBox() string {
	return "0 0 " + num(surveyLabelW+surveyBarW+60) + " " + num(surveyRowH*float64(q.rows())+4)
}

func (q SurveyQuestion) x(v float64) float64 {
	return surveyLabelW + surveyBarW*math.Max(0, v)/q.scale()
}

func surveyY(i int) float64 { return surveyRowH*float64(i) + 2 }
