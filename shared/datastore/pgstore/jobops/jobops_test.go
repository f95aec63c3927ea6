package jobops

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

type counts struct{ done, failed, lost int64 }

func (c *counts) Done() int64   { return c.done }
func (c *counts) Failed() int64 { return c.failed }
func (c *counts) Lost() int64   { return c.lost }

// TestRegister: a prep-worker's GET /metrics is the Prometheus text
// format with its jobs by result, read at scrape time; /healthz answers.
func TestRegister(t *testing.T) {
	w := &counts{done: 3, failed: 1, lost: 2}
	mux := http.NewServeMux()
	Register(mux, "blanket_test_", w)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	scrape := func() map[string]float64 {
		resp, err := http.Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		f := fams["blanket_test_prep_jobs_total"]
		if f == nil || fams["go_goroutines"] == nil {
			t.Fatalf("families %v", fams)
		}
		out := map[string]float64{}
		for _, m := range f.GetMetric() {
			out[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
		return out
	}
	if got := scrape(); got["ok"] != 3 || got["failed"] != 1 || got["lost"] != 2 || len(got) != 3 {
		t.Fatalf("jobs %v", got)
	}
	w.done = 5
	if got := scrape(); got["ok"] != 5 {
		t.Fatalf("not read at scrape time: %v", got)
	}
	resp, err := http.Get(srv.URL + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz %v %v", resp, err)
	}
	resp.Body.Close()
}
