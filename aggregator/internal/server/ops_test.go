package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/blanket-fl/blanket/aggregator/internal/opsview"
	"github.com/blanket-fl/blanket/web"
)

// scrape parses the aggregator's GET /metrics.
func scrape(t *testing.T, h *harness) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(h.http.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("GET /metrics is not the Prometheus text format: %v", err)
	}
	return fams
}

// value is the value of family name's series whose label (if any) is
// labelValue.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name, labelValue string) float64 {
	t.Helper()
	f := fams[opsview.Prefix+name]
	if f == nil {
		t.Fatalf("no family %s%s", opsview.Prefix, name)
	}
	for _, m := range f.GetMetric() {
		if labelValue != "" && (len(m.GetLabel()) != 1 || m.GetLabel()[0].GetValue() != labelValue) {
			continue
		}
		if m.GetCounter() != nil {
			return m.GetCounter().GetValue()
		}
		return m.GetGauge().GetValue()
	}
	t.Fatalf("no series %s{%s}", name, labelValue)
	return 0
}

// TestPrometheusSeries: GET /metrics is the Prometheus text format with
// the aggregator's series (read at scrape time: a finished round moves
// rounds_total{status="ok"}, last_round and the datastore's counters) and
// the Go runtime's and process's; every label value is from the fixed
// lists.
func TestPrometheusSeries(t *testing.T) {
	relay := newFakeRelay(t)
	h := newHarness(t, t.TempDir(), relay, nil)
	defer h.stop()
	relay.next(t)
	before := scrape(t, h)
	if v := value(t, before, "rounds_total", "ok"); v != 0 {
		t.Fatalf("rounds ok before any: %v", v)
	}
	if value(t, before, "privacy_epsilon_target", "") != 100 || value(t, before, "running", "") != 1 || value(t, before, "open_round", "") != 1 {
		t.Errorf("target, running or open round wrong before the first batch")
	}
	h.sendBatch(makeBatch(t, h.srv.PublicKey(), testParams(), batchSpec{round: 1, reports: 4, value: constValue(0.6)}))
	after := scrape(t, h)
	if value(t, after, "rounds_total", "ok") != 1 || value(t, after, "last_round", "") != 1 {
		t.Errorf("a finished round: rounds ok %v, last round %v", value(t, after, "rounds_total", "ok"), value(t, after, "last_round", ""))
	}
	if value(t, after, "datastore_commits_total", "") <= value(t, before, "datastore_commits_total", "") {
		t.Error("a finished round moved no datastore commit")
	}
	if value(t, after, "privacy_epsilon_spent", "") <= 0 {
		t.Error("a charged round spent no epsilon")
	}
	if after["go_goroutines"] == nil || after["process_start_time_seconds"] == nil {
		t.Error("no Go runtime or process series")
	}
	statuses := map[string]bool{}
	for _, s := range opsview.Statuses {
		statuses[s] = true
	}
	for name, f := range after {
		if !strings.HasPrefix(name, opsview.Prefix) {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "status" && !statuses[l.GetValue()] {
					t.Errorf("%s: status %q is not a round status", name, l.GetValue())
				}
			}
		}
	}
}

// TestReadyz: GET /readyz is 200 when the datastore takes writes, the
// ledger is not suspended and a task is loaded; 503 naming the condition
// otherwise; GET /healthz is 200 throughout.
func TestReadyz(t *testing.T) {
	get := func(h *harness, path string) (int, string) {
		t.Helper()
		resp, err := http.Get(h.http.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	noTask := newHarness(t, t.TempDir(), newFakeRelay(t), nil)
	if code, body := get(noTask, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "\ntask: no task loaded") {
		t.Errorf("without a task: %d %q", code, body)
	}
	noTask.stop()

	h := newHarness(t, t.TempDir(), newFakeRelay(t), func(c *Config) { c.Task = testTask(t) })
	defer h.stop()
	if code, body := get(h, "/readyz"); code != http.StatusOK || body != "ready\n" {
		t.Fatalf("ready aggregator: %d %q", code, body)
	}
	h.srv.ledger.Suspend(errors.New("rollback"))
	if code, body := get(h, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "\nprivacy ledger: suspended: rollback") {
		t.Errorf("suspended ledger: %d %q", code, body)
	}
	h.srv.ledger.Resume()
	h.srv.db.Close()
	if code, body := get(h, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "\ndatastore: refuses writes: ") {
		t.Errorf("closed datastore: %d %q", code, body)
	}
	if code, _ := get(h, "/healthz"); code != http.StatusOK {
		t.Errorf("GET /healthz: %d", code)
	}
}

// syncBuffer is a bytes.Buffer for a logger written from goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// TestLogsCarryTheClass: every line the aggregator logs has the class
// (the join code of its key), and the round's lines the round.
func TestLogsCarryTheClass(t *testing.T) {
	var buf syncBuffer
	relay := newFakeRelay(t)
	h := newHarness(t, t.TempDir(), relay, func(c *Config) { c.Logger = slog.New(slog.NewJSONHandler(&buf, nil)) })
	relay.next(t)
	h.sendBatch(makeBatch(t, h.srv.PublicKey(), testParams(), batchSpec{round: 1, reports: 4, value: constValue(0.6)}))
	h.stop()
	class := web.JoinCodeOf(h.srv.Fingerprint())
	buf.mu.Lock()
	logs := buf.b.String()
	buf.mu.Unlock()
	announced := false
	for line := range strings.Lines(logs) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["class"] != class {
			t.Errorf("%q: class %v, want %q", rec["msg"], rec["class"], class)
		}
		if rec["msg"] == "round announced" && rec["round"] == 1.0 { // round 2 may be announced before the stop
			announced = true
		}
	}
	if !announced {
		t.Errorf("no line announcing round 1 with its round:\n%s", logs)
	}
}
