package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/scripts/internal/cohort"
	"github.com/blanket-fl/blanket/scripts/internal/localrun"
	"github.com/blanket-fl/blanket/shared/dataset/sample"
	"github.com/blanket-fl/blanket/shared/task"
	"github.com/blanket-fl/blanket/shared/task/taskdata"
)

// TestNewClassTrainsFirstRound (issue 23): New class, as make run's
// supervisor runs it (localrun.NewClass: the aggregator restarted on a
// fresh state directory, the relay's class state archived), trains the new
// class's first round in every way a teacher can press it: during a round
// and after training ended, keeping the class's task and with a task chosen
// on the operator page. Before, a relay that kept the previous class's
// rounds refused round 1 ("round 1 is not after round 5") and the new
// class never trained.
//
// The volunteers are native (scripts/internal/cohort) on real websockets:
// what is tested is the servers' hand-over, which a browser page would
// only make slower; TestClassroom drives New class from the operator page.
// The classes run secure summation with 4 volunteers, a minimum batch of 3
// (the relay's own floor too) and 2 rounds each.
func TestNewClassTrainsFirstRound(t *testing.T) {
	root := repoRoot(t)
	artifacts := artifactsDir(t, root)
	bins, wasmPath := buildAll(t, root)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	logPath := filepath.Join(artifacts, "newclass-servers.log")
	logs, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	const password = "test-pass-word-newclass"
	const volunteers = 4
	cl, err := localrun.Start(ctx, bins, localrun.Options{
		Dir: filepath.Join(t.TempDir(), "state"), OperatorToken: password, NewClass: true,
		RelayArgs: []string{"-wasm", wasmPath, "-target-epsilon", "8", "-target-delta", "1e-05", "-min-batch", "3"},
		AggregatorArgs: []string{"-wasm", wasmPath, "-protocol", "secagg", "-epsilon", "8", "-delta", "1e-05", "-check-in", "1",
			"-expected-n", "4", "-round-timeout", "90s", "-min-batch", "3", "-paused", "-rounds", "2"},
		Stdout: logs, Stderr: logs,
	})
	if err != nil {
		t.Fatalf("%v (logs: %s)", err, logPath)
	}
	t.Cleanup(func() { cl.Stop() })
	key, err := cohort.FetchKey(ctx, nil, cl.AggregatorURL(), "")
	if err != nil {
		t.Fatal(err)
	}

	// The volunteers learn the class's task: the digits, or the simulation
	// rows of the task chosen for it.
	stopCohort := func() {}
	startCohort := func() {
		stopCohort()
		cc := cohort.Config{Relay: cl.WebSocketURL(), Key: key, Clients: volunteers, PerUser: 100,
			Dataset: sample.Name, Seed: 7, Logger: slog.New(slog.DiscardHandler)}
		st, err := cl.ClassTask()
		if err != nil {
			t.Fatal(err)
		}
		if st != nil && st.Task.Source != task.SourceBuiltin {
			sets, err := st.Open()
			if err == nil {
				cc.Shares, err = taskdata.Shares(sets, volunteers, cc.Seed)
			}
			if err != nil {
				t.Fatal(err)
			}
			cc.PerUser = 1
		}
		cctx, ccancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			cohort.Run(cctx, cc)
		}()
		stopCohort = func() { ccancel(); <-done; stopCohort = func() {} }
	}
	t.Cleanup(func() { stopCohort() })

	class := 1
	startCohort()
	start(ctx, t, cl, password, volunteers)
	waitRoundOK(ctx, t, cl, 1, logPath)

	for _, step := range []struct {
		name   string
		during bool   // New class while a round of the old class is open
		task   string // the next class's task chosen on the operator page ("": the class's own)
	}{
		{"during training, same task", true, ""},
		{"after training, same task", false, ""},
		{"during training, a new task", true, "breast-cancer"},
		{"after training, a new task", false, task.DigitsName},
	} {
		if step.during {
			waitSecondRound(ctx, t, cl, step.name)
		} else {
			waitStopped(ctx, t, cl, logPath)
		}
		if step.task != "" {
			if err := operatorPost(ctx, cl, password, "task", url.Values{"example": {step.task}}); err != nil {
				t.Fatalf("%s: choosing the task: %v", step.name, err)
			}
		}
		if err := operatorPost(ctx, cl, password, "newclass", nil); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		class++
		if err := cl.NewClass(ctx, filepath.Join(filepath.Dir(cl.AggregatorDir()), fmt.Sprintf("class-%d", class))); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if step.task != "" {
			startCohort() // the new task's volunteers
		}
		var st localrun.Status
		if err := cl.GetJSON(ctx, "/api/status", &st); err != nil || st.Round != 0 {
			t.Fatalf("%s: the new class starts at round %d (%v)", step.name, st.Round, err)
		}
		start(ctx, t, cl, password, volunteers)
		waitRoundOK(ctx, t, cl, 1, logPath)
		t.Logf("%s: class %d trained its first round", step.name, class)
	}
}

