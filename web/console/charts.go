package console

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"rsc.io/qr"

	"github.com/blanket-fl/blanket/shared/features"
)

// DashboardData is what the teacher / analyzer dashboard shows
// (docs/web.md). The aggregator fills it from its status, round history
// and model; package web does not import the aggregator.
type DashboardData struct {
	// Round is the last finished round, OpenRound the announced round
	// awaiting its batch (0 if none), RoundsOK the rounds that updated
	// the model.
	Round, OpenRound, RoundsOK int
	// Accuracy and Loss after the last ok round (nil before the first).
	Accuracy, Loss *float64
	// Epsilon is spent by the tightest valid method without caveat
	// (Method), against the target (TargetEpsilon, TargetDelta).
	Epsilon       float64
	Method        string
	TargetEpsilon float64
	TargetDelta   float64
	// State is "running", "paused" or "stopped" (Stopped says why).
	State   string
	Stopped string
	Rounds  []RoundView
	Model   ModelView
	// ModelResets lists the rounds after which the operator reset the
	// model to zero (the privacy ledger is never reset).
	ModelResets []int
	// Markers are the operator's protocol changes.
	Markers     []Marker
	Config      []ConfigItem
	Fingerprint string
	WasmSHA256  string
	JoinURL     string
	// QR is the join URL's QR code, shown at the top for the room to scan.
	QR QR
	// Simulated is how many of the connected volunteers are simulated
	// (make run's native cohort), 0 if none.
	Simulated int
	// Audit is the live privacy audit of the current configuration.
	Audit AuditView
	// LastAbort says why the latest round ended without a model update
	// and what to do (nil when a round updated the model since).
	LastAbort *AbortNote
	// Chance explains, when the accuracy is no better than guessing, why
	// (the noise that protects each volunteer against too few updates);
	// "" otherwise.
	Chance string
	// Noise warns, from public parameters only (dashboard.NoiseWarning),
	// when the noise dominates what the volunteers can teach the model
	// together; "" otherwise.
	Noise string
	// Counts are the study's private counts (nil: none; counts.go).
	Counts *CountsView
	// Task is the study (nil: the built-in digits, as before tasks).
	Task *TaskView
}

// AbortNote is a cancelled round in words (api.Abort's message and advice).
type AbortNote struct {
	Round           int
	Message, Advice string
}

// AuditView is the live privacy audit of a round configuration (the
// aggregator's liveaudit): an empirical lower bound on one round's ε that
// the strongest implemented attack proves, next to the per-round charge.
type AuditView struct {
	// State is off, not_applicable, pending, running, done, failed or
	// not_audited.
	State  string
	Reason string
	// Lower, Charged, Confidence, Trials and Attack are set when done;
	// Exceeds when Lower > Charged.
	Lower, Charged, Confidence float64
	Trials                     int
	Attack                     string
	Exceeds                    bool
	// Caught is the smallest under-charge the audit could have caught
	// (audit.Bound.DetectableFactor: a leak of Caught times the charge is
	// shown above it at least half the time); 0 when none could be.
	Caught float64
	// NoiseFactor (secure summation) is the smallest k such that the
	// audit's variance test flags a relay adding σ/k at least half the
	// time (audit.NoiseTest.Factor); 0 when not run.
	NoiseFactor float64
	// NoiseFlagged says the variance test found the relay's noise below
	// the announced σ (NoiseRatio: the measured variance over the
	// announced one; NoiseAlpha: the test's false-alarm probability).
	NoiseFlagged           bool
	NoiseRatio, NoiseAlpha float64
}

// noiseOnly says the warning is the variance test's alone (the attack's
// bound is below the charge).
func (a AuditView) noiseOnly() bool { return a.Exceeds && a.NoiseFlagged && a.Lower <= a.Charged }

// noiseWarning is the variance test's alarm in words.
func (a AuditView) noiseWarning() string {
	return fmt.Sprintf("Audit warning: the relay's noise, drawn through its own code, has %.2f%% less variance than the announced σ², which an honest relay shows with probability below %.2g. Stop the run and report it.",
		100*(1-a.NoiseRatio), a.NoiseAlpha)
}

