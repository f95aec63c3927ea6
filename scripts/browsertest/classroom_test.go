package browsertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/blanket-fl/blanket/scripts/internal/cohort"
	"github.com/blanket-fl/blanket/scripts/internal/localrun"
	"github.com/blanket-fl/blanket/shared/dataset/sample"
	"github.com/blanket-fl/blanket/shared/ledger"
)

// classHost is the address the classroom test serves on: not 127.0.0.1
// (so nothing works by accident through "localhost"), an address of this
// machine that the test picks itself and that sends nothing to any network.
const classHost = "127.0.0.2"

// Viewports: a phone (CSS pixels of a 6.1" phone) and a projector.
const (
	phoneW, phoneH = 390, 844
	projW, projH   = 1920, 1080
)

// phone emulates a phone's viewport and touch screen.
func phone() chromedp.Action[chromedp.Void] {
	return chromedp.EmulateViewport(phoneW, phoneH, chromedp.EmulateScale(3), chromedp.EmulateMobile)
}

// projector emulates a 1920x1080 screen.
func projector() chromedp.Action[chromedp.Void] {
	return chromedp.EmulateViewport(projW, projH)
}

// setScheme switches the tab's prefers-color-scheme ("light" or "dark").
func setScheme(tb *tab, scheme string) error {
	_, err := chromedp.Call(tb.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}})
	if err != nil {
		return fmt.Errorf("%s: colour scheme %s: %w", tb.name, scheme, err)
	}
	// Reading a computed style recalculates the styles at once.
	_, err = eval[string](tb, `getComputedStyle(document.documentElement).backgroundColor`)
	return err
}

// contrastJS computes WCAG contrast ratios in the page: text(id) of an
// element's text against its effective background, and graphics(selector)
// of every matched SVG element's stroke or fill against its section's
// background (the lowest ratio, and how many were measured).
const contrastJS = `(() => {
	const parse = (c) => {
		const m = /rgba?\(([^)]+)\)/.exec(c || "");
		if (!m) return null;
		const p = m[1].split(/[\s,\/]+/).filter(Boolean).map(Number);
		return { r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1 };
	};
	const lum = (c) => {
		const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
		return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b);
	};
	const ratio = (a, b) => { const x = lum(a), y = lum(b); return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05); };
	const bg = (el) => {
		for (let e = el; e; e = e.parentElement) {
			const c = parse(getComputedStyle(e).backgroundColor);
			if (c && c.a > 0) return c;
		}
		return { r: 255, g: 255, b: 255 };
	};
	globalThis.__contrast = {
		text(id) {
			const el = document.getElementById(id);
			if (!el) return -1;
			return ratio(parse(getComputedStyle(el).color), bg(el));
		},
		graphics(sel) {
			let lowest = 99, n = 0;
			for (const el of document.querySelectorAll(sel)) {
				const cs = getComputedStyle(el);
				const c = parse(cs.stroke !== "none" ? cs.stroke : cs.fill);
				if (!c) continue;
				lowest = Math.min(lowest, ratio(c, bg(el.closest("section, details, figure") || el)));
				n++;
			}
			return [lowest, n];
		},
	};
	return true;
})()`

// checkContrast asserts WCAG AA: 4.5:1 for the text of the ids, 3:1 for
// the graphics the selectors match (chart lines, legend swatches, target).
func checkContrast(t *testing.T, tb *tab, scheme string, ids []string, graphics []string) {
	t.Helper()
	if _, err := eval[bool](tb, contrastJS); err != nil {
		t.Error(err)
		return
	}
	for _, id := range ids {
		r, err := eval[float64](tb, `__contrast.text(`+strconv.Quote(id)+`)`)
		switch {
		case err != nil:
			t.Error(err)
		case r < 0:
			t.Errorf("%s (%s): no #%s", tb.name, scheme, id)
		case r < 4.5:
			t.Errorf("%s (%s): #%s text contrast %.2f:1, WCAG AA needs 4.5:1", tb.name, scheme, id, r)
		default:
			t.Logf("%s (%s): #%s contrast %.2f:1", tb.name, scheme, id, r)
		}
	}
	for _, sel := range graphics {
		v, err := eval[[]float64](tb, `__contrast.graphics(`+strconv.Quote(sel)+`)`)
		switch {
		case err != nil:
			t.Error(err)
		case v[1] == 0:
			t.Errorf("%s (%s): nothing matches %s", tb.name, scheme, sel)
		case v[0] < 3:
			t.Errorf("%s (%s): %s lowest contrast %.2f:1 against the background, WCAG AA needs 3:1", tb.name, scheme, sel, v[0])
		default:
			t.Logf("%s (%s): %d × %s, lowest contrast %.2f:1", tb.name, scheme, int(v[1]), sel, v[0])
		}
	}
}

