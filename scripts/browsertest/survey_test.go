package browsertest

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/scripts/internal/cohort"
	"github.com/blanket-fl/blanket/scripts/internal/localrun"
	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/task"
)

// TestSurveyInBrowser runs tasks/class-survey (a form, no public data)
// through the real binaries: a 390 px phone answers the survey built from
// the schema (labelled fields, number inputs with the declared range,
// choices of the declared categories); an answer out of range is refused
// on its own field; the valid answers are the one row the phone trains on,
// next to a native cohort of four answering rows. The dashboard says it
// cannot show accuracy and why, draws five classes of twelve bars, and its
// try form predicts one of the declared classes.
func TestSurveyInBrowser(t *testing.T) {
	exe := chromiumPath(t)
	root := repoRoot(t)
	artifacts := artifactsDir(t, root)
	bins, wasmPath := buildAll(t, root)
	taskPath := filepath.Join(root, "tasks", "class-survey", "task.json")
	tk, _, err := task.Load(taskPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cl, b := startStudy(t, ctx, bins, wasmPath, exe, filepath.Join(artifacts, "survey-servers.log"), taskPath)

	ph := b.open(t, "survey-phone", cl.JoinURL(), phone())
	if err := waitFor(ph, `!document.getElementById("task-form").hidden && `+joinReady, joinStateJS, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	// Every question is a labelled field of the right kind.
	fields, err := eval[[]string](ph, `[...document.querySelectorAll("#task-questions input, #task-questions select")].map((e) =>
		[e.name, e.tagName.toLowerCase(), e.type, e.min || "", e.max || "", e.labels.length ? e.labels[0].textContent : "", e.tagName === "SELECT" ? String(e.options.length - 1) : ""].join("|"))`)
	if err != nil || len(fields) != 5 {
		t.Fatalf("survey fields %q (%v)", fields, err)
	}
	want := []string{"minutes|input|number|0|120|" + tk.Features[0].Question + "|", "distance_km|input|number|0|50|" + tk.Features[1].Question + "|",
		"grade|select|select-one|||" + tk.Features[2].Question + "|6", "weather|select|select-one|||" + tk.Features[3].Question + "|4",
		"transport|select|select-one|||" + tk.Label.Question + "|5"}
	for i := range want {
		if fields[i] != want[i] {
			t.Errorf("field %d: %q, want %q", i, fields[i], want[i])
		}
	}
	if got, err := eval[string](ph, `document.getElementById("task-consent").textContent`); err != nil || got != tk.Consent {
		t.Errorf("consent shown: %.60q (%v)", got, err)
	}
	fill := `(() => { const v = {minutes: %q, distance_km: "3", grade: "4", weather: "rainy", transport: "bus or tram"};
		for (const [k, x] of Object.entries(v)) document.querySelector('#task-questions [name="' + k + '"]').value = x; return true; })()`
	if _, err := eval[bool](ph, strings.Replace(fill, "%q", `"500"`, 1)); err != nil {
		t.Fatal(err)
	}
	if err := ph.agree(); err != nil {
		t.Fatal(err)
	}
	if err := ph.click("start"); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(ph, `document.getElementById("task-q0").getAttribute("aria-invalid") === "true" && !document.getElementById("task-q0-err").hidden`,
		`document.getElementById("task-form").innerText + " | " + document.getElementById("status").textContent`, 10*time.Second); err != nil {
		t.Error(err)
	}
	if st, err := eval[string](ph, `document.getElementById("status").textContent`); err != nil || !strings.Contains(st, "outside the declared range") {
		t.Errorf("status after an answer out of range: %q (%v)", st, err)
	}
	noOverflow(t, ph, "the survey at 390 px")
	if err := ph.screenshot(filepath.Join(artifacts, "survey-phone-invalid.png")); err != nil {
		t.Error(err)
	}
	if _, err := eval[bool](ph, strings.Replace(fill, "%q", `"25"`, 1)); err != nil {
		t.Fatal(err)
	}

	// The phone connects first, so that the classmates' rounds cannot all
	// run before it (on a loaded machine its wasm client may take a while
	// to connect: three rounds of four native clients once finished
	// before it did, in CI under two busy loops). A volunteer who checked
	// in is waited for until the round's deadline.
	if err := ph.agree(); err != nil {
		t.Fatal(err)
	}
	if err := ph.click("start"); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(ph, `["waiting", "training", "sent"].includes(document.getElementById("status").dataset.state)`, phoneStateJS, 120*time.Second); err != nil {
		t.Fatal(err)
	}

	// Four classmates answer too (native clients, one row each).
	key, err := cohort.FetchKey(ctx, nil, cl.AggregatorURL(), "")
	if err != nil {
		t.Fatal(err)
	}
	var shares []logreg.Dataset
	var answers [][]int
	for i := range 4 {
		row := map[string]string{"minutes": strconv.Itoa(5 + 20*i), "distance_km": strconv.Itoa(1 + 4*i),
			"grade": strconv.Itoa(1 + i), "weather": tk.Features[3].Categories[i], "transport": tk.Label.Classes[i]}
		x, y, err := tk.EncodeAnswers(row)
		if err != nil {
			t.Fatal(err)
		}
		a, err := tk.SurveyAnswers(row) // the survey's private counts (each multiple-choice answer)
		if err != nil {
			t.Fatal(err)
		}
		answers = append(answers, a)
		d, err := logreg.NewDataset(tk.Shape(), x, []uint8{y})
		if err != nil {
			t.Fatal(err)
		}
		shares = append(shares, d)
	}
	cctx, ccancel := context.WithCancel(ctx)
	cohortDone := make(chan struct{})
	go func() {
		defer close(cohortDone)
		_, err := cohort.Run(cctx, cohort.Config{Relay: cl.WebSocketURL(), Key: key, Clients: 4, PerUser: 1, Shares: shares, Answers: answers, Seed: 9,
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil && cctx.Err() == nil {
			t.Errorf("cohort: %v", err)
		}
	}()
	t.Cleanup(func() { ccancel(); <-cohortDone })

	if err := waitFor(ph, `Number(document.getElementById("rounds-joined").dataset.value) >= 1`, phoneStateJS, 150*time.Second); err != nil {
		t.Error(err)
	}
	if acc, err := eval[string](ph, `document.getElementById("class-accuracy").textContent`); err != nil || !strings.Contains(acc, "Measured privately") {
		t.Errorf("the phone's class accuracy: %q (%v)", acc, err)
	}
	if err := ph.screenshot(filepath.Join(artifacts, "survey-phone-round.png")); err != nil {
		t.Error(err)
	}

	dash := b.open(t, "survey-dashboard", cl.DashboardURL(), projector())
	if err := waitFor(dash, `document.querySelectorAll("#coef-bars figure.coef").length === 5 && document.getElementById("try-result").dataset.class !== ""`,
		`document.body.innerText.slice(0, 600)`, 30*time.Second); err != nil {
		t.Error(err)
	}
	// Without public test data the accuracy is measured privately on the
	// volunteers' own rows (at a class of 5 it is noise, and says so), and
	// the survey's answers are private counts per question.
	got, err := eval[[]string](dash, `[document.getElementById("accuracy").dataset.source, document.getElementById("accuracy").textContent.trim(),
		String(!!document.getElementById("private-accuracy")), String(document.querySelectorAll("#coef-bars figure.coef")[4].querySelectorAll("rect.coef").length),
		document.querySelectorAll("#coef-bars rect.coef")[2].dataset.name, document.getElementById("try-result").dataset.class, String(!!document.getElementById("survey"))]`)
	if err != nil || got[0] != "volunteers_private" || !strings.Contains(got[1], "private") || got[2] != "true" || got[3] != "12" ||
		got[4] != "grade=1" || !strings.Contains(strings.Join(tk.Label.Classes, "|"), got[5]) || got[6] != "true" {
		t.Errorf("dashboard of a study without test data: %q (%v)", got, err)
	}
	// A class of 5 at ε = 4: the noise dominates, and the dashboard says so
	// from public parameters (dashboard.NoiseWarning).
	if note, err := eval[string](dash, `(document.getElementById("noise-note") || {}).textContent || ""`); err != nil || !strings.Contains(note, "Mostly noise") {
		t.Errorf("the survey's dashboard does not warn that the noise dominates: %q (%v)", note, err)
	}
	noOverflow(t, dash, "the survey's dashboard at 1920 px")
	if err := dash.screenshot(filepath.Join(artifacts, "survey-dashboard-1920.png")); err != nil {
		t.Error(err)
	}
}

// startStudy starts the relay and the aggregator on task taskPath (secure
// summation, ε = 4, rounds of 20 s for a class of 5, minimum batch 3, 3
// rounds; the servers' output in logPath) and a headless Chromium whose
// console problems fail the test.
func startStudy(t *testing.T, ctx context.Context, bins localrun.Binaries, wasmPath, exe, logPath, taskPath string) (*localrun.Cluster, *browser) {
	t.Helper()
	logs, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logs.Close() })
	cl, err := localrun.Start(ctx, bins, localrun.Options{
		Dir: filepath.Join(t.TempDir(), "state"), Host: classHost,
		RelayArgs: []string{"-wasm", wasmPath},
		AggregatorArgs: []string{"-wasm", wasmPath, "-task", taskPath, "-protocol", "secagg", "-epsilon", "4", "-check-in", "1",
			"-expected-n", "5", "-quota", "0", "-round-timeout", "20s", "-min-batch", "3", "-rounds", "3"},
		Stdout: logs, Stderr: logs,
	})
	if err != nil {
		t.Fatalf("%v (logs: %s)", err, logPath)
	}
	t.Cleanup(func() { cl.Stop() })
	b := newBrowser(t, ctx, exe)
	t.Cleanup(func() {
		for _, p := range b.Problems() {
			t.Errorf("browser: %s", p)
		}
	})
	return cl, b
}
