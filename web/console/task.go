package console

import (
	"math"
	"strconv"

	"github.com/blanket-fl/blanket/shared/task"
)

// TaskView is the study the pages show: its public definition (the
// aggregator's GET /api/task), the names of the encoded inputs, and where
// the shown accuracy comes from.
type TaskView struct {
	Def *task.Task
	// Inputs names the encoded inputs (the aggregator's EncodedInputs:
	// one per numeric column, "name=category" per category).
	Inputs []string
	// AccuracySource is "public_holdout" or "none" (/api/status).
	AccuracySource string
}

// IsImage reports whether the model's inputs are a 28×28 image (the
// dashboard then draws heatmaps; otherwise per-class coefficient bars).
// Without a task the dashboard draws heatmaps as it always did.
func (d DashboardData) IsImage() bool {
	if d.Task == nil || d.Task.Def == nil {
		return true
	}
	return d.Task.Def.Inputs() == 784 && d.Task.Def.Source == task.SourceBuiltin // 784 pixels, whatever features a map makes of them
}

// NoAccuracy reports whether the task has no public test data, so the
// dashboard cannot show accuracy.
func (d DashboardData) NoAccuracy() bool {
	return d.Task != nil && d.Task.AccuracySource == "none"
}

// PrivateSource says the study's accuracy is measured privately on the
// volunteers' own rows (AccuracySource "volunteers_private", private
// counts; docs/counts.md), not on public test data.
func (d DashboardData) PrivateSource() bool {
	return d.Task != nil && d.Task.AccuracySource == "volunteers_private"
}

// PrivateAccuracy is the headline accuracy of a study measured privately
// on the volunteers' own rows (AccuracySource "volunteers_private"): the
// latest round's estimate as a data value and its text, "noise only" while
// the noise hides it, "not yet" before any round; ok false for any other
// source.
func (d DashboardData) PrivateAccuracy() (value, text string, ok bool) {
	if !d.PrivateSource() {
		return "", "", false
	}
	var a *CountAccuracy
	if d.Counts != nil {
		a = d.Counts.Latest()
	}
	switch {
	case a == nil:
		return "", "not yet (measured privately)", true
	case a.Dominated:
		return "", "noise only (measured privately)", true
	}
	return valueAttr(a.Estimate), pctOf(a.Estimate) + " (private, ±" + strconv.FormatFloat(50*(a.Hi-a.Lo), 'f', 1, 64) + " points)", true
}

// TaskTitle is the study's title ("" for the built-in digits, whose page
// says digits everywhere).
func (d DashboardData) TaskTitle() string {
	if d.Task == nil || d.Task.Def == nil || d.Task.Def.Source == task.SourceBuiltin {
		return ""
	}
	return d.Task.Def.Title
}

// TaskName is the task's name, as /api/status says it ("" without a
// task); the dashboard reloads when a new class's differs.
func (d DashboardData) TaskName() string {
	if d.Task == nil || d.Task.Def == nil {
		return ""
	}
	return d.Task.Def.Name
}

// ClassName is class c's declared name (its number without a task).
func (d DashboardData) ClassName(c int) string {
	if d.Task != nil && d.Task.Def != nil && c < len(d.Task.Def.Label.Classes) {
		return d.Task.Def.Label.Classes[c]
	}
	return strconv.Itoa(c)
}

// Coef is one bar of CoefBars: input Name's weight for a class, centred
// (minus the mean over the classes: a softmax model's predictions ignore
// what every class shares) and scaled by the largest such value of the
// model to [-1, 1].
type Coef struct {
	Name  string
	Value float64 // the centred weight
	Scale float64 // Value / the model's largest |centred weight|, in [-1, 1]
}

// ClassCoefs is one class's bars.
type ClassCoefs struct {
	Class int
	Name  string
	Bars  []Coef
}

// CoefBars returns, for every class, the centred weight of each input
// (logreg layout: class c's weights are Params[c·F : (c+1)·F]): what the
// dashboard draws as bars for tabular data. names labels the inputs (a
// shorter or nil list is completed with "input j").
func CoefBars(m ModelView, names []string, classNames func(int) string) []ClassCoefs {
	f, k := m.Features, m.Classes
	if f < 1 || k < 1 || len(m.Params) < f*k {
		return nil
	}
	mean := make([]float64, f)
	for c := range k {
		for j := range f {
			mean[j] += m.Params[c*f+j] / float64(k)
		}
	}
	top := 0.0
	for c := range k {
		for j := range f {
			top = max(top, math.Abs(m.Params[c*f+j]-mean[j]))
		}
	}
	out := make([]ClassCoefs, k)
	for c := range k {
		cc := ClassCoefs{Class: c, Name: classNames(c), Bars: make([]Coef, f)}
		for j := range f {
			v := m.Params[c*f+j] - mean[j]
			name := "input " + strconv.Itoa(j)
			if j < len(names) {
				name = names[j]
			}
			s := 0.0
			if top > 0 {
				s = v / top
			}
			cc.Bars[j] = Coef{Name: name, Value: v, Scale: s}
		}
		out[c] = cc
	}
	return out
}

// Bars is CoefBars of the dashboard's model with the task's names.
func (d DashboardData) Bars() []ClassCoefs {
	var names []string
	if d.Task != nil {
		names = d.Task.Inputs
	}
	return CoefBars(d.Model, names, d.ClassName)
}

// barGeometry: the SVG of one class's bars is barLabelW + 2·barHalfW wide,
// one barRowH row per input.
const (
	barLabelW = 200.0
	barHalfW  = 160.0
	barRowH   = 19.0
)

func (c ClassCoefs) viewBox() string {
	return "0 0 " + num(barLabelW+2*barHalfW+8) + " " + num(barRowH*float64(len(c.Bars))+4)
}

func barX(b Coef) float64 {
	return barLabelW + barHalfW + math.Min(0, b.Scale)*barHalfW
}

func barW(b Coef) float64 { return math.Max(0.5, math.Abs(b.Scale)*barHalfW) }

func barY(i int) float64 { return 2 + barRowH*float64(i) + 3 }

func barSign(b Coef) string {
	if b.Value >= 0 {
		return "pos"
	}
	return "neg"
}

// fnum formats a declared bound for an input attribute ("" when absent).
func fnum(p *float64) string {
	if p == nil {
		return ""
	}
	return strconv.FormatFloat(*p, 'g', -1, 64)
}

// step is a numeric input's step: "any" (every value in range is valid).
func step(task.Feature) string { return "any" }

// question is the feature's wording on a form (its name by default).
func question(f task.Feature) string {
	if f.Question != "" {
		return f.Question
	}
	return f.Name
}

// tryFeatures are the features a try form asks for (a feature of count >
// 1, an image's pixels, is not asked one by one: nil then).
func (d DashboardData) tryFeatures() []task.Feature {
	if d.Task == nil || d.Task.Def == nil || d.IsImage() {
		return nil
	}
	for _, f := range d.Task.Def.Features {
		if f.Count > 1 {
			return nil
		}
	}
	return d.Task.Def.Features
}

// midpoint is the middle of a numeric feature's declared range, the try
// form's starting value.
func midpoint(f task.Feature) string {
	if f.Min == nil || f.Max == nil {
		return ""
	}
	return strconv.FormatFloat((*f.Min+*f.Max)/2, 'g', 4, 64)
}