// limit says what a finished audit could have caught: without it "found
// no leak" overstates a run too small to find one.
func (a AuditView) limit() string {
	s := "it could not have caught any under-charge (too few trials for this charge)"
	if a.Caught > 0 {
		s = fmt.Sprintf("it could have caught only an under-charge of %.2g× or more", a.Caught)
	}
	if a.NoiseFactor > 0 {
		s += fmt.Sprintf("; its noise test would have caught a relay adding σ/%.4g or less", a.NoiseFactor)
	}
	return s
}

// Short is a finished audit in a few words for the projected page.
func (a AuditView) Short() string {
	if a.noiseOnly() {
		return a.noiseWarning()
	}
	if a.Exceeds {
		return fmt.Sprintf("Audit warning: an attack shows ε ≥ %s per round, above the %s charged. Stop and report it.", fmtEps(a.Lower), fmtEps(a.Charged))
	}
	if a.Lower == 0 {
		return fmt.Sprintf("Audited: the strongest attack we run on this configuration found no leak (ε ≥ 0 per round; %s charged); %s.", fmtEps(a.Charged), a.limit())
	}
	return fmt.Sprintf("Audited: the strongest attack we run proves only ε ≥ %s per round, below the %s charged; %s.", fmtEps(a.Lower), fmtEps(a.Charged), a.limit())
}

// Text is the audit in one plain sentence ("" when the audit is off).
func (a AuditView) Text() string {
	switch a.State {
	case "done":
		if a.noiseOnly() {
			return a.noiseWarning()
		}
		if a.Exceeds {
			return fmt.Sprintf("Audit warning: an attack on this configuration shows ε ≥ %s for one round, above the %s the ledger charges per round (%.0f%% confidence, %d trials). Stop the run and report it.",
				fmtEps(a.Lower), fmtEps(a.Charged), 100*a.Confidence, a.Trials)
		}
		return fmt.Sprintf("Audited: the strongest attack Blanket runs on this configuration shows ε ≥ %s for one round (%.0f%% confidence, %d trials per hypothesis); the ledger charges %s per round. A lower bound below the charge means no leak was found, not that none exists: %s.",
			fmtEps(a.Lower), 100*a.Confidence, a.Trials, fmtEps(a.Charged), a.limit())
	case "pending", "running":
		return "Audit: attacking this configuration in the background; its lower bound on ε appears here when done."
	case "not_applicable":
		return "Audit: not applicable to secure summation (its noise is added by the servers, not by each volunteer's device); the audit attacks the shuffle protocols."
	case "failed":
		return "Audit: failed (" + a.Reason + ")."
	case "not_audited":
		return "Audit: this configuration was not audited by the running aggregator."
	}
	return ""
}

