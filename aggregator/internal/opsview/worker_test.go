package opsview

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestWorkerSeries: a prep-worker's GET /metrics is the Prometheus text
// format with its jobs by result, read at scrape time; /healthz answers.
func TestWorkerSeries(t *testing.T) {
	done := int64(3)
	mux := http.NewServeMux()
	RegisterWorker(mux, WorkerSource{Done: func() int64 { return done }, Failed: func() int64 { return 1 }, Lost: func() int64 { return 2 }})
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
		f := fams[Prefix+"prep_jobs_total"]
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
	done = 5
	if got := scrape(); got["ok"] != 5 {
		t.Fatalf("not read at scrape time: %v", got)
	}
	resp, err := http.Get(srv.URL + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz %v %v", resp, err)
	}
	resp.Body.Close()
}
