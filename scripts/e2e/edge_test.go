package e2e

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/scripts/internal/cohort"
	"github.com/blanket-fl/blanket/scripts/internal/localrun"
	"github.com/blanket-fl/blanket/shared/dataset/sample"
)

// TestSecAggThroughEdges: the relay's volunteers spread over an edge relay
// (relay -edge-of, relay/internal/edge) and the owning relay itself. The
// edge holds 20 volunteers' websockets and hands their reports to the
// owner, which prepares them with its own 10 as the PINE helper: every
// round is ok with the 30 reports accepted (the edge's counted in: the
// owner waits for the edge's counts), and the edge accepted its
// volunteers' frames. Then the edge is killed (SIGKILL) and started again:
// its volunteers reconnect and a later round is again ok with all 30.
func TestSecAggThroughEdges(t *testing.T) {
	const atEdge, atOwner = 20, 10
	dir := t.TempDir()
	var logs io.Writer = io.Discard
	if testing.Verbose() {
		logs = os.Stderr
	}
	n := strconv.Itoa(atEdge + atOwner)
	cl, err := localrun.Start(context.Background(), bins, localrun.Options{Dir: dir, Stdout: logs, Stderr: logs,
		AggregatorArgs: []string{"-protocol", "secagg", "-expected-n", n, "-quota", n, "-min-batch", "20", "-rounds", "4",
			"-epsilon", "50", "-check-in", "1", "-round-timeout", scaled(40 * time.Second).String(), "-batch-grace", scaled(time.Minute).String()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Stop() })
	startEdge := func(addr string) *localrun.Edge {
		e, err := cl.StartEdge(context.Background(), bins.Relay, addr, "edge-1")
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	edge := startEdge("")
	edgeAddr := edge.Addr
	t.Cleanup(func() { edge.Kill() })

	ctx, cancel := context.WithCancel(context.Background())
	key, err := cohort.FetchKey(ctx, nil, cl.AggregatorURL(), "")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{}, 2)
	for _, c := range []cohort.Config{
		{Relay: edge.WebSocketURL(), Clients: atEdge, Seed: 3},
		{Relay: cl.WebSocketURL(), Clients: atOwner, Seed: 4},
	} {
		c.Key, c.PerUser, c.Dataset, c.SeededNoise, c.Logger = key, 8000/(atEdge+atOwner), sample.Name, true, slog.New(slog.DiscardHandler)
		go func() { cohort.Run(ctx, c); done <- struct{}{} }()
	}
	t.Cleanup(func() { cancel(); <-done; <-done })
	edgeConns := func() int {
		var v struct {
			Connections int    `json:"connections"`
			Accepted    uint64 `json:"accepted"`
		}
		resp, err := http.Get(edge.URL() + "/api/edge")
		if err != nil {
			return -1
		}
		defer resp.Body.Close()
		json.NewDecoder(resp.Body).Decode(&v)
		return v.Connections
	}
	waitConns := func() {
		t.Helper()
		if err := cl.WaitVolunteers(ctx, atOwner, scaled(3*time.Minute)); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(scaled(3 * time.Minute)); edgeConns() < atEdge; time.Sleep(200 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d volunteers at the edge", edgeConns(), atEdge)
			}
		}
	}
	waitConns()
	before, _ := cl.Rounds(ctx)
	rs := waitOK(t, cl, len(ok(before))+1, 4*time.Minute)
	if r := rs[len(rs)-1]; r.N != atEdge+atOwner {
		t.Fatalf("round %d through the edge: %d reports accepted, want %d (%d at the edge)", r.Round, r.N, atEdge+atOwner, atEdge)
	}

	// The edge is killed and comes back: its volunteers reconnect.
	edge.Kill()
	edge = startEdge(edgeAddr)
	waitConns()
	before, _ = cl.Rounds(ctx)
	rs = waitOK(t, cl, len(ok(before))+1, 4*time.Minute)
	if r := rs[len(rs)-1]; r.N != atEdge+atOwner {
		t.Fatalf("round %d after the edge's restart: %d reports accepted, want %d", r.Round, r.N, atEdge+atOwner)
	}
}
