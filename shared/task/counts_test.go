package task

import (
	"errors"
	"strings"
	"testing"
)

// TestCountsPlan: the defaults (docs/tasks.md, "Private counts"): a form
// task counts every categorical question and the label (in the form's
// order) and evaluates on its volunteers' one row; a csv task with a
// holdout and the built-in digits count nothing; a csv task without a
// holdout evaluates 100 rows per volunteer; the section overrides each.
func TestCountsPlan(t *testing.T) {
	form := mustParse(t, survey)
	p := form.CountsPlan()
	var names []string
	for _, q := range p.Questions {
		names = append(names, q.Name)
	}
	if p.EvalRows != DefaultEvalRowsForm || p.EpsShare != DefaultCountsEpsShare || len(p.Questions) == 0 || !p.Questions[len(p.Questions)-1].Label {
		t.Fatalf("form plan %+v", p)
	}
	for i, q := range p.Questions[:len(p.Questions)-1] {
		f := -1
		for j, ft := range form.Features {
			if ft.Name == q.Name {
				f = j
			}
		}
		if f < 0 || form.Features[f].Type != TypeCategorical || len(q.Options) != len(form.Features[f].Categories) {
			t.Fatalf("question %d %+v", i, q)
		}
	}
	if l := p.Questions[len(p.Questions)-1]; len(l.Options) != len(form.Label.Classes) {
		t.Fatalf("label question %+v", l)
	}
	t.Logf("survey questions %v", names)
	dg, err := Digits()
	if err != nil {
		t.Fatal(err)
	}
	if dp := dg.CountsPlan(); dp.Any() || dp.EpsShare != 0 {
		t.Fatalf("digits plan %+v", dp)
	}
	off := mustParse(t, strings.Replace(survey, `"model"`, `"counts": {"evaluation": "off", "survey": "off"}, "model"`, 1))
	if op := off.CountsPlan(); op.Any() {
		t.Fatalf("plan with both off %+v", op)
	}
	set := mustParse(t, strings.Replace(survey, `"model"`, `"counts": {"eval_rows": 3, "survey": "off", "eps_share": 0.25}, "model"`, 1))
	if sp := set.CountsPlan(); sp.EvalRows != 3 || len(sp.Questions) != 0 || sp.EpsShare != 0.25 {
		t.Fatalf("plan %+v", sp)
	}
}

// TestCountsErrors: every bad field of the section is named, all at once.
func TestCountsErrors(t *testing.T) {
	bad := strings.Replace(survey, `"model"`, `"counts": {"evaluation": "yes", "survey": "maybe", "eval_rows": -1, "eps_share": 2}, "model"`, 1)
	_, err := Parse([]byte(bad))
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("err %v", err)
	}
	for _, want := range []string{"counts.evaluation", "counts.survey", "counts.eval_rows", "counts.eps_share"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %s:\n%v", want, err)
		}
	}
	for _, c := range []struct{ counts, want string }{
		{`{"evaluation": "off", "eval_rows": 5}`, "counts.eval_rows: 5 rows with the evaluation off"},
		{`{"eval_rows": 2000000}`, "counts.eval_rows: 2000000: want 1 to"},
		{`{"rows": 5}`, `unknown field "rows"`},
	} {
		_, err := Parse([]byte(strings.Replace(survey, `"model"`, `"counts": `+c.counts+`, "model"`, 1)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("counts %s: err %v, want %q", c.counts, err, c.want)
		}
	}
}
