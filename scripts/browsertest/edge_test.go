package browsertest

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/scripts/internal/cohort"
	"github.com/blanket-fl/blanket/scripts/internal/localrun"
	"github.com/blanket-fl/blanket/shared/dataset/sample"
)

// TestVolunteerThroughEdge: a volunteer on a phone opens the join page of
// an edge relay (relay -edge-of: the page, the module and the API passed
// through to the relay, the websocket held by the edge), agrees and
// starts; a native cohort on the relay itself fills the rounds. The
// phone's report, handed by the edge to the relay, is in an ok round (its
// page counts a round joined), and the edge counted its frames accepted.
func TestVolunteerThroughEdge(t *testing.T) {
	exe := chromiumPath(t)
	root := repoRoot(t)
	artifacts := artifactsDir(t, root)
	bins, wasmPath := buildAll(t, root)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const native, rounds = 12, 2
	logPath := filepath.Join(artifacts, "browsertest-edge-servers.log")
	logs, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	dir := filepath.Join(t.TempDir(), "state")
	cl, err := localrun.Start(ctx, bins, localrun.Options{Dir: dir, RelayArgs: []string{"-wasm", wasmPath},
		AggregatorArgs: []string{"-wasm", wasmPath, "-protocol", "secagg", "-epsilon", "50", "-check-in", "1",
			"-expected-n", strconv.Itoa(native + 1), "-quota", "0", "-round-timeout", roundTimeout.String(),
			"-min-batch", "10", "-rounds", strconv.Itoa(rounds)},
		Stdout: logs, Stderr: logs})
	if err != nil {
		t.Fatalf("%v (logs: %s)", err, logPath)
	}
	t.Cleanup(func() { cl.Stop() })
	edge, err := cl.StartEdge(ctx, bins.Relay, "", "edge-phone")
	if err != nil {
		t.Fatalf("%v (logs: %s)", err, logPath)
	}
	t.Cleanup(func() { edge.Kill() })
	edgeURL := edge.URL()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(edgeURL + "/api/key"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK { // the relay's, passed through: a round was announced
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the edge passes no aggregator key through after a minute (logs: %s)", logPath)
		}
	}

	b := newBrowser(t, ctx, exe)
	t.Cleanup(func() {
		for _, p := range b.Problems() {
			t.Errorf("browser: %s", p)
		}
	})
	ph := b.open(t, "phone-at-edge", edgeURL+"/", phone())
	if err := waitFor(ph, joinReady, joinStateJS, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := ph.agree(); err != nil {
		t.Fatal(err)
	}
	if err := ph.click("start"); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(ph, `["waiting", "training", "sent"].includes(document.getElementById("status").dataset.state)`, joinStateJS, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	key, err := cohort.FetchKey(ctx, nil, cl.AggregatorURL(), "")
	if err != nil {
		t.Fatal(err)
	}
	cctx, ccancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		cohort.Run(cctx, cohort.Config{Relay: cl.WebSocketURL(), Key: key, Clients: native, PerUser: perUser,
			Dataset: sample.Name, Seed: 7, Logger: slog.New(slog.DiscardHandler)})
	}()
	t.Cleanup(func() { ccancel(); <-done })

	// The phone's page counts a round joined once a round it reported in
	// is ok: its report went through the edge into the relay's sum.
	if err := waitFor(ph, `Number(document.getElementById("rounds-joined").getAttribute("data-value")) >= 1`, joinStateJS, 3*time.Minute); err != nil {
		rs, _ := cl.Rounds(context.Background())
		t.Fatalf("%v; rounds %+v; logs %s", err, rs, logPath)
	}
	var counts struct {
		Accepted uint64            `json:"accepted"`
		Rejected map[string]uint64 `json:"rejected"`
	}
	resp, err := http.Get(edgeURL + "/api/edge")
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&counts)
	resp.Body.Close()
	if counts.Accepted < 2 || len(counts.Rejected) != 0 {
		t.Errorf("the edge counted %d frames accepted, rejected %v: want the phone's check-in and report, none rejected", counts.Accepted, counts.Rejected)
	}
	if err := ph.screenshot(filepath.Join(artifacts, "join-through-edge.png")); err != nil {
		t.Error(err)
	}
}