// noOverflow asserts the page is no wider than the viewport.
func noOverflow(t *testing.T, tb *tab, what string) {
	t.Helper()
	v, err := eval[[]float64](tb, `[document.documentElement.scrollWidth, window.innerWidth]`)
	if err != nil {
		t.Error(err)
		return
	}
	if v[0] > v[1] {
		t.Errorf("%s: %s is %v px wide in a %v px viewport (horizontal scrolling)", tb.name, what, v[0], v[1])
	}
}

// qrOf decodes the QR code #join-qr of the tab's page from its SVG (one
// rect per run of dark modules, a 4-module quiet zone).
func qrOf(tb *tab) (string, error) {
	raw, err := eval[string](tb, `JSON.stringify((() => {
		const svg = document.getElementById("join-qr");
		if (!svg) return null;
		const n = svg.viewBox.baseVal.width;
		const runs = [...svg.querySelectorAll("rect")].filter((r) => r.getAttribute("fill") === "#000")
			.map((r) => [+r.getAttribute("x"), +r.getAttribute("y"), +r.getAttribute("width")]);
		return { n, runs };
	})())`)
	if err != nil {
		return "", err
	}
	var q struct {
		N    int      `json:"n"`
		Runs [][3]int `json:"runs"`
	}
	if err := json.Unmarshal([]byte(raw), &q); err != nil || q.N == 0 {
		return "", fmt.Errorf("%s: no QR code (%s)", tb.name, raw)
	}
	const quiet = 4
	size := q.N - 2*quiet
	black := make([][]bool, size)
	for y := range black {
		black[y] = make([]bool, size)
	}
	for _, r := range q.Runs {
		x, y := r[0]-quiet, r[1]-quiet
		for i := range r[2] {
			if y < 0 || y >= size || x+i < 0 || x+i >= size {
				return "", fmt.Errorf("%s: QR module outside the code", tb.name)
			}
			black[y][x+i] = true
		}
	}
	return decodeQR(black)
}

