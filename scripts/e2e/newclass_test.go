package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/scripts/internal/cohort"
	"github.com/blanket-fl/blanket/scripts/internal/localrun"
	"github.com/blanket-fl/blanket/shared/ledger"
	"github.com/blanket-fl/blanket/shared/task"
	"github.com/blanket-fl/blanket/shared/task/taskdata"
)

// TestNewClassSwitchesTask: a class that runs the built-in digits (d =
// 8340, scatter1) chooses the shipped breast-cancer example on the operator page's
// API (POST /operator/task) and asks for a new class; the supervisor
// (localrun's NewClass, as make run does) restarts the aggregator with a
// fresh state directory, and the new class learns breast cancer: the
// aggregator's model and the relay's join-page definition are the new
// task's, d = (30 + 1)·2 = 62, 20 native volunteers on its simulation
// rows finish a secure-summation round at that d, the new class's rounds
// and privacy ledger start from nothing, the old class's ledger and task
// are unchanged, and the volunteers' fingerprint is the same.
func TestNewClassSwitchesTask(t *testing.T) {
	const clients, op = 20, "operator-token-0123456789"
	ctx := context.Background()
	var logs io.Writer = io.Discard
	if testing.Verbose() {
		logs = os.Stderr
	}
	dir := t.TempDir()
	cl, err := localrun.Start(ctx, bins, localrun.Options{Dir: dir, NewClass: true, OperatorToken: op, Stdout: logs, Stderr: logs,
		AggregatorArgs: []string{"-paused", "-protocol", "secagg", "-check-in", "1", "-rounds", "2", "-epsilon", "50",
			"-expected-n", "20", "-min-batch", "10", "-quota", "20", "-round-timeout", scaled(40 * time.Second).String(),
			"-batch-grace", scaled(time.Minute).String()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Stop() })
	oldDir := cl.AggregatorDir()
	shape := func() (string, int) {
		t.Helper()
		var m struct {
			Features, Classes int
			Params            []float64
		}
		if err := cl.GetJSON(ctx, "/api/model", &m); err != nil {
			t.Fatal(err)
		}
		var rt struct{ Name string }
		resp, err := http.Get(cl.RelayURL() + "/api/task") // what the join page reads
		if err != nil {
			t.Fatal(err)
		}
		err = jsonDecode(resp, &rt)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Params) != (m.Features+1)*m.Classes {
			t.Fatalf("model of %d parameters for %d features and %d classes", len(m.Params), m.Features, m.Classes)
		}
		return rt.Name, len(m.Params)
	}
	if name, d := shape(); name != task.DigitsName || d != 8340 {
		t.Fatalf("first class: task %q, d = %d; want the digits, 8340 (scatter1)", name, d)
	}
	var before struct{ Fingerprint string }
	if err := cl.GetJSON(ctx, "/api/status", &before); err != nil {
		t.Fatal(err)
	}

	post := func(action string, form url.Values) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, cl.OperatorURL()+"/"+action, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Operator-Token", op)
		resp, err := http.DefaultTransport.RoundTrip(req) // no redirects: 303 is success
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("POST /operator/%s: HTTP %d: %.400s", action, resp.StatusCode, b)
		}
	}
	post("task", url.Values{"example": {"breast-cancer"}})
	post("newclass", nil)
	var st struct {
		NewClass bool `json:"new_class_requested"`
	}
	if err := cl.GetJSON(ctx, "/api/status", &st); err != nil || !st.NewClass {
		t.Fatalf("new class not requested: %v %+v", err, st)
	}
	oldLedger, _ := exportLedger(oldDir)
	if err := cl.NewClass(ctx, filepath.Join(dir, "classes", "second")); err != nil {
		t.Fatal(err)
	}
	if name, d := shape(); name != "breast-cancer" || d != 62 {
		t.Fatalf("new class: task %q, d = %d; want breast-cancer, 62", name, d)
	}
	if st, err := cl.ClassTask(); err != nil || st == nil || st.Task.Name != "breast-cancer" || len(st.Files) != 2 {
		t.Errorf("the new class's task in its datastore: %+v, %v", st, err)
	}
	var after struct {
		Fingerprint string
		Round       int
		Epsilon     float64
		Task        string
	}
	if err := cl.GetJSON(ctx, "/api/status", &after); err != nil {
		t.Fatal(err)
	}
	if after.Fingerprint != before.Fingerprint || after.Round != 0 || after.Epsilon != 0 || after.Task != "breast-cancer" {
		t.Fatalf("new class status %+v; want the same fingerprint %s, no round, nothing spent, the new task", after, before.Fingerprint)
	}

	tk, tdir, err := task.Load("../../tasks/breast-cancer/task.json")
	if err != nil {
		t.Fatal(err)
	}
	sets, err := taskdata.Open(tk, tdir, "", "")
	if err != nil {
		t.Fatal(err)
	}
	shares, err := taskdata.Shares(sets, clients, 7)
	if err != nil {
		t.Fatal(err)
	}
	startCohort(t, cl, cohort.Config{Clients: clients, Shares: shares, Seed: 7}, nil)
	post("start", nil)
	rs := waitOK(t, cl, 1, 3*time.Minute)
	if rs[0].N < 10 || rs[0].EpsilonTightest == nil || *rs[0].EpsilonTightest <= 0 || rs[0].Accuracy == nil {
		t.Errorf("first round of the new class: %+v", rs[0])
	}
	all, err := cl.Rounds(ctx)
	if err != nil || len(all) == 0 || all[0].Round != 1 {
		t.Errorf("the new class's rounds %+v (%v): want its own, from round 1", all, err)
	}
	if name, d := shape(); name != "breast-cancer" || d != 62 {
		t.Errorf("after a round: task %q, d = %d", name, d)
	}
	if b, _ := exportLedger(oldDir); string(b) != string(oldLedger) {
		t.Error("the old class's ledger changed")
	}
	if st, err := localrun.ReadTask(oldDir, task.ClassBucket); err != nil || st != nil {
		t.Errorf("the old class's datastore gained a class task: %+v, %v", st, err)
	}
	if st, err := localrun.ReadTask(oldDir, task.NextClassBucket); err != nil || st == nil || st.Task.Name != "breast-cancer" {
		t.Errorf("the old class's choice for the next class: %+v, %v", st, err)
	}
	for _, d := range []string{task.ClassDir, task.NextClassDir} {
		if _, err := os.Stat(filepath.Join(oldDir, d)); !os.IsNotExist(err) {
			t.Errorf("a task directory %s was written in the old class's directory: %v", d, err)
		}
	}
}

// jsonDecode decodes an HTTP 200 response's JSON body into v and closes it.
func jsonDecode(resp *http.Response, v any) error {
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %s", resp.Request.URL, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// exportLedger returns the privacy ledger in the aggregator's state
// directory dir (its datastore), in the ledger file format, read-only.
func exportLedger(dir string) ([]byte, error) {
	var b bytes.Buffer
	_, err := ledger.ExportDir(dir, &b)
	return b.Bytes(), err
}
