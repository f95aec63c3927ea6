package task

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// Counts switches (Counts.Evaluation, Counts.Survey).
const (
	CountsOn  = "on"
	CountsOff = "off"
)

// Defaults and limits of the counts section (docs/tasks.md, "Private
// counts").
const (
	// DefaultEvalRowsCSV is R, the rows a volunteer of a csv task
	// evaluates at most: the count noise grows with R (CountSD is
	// proportional to it) while a volunteer's rows beyond R are not
	// counted, and 100 rows is the order of a volunteer's file in the
	// shipped examples (breast-cancer deals 569 rows to a few volunteers).
	DefaultEvalRowsCSV = 100
	// DefaultEvalRowsForm is R of a form task: one row per volunteer.
	DefaultEvalRowsForm = 1
	// DefaultCountsEpsShare is the fraction of the ledger's ε target the
	// count blocks cost by default (the update gets the rest).
	DefaultCountsEpsShare = 0.1
	maxEvalRows           = 1 << 20
	maxCountsEpsShare     = 0.9
	// maxQuestions is the most survey question blocks (shared/counts
	// MaxBlocks, one of which may be the evaluation).
	maxQuestions = 255
)

// Counts is a task's private counts section, every field optional
// (docs/counts.md: each count vector is its own PINE block, noised by
// both servers and charged jointly with the update).
type Counts struct {
	// Evaluation is CountsOn or CountsOff; absent: on exactly when the
	// task has no public holdout (a csv or form task without one), where
	// the volunteers' own rows are the only way to show an accuracy.
	Evaluation string `json:"evaluation,omitempty"`
	// EvalRows is R, the most rows a volunteer evaluates per round
	// (default DefaultEvalRowsCSV, DefaultEvalRowsForm for a form task).
	EvalRows int `json:"eval_rows,omitempty"`
	// Survey is CountsOn or CountsOff; absent: on for a form task, whose
	// categorical questions and label are then released as noisy counts
	// (one block per question, the label's included).
	Survey string `json:"survey,omitempty"`
	// EpsShare is the fraction, in (0, 0.9], of the ledger's ε target the
	// count blocks may cost over the task's rounds (default
	// DefaultCountsEpsShare); the update's noise is calibrated to the
	// rest.
	EpsShare float64 `json:"eps_share,omitempty"`
}

// Question is one survey question released as counts: a categorical
// feature's or the label's name, wording and options.
type Question struct {
	Name, Question string
	Options        []string
	// Label: the question is the label's.
	Label bool
}

// CountsPlan is a task's resolved counts section.
type CountsPlan struct {
	// EvalRows is R (0: no evaluation block).
	EvalRows int
	// Questions are the survey's blocks, in the form's order: the
	// categorical features, then the label.
	Questions []Question
	// EpsShare is the fraction of the ε target the blocks cost (0 when
	// there are none).
	EpsShare float64
}

// Any reports whether the plan has any block.
func (p CountsPlan) Any() bool { return p.EvalRows > 0 || len(p.Questions) > 0 }

// CountsPlan resolves t's counts section with the defaults (docs/tasks.md,
// "Private counts").
func (t *Task) CountsPlan() CountsPlan {
	c := t.Counts
	var p CountsPlan
	eval := c.Evaluation == CountsOn || (c.Evaluation == "" && t.Source != SourceBuiltin && t.Holdout == "")
	if eval {
		p.EvalRows = c.EvalRows
		if p.EvalRows == 0 {
			p.EvalRows = DefaultEvalRowsCSV
			if t.Source == SourceForm {
				p.EvalRows = DefaultEvalRowsForm
			}
		}
	}
	if c.Survey == CountsOn || (c.Survey == "" && t.Source == SourceForm) {
		for _, f := range t.Features {
			if f.Type == TypeCategorical {
				p.Questions = append(p.Questions, Question{Name: f.Name, Question: orText(f.Question, f.Name), Options: f.Categories})
			}
		}
		p.Questions = append(p.Questions, Question{Name: t.Label.Name, Question: orText(t.Label.Question, t.Label.Name), Options: t.Label.Classes, Label: true})
	}
	if p.Any() {
		p.EpsShare = c.EpsShare
		if p.EpsShare == 0 {
			p.EpsShare = DefaultCountsEpsShare
		}
	}
	return p
}

func orText(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// validate checks the counts section: the switches, R in [1, 2^20], the
// share in (0, 0.9], a survey only on a form task (a csv task's rows are
// not one answer per volunteer), and at most 255 questions.
func (c *Counts) validate(t *Task) error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, invalid("counts."+field, format, a...))
	}
	for field, v := range map[string]string{"evaluation": c.Evaluation, "survey": c.Survey} {
		if v != "" && v != CountsOn && v != CountsOff {
			bad(field, "%q: want %q or %q (or leave it out for the default)", v, CountsOn, CountsOff)
		}
	}
	if c.EvalRows < 0 || c.EvalRows > maxEvalRows {
		bad("eval_rows", "%d: want 1 to %d rows (or leave it out for the default)", c.EvalRows, maxEvalRows)
	}
	if v := c.EpsShare; math.IsNaN(v) || v < 0 || v > maxCountsEpsShare {
		bad("eps_share", "%v: want a fraction of the ε target in (0, %v] (or leave it out for %v)", v, maxCountsEpsShare, DefaultCountsEpsShare)
	}
	if c.Survey == CountsOn && t.Source != SourceForm {
		bad("survey", "a survey counts a form's answers; this task's source is %q", t.Source)
	}
	if c.Evaluation == CountsOff && c.EvalRows != 0 {
		bad("eval_rows", "%d rows with the evaluation off", c.EvalRows)
	}
	if len(errs) == 0 {
		if n := len(t.CountsPlan().Questions); n > maxQuestions {
			bad("survey", "%d questions, at most %d", n, maxQuestions)
		}
	}
	return errors.Join(errs...)
}

// SurveyAnswers maps a volunteer's form answers (column name → value, as
// EncodeAnswers takes them) to its answers to the counts plan's questions
// (the 0-based option of each, in plan order: client.Config.Answers). nil
// when the plan has no question; an error when an answer is missing or
// not one of its question's options.
func (t *Task) SurveyAnswers(answers map[string]string) ([]int, error) {
	qs := t.CountsPlan().Questions
	if len(qs) == 0 {
		return nil, nil
	}
	out := make([]int, len(qs))
	for i, q := range qs {
		v, ok := answers[q.Name]
		j := slices.Index(q.Options, v)
		if !ok || j < 0 {
			return nil, RowError{Column: q.Name, Msg: fmt.Sprintf("%q is not one of the %d options of %q", v, len(q.Options), q.Question)}
		}
		out[i] = j
	}
	return out, nil
}
