package browsertest

import (
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/blanket-fl/blanket/scripts/internal/cohort"
	"github.com/blanket-fl/blanket/shared/task"
	"github.com/blanket-fl/blanket/shared/task/taskdata"
)

// bodyLog records every request body and WebSocket frame a tab sends
// (Chromium's DevTools protocol: Network.requestWillBeSent's post data,
// Network.webSocketFrameSent's payload, base64 for binary frames).
type bodyLog struct {
	mu     sync.Mutex
	bodies []string
	frames int
}

func (l *bodyLog) listen(t *testing.T, tb *tab) {
	err := chromedp.Listen(tb.ctx, func(ev any) {
		l.mu.Lock()
		defer l.mu.Unlock()
		switch ev := ev.(type) {
		case *network.EventRequestWillBeSent:
			if ev.Request != nil && ev.Request.HasPostData {
				for _, e := range ev.Request.PostDataEntries {
					l.bodies = append(l.bodies, string(e.Bytes))
					if b, err := base64.StdEncoding.DecodeString(string(e.Bytes)); err == nil {
						l.bodies = append(l.bodies, string(b))
					}
				}
			}
		case *network.EventWebSocketFrameSent:
			if ev.Response == nil {
				return
			}
			l.frames++
			p := string(ev.Response.PayloadData)
			l.bodies = append(l.bodies, p)
			if b, err := base64.StdEncoding.DecodeString(p); err == nil {
				l.bodies = append(l.bodies, string(b))
			}
		}
	})
	if err != nil {
		t.Fatalf("%s: listen: %v", tb.name, err)
	}
}

// containing returns the recorded bodies that contain any of needles.
func (l *bodyLog) containing(needles []string) (hits []string, frames int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, b := range l.bodies {
		for _, n := range needles {
			if strings.Contains(b, n) {
				hits = append(hits, n)
			}
		}
	}
	return hits, l.frames
}