// RoundURL is the relay's GET /api/round (the volunteers connected now,
// the round's deadline) next to the join page; "" if the join URL is not
// an absolute http(s) URL.
func (d DashboardData) RoundURL() string {
	u, err := url.Parse(d.JoinURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host + "/api/round"
}

// EpsilonShare is the spent fraction of the target in [0, 1] (0 when the
// target is not a positive finite number).
func (d DashboardData) EpsilonShare() float64 {
	if !(d.TargetEpsilon > 0) || math.IsInf(d.TargetEpsilon, 0) || math.IsNaN(d.Epsilon) {
		return 0
	}
	return max(0, min(1, d.Epsilon/d.TargetEpsilon))
}

// RoundView is one round of the history.
type RoundView struct {
	Round       int
	Status      string // ok, aborted, refused, invalid, abandoned, lost
	Accuracy    *float64
	Loss        *float64
	N           int // reports in the batch (participants)
	NP          int
	CheckedIn   int
	Population  int
	CheckInRate float64
	// Epsilon is the cumulative guarantee after the round by every
	// accounting method (nil Epsilon: the method does not apply).
	Epsilon []EpsilonView
}

// EpsilonView is one accounting method's cumulative epsilon.
type EpsilonView struct {
	Method   string
	Epsilon  *float64
	Tightest bool
	Caveated bool
}

// ModelView is the logistic-regression model: Params[c*Features :
// (c+1)*Features] are the weights of class c (shared/logreg's layout).
// Layout, when set, is how the features are arranged (the task's feature
// map's output: ModelLayout); Heatmaps draws by it.
type ModelView struct {
	Features, Classes int
	Params            []float64
	Layout            features.Layout
}

// ConfigItem is one line of the configuration table.
type ConfigItem struct {
	Name, Value string
}

// Chart geometry (SVG user units).
const (
	chartW      = 640.0
	chartH      = 220.0
	chartLeft   = 52.0
	chartRight  = 52.0
	chartTop    = 14.0
	chartBottom = 30.0
)

// palette colours series in order.
// (The stylesheet's light palette; the dark one is in dashboardStyle.)
var palette = []string{"#1f77b4", "#c62828", "#2e7d32", "#7b4fa8", "#b35900", "#8c564b", "#c2185b", "#00838f", "#616161", "#6d6a00"}

// Point is one plotted value of a round.
type Point struct {
	Round int
	Value float64
	X, Y  float64
}

// Series is one line of a line chart.
type Series struct {
	Name string
	// Color is the light scheme's colour; Class ("s0".."s9") selects the
	// colour in the stylesheet, which has a palette for each scheme, both
	// at least 4.5:1 against the chart's background.
	Color  string
	Class  string
	Dashed bool
	Points []Point
}

// Path returns the polyline's points attribute.
func (s Series) Path() string {
	var b strings.Builder
	for i, p := range s.Points {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(num(p.X))
		b.WriteByte(',')
		b.WriteString(num(p.Y))
	}
	return b.String()
}

// Tick is an axis tick at Pos (SVG units) labelled Label.
type Tick struct {
	Pos   float64
	Label string
}

// RefLine is a horizontal reference line (the privacy target).
type RefLine struct {
	Name  string
	Value float64
	Y     float64
	Color string
}

// Bar is one round's bar.
type Bar struct {
	Round      int
	Value      int
	Status     string
	X, Y, W, H float64
}

// Chart is a server-rendered SVG chart: lines (Series), bars and
// horizontal reference lines over rounds on the x axis, a left y axis and
// optionally a right one (for the check-in rate).
type Chart struct {
	ID, Title     string
	YLabel        string
	RightLabel    string
	Series        []Series
	Bars          []Bar
	Refs          []RefLine
	XTicks        []Tick
	YTicks        []Tick
	RightTicks    []Tick
	Resets        []float64 // x of model resets
	Markers       []ChartMarker
	Width, Height float64
	PlotX, PlotY  float64
	PlotW, PlotH  float64
}

// Empty reports whether the chart has nothing to draw.
func (c Chart) Empty() bool {
	for _, s := range c.Series {
		if len(s.Points) > 0 {
			return false
		}
	}
	return len(c.Bars) == 0
}

// ViewBox returns the SVG viewBox.
func (c Chart) ViewBox() string { return "0 0 " + num(c.Width) + " " + num(c.Height) }

// Bottom is the y of the x axis.
func (c Chart) Bottom() float64 { return c.PlotY + c.PlotH }

// Right is the x of the right edge of the plot.
func (c Chart) Right() float64 { return c.PlotX + c.PlotW }

// scale maps rounds and values to SVG coordinates.
type scale struct {
	r0, r1 float64 // rounds
	v0, v1 float64 // values
}

func newChart(id, title, ylabel string) Chart {
	return Chart{ID: id, Title: title, YLabel: ylabel, Width: chartW, Height: chartH,
		PlotX: chartLeft, PlotY: chartTop, PlotW: chartW - chartLeft - chartRight, PlotH: chartH - chartTop - chartBottom}
}

func (c Chart) x(s scale, round float64) float64 {
	if s.r1 == s.r0 {
		return c.PlotX + c.PlotW/2
	}
	return c.PlotX + (round-s.r0)/(s.r1-s.r0)*c.PlotW
}

func (c Chart) y(s scale, v float64) float64 {
	if s.v1 == s.v0 {
		return c.PlotY + c.PlotH/2
	}
	return c.PlotY + c.PlotH - (v-s.v0)/(s.v1-s.v0)*c.PlotH
}

// roundRange returns the x range covering every round of the history.
func roundRange(rounds []RoundView) (float64, float64) {
	if len(rounds) == 0 {
		return 0, 1
	}
	lo, hi := rounds[0].Round, rounds[0].Round
	for _, r := range rounds {
		lo, hi = min(lo, r.Round), max(hi, r.Round)
	}
	if lo == hi {
		return float64(lo) - 0.5, float64(hi) + 0.5
	}
	return float64(lo), float64(hi)
}

func (c *Chart) xTicks(s scale) {
	lo, hi := math.Ceil(s.r0), math.Floor(s.r1)
	for _, t := range niceTicks(lo, hi, 6) {
		if t != math.Trunc(t) || t < s.r0 || t > s.r1 {
			continue
		}
		c.XTicks = append(c.XTicks, Tick{Pos: c.x(s, t), Label: strconv.Itoa(int(t))})
	}
}

func (c *Chart) yTicks(s scale) {
	for _, t := range niceTicks(s.v0, s.v1, 5) {
		c.YTicks = append(c.YTicks, Tick{Pos: c.y(s, t), Label: tickLabel(t)})
	}
}

func (c *Chart) resets(s scale, resets []int) {
	for _, r := range resets {
		// A reset after round r takes effect before round r+1.
		if x := float64(r) + 0.5; x >= s.r0 && x <= s.r1 {
			c.Resets = append(c.Resets, c.x(s, x))
		}
	}
}

// niceTicks returns about n round-numbered ticks covering [lo, hi].
func niceTicks(lo, hi float64, n int) []float64 {
	if !(hi > lo) || n < 1 {
		return []float64{lo}
	}
	step := niceStep((hi - lo) / float64(n))
	var out []float64
	for i := math.Ceil(lo/step - 1e-9); i*step <= hi+step*1e-9 && len(out) < 4*n; i++ {
		// 12 significant digits drop the binary residue (3*0.2 is
		// 0.6000000000000001); adding 0 turns -0 into 0.
		v, _ := strconv.ParseFloat(strconv.FormatFloat(i*step, 'g', 12, 64), 64)
		out = append(out, v+0)
	}
	return out
}

func niceStep(raw float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	switch f := raw / p; {
	case f <= 1:
		return p
	case f <= 2:
		return 2 * p
	case f <= 5:
		return 5 * p
	}
	return 10 * p
}

func tickLabel(v float64) string {
	if v == 0 {
		return "0"
	}
	a := math.Abs(v)
	if a >= 1e4 || a < 1e-3 {
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// num formats an SVG coordinate.
func num(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// valueAttr formats a data-value attribute (full precision).
func valueAttr(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// lineChart draws one series per extracted metric: a point for every
// round whose value is present.
func lineChart(id, title, ylabel string, rounds []RoundView, resets []int, series []struct {
	name string
	get  func(RoundView) *float64
}, zeroBased bool, fixed *[2]float64) Chart {
	return lineChartSized(chartW, chartH, id, title, ylabel, rounds, resets, series, zeroBased, fixed)
}

// wideW is the width of a chart that spans the page (the accuracy).
const wideW = 1100.0

func lineChartSized(w, h float64, id, title, ylabel string, rounds []RoundView, resets []int, series []struct {
	name string
	get  func(RoundView) *float64
}, zeroBased bool, fixed *[2]float64) Chart {
	c := newChart(id, title, ylabel)
	c.Width, c.Height, c.PlotW, c.PlotH = w, h, w-chartLeft-chartRight, h-chartTop-chartBottom
	r0, r1 := roundRange(rounds)
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, sr := range series {
		for _, r := range rounds {
			if v := sr.get(r); v != nil {
				lo, hi = min(lo, *v), max(hi, *v)
			}
		}
	}
	if math.IsInf(lo, 0) {
		lo, hi = 0, 1
	}
	if zeroBased {
		lo = min(lo, 0)
	}
	if fixed != nil {
		lo, hi = fixed[0], fixed[1]
	}
	if hi == lo {
		hi = lo + 1
	}
	s := scale{r0: r0, r1: r1, v0: lo, v1: hi}
	for i, sr := range series {
		line := Series{Name: sr.name, Color: palette[i%len(palette)], Class: "s" + strconv.Itoa(i%len(palette))}
		for _, r := range rounds {
			if v := sr.get(r); v != nil {
				line.Points = append(line.Points, Point{Round: r.Round, Value: *v, X: c.x(s, float64(r.Round)), Y: c.y(s, *v)})
			}
		}
		c.Series = append(c.Series, line)
	}
	c.xTicks(s)
	c.yTicks(s)
	c.resets(s, resets)
	return c
}

// AccuracyChart plots the test accuracy after every ok round
// (#chart-accuracy), wide: it spans the projected dashboard.
func AccuracyChart(rounds []RoundView, resets []int) Chart {
	return lineChartSized(wideW, chartH, "chart-accuracy", "Test accuracy per round", "accuracy", rounds, resets, []struct {
		name string
		get  func(RoundView) *float64
	}{{"accuracy", func(r RoundView) *float64 { return r.Accuracy }}}, true, &[2]float64{0, 1})
}

// AccuracyChartNarrow is the accuracy chart at the usual width, which the
// dashboard shows instead of the wide one on a phone
// (#chart-accuracy-narrow).
func AccuracyChartNarrow(rounds []RoundView, resets []int) Chart {
	c := lineChart("chart-accuracy-narrow", "Test accuracy per round", "accuracy", rounds, resets, []struct {
		name string
		get  func(RoundView) *float64
	}{{"accuracy", func(r RoundView) *float64 { return r.Accuracy }}}, true, &[2]float64{0, 1})
	return c
}

// LossChart plots the test loss after every ok round (#chart-loss).
func LossChart(rounds []RoundView, resets []int) Chart {
	return lineChart("chart-loss", "Test loss (cross-entropy) per round", "loss", rounds, resets, []struct {
		name string
		get  func(RoundView) *float64
	}{{"loss", func(r RoundView) *float64 { return r.Loss }}}, true, nil)
}

// EpsilonChart plots the cumulative epsilon spent after every round by
// every accounting method that applies (one line per method, in the order
// the methods first appear) and the target as a horizontal line
// (#chart-epsilon).
func EpsilonChart(rounds []RoundView, target float64) Chart {
	// One series per method: the accountant names a method by its
	// per-round bound plus how rounds were composed ("..., composed over
	// rounds", "..., basic composition over rounds"), so the base name
	// identifies the method across rounds, and of two compositions of the
	// same base the smaller epsilon is the method's guarantee.
	vals := make([]map[string]float64, len(rounds))
	caveated := map[string]bool{}
	tightest := map[string]bool{}
	var order []string
	seen := map[string]bool{}
	for i, r := range rounds {
		vals[i] = map[string]float64{}
		for _, e := range r.Epsilon {
			if e.Epsilon == nil {
				continue
			}
			m := baseMethod(e.Method)
			if v, ok := vals[i][m]; !ok || *e.Epsilon < v {
				vals[i][m] = *e.Epsilon
			}
			caveated[m] = caveated[m] || e.Caveated
			tightest[m] = tightest[m] || e.Tightest
			if !seen[m] {
				seen[m] = true
				order = append(order, m)
			}
		}
	}
	// The scale follows the tightest proven method (the one rounds are
	// admitted by) and the target: a method more than three times above
	// the tightest would flatten every useful line, so it is not drawn;
	// the title counts them and /api/rounds lists every method's value.
	top := 0.0
	largest := map[string]float64{}
	for i := range rounds {
		for m, v := range vals[i] {
			largest[m] = max(largest[m], v)
			if tightest[m] {
				top = max(top, v)
			}
		}
	}
	var methods []string
	omitted := 0
	for _, m := range order {
		if top > 0 && largest[m] > 3*top {
			omitted++
			continue
		}
		methods = append(methods, m)
	}
	index := map[int]int{}
	for i, r := range rounds {
		index[r.Round] = i
	}
	series := make([]struct {
		name string
		get  func(RoundView) *float64
	}, len(methods))
	for i, m := range methods {
		series[i].name = m
		series[i].get = func(r RoundView) *float64 {
			if v, ok := vals[index[r.Round]][m]; ok {
				return &v
			}
			return nil
		}
	}
	// Scale to the target and the largest value drawn.
	hi := top
	if target > 0 && !math.IsInf(target, 0) {
		hi = max(hi, target)
	}
	for _, m := range methods {
		hi = max(hi, largest[m])
	}
	if !(hi > 0) || math.IsInf(hi, 0) {
		hi = 1
	}
	title := "Privacy spent (cumulative epsilon) per accounting method"
	if omitted > 0 {
		title += fmt.Sprintf(" (%d methods more than 3x the tightest not drawn)", omitted)
	}
	c := lineChart("chart-epsilon", title, "epsilon", rounds, nil, series, true, &[2]float64{0, hi * 1.05})
	for i := range c.Series {
		c.Series[i].Dashed = caveated[c.Series[i].Name]
	}
	if target > 0 && !math.IsInf(target, 0) {
		s := scale{v0: 0, v1: hi * 1.05}
		c.Refs = append(c.Refs, RefLine{Name: "target", Value: target, Y: c.y(s, target), Color: "currentColor"})
	}
	return c
}

// ParticipantsChart draws the reports per round as bars (coloured by the
// round's status) and the check-in rate as points on a right axis in
// [0, 1] (#chart-participants).
func ParticipantsChart(rounds []RoundView) Chart {
	c := newChart("chart-participants", "Participants (reports) and check-in rate per round", "reports")
	c.RightLabel = "check-in rate"
	r0, r1 := roundRange(rounds)
	if len(rounds) > 0 {
		r0, r1 = r0-0.5, r1+0.5
		if r1-r0 < 2 {
			r0, r1 = r0-0.5, r1+0.5
		}
	}
	hi := 1
	for _, r := range rounds {
		hi = max(hi, r.N)
	}
	s := scale{r0: r0, r1: r1, v0: 0, v1: float64(hi) * 1.1}
	bw := c.PlotW / (r1 - r0) * 0.7
	for _, r := range rounds {
		x := c.x(s, float64(r.Round))
		y := c.y(s, float64(r.N))
		c.Bars = append(c.Bars, Bar{Round: r.Round, Value: r.N, Status: r.Status, X: x - bw/2, Y: y, W: bw, H: c.Bottom() - y})
	}
	rate := Series{Name: "check-in rate", Color: palette[4], Class: "s4"}
	rs := scale{r0: r0, r1: r1, v0: 0, v1: 1}
	for _, r := range rounds {
		if r.Population > 0 {
			rate.Points = append(rate.Points, Point{Round: r.Round, Value: r.CheckInRate, X: c.x(rs, float64(r.Round)), Y: c.y(rs, r.CheckInRate)})
		}
	}
	c.Series = []Series{rate}
	c.xTicks(s)
	c.yTicks(s)
	for _, t := range []float64{0, 0.25, 0.5, 0.75, 1} {
		c.RightTicks = append(c.RightTicks, Tick{Pos: c.y(rs, t), Label: tickLabel(t)})
	}
	return c
}

// BarColor colours a bar by its round's status.
func BarColor(status string) string {
	switch status {
	case "ok":
		return "#1f77b4"
	case "aborted", "abandoned":
		return "#8a8f98"
	}
	return "#d62728"
}

// Heatmap is one class's weight vector drawn as a grid of cells (28x28
// for MNIST), normalized to show what the model learned (see Heatmaps).
type Heatmap struct {
	Class      int
	Cols, Rows int
	// Scale is the colour scale shared by every class: from -Scale (blue)
	// through 0 (white) to +Scale (red), clipped beyond.
	Scale float64
	Cells []Cell
}

// Cell is one feature's normalized weight.
type Cell struct {
	X, Y  int
	Fill  string
	Value float64
}

// ViewBox returns the SVG viewBox of the heatmap.
func (h Heatmap) ViewBox() string { return fmt.Sprintf("0 0 %d %d", h.Cols, h.Rows) }

// heatmapQuantile is the quantile of |normalized weight| over all classes
// that the shared colour scale reaches: a few extreme pixels (the border
// pixels the digits never touch get large, meaningless weights under
// noise) saturate instead of washing every other pixel out to white.
const heatmapQuantile = 0.99

// Heatmaps draws every class's weights: class c's are
// Params[c*Features : (c+1)*Features], laid out row-major on a square
// grid (28x28 for 784 features; ceil(sqrt(F)) columns otherwise), or,
// with a Layout of several channels (a feature map's output: scatter1's
// 17 channels of 7 x 7), one cell per place (Height x Width), the sum
// over the channels at that place.
//
// What is drawn is what the model learned to tell the classes apart:
// softmax regression only depends on the differences between the classes'
// weights (adding one vector to every class changes no prediction), so
// the mean over the classes is subtracted from every class first; what
// is left is the evidence for (red) and against (blue) each class. Summed
// over the channels of a place (standardized features), a cell is how much
// the class gains over the others when every feature at that place rises
// by one standard deviation: where more ink or stroke counts for or
// against the class. All classes share one colour scale (the 99th
// percentile of the cells' |values|), so a class the model knows little
// about looks faint rather than being blown up to full colour. A model
// whose length does not match the shape yields no heatmaps.
func Heatmaps(m ModelView) []Heatmap {
	f, k := m.Features, m.Classes
	if f < 1 || k < 1 || len(m.Params) < f*k {
		return nil
	}
	centred := make([]float64, f*k)
	for i := range f {
		mean, n := 0.0, 0
		for c := range k {
			if v := m.Params[c*f+i]; !math.IsNaN(v) && !math.IsInf(v, 0) {
				mean += v
				n++
			}
		}
		if n > 0 {
			mean /= float64(n)
		}
		for c := range k {
			v := m.Params[c*f+i] - mean
			if math.IsNaN(v) || math.IsInf(v, 0) {
				v = 0
			}
			centred[c*f+i] = v
		}
	}
	n := f // cells per class
	cols := int(math.Ceil(math.Sqrt(float64(f))))
	rows := (f + cols - 1) / cols
	vals := centred
	if l := m.Layout; l.Channels > 1 && l.Size() == f {
		n, cols, rows = l.Height*l.Width, l.Width, l.Height
		vals = make([]float64, k*n)
		for c := range k {
			for ch := range l.Channels {
				for i, v := range centred[c*f+ch*n : c*f+(ch+1)*n] {
					vals[c*n+i] += v
				}
			}
		}
	}
	mags := make([]float64, len(vals))
	for i, v := range vals {
		mags[i] = math.Abs(v)
	}
	slices.Sort(mags)
	scale := mags[min(len(mags)-1, int(heatmapQuantile*float64(len(mags))))]
	if scale == 0 {
		scale = mags[len(mags)-1]
	}
	out := make([]Heatmap, k)
	for c := range k {
		h := Heatmap{Class: c, Cols: cols, Rows: rows, Scale: scale, Cells: make([]Cell, n)}
		for i, v := range vals[c*n : (c+1)*n] {
			h.Cells[i] = Cell{X: i % cols, Y: i / cols, Fill: diverging(v, scale), Value: v}
		}
		out[c] = h
	}
	return out
}

// PNG encodes the heatmap as a Cols x Rows PNG, one pixel per feature
// (about a kilobyte; the page scales it up with crisp edges). The
// dashboard loads these instead of ~8,000 SVG rects per update.
func (h Heatmap) PNG() ([]byte, error) {
	img := image.NewNRGBA(image.Rect(0, 0, h.Cols, h.Rows))
	for _, c := range h.Cells {
		r, g, b := divergingRGB(c.Value, h.Scale)
		img.SetNRGBA(c.X, c.Y, color.NRGBA{R: r, G: g, B: b, A: 255})
	}
	var buf bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(&buf, img); err != nil {
		return nil, fmt.Errorf("web: heatmap png: %w", err)
	}
	return buf.Bytes(), nil
}

// diverging maps v in [-scale, scale] to blue (-) / white (0) / red (+),
// quantized to 16 steps per side so that equal colours repeat.
func diverging(v, scale float64) string {
	r, g, b := divergingRGB(v, scale)
	return fmt.Sprintf("#%02x%02x%02x", r, g, b)
}

func divergingRGB(v, scale float64) (r, g, b uint8) {
	t := 0.0
	if scale > 0 && !math.IsNaN(v) {
		t = max(-1, min(1, v/scale))
	}
	t = math.Round(t*16) / 16
	// Endpoints: #2166ac (negative) and #b2182b (positive).
	lerp := func(a, b float64) uint8 { return uint8(math.Round(a + (b-a)*math.Abs(t))) }
	if t < 0 {
		return lerp(255, 0x21), lerp(255, 0x66), lerp(255, 0xac)
	}
	return lerp(255, 0xb2), lerp(255, 0x18), lerp(255, 0x2b)
}

// QR is a QR code as horizontal runs of dark modules, drawn as inline
// SVG with a 4-module quiet zone.
type QR struct {
	Text string
	Size int // modules per side, without the quiet zone
	Runs []QRRun
}

// QRRun is W dark modules starting at module (X, Y), quiet zone included.
type QRRun struct {
	X, Y, W int
}

// qrQuiet is the quiet zone around the code (ISO/IEC 18004: 4 modules).
const qrQuiet = 4

// NewQR encodes text at error-correction level M.
func NewQR(text string) (QR, error) {
	code, err := qr.Encode(text, qr.M)
	if err != nil {
		return QR{}, fmt.Errorf("web: qr code: %w", err)
	}
	q := QR{Text: text, Size: code.Size}
	for y := range code.Size {
		for x := 0; x < code.Size; {
			if !code.Black(x, y) {
				x++
				continue
			}
			start := x
			for x < code.Size && code.Black(x, y) {
				x++
			}
			q.Runs = append(q.Runs, QRRun{X: start + qrQuiet, Y: y + qrQuiet, W: x - start})
		}
	}
	return q, nil
}

// ViewBox returns the SVG viewBox (code plus quiet zone).
func (q QR) ViewBox() string {
	n := q.Size + 2*qrQuiet
	return fmt.Sprintf("0 0 %d %d", n, n)
}

func pct(v *float64) string {
	if v == nil {
		return "–"
	}
	return strconv.FormatFloat(100**v, 'f', 1, 64) + " %"
}

func ptrAttr(v *float64) string {
	if v == nil {
		return ""
	}
	return valueAttr(*v)
}

func fmtEps(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "–"
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// baseMethod strips the accountant's suffix saying how rounds were composed.
func baseMethod(m string) string {
	for _, suf := range []string{", composed over rounds", ", basic composition over rounds", ", advanced composition over rounds"} {
		if b, ok := strings.CutSuffix(m, suf); ok {
			return b
		}
	}
	return m
}

// Marker is a change worth marking on the charts: the operator switched
// the protocol (Label) from round Round on.
type Marker struct {
	Round int
	Label string
}

// ChartMarker is a Marker's position on one chart.
type ChartMarker struct {
	X     float64
	Label string
}

// WithMarkers adds a vertical marker before each marker's round that lies
// within the rounds drawn.
func (c Chart) WithMarkers(ms []Marker, rounds []RoundView) Chart {
	r0, r1 := roundRange(rounds)
	s := scale{r0: r0, r1: r1}
	for _, m := range ms {
		if x := float64(m.Round) - 0.5; x >= r0 && x <= r1 {
			c.Markers = append(c.Markers, ChartMarker{X: c.x(s, x), Label: m.Label})
		}
	}
	return c
}
