package dashboard

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"

	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/task"
	"github.com/blanket-fl/blanket/shared/wire"
	"github.com/blanket-fl/blanket/web/console"
)

// TestCountsView: two ok rounds with an evaluation block (800 of 1,000
// rows correct, then 30 of 50 under noise SD 40: dominated) and the class
// survey's questions: the private accuracy is 0.8 with the delta
// method's interval, the second round "noise only"; the survey shows the
// latest round's bars named by the task, with ± 1.96 CountSD, and a
// phantom option only when its interval excludes 0; the rendered
// dashboard pieces carry the ids and data attributes docs/web.md states.
func TestCountsView(t *testing.T) {
	tk, _, err := task.Load("../../../tasks/class-survey/task.json")
	if err != nil {
		t.Fatal(err)
	}
	plan := tk.CountsPlan()
	if len(plan.Questions) != 3 {
		t.Fatalf("plan %+v", plan)
	}
	q := func(opts int, c []float64, sd float64) checkpoint.CountBlockRecord {
		return checkpoint.CountBlockRecord{Kind: "question", Options: opts, CountSD: sd, Counts: c}
	}
	hist := []checkpoint.RoundRecord{
		{Round: 1, Status: checkpoint.StatusOK, Counts: &checkpoint.CountsRecord{N: 20, Blocks: []checkpoint.CountBlockRecord{
			{Kind: "eval", Rows: 100, CountSD: 5, Counts: []float64{800, 1000}}}}},
		{Round: 2, Status: checkpoint.StatusLost},
		{Round: 3, Status: checkpoint.StatusOK, Counts: &checkpoint.CountsRecord{N: 20, Blocks: []checkpoint.CountBlockRecord{
			{Kind: "eval", Rows: 100, CountSD: 40, Counts: []float64{30, 50}},
			q(6, []float64{1, 2, 3, 4, 5, 5, 0.4, -0.3}, 1),
			q(4, []float64{10, 5, 3, 2}, 1),
			q(5, []float64{8, 4, 4, 2, 2, 6, 0, 0}, 1)}}},
	}
	v := Counts(hist, tk, nil, 20, 20)
	if v == nil || len(v.Accuracy) != 2 || v.SurveyRound != 3 || len(v.Questions) != 3 {
		t.Fatalf("view %+v", v)
	}
	a := v.Accuracy[0]
	sd := math.Sqrt(0.8*0.2/1000 + 25*(1+0.64)/1e6)
	if a.Round != 1 || a.Estimate != 0.8 || math.Abs(a.Hi-0.8-1.959963984540054*sd) > 1e-12 || a.Dominated {
		t.Fatalf("round 1 accuracy %+v (sd %v)", a, sd)
	}
	if !v.Accuracy[1].Dominated || v.Latest().Round != 3 {
		t.Fatalf("round 3 accuracy %+v", v.Accuracy[1])
	}
	grade := v.Questions[0]
	if grade.Name != "grade" || len(grade.Bars) != 6 || grade.Bars[2].Option != "3" || grade.Bars[2].Count != 3 ||
		math.Abs(grade.Bars[2].Hi-3-1.959963984540054) > 1e-12 || len(grade.Phantom) != 0 {
		t.Fatalf("grade %+v", grade)
	}
	tr := v.Questions[2]
	if !tr.Label || tr.Bars[0].Option != "walk" || tr.Bars[0].Count != 8 || len(tr.Phantom) != 1 || tr.Phantom[0].Count != 6 {
		t.Fatalf("transport %+v", tr)
	}
	var b bytes.Buffer
	if err := console.DashboardSurvey(v).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	if err := console.DashboardCountsAccuracy(v).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, want := range []string{`id="survey"`, `data-question="transport"`, `data-option="walk"`, `data-count="8"`, `class="survey-bar phantom"`,
		`id="private-accuracy"`, `data-round="3"`, `data-dominated="true"`, "noise only", "80.0%"} {
		if !strings.Contains(html, want) {
			t.Errorf("rendered counts lack %s", want)
		}
	}
	if Counts(nil, tk, nil, 20, 20) != nil {
		t.Fatal("a view without rounds or warnings")
	}
}

// TestRoundNoise: the class survey at ε = 4 over 5 rounds with 30
// volunteers (params.WithCounts' calibration, here with fixed σ of the
// same order): the evaluation of one row per volunteer is dominated by
// its noise, and so are the survey's counts; with a huge crowd nothing
// is; the update's note is NoiseWarning's.
func TestRoundNoise(t *testing.T) {
	tk, _, err := task.Load("../../../tasks/class-survey/task.json")
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := roundspec.Build(tk.D(), 30, roundspec.Options{Protocol: wire.ProtocolSecAgg, Sigma: 60000, Clip: 0.3})
	if err != nil {
		t.Fatal(err)
	}
	p.Counts = wire.NewCountList(wire.CountBlock{Kind: wire.CountEval, N: 1, Sigma: 8500}, wire.CountBlock{Kind: wire.CountQuestion, N: 6, Sigma: 8000},
		wire.CountBlock{Kind: wire.CountQuestion, N: 4, Sigma: 10000}, wire.CountBlock{Kind: wire.CountQuestion, N: 5, Sigma: 8000})
	spec, err := roundspec.New(p)
	if err != nil {
		t.Fatal(err)
	}
	up, blocks := RoundNoise(spec, tk, 30, 30, 4)
	if len(blocks) != 4 || !strings.Contains(blocks[0], "Private accuracy mostly noise") || !strings.Contains(blocks[1], "Which year are you in?") {
		t.Fatalf("block notes %q", blocks)
	}
	sa, _ := spec.SecAgg()
	if want := NoiseWarning(NoiseFacts{D: int(p.D), Sigma: sa.Sigma, Sensitivity: sa.Sensitivity(), Reports: 30, TargetEpsilon: 4}); up != want {
		t.Fatalf("update note %q, NoiseWarning %q", up, want)
	}
	if up, blocks := RoundNoise(spec, tk, 1e8, 30, 4); up != "" || len(blocks) != 0 {
		t.Fatalf("with 1e8 volunteers: %q %q", up, blocks)
	}
	t.Logf("30 volunteers: %q", blocks)
}
