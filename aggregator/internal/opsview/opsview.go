// Package opsview is what the aggregator serves its operators besides the
// API: GET /metrics (the Prometheus text format: the aggregator's rounds,
// privacy budget and datastore, with the Go runtime's and the process's
// series), GET /api/metrics (the datastore's counters as JSON, as GET
// /metrics served them before) and GET /readyz (shared/readiness).
// Every series is read from the server's status at scrape time, so the
// counters have one bookkeeping; none carries a value a volunteer sent,
// and no label value comes from outside a fixed list of the binary (round
// statuses, batch rejection reasons).
package opsview

import (
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/blanket-fl/blanket/aggregator/internal/api"
	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/readiness"
)

// Source is where the series are read.
type Source struct {
	Status func() api.Status
	Rounds func() []checkpoint.RoundRecord
	Store  func() datastore.Stats
	// Chunks is how many secure-summation chunks were folded from results
	// prepared apart by the replicas (-prep-jobs) and prepared here, and
	// how many jobs this replica completed.
	Chunks func() (apart, here, jobs int64)
}

// Prefix starts the name of every aggregator series.
const Prefix = "blanket_aggregator_"

// Statuses are the round statuses rounds_total counts (checkpoint's).
var Statuses = []string{checkpoint.StatusOK, checkpoint.StatusAborted, checkpoint.StatusRefused,
	checkpoint.StatusInvalid, checkpoint.StatusAbandoned, checkpoint.StatusLost}

type desc struct {
	d   *prometheus.Desc
	typ prometheus.ValueType
}

func newDesc(name, help string, typ prometheus.ValueType, labels ...string) desc {
	return desc{prometheus.NewDesc(Prefix+name, help, labels, nil), typ}
}

var (
	dRounds      = newDesc("rounds_total", "Rounds ended, by status (ok: charged and applied; aborted, refused, invalid, abandoned, lost).", prometheus.CounterValue, "status")
	dLastRound   = newDesc("last_round", "The last finished round (0: none).", prometheus.GaugeValue)
	dOpenRound   = newDesc("open_round", "The announced round awaiting its batch (0: none).", prometheus.GaugeValue)
	dDeadline    = newDesc("open_round_deadline_timestamp_seconds", "The open round's deadline (Unix seconds; 0: none).", prometheus.GaugeValue)
	dWaiting     = newDesc("open_round_waiting_for_relay", "1 while the open round waits for a relay that does not answer.", prometheus.GaugeValue)
	dEpsSpent    = newDesc("privacy_epsilon_spent", "The privacy ledger's spent epsilon at the target delta (GET /api/status epsilon).", prometheus.GaugeValue)
	dEpsTarget   = newDesc("privacy_epsilon_target", "The privacy ledger's target epsilon.", prometheus.GaugeValue)
	dDeltaTarget = newDesc("privacy_delta_target", "The privacy ledger's target delta.", prometheus.GaugeValue)
	dRunning     = newDesc("running", "1 while rounds go on (0: stopped, e.g. the budget is spent).", prometheus.GaugeValue)
	dPaused      = newDesc("paused", "1 while the operator paused the announcements.", prometheus.GaugeValue)
	dNewClass    = newDesc("new_class_requested", "1 once the operator asked for a new class.", prometheus.GaugeValue)
	dResets      = newDesc("model_resets_total", "The operator's model resets.", prometheus.CounterValue)
	dRejected    = newDesc("batches_rejected_total", "Batches rejected as invalid since the start, by reason.", prometheus.CounterValue, "reason")
	dCommits     = newDesc("datastore_commits_total", "Datastore transactions that wrote and committed.", prometheus.CounterValue)
	dFsyncs      = newDesc("datastore_fsyncs_total", "Fsyncs of the datastore's log, snapshots and directory.", prometheus.CounterValue)
	dWritten     = newDesc("datastore_written_bytes_total", "Bytes written to the datastore's log and snapshots.", prometheus.CounterValue)
	dCompactions = newDesc("datastore_compactions_total", "Rewrites of the datastore's log.", prometheus.CounterValue)
	dLogSize     = newDesc("datastore_log_size_bytes", "The datastore log's current size.", prometheus.GaugeValue)
	dChunks      = newDesc("secagg_chunks_total", "Secure-summation chunks folded, by where they were prepared (apart: by a replica leasing the job, -prep-jobs; here: by the intake).", prometheus.CounterValue, "prepared")
	dJobs        = newDesc("prep_jobs_completed_total", "Chunks' preparation jobs this replica completed (-prep-jobs).", prometheus.CounterValue)
	all          = []desc{dRounds, dLastRound, dOpenRound, dDeadline, dWaiting, dEpsSpent, dEpsTarget, dDeltaTarget,
		dRunning, dPaused, dNewClass, dResets, dRejected, dCommits, dFsyncs, dWritten, dCompactions, dLogSize, dChunks, dJobs}
)

type collector struct{ src Source }

// Describe implements prometheus.Collector.
func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range all {
		ch <- d.d
	}
}

func bit(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Collect implements prometheus.Collector.
func (c collector) Collect(ch chan<- prometheus.Metric) {
	emit := func(d desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d.d, d.typ, v, labels...)
	}
	st := c.src.Status()
	byStatus := make(map[string]int, len(Statuses))
	for _, s := range Statuses {
		byStatus[s] = 0
	}
	for _, r := range c.src.Rounds() {
		if _, ok := byStatus[r.Status]; ok {
			byStatus[r.Status]++
		}
	}
	for s, n := range byStatus {
		emit(dRounds, float64(n), s)
	}
	emit(dLastRound, float64(st.Round))
	emit(dOpenRound, float64(st.OpenRound))
	deadline := 0.0
	if st.OpenRound != 0 && !st.Deadline.IsZero() {
		deadline = float64(st.Deadline.UnixNano()) / 1e9
	}
	emit(dDeadline, deadline)
	emit(dWaiting, bit(st.Waiting != ""))
	emit(dEpsSpent, st.Epsilon)
	emit(dEpsTarget, st.TargetEpsilon)
	emit(dDeltaTarget, st.TargetDelta)
	emit(dRunning, bit(st.Running))
	emit(dPaused, bit(st.Paused))
	emit(dNewClass, bit(st.NewClassRequested))
	emit(dResets, float64(st.ModelResets))
	for reason, n := range st.RejectedBatches {
		emit(dRejected, float64(n), strings.ReplaceAll(reason, " ", "_"))
	}
	ds := c.src.Store()
	emit(dCommits, float64(ds.Commits))
	emit(dFsyncs, float64(ds.Fsyncs))
	emit(dWritten, float64(ds.BytesWritten))
	emit(dCompactions, float64(ds.Compactions))
	emit(dLogSize, float64(ds.LogSize))
	var apart, here, jobs int64
	if c.src.Chunks != nil {
		apart, here, jobs = c.src.Chunks()
	}
	emit(dChunks, float64(apart), "apart")
	emit(dChunks, float64(here), "here")
	emit(dJobs, float64(jobs))
}

// Registry returns a registry of the aggregator's series and the Go
// runtime's and the process's.
func Registry(src Source) *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(collector{src}, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}

// Register adds GET /metrics, GET /api/metrics and GET /readyz (ready:
// the server's conditions) to mux.
func Register(mux *http.ServeMux, src Source, ready ...readiness.Check) {
	mux.Handle("GET /metrics", promhttp.HandlerFor(Registry(src), promhttp.HandlerOpts{}))
	mux.Handle("GET /api/metrics", api.Metrics(src.Store))
	mux.Handle("GET /readyz", readiness.Handler(ready...))
}
