package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/blanket-fl/blanket/shared/task"
)

// TestStatusServerStep: /api/status and the dashboard's configuration list
// name the server's step beside its learning rate: for secure summation
// the task's FedAvgM with its β, for a shuffle protocol plain sgd (the
// momentum applies to secure summation only: rounds.OptimizerOf).
func TestStatusServerStep(t *testing.T) {
	tk, err := task.Parse([]byte(`{"version": 1, "name": "tiny", "title": "Tiny", "consent": "Yes.", "source": "form",
		"features": [{"name": "x", "type": "numeric", "min": -1, "max": 1, "count": 3}],
		"label": {"name": "y", "classes": ["a", "b"]}, "model": {"type": "logreg"},
		"training": {"server_optimizer": "momentum", "server_momentum": 0.8}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, kind, words string
		beta, lr          float64
		secagg            bool
	}{{"secagg", "momentum", "momentum (FedAvgM), β = 0.8", 0.8, 1, true}, {"ss-topk", "sgd", "sgd", 0, 2, false}} {
		t.Run(c.name, func(t *testing.T) {
			var h *harness
			if c.secagg {
				h = newSecAggHarness(t, t.TempDir(), newSecAggRelay(t), func(cfg *Config) { cfg.Task = tk })
			} else {
				h = newHarness(t, t.TempDir(), newFakeRelay(t), func(cfg *Config) { cfg.Task = tk })
			}
			resp, err := http.Get(h.http.URL + "/api/status")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var st struct {
				Optimizer string  `json:"server_optimizer"`
				Beta      float64 `json:"server_momentum"`
				LR        float64 `json:"server_lr"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
				t.Fatal(err)
			}
			if st.Optimizer != c.kind || st.Beta != c.beta || st.LR != c.lr {
				t.Errorf("/api/status: server step %+v, want %s β %v at lr %v", st, c.kind, c.beta, c.lr)
			}
			var lines []string
			for _, it := range h.srv.DashboardData().Config {
				lines = append(lines, it.Name+"="+it.Value)
			}
			if !strings.Contains(strings.Join(lines, "\n"), "server optimiser="+c.words+"\nserver learning rate=") {
				t.Errorf("configuration list %q lacks the optimiser %q before the learning rate", lines, c.words)
			}
		})
	}
}
