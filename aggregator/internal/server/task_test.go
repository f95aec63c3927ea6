package server

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/task"
)

// TestAccuracySource: with a public holdout the round's accuracy is shown
// and /api/status says "public_holdout"; for a task without public test
// data (logreg.ShapeOnly) the same round completes and updates the model,
// but no accuracy or loss is computed and the status says "none".
func TestAccuracySource(t *testing.T) {
	for _, c := range []struct {
		holdout bool
		want    string
	}{{true, "public_holdout"}, {false, "none"}} {
		h := newHarness(t, t.TempDir(), newFakeRelay(t), func(cfg *Config) {
			cfg.Task = testTask(t)
			if !c.holdout {
				var err error
				if cfg.Test, err = logreg.ShapeOnly(cfg.Test.Shape()); err != nil {
					t.Fatal(err)
				}
			}
		})
		h.relay.next(t)
		h.sendBatch(makeBatch(t, h.srv.PublicKey(), testParams(), batchSpec{round: 1, reports: 4, value: constValue(0.6)}))
		h.relay.next(t) // round 1 is recorded before round 2 is announced
		resp, err := http.Get(h.http.URL + "/api/status")
		if err != nil {
			t.Fatal(err)
		}
		var st struct {
			RoundsOK       int      `json:"rounds_ok"`
			Accuracy       *float64 `json:"accuracy"`
			Loss           *float64 `json:"loss"`
			AccuracySource string   `json:"accuracy_source"`
			Task           string   `json:"task"`
		}
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if st.RoundsOK != 1 || st.AccuracySource != c.want || st.Task != "tiny" || (st.Accuracy != nil) != c.holdout || (st.Loss != nil) != c.holdout {
			t.Errorf("holdout %v: status %+v", c.holdout, st)
		}
		if m := h.srv.Model(); !c.holdout && allZero(m) {
			t.Error("the round did not update the model")
		}
	}
}

// testTask is a task of testSet's shape (3 features, 2 classes).
func testTask(t *testing.T) *task.Task {
	t.Helper()
	tk, err := task.Parse([]byte(`{"version": 1, "name": "tiny", "title": "Tiny", "consent": "Yes.", "source": "form",
		"features": [{"name": "x", "type": "numeric", "min": -1, "max": 1, "count": 3}],
		"label": {"name": "y", "classes": ["a", "b"]}, "model": {"type": "logreg"}, "holdout": "secret/path.csv"}`))
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// TestTaskEndpoint: GET /api/task serves the public definition without
// the operator's file paths, and 404 without a task; a task whose model
// differs from the test set's is refused.
func TestTaskEndpoint(t *testing.T) {
	h := newHarness(t, t.TempDir(), newFakeRelay(t), func(cfg *Config) { cfg.Task = testTask(t) })
	resp, err := http.Get(h.http.URL + "/api/task")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("HTTP %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	back, err := task.Parse(body)
	if err != nil || back.Name != "tiny" || back.D() != 8 || back.Holdout != "" || strings.Contains(string(body), "secret") {
		t.Fatalf("served %s: %v", body, err)
	}
	h2 := newHarness(t, t.TempDir(), newFakeRelay(t), nil)
	if resp, err := http.Get(h2.http.URL + "/api/task"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("no task: %v %v", resp.Status, err)
	}
	cfg := h.cfg
	cfg.StateDir = t.TempDir()
	cfg.Task, _ = task.Parse([]byte(strings.Replace(`{"version": 1, "name": "t", "title": "T", "consent": "Yes.", "source": "form",
		"features": [{"name": "x", "type": "numeric", "min": -1, "max": 1, "count": 4}],
		"label": {"name": "y", "classes": ["a", "b"]}, "model": {"type": "logreg"}}`, "\n", " ", -1)))
	if _, err := New(cfg); err == nil {
		t.Fatal("a task of 4 features with a test set of 3 accepted")
	}
}

func allZero(v []float64) bool {
	for _, x := range v {
		if x != 0 {
			return false
		}
	}
	return true
}
