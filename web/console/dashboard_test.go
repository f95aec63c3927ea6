package console

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"image/png"
	"math"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/blanket-fl/blanket/web"

	"rsc.io/qr"
)

// xmlNode is a generic XML element (the SVG that templ renders is
// well-formed XML: every element is closed).
type xmlNode struct {
	XMLName xml.Name
	Attrs   []xml.Attr `xml:",any,attr"`
	Nodes   []xmlNode  `xml:",any"`
	Text    string     `xml:",chardata"`
}

func (n xmlNode) attr(name string) string {
	for _, a := range n.Attrs {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

// walk calls fn on n and every descendant.
func (n xmlNode) walk(fn func(xmlNode)) {
	fn(n)
	for _, c := range n.Nodes {
		c.walk(fn)
	}
}

// svgs returns every <svg> element of page, parsed.
func svgs(t *testing.T, page string) []xmlNode {
	t.Helper()
	var out []xmlNode
	for rest := page; ; {
		i := strings.Index(rest, "<svg")
		if i < 0 {
			return out
		}
		j := strings.Index(rest[i:], "</svg>")
		if j < 0 {
			t.Fatal("unterminated <svg>")
		}
		var n xmlNode
		if err := xml.Unmarshal([]byte(rest[i:i+j+len("</svg>")]), &n); err != nil {
			t.Fatalf("svg is not well-formed: %v", err)
		}
		out = append(out, n)
		rest = rest[i+j:]
	}
}

func svgByID(t *testing.T, page, id string) xmlNode {
	t.Helper()
	for _, s := range svgs(t, page) {
		if s.attr("id") == id {
			return s
		}
	}
	t.Fatalf("no <svg id=%q>", id)
	return xmlNode{}
}

// count counts the elem descendants of n that have class among their
// classes ("" for any).
func count(n xmlNode, elem, class string) int {
	c := 0
	n.walk(func(m xmlNode) {
		if m.XMLName.Local == elem && (class == "" || slices.Contains(strings.Fields(m.attr("class")), class)) {
			c++
		}
	})
	return c
}

func fp(v float64) *float64 { return &v }

// sampleDashboard has 5 rounds: 4 ok and 1 aborted (round 3), three
// accounting methods (one caveated, one not applicable), and an MNIST-shaped
// model whose weight i of class c is (i - 392) * (c + 1).
func sampleDashboard() DashboardData {
	var rounds []RoundView
	for r := 1; r <= 5; r++ {
		rv := RoundView{Round: r, Status: "ok", N: 100 + r, NP: 40, CheckedIn: 120, Population: 150, CheckInRate: 0.8,
			Accuracy: fp(0.5 + 0.05*float64(r)), Loss: fp(2 / float64(r))}
		if r == 3 {
			rv = RoundView{Round: 3, Status: "aborted", N: 7, CheckedIn: 9, Population: 150, CheckInRate: 0.06}
		}
		ok := r
		if r > 3 {
			ok--
		}
		rv.Epsilon = []EpsilonView{
			{Method: "pld", Epsilon: fp(30 * float64(ok)), Tightest: true},
			{Method: "flame", Epsilon: fp(0.9 * float64(ok)), Caveated: true},
			{Method: "rdp"},
		}
		rounds = append(rounds, rv)
	}
	params := make([]float64, 7850)
	for c := range 10 {
		for i := range 784 {
			params[c*784+i] = float64(i-392) * float64(c+1)
		}
	}
	return DashboardData{Round: 5, RoundsOK: 4, Accuracy: fp(0.75), Loss: fp(0.4), Epsilon: 120, Method: "pld",
		TargetEpsilon: 750, TargetDelta: 1e-5, State: "running", Rounds: rounds,
		Model:       ModelView{Features: 784, Classes: 10, Params: params},
		ModelResets: []int{2},
		Config:      []ConfigItem{{"protocol", "ss-topk"}, {"n_p", "40"}},
		Fingerprint: "abcd-ef01-2345-6789-abcd-ef01-2345-6789", WasmSHA256: strings.Repeat("ab", 32),
		JoinURL: "http://127.0.0.1:8081/"}
}

func renderDashboard(t *testing.T, d DashboardData) string {
	t.Helper()
	var b bytes.Buffer
	if err := Dashboard(d).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// dataValue returns the data-value attribute of the element with id.
func dataValue(t *testing.T, page, id string) string {
	t.Helper()
	m := regexp.MustCompile(`id="` + regexp.QuoteMeta(id) + `"[^>]*?data-value="([^"]*)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no element id=%q with data-value", id)
	}
	return m[1]
}

func TestDashboardElementIDs(t *testing.T) {
	page := renderDashboard(t, sampleDashboard())
	for _, id := range []string{"round", "accuracy", "epsilon", "target", "chart-accuracy", "chart-epsilon",
		"chart-participants", "heatmaps", "config", "fingerprint", "wasm-sha256", "join-url", "charts"} {
		if n := strings.Count(page, `id="`+id+`"`); n != 1 {
			t.Errorf("id %q appears %d times, want 1", id, n)
		}
	}
	for id, want := range map[string]string{"round": "5", "accuracy": "0.75", "epsilon": "120", "target": "750",
		"fingerprint": "abcd-ef01-2345-6789-abcd-ef01-2345-6789", "wasm-sha256": strings.Repeat("ab", 32),
		"join-url": "http://127.0.0.1:8081/"} {
		if got := dataValue(t, page, id); got != want {
			t.Errorf("#%s data-value = %q, want %q", id, got, want)
		}
	}
	if !strings.Contains(page, `href="http://127.0.0.1:8081/"`) || !strings.Contains(page, "ss-topk") {
		t.Error("join link or configuration missing")
	}
	rec := httptest.NewRecorder()
	web.Static().ServeHTTP(rec, httptest.NewRequest("GET", "/static/dashboard.js", nil))
	if rec.Code != 200 {
		t.Fatalf("GET /static/dashboard.js: %d", rec.Code)
	}
	js := rec.Body.Bytes()
	if !strings.Contains(page, `src="/static/dashboard.js"`) || !strings.Contains(string(js), `new EventSource("/events")`) ||
		!strings.Contains(string(js), "/fragments/charts") {
		t.Error("live update script missing")
	}
}

// TestDashboardProjector: what the room needs is at the top: the join
// link with its QR code, the volunteers connected now (from the relay next
// to the join page), the state, and the privacy spent as a meter against
// the target with plain words; the per-method comparison is collapsed.
func TestDashboardProjector(t *testing.T) {
	d := sampleDashboard()
	q, err := NewQR(d.JoinURL)
	if err != nil {
		t.Fatal(err)
	}
	d.QR = q
	d.Simulated = 200
	page := renderDashboard(t, d)
	if !strings.Contains(page, `data-simulated="200"`) || !strings.Contains(page, `id="volunteers-split"`) {
		t.Error("the dashboard cannot tell real from simulated volunteers")
	}
	head := page[strings.Index(page, `<header class="dash-head"`):strings.Index(page, "</header>")]
	for _, want := range []string{`id="join-url"`, `id="join-qr"`, `id="volunteers" data-url="http://127.0.0.1:8081/api/round"`, `id="state" data-state="running"`} {
		if !strings.Contains(head, want) {
			t.Errorf("dashboard header lacks %s", want)
		}
	}
	if !strings.Contains(page, `id="privacy-meter" min="0" max="1"`) || !strings.Contains(page, `value="0.16"`) {
		t.Error("privacy meter missing or not at 120/750")
	}
	if !strings.Contains(page, "What this means:") {
		t.Error("privacy figure not explained in plain words")
	}
	det := page[strings.Index(page, `<details id="privacy-details"`):]
	det = det[:strings.Index(det, "</details>")]
	if !strings.Contains(det, `id="chart-epsilon"`) || strings.Contains(det, " open") && strings.Contains(det[:40], "open") {
		t.Error("the per-method comparison should be in the collapsed privacy details")
	}
	if !strings.Contains(page, `id="disconnected" class="banner" role="alert" hidden`) {
		t.Error("no disconnected banner")
	}
}

// TestDashboardFragmentSmall: the block swapped after every round carries
// chart points and image links, not thousands of heatmap cells nor the
// per-method privacy comparison: with 30 rounds and 22 methods it stays
// under 40 kB (it was 683 kB).
func TestDashboardFragmentSmall(t *testing.T) {
	d := sampleDashboard()
	d.Rounds = nil
	for r := 1; r <= 30; r++ {
		rv := RoundView{Round: r, Status: "ok", N: 200, NP: 67, CheckedIn: 200, Population: 200, CheckInRate: 1,
			Accuracy: fp(0.1 + 0.02*float64(r)), Loss: fp(2 / float64(r))}
		for m := range 22 {
			rv.Epsilon = append(rv.Epsilon, EpsilonView{Method: fmt.Sprintf("method %d", m), Epsilon: fp(float64(r * (m + 1))), Tightest: m == 0})
		}
		d.Rounds = append(d.Rounds, rv)
	}
	d.Round = 30
	var b bytes.Buffer
	if err := DashboardCharts(d).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	if b.Len() > 40<<10 {
		t.Errorf("chart fragment is %d bytes, want under 40 kB", b.Len())
	}
	if strings.Contains(b.String(), "chart-epsilon") || strings.Count(b.String(), "<rect") > 100 {
		t.Error("chart fragment carries the privacy comparison or heatmap cells")
	}
	if n := strings.Count(b.String(), `<img class="heatmap"`); n != 10 {
		t.Errorf("%d heatmap images, want 10", n)
	}
}

func TestDashboardChartsOnePointPerRound(t *testing.T) {
	d := sampleDashboard()
	page := renderDashboard(t, d)
	acc := svgByID(t, page, "chart-accuracy")
	// Round 3 was aborted: no accuracy, so 4 points, one per ok round.
	var rounds []string
	acc.walk(func(n xmlNode) {
		if n.XMLName.Local == "circle" {
			rounds = append(rounds, n.attr("data-round"))
		}
	})
	if strings.Join(rounds, ",") != "1,2,4,5" {
		t.Errorf("accuracy points at rounds %v, want 1,2,4,5", rounds)
	}
	// Epsilon: one line per applicable method, one point per round each,
	// and the target as a reference line.
	eps := svgByID(t, page, "chart-epsilon")
	if n := count(eps, "polyline", "series"); n != 2 {
		t.Errorf("epsilon chart has %d lines, want 2 (pld, flame)", n)
	}
	perMethod := map[string]int{}
	eps.walk(func(n xmlNode) {
		if n.XMLName.Local == "circle" {
			perMethod[n.attr("data-series")]++
		}
	})
	if perMethod["pld"] != 5 || perMethod["flame"] != 5 || len(perMethod) != 2 {
		t.Errorf("epsilon points per method %v, want 5 each for pld and flame", perMethod)
	}
	var target []xmlNode
	eps.walk(func(n xmlNode) {
		if n.XMLName.Local == "line" && n.attr("class") == "ref" {
			target = append(target, n)
		}
	})
	if len(target) != 1 || target[0].attr("data-value") != "750" {
		t.Fatalf("target lines %+v", target)
	}
	// The target is the top of the scale here (750 > 150), drawn at 1/1.05
	// of the plot height above the axis.
	y, _ := strconv.ParseFloat(target[0].attr("y1"), 64)
	plotH := chartH - chartTop - chartBottom
	if want := chartTop + plotH - plotH/1.05; math.Abs(y-want) > 0.06 {
		t.Errorf("target at y = %v, want %v", y, want)
	}
	// Participants: one bar per round, the value its report count.
	part := svgByID(t, page, "chart-participants")
	var bars []string
	part.walk(func(n xmlNode) {
		if n.XMLName.Local == "rect" && n.attr("class") == "bar" {
			bars = append(bars, n.attr("data-round")+":"+n.attr("data-value"))
		}
	})
	if strings.Join(bars, ",") != "1:101,2:102,3:7,4:104,5:105" {
		t.Errorf("bars %v", bars)
	}
	if n := count(part, "circle", "pt"); n != 5 {
		t.Errorf("check-in rate points %d, want 5", n)
	}
	// Taller bars for more reports, all standing on the axis.
	loss := svgByID(t, page, "chart-loss")
	if n := count(loss, "circle", "pt"); n != 4 {
		t.Errorf("loss points %d, want 4", n)
	}
	if n := count(acc, "line", "reset"); n != 1 {
		t.Errorf("reset markers %d, want 1", n)
	}
}

// TestDashboardHeatmaps: the heatmaps show what tells the classes apart.
// Every class shares a large common component (a softmax model's
// predictions ignore it) and class c has one pixel of its own: after
// normalization the common part is white, each class's own pixel is full
// red in its image and blue in the others', on one scale for all classes.
func TestDashboardHeatmaps(t *testing.T) {
	params := make([]float64, 7850)
	for c := range 10 {
		for i := range 784 {
			params[c*784+i] = float64(i%28) * 50 // the same for every class
		}
		params[c*784+100+c] += 3
	}
	maps := Heatmaps(ModelView{Features: 784, Classes: 10, Params: params})
	if len(maps) != 10 {
		t.Fatalf("%d heatmaps, want 10", len(maps))
	}
	for c, h := range maps {
		if h.Cols != 28 || h.Rows != 28 || h.Scale != maps[0].Scale {
			t.Fatalf("class %d: %dx%d scale %v (class 0: %v)", c, h.Cols, h.Rows, h.Scale, maps[0].Scale)
		}
		b, err := h.PNG()
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if img.Bounds().Dx() != 28 || img.Bounds().Dy() != 28 || len(b) > 2048 {
			t.Fatalf("class %d: %v image of %d bytes", c, img.Bounds(), len(b))
		}
		own := 100 + c
		for i := range 784 {
			r, g, bl, _ := img.At(i%28, i/28).RGBA()
			got := fmt.Sprintf("#%02x%02x%02x", r>>8, g>>8, bl>>8)
			switch {
			case i == own && got != "#b2182b":
				t.Errorf("class %d: its own pixel is %s, want full red", c, got)
			case i >= 100 && i < 110 && i != own && !(bl > r):
				t.Errorf("class %d: pixel %d (another class's) is %s, want blue (evidence against)", c, i, got)
			case (i < 100 || i >= 110) && got != "#ffffff":
				t.Fatalf("class %d: common-component pixel %d is %s, want white", c, i, got)
			}
		}
	}
}

func TestDivergingScale(t *testing.T) {
	for _, tc := range []struct {
		v, s float64
		want string
	}{{0, 1, "#ffffff"}, {1, 1, "#b2182b"}, {-1, 1, "#2166ac"}, {5, 1, "#b2182b"}, {-5, 1, "#2166ac"},
		{1, 0, "#ffffff"}, {math.NaN(), 1, "#ffffff"}, {0.5, 1, "#d98c95"}} {
		if got := diverging(tc.v, tc.s); got != tc.want {
			t.Errorf("diverging(%v, %v) = %s, want %s", tc.v, tc.s, got, tc.want)
		}
	}
}

func TestDashboardEmpty(t *testing.T) {
	page := renderDashboard(t, DashboardData{State: "running", TargetEpsilon: 10, TargetDelta: 1e-5})
	for _, id := range []string{"chart-accuracy", "chart-epsilon", "chart-participants"} {
		s := svgByID(t, page, id)
		if count(s, "circle", "") != 0 || !strings.Contains(fmt.Sprint(s), "no rounds yet") {
			t.Errorf("%s: empty chart not marked", id)
		}
	}
	if dataValue(t, page, "accuracy") != "" {
		t.Error("accuracy before any round should have an empty data-value")
	}
	// A model whose length does not match its shape draws no heatmaps
	// instead of panicking; an all-zero model draws white ones.
	for _, h := range Heatmaps(ModelView{Features: 784, Classes: 10, Params: make([]float64, 7850)}) {
		for _, c := range h.Cells {
			if c.Fill != "#ffffff" {
				t.Fatalf("zero model: cell %s", c.Fill)
			}
		}
	}
	if h := Heatmaps(ModelView{Features: 784, Classes: 10, Params: make([]float64, 10)}); h != nil {
		t.Error("heatmaps of a short model")
	}
}

// TestDashboardPausedWords: paused before the first round reads "waiting
// to start" (make run holds its first round until its simulated
// volunteers connect: the room must not read that the teacher paused it);
// paused after a round reads "paused by the teacher".
func TestDashboardPausedWords(t *testing.T) {
	for _, tc := range []struct {
		round     int
		want, not string
	}{{0, "waiting to start", "paused by the teacher"}, {2, "paused by the teacher", "waiting to start"}} {
		page := renderDashboard(t, DashboardData{State: "paused", Round: tc.round, TargetEpsilon: 4, TargetDelta: 1e-5})
		if !strings.Contains(page, tc.want) || strings.Contains(page, tc.not) {
			t.Errorf("paused at round %d: want %q, not %q", tc.round, tc.want, tc.not)
		}
	}
}

func TestNiceTicks(t *testing.T) {
	got := niceTicks(0, 1, 5)
	if fmt.Sprint(got) != "[0 0.2 0.4 0.6 0.8 1]" {
		t.Errorf("niceTicks(0, 1) = %v", got)
	}
	if got := niceTicks(0, 787.5, 5); fmt.Sprint(got) != "[0 200 400 600]" {
		t.Errorf("niceTicks(0, 787.5) = %v", got)
	}
}

func TestQRDecodesToTheCode(t *testing.T) {
	const text = "http://192.168.1.20:8081/"
	q, err := NewQR(text)
	if err != nil {
		t.Fatal(err)
	}
	code, err := qr.Encode(text, qr.M)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := QRSVG(q).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	s := svgByID(t, b.String(), "join-qr")
	n := code.Size + 2*qrQuiet
	if s.attr("viewBox") != fmt.Sprintf("0 0 %d %d", n, n) || s.attr("data-size") != strconv.Itoa(code.Size) {
		t.Fatalf("viewBox %q size %q, code size %d", s.attr("viewBox"), s.attr("data-size"), code.Size)
	}
	// Paint the runs back into a bitmap and compare it module by module.
	dark := make([][]bool, n)
	for i := range dark {
		dark[i] = make([]bool, n)
	}
	for _, r := range s.Nodes[1:] {
		x, _ := strconv.Atoi(r.attr("x"))
		y, _ := strconv.Atoi(r.attr("y"))
		w, _ := strconv.Atoi(r.attr("width"))
		if r.attr("fill") != "#000" || r.attr("height") != "1" || w < 1 {
			t.Fatalf("bad run %+v", r.Attrs)
		}
		for i := range w {
			if dark[y][x+i] {
				t.Fatalf("module (%d,%d) painted twice", x+i, y)
			}
			dark[y][x+i] = true
		}
	}
	for y := range n {
		for x := range n {
			want := code.Black(x-qrQuiet, y-qrQuiet)
			if dark[y][x] != want {
				t.Fatalf("module (%d,%d) dark = %v, want %v", x, y, dark[y][x], want)
			}
		}
	}
	if _, err := NewQR(strings.Repeat("x", 5000)); err == nil {
		t.Error("a text too long for any QR version should fail")
	}
}

func TestOperatorPage(t *testing.T) {
	q, err := NewQR("http://127.0.0.1:8081/")
	if err != nil {
		t.Fatal(err)
	}
	render := func(d OperatorData) string {
		var b bytes.Buffer
		if err := Operator(d).Render(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	d := OperatorData{State: "paused", Round: 3, LoggedIn: true, NewClass: true, JoinURL: "http://127.0.0.1:8081/", QR: q,
		Form: OperatorForm{Protocol: "ss-double", EpsL: "78.5", D: 7850,
			Defaults: []ProtocolDefaults{{Protocol: "ss-simple", ServerLR: "1"}, {Protocol: "ss-topk", K: "157", NPRatio: "3", ServerLR: "50"}}},
		Error: "bad <input>", Pending: []string{"reset"}}
	page := render(d)
	for _, want := range []string{`id="op-state" data-state="paused"`, "paused by the teacher", `action="/operator/start"`, `action="/operator/pause"`,
		`action="/operator/reset"`, `action="/operator/config"`, `action="/operator/newclass"`, `id="join-qr"`,
		`<option value="ss-double" selected>`, `name="eps_l" type="number" step="any" value="78.5"`,
		`data-protocol="ss-topk" data-k="157" data-np-ratio="3" data-server-lr="50"`,
		"bad &lt;input&gt;", "Reset does not reset privacy", `class="danger"`, "/static/operator.js"} {
		if !strings.Contains(page, want) {
			t.Errorf("operator page lacks %q", want)
		}
	}
	for _, name := range []string{"protocol", "eps_l", "clip", "k", "beta", "np_ratio", "check_in_p", "round_timeout", "min_batch"} {
		if !strings.Contains(page, `name="`+name+`"`) {
			t.Errorf("operator form lacks field %q", name)
		}
	}
	// Enter in a configuration field submits the form's first submit
	// button: it must be Apply, never Start, Pause, Reset or New class.
	form := page[strings.Index(page, `<form id="operator-form"`):]
	form = form[:strings.Index(form, "</form>")]
	if n := strings.Count(form, `type="submit"`); n != 1 || !strings.Contains(form, `id="op-config" type="submit"`) {
		t.Errorf("the configuration form has %d submit buttons; want only Apply", n)
	}
	for _, danger := range []string{"op-reset", "op-newclass"} {
		i := strings.Index(page, `id="`+danger+`"`)
		if i < 0 || !strings.Contains(page[strings.LastIndex(page[:i], "<form"):i], "data-confirm=") {
			t.Errorf("%s is not in a form that asks for confirmation", danger)
		}
	}

	// Without the operator's session: the password form, no controls.
	d.LoggedIn = false
	page = render(d)
	if !strings.Contains(page, `action="/operator/login"`) || !strings.Contains(page, `name="password"`) {
		t.Error("logged-out operator page lacks the password form")
	}
	for _, ctl := range []string{"/operator/start", "/operator/reset", "/operator/config", "/operator/newclass"} {
		if strings.Contains(page, ctl) {
			t.Errorf("logged-out operator page offers %s", ctl)
		}
	}
}

// TestDashboardAudit: the live audit's sentence is rendered with its
// numbers, a bound above the charge is a warning, and an audit that is off
// renders nothing.
func TestDashboardAudit(t *testing.T) {
	render := func(a AuditView) string {
		var b strings.Builder
		if err := Dashboard(DashboardData{TargetEpsilon: 4, TargetDelta: 1e-5, Audit: a}).Render(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	done := render(AuditView{State: "done", Lower: 0.25, Charged: 3, Confidence: 0.95, Trials: 50, Caught: 14.2})
	if !strings.Contains(done, `id="audit"`) || !strings.Contains(done, "ε ≥ 0.25") || !strings.Contains(done, "charges 3 per round") || !strings.Contains(done, `<p id="audit" class="hint" data-state="done"`) {
		t.Errorf("done audit not shown as expected")
	}
	if !strings.Contains(done, `<p id="audit-summary" class="words">Audited: the strongest attack we run proves only ε ≥ 0.25 per round, below the 3 charged; it could have caught only an under-charge of 14× or more.`) {
		t.Errorf("done audit not summarized under the privacy meter with what it could have caught")
	}
	// "found no leak" always says the audit's limit.
	none := render(AuditView{State: "done", Charged: 3, Confidence: 0.95, Trials: 50})
	if !strings.Contains(none, "found no leak (ε ≥ 0 per round; 3 charged); it could not have caught any under-charge") {
		t.Errorf("a blind audit's \"found no leak\" does not say it was blind")
	}
	sa := render(AuditView{State: "done", Lower: 0.7, Charged: 1.6, Confidence: 0.95, Trials: 200000, Caught: 1.6, NoiseFactor: 1.0035})
	if !strings.Contains(sa, "under-charge of 1.6× or more; its noise test would have caught a relay adding σ/1.004 or less") {
		t.Errorf("secure summation's noise test limit is not shown")
	}
	leak := render(AuditView{State: "done", Lower: 4.5, Charged: 3, Confidence: 0.95, Trials: 50, Exceeds: true})
	if !strings.Contains(leak, `class="hint warn"`) || !strings.Contains(leak, `<p id="audit-summary" class="words warn">Audit warning`) {
		t.Errorf("an audited bound above the charge is not a warning")
	}
	// The variance test's alarm says what it measured, not an ε.
	noisy := render(AuditView{State: "done", Lower: 0.7, Charged: 1.6, Confidence: 0.95, Trials: 200000, Exceeds: true,
		NoiseFlagged: true, NoiseRatio: 0.9, NoiseAlpha: 1e-6})
	if !strings.Contains(noisy, `class="words warn">Audit warning: the relay&#39;s noise, drawn through its own code, has 10.00% less variance than the announced σ², which an honest relay shows with probability below 1e-06.`) ||
		strings.Contains(noisy, "above the 1.6 charged") {
		t.Errorf("the variance test's alarm is not said as such")
	}
	if off := render(AuditView{State: "off"}); strings.Contains(off, `id="audit"`) || strings.Contains(off, `id="audit-summary"`) {
		t.Errorf("an audit that is off is shown")
	}
	if running := render(AuditView{State: "running"}); !strings.Contains(running, `id="audit"`) || strings.Contains(running, `id="audit-summary"`) {
		t.Errorf("a running audit: the details line only")
	}
}

// TestDashboardClassroom: beside the QR code the link to type (relay
// address and class code); the sentence that anchors ε; a cancelled round
// said in words with what to do, hidden when there is none; the chance
// note inside the chart block; and "draw a digit" wired to the relay's
// predictor.
func TestDashboardClassroom(t *testing.T) {
	d := sampleDashboard()
	d.TargetEpsilon = 4
	d.LastAbort = &AbortNote{Round: 5, Message: "Round 5 was cancelled: only 12 of the 400 connected volunteers sent an update.",
		Advice: "start with fewer (-clients 100)"}
	d.Chance = "The model is no better than guessing."
	page := renderDashboard(t, d)
	if got := dataValue(t, page, "join-short"); got != "http://127.0.0.1:8081/abcd" {
		t.Errorf("#join-short = %q", got)
	}
	if !strings.Contains(page, ">127.0.0.1:8081/abcd<") || dataValue(t, page, "join-code") != "abcd" {
		t.Error("the short link is not shown without its scheme, or the code is missing")
	}
	if !strings.Contains(upTo(page, "eps-anchor", "</span>"), "e^4 ≈ 55 times") {
		t.Errorf("ε anchor: %q", upTo(page, "eps-anchor", "</span>"))
	}
	note := upTo(page, "round-note", "</p>")
	if !strings.Contains(note, "only 12 of the 400") || !strings.Contains(note, "What to do: start with fewer (-clients 100)") ||
		strings.Contains(openTag(page, "round-note"), "hidden") {
		t.Errorf("round note: %q (%s)", note, openTag(page, "round-note"))
	}
	charts := upTo(page, "charts", `id="weights-h"`)
	if !strings.Contains(charts, `id="chance-note"`) || !strings.Contains(charts, "no better than guessing") {
		t.Error("the chance note is not in the chart block (refreshed every round)")
	}
	if !strings.Contains(page, `data-predictor="http://127.0.0.1:8081/api/predictor"`) || !strings.Contains(page, `id="try-canvas"`) ||
		!strings.Contains(page, `src="/static/pad.js"`) {
		t.Error("draw-a-digit is missing or not wired to the relay's predictor")
	}
	// The pad loads the wasm module served here for a model over a feature
	// map, only when this aggregator serves one.
	if got := openTag(page, "try-box"); strings.Contains(got, `data-wasm="/blanket.wasm"`) != (d.WasmSHA256 != "") {
		t.Errorf("wasm %q: try box %s", d.WasmSHA256, got)
	}
	d.WasmSHA256 = "ab12"
	if got := openTag(renderDashboard(t, d), "try-box"); !strings.Contains(got, `data-wasm="/blanket.wasm"`) {
		t.Errorf("with a wasm module: try box %s", got)
	}
	d.LastAbort, d.Chance = nil, ""
	page = renderDashboard(t, d)
	if !strings.Contains(openTag(page, "round-note"), "hidden") || strings.Contains(page, `id="chance-note"`) {
		t.Error("a round note or chance note without a cancelled round or a model at chance")
	}
}

// openTag is the opening tag of the element with id.
func openTag(page, id string) string {
	i := strings.Index(page, `id="`+id+`"`)
	if i < 0 {
		return ""
	}
	start := strings.LastIndex(page[:i], "<")
	end := strings.Index(page[i:], ">")
	return page[start : i+end+1]
}

// upTo is the page from the element with id up to the next end.
func upTo(page, id, end string) string {
	i := strings.Index(page, `id="`+id+`"`)
	if i < 0 {
		return ""
	}
	j := strings.Index(page[i:], end)
	if j < 0 {
		return page[i:]
	}
	return page[i : i+j]
}
