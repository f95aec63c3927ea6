package server

import (
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/blanket-fl/blanket/aggregator/internal/classtask"
	"github.com/blanket-fl/blanket/shared/task"
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
	// The study record: the hash is of the bytes GET /api/task serves,
	// and the privacy spent is the ledger's, by its row.
	_, taskBody := get(t, h.http.URL+"/api/task")
	sum := sha256.Sum256([]byte(taskBody))
	st := h.srv.Status()
	rc := h.srv.Current()
	if r := e.Study; r == nil || r.TaskSHA256 != hex.EncodeToString(sum[:]) || r.Epsilon != st.Epsilon || !(r.Epsilon > 0) ||
		r.Method == "" || r.Method != st.Method || r.TargetEpsilon != st.TargetEpsilon || r.AggregatorKey != h.srv.PublicKey().Fingerprint() ||
		r.Protocol.Clip != rc.Params.Clip || r.ServerLR != rc.ServerLR || r.RoundsOK != 1 || r.Software.GoVersion == "" {
		t.Errorf("study record %+v (status %+v)", e.Study, st)
	}
	// The consent text the volunteers were shown (GET /api/task's) and
	// the hash their leader shares are sealed under.
	var served task.Task
	if err := json.Unmarshal([]byte(taskBody), &served); err != nil {
		t.Fatal(err)
	}
	if ch := task.ConsentHash(&served); e.Study != nil && (e.Study.Consent.Text != served.Consent || served.Consent == "" ||
		e.Study.Consent.SHA256 != hex.EncodeToString(ch[:]) || e.Study.Consent.Version != hex.EncodeToString(ch[:4])) {
		t.Errorf("study consent %+v, want the served text %q and its hash %x", e.Study.Consent, served.Consent, ch)
	}
	// The rounds as CSV: the header, then round 1 ok with its epsilon.
	code, csvBody := get(t, h.http.URL+"/api/rounds.csv")
	rows, err := csv.NewReader(strings.NewReader(csvBody)).ReadAll()
	if code != http.StatusOK || err != nil || len(rows) != 2 || rows[0][0] != "round" || rows[1][0] != "1" || rows[1][1] != "ok" || rows[1][8] == "" {
		t.Errorf("rounds.csv (HTTP %d, %v):\n%s", code, err, csvBody)
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