// TestClassroom is the classroom as people use it. The servers run on
// 127.0.0.2 with an operator password and start paused, as make run -lan
// -clients 0 does. The projected dashboard (1920x1080) shows the join link
// and its QR code; the phone (390x844) joins through the URL decoded from
// that QR code, which must point at the address the relay serves on; the
// teacher logs in on the operator page and presses Start; the phone's
// status stays on screen and says what happens (paused, the round's
// countdown, training). No page scrolls sideways, and the primary controls
// and chart colours meet WCAG AA in both colour schemes. Screenshots go to
// out/artifacts/classroom-*.png.
func TestClassroom(t *testing.T) {
	exe := chromiumPath(t)
	root := repoRoot(t)
	artifacts := artifactsDir(t, root)
	start := time.Now()
	bins, wasmPath := buildAll(t, root)
	t.Logf("built after %v", time.Since(start).Round(time.Millisecond))

	ctx, cancel := context.WithTimeout(context.Background(), 7*time.Minute)
	defer cancel()
	logPath := filepath.Join(artifacts, "classroom-servers.log")
	logs, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	const password = "test-pass-word-0123"
	cl, err := localrun.Start(ctx, bins, localrun.Options{
		Dir: filepath.Join(t.TempDir(), "state"), Host: classHost, OperatorToken: password, NewClass: true,
		RelayArgs: []string{"-wasm", wasmPath},
		AggregatorArgs: []string{"-wasm", wasmPath, "-protocol", "secagg", "-epsilon", "4", "-check-in", "1",
			"-expected-n", "6", "-quota", "0", "-round-timeout", "25s", "-min-batch", "3", "-paused", "-rounds", "2"},
		Stdout: logs, Stderr: logs,
	})
	if err != nil {
		t.Fatalf("%v (logs: %s)", err, logPath)
	}
	t.Cleanup(func() { cl.Stop() })
	if u, _ := url.Parse(cl.RelayURL()); u.Hostname() != classHost {
		t.Fatalf("relay serves on %s, want %s", cl.RelayURL(), classHost)
	}

	b := newBrowser(t, ctx, exe)
	t.Cleanup(func() {
		for _, p := range b.Problems() {
			t.Errorf("browser: %s", p)
		}
	})

	// The projected dashboard: the join link and its QR code at the top.
	dash := b.open(t, "dashboard-projector", cl.DashboardURL(), projector())
	if err := waitFor(dash, `document.getElementById("join-qr")`, `document.title`, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	joinURL, err := qrOf(dash)
	if err != nil {
		t.Fatal(err)
	}
	// The QR code carries the aggregator key's fingerprint in the URL
	// fragment (the pin the relay cannot change); the rest is the relay's
	// address.
	var served struct {
		Fingerprint string `json:"fingerprint"`
	}
	if err := cl.GetJSON(ctx, "/api/key", &served); err != nil {
		t.Fatal(err)
	}
	pinned, _ := url.Parse(joinURL)
	if pinned.Fragment != "fp="+served.Fingerprint {
		t.Fatalf("the QR code's fragment is %q, want fp=%s", pinned.Fragment, served.Fingerprint)
	}
	pinned.Fragment = ""
	if pinned.String() != cl.JoinURL() {
		t.Fatalf("the dashboard's QR code says %q, the relay serves at %q", joinURL, cl.JoinURL())
	}
	if u, _ := url.Parse(joinURL); u.Hostname() != classHost {
		t.Fatalf("QR code points at %q, not at the address served on (%s)", joinURL, classHost)
	}
	t.Logf("the dashboard's QR code decodes to %s", joinURL)
	top, err := eval[[]float64](dash, `(() => { const q = document.getElementById("join-qr").getBoundingClientRect(),
		a = document.getElementById("chart-accuracy").getBoundingClientRect(); return [q.bottom, a.width, window.innerWidth]; })()`)
	if err != nil {
		t.Fatal(err)
	}
	if top[0] > projH {
		t.Errorf("QR code ends at y = %v, below the projector's %d px", top[0], projH)
	}
	if top[1] < 0.8*top[2] {
		t.Errorf("accuracy chart is %v px wide on a %v px screen, want the full width", top[1], top[2])
	}
	noOverflow(t, dash, "the dashboard at 1920 px")
	// The short join link beside the QR code: the relay's address and the
	// class code (the first characters of the key's fingerprint).
	short, err := eval[[]string](dash, `[document.getElementById("join-short").dataset.value, document.getElementById("join-code").dataset.value]`)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.TrimSuffix(cl.JoinURL(), "/") + "/" + served.Fingerprint[:4]; short[0] != want || short[1] != served.Fingerprint[:4] {
		t.Errorf("short join link %q (code %q), want %q", short[0], short[1], want)
	}
	if len(short[0]) > 40 {
		t.Errorf("the short join link %q has %d characters", short[0], len(short[0]))
	}
	if sb, err := eval[[]float64](dash, `(() => { const r = document.getElementById("join-short").getBoundingClientRect(); return [r.bottom, r.width]; })()`); err != nil || sb[0] > projH || sb[1] == 0 {
		t.Errorf("the short join link is not on the projector's screen: %v (%v)", sb, err)
	}
	checkIcon(t, dash)

	// The operator logs in (the password printed at start); Enter in a
	// field applies the configuration and never presses Start.
	op := b.open(t, "operator", cl.OperatorURL())
	if err := waitFor(op, `document.getElementById("op-password")`, `document.body.innerText.slice(0, 300)`, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if opURL, err := qrOf(op); err != nil || opURL != joinURL {
		t.Errorf("the operator page's QR code says %q (%v), the dashboard's %q", opURL, err, joinURL)
	}
	if err := chromedp.Do(op.ctx, chromedp.SendKeys(chromedp.ID("op-password"), password+"\r")); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(op, `document.getElementById("op-config")`, `document.body.innerText.slice(0, 300)`, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(op.ctx, chromedp.SetValue(chromedp.ID("op-round-timeout"), ""),
		chromedp.SendKeys(chromedp.ID("op-round-timeout"), "25\r")); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(op, `document.getElementById("op-message") && document.getElementById("op-message").textContent.includes("Configuration accepted")`,
		`document.body.innerText.slice(0, 400)`, 10*time.Second); err != nil {
		t.Error(err)
	}
	if !isPaused(ctx, cl) {
		t.Error("Enter in a configuration field started training")
	}
	checkContrast(t, op, "light", []string{"op-start", "op-config", "op-reset"}, nil)

	// A student's phone opens the decoded link.
	ph := b.open(t, "phone", joinURL, phone())
	if err := waitFor(ph, joinReady, joinStateJS, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	noOverflow(t, ph, "the join page at 390 px")
	checkIcon(t, ph)
	// Secure summation (the default): the personal privacy level does
	// nothing, so it is not offered.
	if err := waitFor(ph, `document.getElementById("eps-field").dataset.protocol === "secagg" && document.getElementById("eps-field").hidden`,
		`document.getElementById("eps-field").outerHTML.slice(0, 200)`, 20*time.Second); err != nil {
		t.Error(err)
	}
	checkContrast(t, ph, "light", []string{"start", "status"}, nil)
	if err := ph.screenshot(filepath.Join(artifacts, "classroom-phone-ready.png")); err != nil {
		t.Error(err)
	}
	if err := ph.agree(); err != nil {
		t.Fatal(err)
	}
	if err := ph.click("start"); err != nil {
		t.Fatal(err)
	}
	visible := `(() => { const r = document.getElementById("status").getBoundingClientRect(); return r.top >= 0 && r.bottom <= window.innerHeight; })()`
	statusPlace := `(() => { const r = document.getElementById("status").getBoundingClientRect(); return "status top " + r.top + " bottom " + r.bottom + ", viewport " + window.innerHeight + ", scrollY " + window.scrollY + ", page height " + document.documentElement.scrollHeight + ", focus " + (document.activeElement && document.activeElement.id); })()`
	if err := waitFor(ph, `document.getElementById("round-info").dataset.state === "paused"`, `document.getElementById("live").innerText`, 20*time.Second); err != nil {
		t.Error(err)
	}
	// The status comes into view once the round's state is known after
	// Start (join.js scrolls it there: the consent text above may push it
	// down while the data is prepared).
	if err := waitFor(ph, visible, statusPlace, 10*time.Second); err != nil {
		t.Errorf("after Start the status is not on the phone's screen: %v", err)
	}
	if err := ph.screenshot(filepath.Join(artifacts, "classroom-phone-paused.png")); err != nil {
		t.Error(err)
	}

	// The teacher presses Start while only the phone is there (connected
	// to the relay): the round (minimum batch 3) is cancelled, and both
	// pages say why in words.
	if err := waitFor(dash, `Number(document.getElementById("volunteers").dataset.value) >= 1`,
		`document.querySelector(".dash-head").innerText`, 90*time.Second); err != nil {
		t.Error(err)
	}
	if err := op.click("op-start"); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(dash, `!document.getElementById("round-note").hidden && document.getElementById("round-note").dataset.round === "1"`,
		`document.getElementById("summary").innerText`, 90*time.Second); err != nil {
		t.Error(err)
	}
	if note, err := eval[string](dash, `document.getElementById("round-note").textContent`); err != nil ||
		!strings.Contains(note, "only 1 of the 1 connected volunteers") || !strings.Contains(note, "at least 3") || !strings.Contains(note, "What to do:") {
		t.Errorf("the dashboard's note on the cancelled round: %q (%v)", note, err)
	}
	if err := waitFor(ph, `document.getElementById("my-note").dataset.state === "cancelled" && document.getElementById("my-note").dataset.round === "1" && /only 1 update arrived in 25 s/.test(document.getElementById("my-note").textContent)`,
		phoneStateJS, 60*time.Second); err != nil {
		t.Error(err)
	}
	if err := dash.screenshot(filepath.Join(artifacts, "classroom-dashboard-cancelled.png")); err != nil {
		t.Error(err)
	}
	if err := ph.screenshot(filepath.Join(artifacts, "classroom-phone-cancelled.png")); err != nil {
		t.Error(err)
	}

	// A laptop (1280x800) joins with its own drawings: previews, undo,
	// and the status on screen after Start.
	lap := b.open(t, "laptop", short[0], chromedp.EmulateViewport(1280, 800))
	if err := waitFor(lap, joinReady, joinStateJS, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	if h, err := eval[string](lap, `location.hash`); err != nil || h != "#code="+served.Fingerprint[:4] {
		t.Errorf("the short link leads to %q (%v), want the join page with #code=%s", h, err, served.Fingerprint[:4])
	}
	if err := drawDigits(lap); err != nil {
		t.Fatal(err)
	}
	if n, err := eval[float64](lap, `document.querySelectorAll("#drawing-previews canvas").length`); err != nil || n != 3 {
		t.Errorf("%v drawing previews (%v), want 3", n, err)
	}
	if err := lap.click("undo-drawing"); err != nil {
		t.Fatal(err)
	}
	if v, err := eval[[]float64](lap, `[Number(document.getElementById("drawings").dataset.value), document.querySelectorAll("#drawing-previews canvas").length]`); err != nil || v[0] != 2 || v[1] != 2 {
		t.Errorf("after undo: %v drawings and previews (%v), want 2 and 2", v, err)
	}
	if err := lap.agree(); err != nil {
		t.Fatal(err)
	}
	if err := lap.click("start"); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(lap, `document.getElementById("round-info").textContent !== ""`, `document.getElementById("live").innerText`, 20*time.Second); err != nil {
		t.Error(err)
	}
	// The page scrolls the status into view after Start (smoothly, so it
	// may take a moment on a busy machine).
	if err := waitFor(lap, visible, statusPlace, 10*time.Second); err != nil {
		t.Errorf("after Start on a 1280x800 laptop the status is not on screen: %v", err)
	}
	noOverflow(t, lap, "the join page at 1280 px")
	if err := lap.screenshot(filepath.Join(artifacts, "classroom-laptop-drawings.png")); err != nil {
		t.Error(err)
	}

	// Volunteers to fill the rounds besides the phone (min batch 3).
	key, err := cohort.FetchKey(ctx, nil, cl.AggregatorURL(), "")
	if err != nil {
		t.Fatal(err)
	}
	cctx, ccancel := context.WithCancel(ctx)
	cohortDone := make(chan struct{})
	go func() {
		defer close(cohortDone)
		cohort.Run(cctx, cohort.Config{Relay: cl.WebSocketURL(), Key: key, Clients: 4, PerUser: 100,
			Dataset: sample.Name, Seed: 7, Logger: slog.New(slog.DiscardHandler)})
	}()
	t.Cleanup(func() { ccancel(); <-cohortDone })

	// The phone counts the open round down.
	if err := waitFor(ph, `/Round \d+ is (open: it closes in \d+ s|closing)/.test(document.getElementById("round-info").textContent)`,
		`document.getElementById("live").innerText`, 30*time.Second); err != nil {
		t.Error(err)
	}
	if err := waitFor(ph, `["training", "sent"].includes(document.getElementById("status").dataset.state) || Number(document.getElementById("rounds-joined").dataset.value) >= 1`,
		joinStateJS, 90*time.Second); err != nil {
		t.Error(err)
	}
	if ok, err := eval[bool](ph, visible); err != nil || !ok {
		t.Errorf("during the round the status is not on the phone's screen (%v)", err)
	}
	if err := ph.screenshot(filepath.Join(artifacts, "classroom-phone-round.png")); err != nil {
		t.Error(err)
	}
	if err := waitFor(dash, `Number(document.getElementById("round").dataset.value) >= 1 && Number(document.getElementById("volunteers").dataset.value) >= 1`,
		`document.querySelector(".dash-head").innerText`, 90*time.Second); err != nil {
		t.Error(err)
	}
	// Open the per-method comparison: it is fetched when opened.
	if _, err := eval[bool](dash, `(() => { const d = document.getElementById("privacy-details"); d.open = true; d.scrollIntoView(); return true; })()`); err != nil {
		t.Error(err)
	}
	// (a round that was not charged, too few reports, draws no point: the
	// first charged one does)
	if err := waitFor(dash, `document.querySelector("#chart-epsilon circle.pt")`,
		`document.getElementById("privacy").outerHTML.slice(0, 300)`, 90*time.Second); err != nil {
		t.Error(err)
	}
	if err := dash.screenshot(filepath.Join(artifacts, "classroom-dashboard-1920.png")); err != nil {
		t.Error(err)
	}
	if err := op.screenshot(filepath.Join(artifacts, "classroom-operator.png")); err != nil {
		t.Error(err)
	}
	series := []string{"#chart-accuracy circle.pt", "#chart-epsilon circle.pt", "#chart-epsilon line.ref", "#chart-participants circle.pt"}
	checkContrast(t, dash, "light", []string{"join-url", "round", "accuracy", "epsilon"}, series)

	// The end (-rounds 2): the phone says training is finished with the
	// class's accuracy, Stop is off, and every figure the phone shows is
	// the projector's.
	checkEnd(t, ctx, cl, ph, dash, artifacts)

	// A student who opens the page after the end is told so, and is not
	// offered a Start that can only fail.
	late := b.open(t, "late", short[0], chromedp.EmulateViewport(390, 844))
	if err := waitFor(late, `document.getElementById("status").dataset.state === "finished"`, joinStateJS, 90*time.Second); err != nil {
		t.Error(err)
	}
	if ok, err := eval[bool](late, `document.getElementById("start").disabled && /Training is finished/.test(document.getElementById("status").textContent)`); err != nil || !ok {
		t.Errorf("a page opened after the end: Start not disabled or no \"Training is finished\" (%v)", err)
	}

	// Dark mode.
	for _, tb := range []*tab{ph, dash} {
		if err := setScheme(tb, "dark"); err != nil {
			t.Fatal(err)
		}
	}
	checkContrast(t, ph, "dark", []string{"start", "status"}, nil)
	checkContrast(t, dash, "dark", []string{"join-url", "round", "accuracy", "epsilon"}, series)
	if err := ph.screenshot(filepath.Join(artifacts, "classroom-phone-dark.png")); err != nil {
		t.Error(err)
	}
	if err := dash.screenshot(filepath.Join(artifacts, "classroom-dashboard-dark.png")); err != nil {
		t.Error(err)
	}

	// The dashboard on a phone: readable, no sideways scrolling.
	dph := b.open(t, "dashboard-phone", cl.DashboardURL(), phone())
	if err := waitFor(dph, `document.getElementById("chart-accuracy")`, `document.title`, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	noOverflow(t, dph, "the dashboard at 390 px")
	// The smallest chart label as drawn on the phone's screen.
	if px, err := eval[float64](dph, `(() => {
		let least = 1e9;
		for (const s of document.querySelectorAll("#charts svg.chart")) {
			const w = s.getBoundingClientRect().width;
			if (w === 0) continue; // the variant for the other screen size
			for (const t of s.querySelectorAll("text.tick")) least = Math.min(least, parseFloat(getComputedStyle(t).fontSize) * w / s.viewBox.baseVal.width);
		}
		return least; })()`); err != nil || px < 9 || px > 1e8 {
		t.Errorf("chart labels on a phone are %.1f px (%v), want at least 9", px, err)
	}
	if err := dph.screenshot(filepath.Join(artifacts, "classroom-dashboard-phone.png")); err != nil {
		t.Error(err)
	}

	// New class: the operator asks for it; the aggregator pauses and says
	// so, and make run's supervisor (localrun.NewClass here) restarts it
	// on a fresh state directory: same key, round 0, paused, and the old
	// class's ledger untouched on disk.
	// Before it, the teacher picks the next class's task on the operator
	// page (the survey, by the page's own form); the new class's join page
	// then shows it.
	if _, err := eval[bool](op, `(() => { document.getElementById("op-example").value = "class-survey"; document.getElementById("op-task-choose").click(); return true; })()`); err != nil {
		t.Error(err)
	}
	if err := waitFor(op, `document.getElementById("op-next-task") && document.getElementById("op-next-task").dataset.name === "class-survey"`,
		`document.body.innerText.slice(0, 400)`, 20*time.Second); err != nil {
		t.Error(err)
	}
	oldDir := cl.AggregatorDir()
	oldLedger, err := exportLedger(oldDir)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, cl.AggregatorURL()+"/operator/newclass", nil)
	req.Header.Set("X-Operator-Token", password)
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var nc struct {
		Round    int  `json:"round"`
		Paused   bool `json:"paused"`
		NewClass bool `json:"new_class_requested"`
	}
	if err := cl.GetJSON(ctx, "/api/status", &nc); err != nil || resp.StatusCode != http.StatusSeeOther || !nc.NewClass || !nc.Paused {
		t.Fatalf("new class request: HTTP %d, status %+v (%v)", resp.StatusCode, nc, err)
	}
	newDir := filepath.Join(filepath.Dir(oldDir), "class-2")
	if err := cl.NewClass(ctx, newDir); err != nil {
		t.Fatal(err)
	}
	nc.NewClass = false
	if err := cl.GetJSON(ctx, "/api/status", &nc); err != nil || nc.Round != 0 || !nc.Paused || nc.NewClass {
		t.Errorf("after the new class: status %+v (%v), want round 0, paused", nc, err)
	}
	if k, err := cohort.FetchKey(ctx, nil, cl.AggregatorURL(), ""); err != nil || k.Fingerprint() != key.Fingerprint() {
		t.Errorf("the new class's key %v (%v), want the same fingerprint %s", k.Fingerprint(), err, key.Fingerprint())
	}
	if b, err := exportLedger(oldDir); err != nil || string(b) != string(oldLedger) {
		t.Errorf("the old class's ledger changed (%v)", err)
	}
	if err := waitFor(dash, `document.getElementById("round").dataset.value === "0"`, `document.querySelector("#summary").innerText`, 30*time.Second); err != nil {
		t.Error(err)
	}
	// (the projected dashboard reloads itself for the new task)
	survey := b.open(t, "survey", cl.JoinURL(), phone())
	for _, c := range []struct {
		tb *tab
		id string
	}{{survey, "join-title"}, {dash, "task-title"}} {
		if err := waitFor(c.tb, `document.getElementById("`+c.id+`") && document.getElementById("`+c.id+`").textContent === "How do we get to school?"`,
			`document.querySelector("h1").textContent`, 30*time.Second); err != nil {
			t.Errorf("the new class's page does not show the task chosen on the operator page: %v", err)
		}
	}

	// The aggregator goes away: the projected dashboard says so instead of
	// showing stale figures as live.
	if err := setScheme(dash, "light"); err != nil {
		t.Error(err)
	}
	if err := cl.StopAggregator(); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(dash, `!document.getElementById("disconnected").hidden && document.getElementById("state").dataset.state === "disconnected"`,
		`document.querySelector(".dash-head").innerText`, 30*time.Second); err != nil {
		t.Error(err)
	}
	if err := dash.screenshot(filepath.Join(artifacts, "classroom-dashboard-disconnected.png")); err != nil {
		t.Error(err)
	}
	t.Logf("done after %v; screenshots in %s", time.Since(start).Round(time.Millisecond), artifacts)
}

// isPaused reports whether the aggregator says it is paused.
func isPaused(ctx context.Context, cl *localrun.Cluster) bool {
	var s struct {
		Paused bool `json:"paused"`
	}
	return cl.GetJSON(ctx, "/api/status", &s) == nil && s.Paused
}

// checkIcon asserts the page names an icon and /favicon.ico is served (no
// 404 in the browser's log).
func checkIcon(t *testing.T, tb *tab) {
	t.Helper()
	if _, err := eval[bool](tb, `(globalThis.__icon = 0, fetch("/favicon.ico").then((r) => { globalThis.__icon = r.status; }), true)`); err != nil {
		t.Error(err)
		return
	}
	if err := waitFor(tb, `globalThis.__icon === 200 && document.querySelector('link[rel="icon"]')`, `String(globalThis.__icon)`, 10*time.Second); err != nil {
		t.Errorf("%s: no icon: %v", tb.name, err)
	}
}

// checkEnd waits for the end of training and compares the phone with the
// projector: the final accuracy, the class's privacy total, the sentence
// that anchors ε, and the phone's own figure (what the ledger charged up
// to the last round with its update, from /api/rounds); then both try the
// class model on a drawing.
func checkEnd(t *testing.T, ctx context.Context, cl *localrun.Cluster, ph, dash *tab, artifacts string) {
	t.Helper()
	if err := waitFor(ph, `document.getElementById("status").dataset.state === "finished"`, joinStateJS, 3*time.Minute); err != nil {
		t.Error(err)
		return
	}
	if err := waitFor(dash, `document.getElementById("state").dataset.state === "stopped"`, `document.querySelector(".dash-head").innerText`, 30*time.Second); err != nil {
		t.Error(err)
	}
	final, err := eval[string](dash, `document.getElementById("round").dataset.value`)
	if err != nil {
		t.Fatal(err)
	}
	// The receipt of the last round may follow the end by a few seconds.
	if err := waitFor(ph, `document.getElementById("my-epsilon").dataset.round === "`+final+`"`, joinStateJS, 30*time.Second); err != nil {
		t.Logf("the phone's update is not in the last round's sum: %v", err)
	}
	raw, err := eval[string](ph, `JSON.stringify((() => { const $ = (id) => document.getElementById(id); return {
		stop: $("stop").disabled, start: $("start").disabled, status: $("status").textContent,
		acc: $("class-accuracy").dataset.value, my: $("my-epsilon").dataset.value, myRound: $("my-epsilon").dataset.round || "",
		rounds: $("rounds-joined").dataset.rounds, cls: $("class-epsilon").dataset.value, anchor: $("eps-meaning").textContent.trim() }; })())`)
	if err != nil {
		t.Error(err)
		return
	}
	var p struct {
		Stop, Start                      bool
		Status, Acc, My, MyRound, Rounds string
		Cls, Anchor                      string
	}
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		t.Fatal(err)
	}
	d, err := eval[[]string](dash, `[document.getElementById("accuracy").dataset.value, document.getElementById("epsilon").dataset.value,
		document.getElementById("eps-anchor").textContent.trim(), document.getElementById("round").dataset.value]`)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("phone at the end: %+v; dashboard: accuracy %s, epsilon %s, round %s", p, d[0], d[1], d[3])
	if !p.Stop || !p.Start {
		t.Errorf("after training: Stop disabled %v, Start disabled %v; want both", p.Stop, p.Start)
	}
	if !strings.Contains(p.Status, "Training is finished") || !strings.Contains(p.Status, "% of the test digits") {
		t.Errorf("the phone's final status: %q", p.Status)
	}
	same := func(what, a, b string) {
		x, errA := strconv.ParseFloat(a, 64)
		y, errB := strconv.ParseFloat(b, 64)
		if errA != nil || errB != nil || math.Abs(x-y) > 1e-12*max(1, math.Abs(y)) {
			t.Errorf("%s: the phone shows %q, the projector %q", what, a, b)
		}
	}
	same("class accuracy", p.Acc, d[0])
	// The class alone at ε = 4 learns little: when the model is no better
	// than guessing, the projector says why next to the chart.
	if acc, err := strconv.ParseFloat(d[0], 64); err == nil && acc < 0.2 {
		if err := waitFor(dash, `/no better than guessing/.test((document.getElementById("chance-note") || {}).textContent || "")`,
			`document.getElementById("charts").innerText.slice(0, 300)`, 20*time.Second); err != nil {
			t.Error(err)
		}
	} else {
		t.Logf("accuracy %s: above chance, no chance note expected", d[0])
	}
	same("the class's privacy spent", p.Cls, d[1])
	if p.Anchor == "" || p.Anchor != d[2] {
		t.Errorf("ε anchored differently: phone %q, projector %q", p.Anchor, d[2])
	}
	// The phone's own figure: the ledger's total up to the last round its
	// update was in (the projector's figure when that is the last round).
	var rs struct {
		Rounds []struct {
			Round           int      `json:"round"`
			EpsilonTightest *float64 `json:"epsilon_tightest"`
		} `json:"rounds"`
	}
	if err := cl.GetJSON(ctx, "/api/rounds", &rs); err != nil {
		t.Fatal(err)
	}
	mine := strings.Split(p.Rounds, ",")
	last, err := strconv.Atoi(mine[len(mine)-1])
	if err != nil || p.MyRound != mine[len(mine)-1] {
		t.Errorf("the phone's update was in rounds %q, its ε is for round %q", p.Rounds, p.MyRound)
	} else {
		ledger := 0.0
		for _, r := range rs.Rounds {
			if r.Round <= last && r.EpsilonTightest != nil {
				ledger = *r.EpsilonTightest
			}
		}
		same(fmt.Sprintf("ε up to round %d", last), p.My, strconv.FormatFloat(ledger, 'g', -1, 64))
		if strconv.Itoa(last) == d[3] {
			same("the phone's ε and the projector's", p.My, d[1])
		}
	}
	if err := ph.screenshot(filepath.Join(artifacts, "classroom-phone-finished.png")); err != nil {
		t.Error(err)
	}
	// Draw a digit, see the class model's guess: on the phone and on the
	// projector, from the model after the last round.
	for _, tb := range []*tab{ph, dash} {
		if err := tryModel(tb); err != nil {
			t.Error(err)
			continue
		}
		if err := waitFor(tb, `/^[0-9]$/.test(document.getElementById("try-guess").dataset.value) && document.getElementById("try-model").dataset.round === "`+d[3]+`"`,
			`document.getElementById("try-box").innerText`, 20*time.Second); err != nil {
			t.Error(err)
		}
	}
	if err := ph.screenshot(filepath.Join(artifacts, "classroom-phone-try.png")); err != nil {
		t.Error(err)
	}
	if err := dash.screenshot(filepath.Join(artifacts, "classroom-dashboard-finished.png")); err != nil {
		t.Error(err)
	}
}

// tryModel draws a 1 on the page's #try-canvas.
func tryModel(tb *tab) error {
	box, err := eval[[]float64](tb, `(() => {
		const c = document.getElementById("try-canvas");
		c.scrollIntoView({ block: "center" });
		const r = c.getBoundingClientRect();
		return [r.left, r.top, r.width, r.height];
	})()`)
	if err != nil {
		return err
	}
	if len(box) != 4 || box[2] < 50 || box[3] < 50 {
		return fmt.Errorf("%s: try canvas box %v: not drawable", tb.name, box)
	}
	at := func(x, y float64) [2]float64 { return [2]float64{box[0] + x*box[2], box[1] + y*box[3]} }
	return tb.draw([][2]float64{at(0.5, 0.15), at(0.5, 0.35), at(0.5, 0.55), at(0.5, 0.85)})
}

// phoneStateJS is joinStateJS with the note under the status and an
// error's technical text.
const phoneStateJS = `JSON.stringify({ join: ` + joinStateJS + `, note: (document.getElementById("my-note") || {}).textContent,
	error: document.getElementById("error-text").textContent, info: document.getElementById("round-info").textContent })`

// exportLedger returns the privacy ledger in the aggregator's state
// directory dir (its datastore), in the ledger file format, read-only.
func exportLedger(dir string) ([]byte, error) {
	var b bytes.Buffer
	_, err := ledger.ExportDir(dir, &b)
	return b.Bytes(), err
}