// TestStudyInBrowser runs tasks/breast-cancer through the real binaries:
// a phone-size join page shows the study's title and consent, loads a CSV
// file (checked in the wasm client, its bad row listed by row and column)
// whose values never appear in any request body or WebSocket frame the
// page sends, and trains on its rows next to a native cohort; the
// projected dashboard shows the per-class coefficient bars named by the
// schema and a try form that predicts one of the declared classes from
// the exported model.
func TestStudyInBrowser(t *testing.T) {
	exe := chromiumPath(t)
	root := repoRoot(t)
	artifacts := artifactsDir(t, root)
	bins, wasmPath := buildAll(t, root)
	taskPath := filepath.Join(root, "tasks", "breast-cancer", "task.json")
	tk, dir, err := task.Load(taskPath)
	if err != nil {
		t.Fatal(err)
	}

	// The volunteer's file: 20 rows of the public simulation data, one of
	// them (spreadsheet row 4) with a radius outside the declared range.
	raw, err := os.ReadFile(filepath.Join(dir, "train.csv"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	rows := append([]string{lines[0]}, lines[100:121]...)
	cells := strings.Split(rows[3], ",")
	if !strings.HasPrefix(lines[0], "mean_radius,") {
		t.Fatalf("train.csv's first column is not mean_radius: %.40s", lines[0])
	}
	cells[0] = "99"
	rows[3] = strings.Join(cells, ",")
	csvPath := filepath.Join(t.TempDir(), "my-rows.csv")
	if err := os.WriteFile(csvPath, []byte(strings.Join(rows, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// What must never leave the phone: its rows' text.
	needles := []string{rows[1], rows[2], rows[5][:40], "mean_radius", strings.Join(strings.Split(rows[7], ",")[:3], ",")}

	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cl, b := startStudy(t, ctx, bins, wasmPath, exe, filepath.Join(artifacts, "study-servers.log"), taskPath)

	ph := b.open(t, "study-phone", cl.JoinURL(), phone())
	var sent bodyLog
	sent.listen(t, ph)
	if err := waitFor(ph, `!document.getElementById("task-csv").hidden && `+joinReady, joinStateJS, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	if got, err := eval[[]string](ph, `[document.getElementById("join-title").textContent, document.getElementById("task-consent").textContent,
		String(document.getElementById("digits-source").hidden), String(document.getElementById("try-section").hidden)]`); err != nil ||
		got[0] != tk.Title || got[1] != tk.Consent || got[2] != "true" || got[3] != "true" {
		t.Errorf("the join page shows title %q, consent %.60q, digits choice hidden %v, digit drawing hidden %v (%v)", got[0], got[1], got[2], got[3], err)
	}
	if err := chromedp.Do(ph.ctx, chromedp.SetUploadFiles(chromedp.ID("task-file"), []string{csvPath})); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(ph, `document.getElementById("task-csv-result").dataset.rows === "20"`,
		`document.getElementById("task-csv").innerText`, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	rowErr, err := eval[[]string](ph, `(() => { const li = document.querySelectorAll("#task-csv-errors li");
		return [String(li.length), document.getElementById("task-csv-result").dataset.skipped, li[0] ? li[0].dataset.row : "", li[0] ? li[0].dataset.column : "", li[0] ? li[0].textContent : ""]; })()`)
	if err != nil || rowErr[0] != "1" || rowErr[1] != "1" || rowErr[2] != "4" || rowErr[3] != "mean_radius" || !strings.Contains(rowErr[4], "outside the declared range") {
		t.Errorf("row errors shown: %q (%v)", rowErr, err)
	}
	noOverflow(t, ph, "the study's join page at 390 px")
	if err := ph.screenshot(filepath.Join(artifacts, "study-phone-csv.png")); err != nil {
		t.Error(err)
	}

	// A native cohort of four volunteers on the task's simulation rows
	// fills the rounds (minimum batch 3) besides the phone.
	key, err := cohort.FetchKey(ctx, nil, cl.AggregatorURL(), "")
	if err != nil {
		t.Fatal(err)
	}
	sets, err := taskdata.Open(tk, dir, "", "")
	if err != nil {
		t.Fatal(err)
	}
	shares, err := taskdata.Shares(sets, 4, 7)
	if err != nil {
		t.Fatal(err)
	}
	cctx, ccancel := context.WithCancel(ctx)
	cohortDone := make(chan struct{})
	go func() {
		defer close(cohortDone)
		_, err := cohort.Run(cctx, cohort.Config{Relay: cl.WebSocketURL(), Key: key, Clients: 4, PerUser: 1, Shares: shares, Seed: 7,
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil && cctx.Err() == nil {
			t.Errorf("cohort: %v", err)
		}
	}()
	t.Cleanup(func() { ccancel(); <-cohortDone })

	if err := ph.agree(); err != nil {
		t.Fatal(err)
	}
	if err := ph.click("start"); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(ph, `Number(document.getElementById("rounds-joined").dataset.value) >= 1`, phoneStateJS, 150*time.Second); err != nil {
		t.Error(err)
	}
	if err := ph.screenshot(filepath.Join(artifacts, "study-phone-round.png")); err != nil {
		t.Error(err)
	}
	if hits, frames := sent.containing(needles); len(hits) > 0 || frames == 0 {
		t.Errorf("the CSV's values left the phone (%d frames sent): %q", frames, hits)
	}

	// The projected dashboard: bars per class named by the schema, and
	// the try form.
	dash := b.open(t, "study-dashboard", cl.DashboardURL(), projector())
	if err := waitFor(dash, `document.querySelectorAll("#coef-bars figure.coef").length === 2 && document.getElementById("try-result").dataset.class !== ""`,
		`(document.getElementById("charts") || document.body).innerText.slice(0, 400) + " | " + document.getElementById("try-result").textContent`, 30*time.Second); err != nil {
		t.Error(err)
	}
	bars, err := eval[[]string](dash, `(() => { const f = document.querySelector("#coef-bars figure.coef");
		const r = [...f.querySelectorAll("rect.coef")]; return [f.querySelector("figcaption").textContent, String(r.length), r[0].dataset.name,
		String(r.filter((x) => Number(x.getAttribute("width")) > 2).length), String(document.querySelectorAll("#heatmaps").length)]; })()`)
	if err != nil || bars[0] != tk.Label.Classes[0] || bars[1] != "30" || bars[2] != "mean_radius" || bars[3] == "0" || bars[4] != "0" {
		t.Errorf("coefficient bars: class %q, %s bars, first %q, %s visibly long, %s heatmap blocks (%v)", bars[0], bars[1], bars[2], bars[3], bars[4], err)
	}
	// Enter a row of the holdout (declared ranges) and see a prediction.
	set := `(() => { const f = document.getElementById("try-form"), v = %q.split(","), names = %q.split(",");
		names.forEach((n, i) => { if (f.elements.namedItem(n)) f.elements.namedItem(n).value = v[i]; });
		f.dispatchEvent(new Event("input")); return document.getElementById("try-result").textContent; })()`
	hold, err := os.ReadFile(filepath.Join(dir, "holdout.csv"))
	if err != nil {
		t.Fatal(err)
	}
	hl := strings.Split(strings.TrimSpace(string(hold)), "\n")
	got, err := eval[string](dash, fmt.Sprintf(set, hl[1], hl[0]))
	if err != nil || !strings.HasPrefix(got, "Prediction: ") || !(strings.Contains(got, "malignant") || strings.Contains(got, "benign")) {
		t.Errorf("try form: %q (%v)", got, err)
	}
	if out, err := eval[string](dash, fmt.Sprintf(set, "99", "mean_radius")); err != nil || !strings.Contains(out, "outside") {
		t.Errorf("try form with a value outside the range: %q (%v)", out, err)
	}
	eval[string](dash, fmt.Sprintf(set, hl[1], hl[0]))
	var exp struct {
		Task    *task.Task `json:"task"`
		Inputs  []string   `json:"inputs"`
		Weights []float64  `json:"weights"`
		Bias    []float64  `json:"bias"`
	}
	if err := cl.GetJSON(ctx, "/api/export", &exp); err != nil || exp.Task == nil || exp.Task.Name != tk.Name || len(exp.Inputs) != 30 || len(exp.Weights) != 60 || len(exp.Bias) != 2 {
		t.Errorf("export: %v, %d inputs, %d weights", err, len(exp.Inputs), len(exp.Weights))
	}
	noOverflow(t, dash, "the study's dashboard at 1920 px")
	if err := dash.screenshot(filepath.Join(artifacts, "study-dashboard-1920.png")); err != nil {
		t.Error(err)
	}
	dph := b.open(t, "study-dashboard-phone", cl.DashboardURL(), phone())
	if err := waitFor(dph, `document.querySelectorAll("#coef-bars figure.coef").length === 2`, `document.title`, 20*time.Second); err != nil {
		t.Error(err)
	}
	noOverflow(t, dph, "the study's dashboard at 390 px")
	if err := dph.screenshot(filepath.Join(artifacts, "study-dashboard-phone.png")); err != nil {
		t.Error(err)
	}
}