// operatorPost posts an operator action with the operator's password.
func operatorPost(ctx context.Context, cl *localrun.Cluster, password, action string, form url.Values) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cl.AggregatorURL()+"/operator/"+action, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Operator-Token", password)
	req.Header.Set("Origin", cl.AggregatorURL())
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusSeeOther {
		return fmt.Errorf("POST /operator/%s: %s", action, resp.Status)
	}
	return nil
}

// start presses Start once want volunteers are connected to the relay.
func start(ctx context.Context, t *testing.T, cl *localrun.Cluster, password string, want int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var info struct {
			Volunteers int `json:"volunteers"`
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cl.RelayURL()+"/api/round", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			json.NewDecoder(resp.Body).Decode(&info)
			resp.Body.Close()
			if info.Volunteers >= want {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d volunteers connected after 2 minutes, want %d", info.Volunteers, want)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if err := operatorPost(ctx, cl, password, "start", nil); err != nil {
		t.Fatal(err)
	}
}

// waitRoundOK waits (generously: minutes on a loaded machine) until round
// r of the current class is applied, and fails with every round's record
// if it ended another way.
func waitRoundOK(ctx context.Context, t *testing.T, cl *localrun.Cluster, r int, logPath string) {
	t.Helper()
	deadline := time.Now().Add(4 * time.Minute)
	for time.Now().Before(deadline) {
		recs, err := cl.Rounds(ctx)
		if err == nil {
			for _, rec := range recs {
				if rec.Round != r {
					continue
				}
				if rec.Status == "ok" {
					return
				}
				t.Fatalf("round %d ended %s (%s); rounds %+v (logs: %s)", r, rec.Status, rec.Detail, recs, logPath)
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	recs, _ := cl.Rounds(ctx)
	var st localrun.Status
	cl.GetJSON(ctx, "/api/status", &st)
	t.Fatalf("round %d not applied within 4 minutes; status %+v, rounds %+v (logs: %s)", r, st, recs, logPath)
}

// waitSecondRound waits until the class's second round is open at the
// relay (announced, not yet closed): the aggregator's open round is 2 and
// the relay has opened two rounds of this class (its /api/metrics count since
// its last start, which New class restarts).
func waitSecondRound(ctx context.Context, t *testing.T, cl *localrun.Cluster, name string) {
	t.Helper()
	var info struct {
		OpenRound int `json:"open_round"`
	}
	var m struct {
		RoundsOpened int `json:"rounds_opened"`
	}
	get := func(u string, v any) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			json.NewDecoder(resp.Body).Decode(v)
			resp.Body.Close()
		}
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		get(cl.AggregatorURL()+"/api/status", &info)
		get(cl.RelayURL()+"/api/metrics", &m)
		if info.OpenRound == 2 && m.RoundsOpened >= 2 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: the class's second round is not open (aggregator's open round %d, relay opened %d)", name, info.OpenRound, m.RoundsOpened)
}

// waitStopped waits until the class has finished its rounds.
func waitStopped(ctx context.Context, t *testing.T, cl *localrun.Cluster, logPath string) {
	t.Helper()
	deadline := time.Now().Add(4 * time.Minute)
	for time.Now().Before(deadline) {
		var st localrun.Status
		if cl.GetJSON(ctx, "/api/status", &st) == nil && st.Stopped != "" {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("the class did not finish within 4 minutes (logs: %s)", logPath)
}
