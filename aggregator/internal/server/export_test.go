package server

import (
	"encoding/json"
	"github.com/blanket-fl/blanket/aggregator/internal/classtask"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestExport: GET /api/export is the current model with the task it was
// trained for (without the operator's paths), in the task's layout: the
// encoded input names, C·F weights and C biases, the model's own numbers
// after a round; 404 without a task.
func TestExport(t *testing.T) {
	h := newHarness(t, t.TempDir(), newFakeRelay(t), func(cfg *Config) { cfg.Task = testTask(t) })
	h.relay.next(t)
	h.sendBatch(makeBatch(t, h.srv.PublicKey(), testParams(), batchSpec{round: 1, reports: 4, value: constValue(0.6)}))
	h.relay.next(t)
	resp, err := http.Get(h.http.URL + "/api/export?download=1")
	if err != nil {
		t.Fatal(err)
	}
	var e Export
	err = json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTP %d: %v", resp.StatusCode, err)
	}
	if cd := resp.Header.Get("Content-Disposition"); cd != `attachment; filename="blanket-model-tiny-round1.json"` {
		t.Errorf("Content-Disposition %q", cd)
	}
	if e.Task == nil || e.Task.Name != "tiny" || e.Task.Holdout != "" || e.RoundsOK != 1 || e.AccuracySource != "public_holdout" || e.Accuracy == nil {
		t.Fatalf("export %+v", e)
	}
	if !slices.Equal(e.Inputs, []string{"x_0", "x_1", "x_2"}) || len(e.Weights) != 6 || len(e.Bias) != 2 {
		t.Fatalf("inputs %v, %d weights, %d biases", e.Inputs, len(e.Weights), len(e.Bias))
	}
	if m := h.srv.Model(); !slices.Equal(append(slices.Clone(e.Weights), e.Bias...), m) || allZero(m) {
		t.Errorf("exported %v %v, model %v", e.Weights, e.Bias, m)
	}

	bare := newHarness(t, t.TempDir(), newFakeRelay(t), nil)
	if resp, err := http.Get(bare.http.URL + "/api/export"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("no task: %v %v, want 404", resp.StatusCode, err)
	}
}

// TestEncodedInputs: one name per encoded column, in the task's layout.
func TestEncodedInputs(t *testing.T) {
	tk := testTask(t)
	if got := classtask.EncodedInputs(tk); len(got) != tk.Inputs() {
		t.Errorf("%d names for %d inputs", len(got), tk.Inputs())
	}
}

// TestOperatorNamesTask: the operator page names the study (chosen at
// start with -task), even before the operator logs in.
func TestOperatorNamesTask(t *testing.T) {
	h := newHarness(t, t.TempDir(), newFakeRelay(t), func(cfg *Config) { cfg.Task = testTask(t) })
	code, page := get(t, h.http.URL+"/operator")
	if code != http.StatusOK || !strings.Contains(page, `id="op-task" data-name="tiny"`) || !strings.Contains(page, "-task FILE") {
		t.Errorf("operator page (HTTP %d) does not name the task", code)
	}
}
