// Package jobops serves the operator's endpoints of a replica that only
// does leased jobs (`aggregator prep-worker`, `relay prep-worker`): apart
// from pgstore so that the packages that enqueue jobs link no HTTP server.
package jobops

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/blanket-fl/blanket/shared/datastore/pgstore"
)

// Register adds GET /metrics (the worker's jobs by result, prefix
// naming the party: blanket_aggregator_ or blanket_relay_, with the Go
// runtime's and the process's series) and GET /healthz to mux: what an
// operator scrapes from a replica that only does jobs (`aggregator
// prep-worker`, `relay prep-worker`). The series count jobs, nothing of
// their contents.
func Register(mux *http.ServeMux, prefix string, w Counts) {
	r := prometheus.NewRegistry()
	r.MustRegister(workerCollector{w: w, desc: prometheus.NewDesc(prefix+"prep_jobs_total",
		"Preparation jobs this replica leased, by result (ok: done and stored; failed: could not be done here, why stored; lost: the result not stored, the lease taken over or PostgreSQL failing).",
		[]string{"result"}, nil)},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux.Handle("GET /metrics", promhttp.HandlerFor(r, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, _ *http.Request) { rw.Write([]byte("ok\n")) })
}

// Counts are a worker's jobs by result (*pgstore.JobWorker's).
type Counts interface {
	Done() int64
	Failed() int64
	Lost() int64
}

var _ Counts = (*pgstore.JobWorker)(nil)

type workerCollector struct {
	w    Counts
	desc *prometheus.Desc
}

func (c workerCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c workerCollector) Collect(ch chan<- prometheus.Metric) {
	for _, x := range []struct {
		result string
		n      func() int64
	}{{"ok", c.w.Done}, {"failed", c.w.Failed}, {"lost", c.w.Lost}} {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(x.n()), x.result)
	}
}
