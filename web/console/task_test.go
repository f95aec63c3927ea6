package console

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"

	"github.com/blanket-fl/blanket/shared/task"
)

func surveyTask(t *testing.T) *task.Task {
	t.Helper()
	tk, err := task.Parse([]byte(`{"version": 1, "name": "s", "title": "Getting to school", "consent": "Yes.", "source": "form",
		"features": [{"name": "minutes", "type": "numeric", "min": 0, "max": 120},
			{"name": "weather", "type": "categorical", "categories": ["sun", "rain"]}],
		"label": {"name": "y", "classes": ["walk", "bus", "car"]}, "model": {"type": "logreg"}}`))
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// TestCoefBars: each bar is the weight minus its mean over the classes,
// scaled by the largest such value; names come from the schema.
func TestCoefBars(t *testing.T) {
	// 3 inputs, 3 classes: weights then biases.
	params := []float64{1, 0, 5, 1, 3, 5, 1, -3, 5, 0, 0, 0}
	bars := CoefBars(ModelView{Features: 3, Classes: 3, Params: params}, []string{"minutes", "weather=sun"}, func(c int) string { return []string{"walk", "bus", "car"}[c] })
	if len(bars) != 3 || bars[1].Name != "bus" || len(bars[1].Bars) != 3 {
		t.Fatalf("bars %+v", bars)
	}
	if b := bars[1].Bars; b[0].Name != "minutes" || b[0].Value != 0 || b[1].Name != "weather=sun" || b[1].Value != 3 || b[1].Scale != 1 || b[2].Name != "input 2" || b[2].Value != 0 {
		t.Errorf("class bus: %+v", b)
	}
	if b := bars[2].Bars[1]; b.Value != -3 || b.Scale != -1 {
		t.Errorf("class car, input 1: %+v", b)
	}
	if b := bars[0].Bars[1]; math.Abs(b.Value) > 1e-12 {
		t.Errorf("class walk, input 1: %+v (the mean is 0)", b)
	}
}

// TestDashboardStudy: a study's dashboard has bars named from the schema
// and a try form instead of heatmaps and the digit drawing, and says that
// it cannot show accuracy when it has no public test data.
func TestDashboardStudy(t *testing.T) {
	tk := surveyTask(t)
	d := DashboardData{Model: ModelView{Features: tk.Inputs(), Classes: 3, Params: make([]float64, tk.D())},
		Task:    &TaskView{Def: tk, Inputs: []string{"minutes", "weather=sun", "weather=rain"}, AccuracySource: "none"},
		JoinURL: "http://127.0.0.1:8081/"}
	var b bytes.Buffer
	if err := Dashboard(d).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{`id="task-title"`, "Getting to school", `id="coef-bars"`, `data-name="weather=rain"`, `id="try-form"`,
		`name="minutes" type="number"`, `min="0" max="120"`, `<option value="rain">`, `<option value="" selected>no answer</option>`, `id="try-neutral"`, `id="export"`, `data-source="none"`, `id="accuracy-none"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the study's dashboard lacks %s", want)
		}
	}
	for _, not := range []string{`id="heatmaps"`, `id="try-canvas"`, `id="chart-accuracy"`} {
		if strings.Contains(page, not) {
			t.Errorf("the study's dashboard has %s", not)
		}
	}
	d.Task.AccuracySource = "public_holdout"
	b.Reset()
	if err := Dashboard(d).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), `id="accuracy-none"`) || !strings.Contains(b.String(), `id="chart-accuracy"`) {
		t.Error("with a public holdout the dashboard still says it cannot show accuracy")
	}
	// The digits (no task): heatmaps, no bars.
	b.Reset()
	if err := Dashboard(DashboardData{Model: ModelView{Features: 784, Classes: 10, Params: make([]float64, 7850)}}).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `id="heatmaps"`) || strings.Contains(b.String(), `id="coef-bars"`) {
		t.Error("the digits' dashboard has no heatmaps or has bars")
	}
}
