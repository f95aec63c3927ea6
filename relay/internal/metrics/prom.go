package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Source returns what GET /metrics exposes: the relay's Snapshot, with
// its datastore's counters and its large-frame budget filled in.
type Source func() Snapshot

// series describes one Prometheus series family of the relay: its name
// (blanket_relay_ prefixed), help, type and, for a family with a label,
// the label's name and the snapshot's map of label value to count.
type series struct {
	name, help string
	typ        prometheus.ValueType
	label      string
	value      func(s *Snapshot) float64
	byLabel    func(s *Snapshot) map[string]uint64
}

func counter(name, help string, v func(s *Snapshot) float64) series {
	return series{name: name, help: help, typ: prometheus.CounterValue, value: v}
}

func gauge(name, help string, v func(s *Snapshot) float64) series {
	return series{name: name, help: help, typ: prometheus.GaugeValue, value: v}
}

func labelled(name, help, label string, m func(s *Snapshot) map[string]uint64) series {
	return series{name: name, help: help, typ: prometheus.CounterValue, label: label, byLabel: m}
}

func f[T int | int64 | uint32 | uint64](v T) float64 { return float64(v) }

// lastRound reads a field of the last closed round (0 before the first).
func lastRound(v func(r *RoundReport) float64) func(s *Snapshot) float64 {
	return func(s *Snapshot) float64 {
		if s.LastRound == nil {
			return 0
		}
		return v(s.LastRound)
	}
}

// store reads a datastore counter (0 when the relay has no store).
func store(v func(d *DatastoreStats) int64) func(s *Snapshot) float64 {
	return func(s *Snapshot) float64 {
		if s.Datastore == nil {
			return 0
		}
		return float64(v(s.Datastore))
	}
}

// Series is every family the relay's /metrics exposes, read from one
// Snapshot per scrape: the same counters as GET /api/metrics (the JSON
// document, whose every field is allow-listed in the server's
// published_test.go), never a payload, a dummy count or a truncated
// dimension. The label values come from fixed lists (rejection reasons,
// delivery and round outcomes, drop and secure-summation reasons).
var Series = []series{
	counter("frames_received_total", "Client frames received.", func(s *Snapshot) float64 { return f(s.Received) }),
	labelled("frames_accepted_total", "Client frames accepted, by kind (checkin, report, shares).", "kind", func(s *Snapshot) map[string]uint64 { return s.Accepted }),
	labelled("frames_rejected_total", "Client frames rejected, by reason.", "reason", func(s *Snapshot) map[string]uint64 { return s.Rejected }),
	counter("reports_complete_total", "Shuffle reports completed (every message of the report received).", func(s *Snapshot) float64 { return f(s.ReportsComplete) }),
	counter("reports_partial_discarded_total", "Partial reports dropped (disconnect, round close, error).", func(s *Snapshot) float64 { return f(s.PartialDiscarded) }),
	counter("connection_timeouts_total", "Connections cut by a read deadline.", func(s *Snapshot) float64 { return f(s.Timeouts) }),
	gauge("connections", "Volunteers' websocket connections open.", func(s *Snapshot) float64 { return f(s.Connections) }),
	counter("connections_total", "Volunteers' websocket connections accepted.", func(s *Snapshot) float64 { return f(s.ConnectionsTotal) }),
	counter("origin_rejected_total", "Websocket upgrades refused for their Origin.", func(s *Snapshot) float64 { return f(s.OriginRejected) }),
	counter("rounds_opened_total", "Rounds opened on the aggregator's announcement.", func(s *Snapshot) float64 { return f(s.RoundsOpened) }),
	counter("rounds_forwarded_total", "Shuffle rounds whose batch was persisted for the aggregator.", func(s *Snapshot) float64 { return f(s.RoundsForwarded) }),
	counter("rounds_aborted_total", "Rounds aborted (too few reports, restart, refusal).", func(s *Snapshot) float64 { return f(s.RoundsAborted) }),
	counter("send_attempts_total", "Attempts to deliver a batch or an abort to the aggregator.", func(s *Snapshot) float64 { return f(s.SendAttempts) }),
	counter("send_failures_total", "Delivery attempts without a definitive answer (retried).", func(s *Snapshot) float64 { return f(s.SendFailures) }),
	labelled("delivered_total", "The aggregator's definitive answers to batches and aborts, by outcome.", "outcome", func(s *Snapshot) map[string]uint64 { return s.Delivered }),
	gauge("outbox_pending", "Batches and aborts persisted and not yet answered by the aggregator.", func(s *Snapshot) float64 { return f(s.Pending) }),
	gauge("last_round", "Number of the last closed round (0: none since the start).", lastRound(func(r *RoundReport) float64 { return f(r.Round) })),
	gauge("last_round_population", "Connections invited to the last closed round.", lastRound(func(r *RoundReport) float64 { return f(r.Population) })),
	gauge("last_round_checked_in", "Volunteers that checked in to the last closed round.", lastRound(func(r *RoundReport) float64 { return f(r.CheckedIn) })),
	gauge("last_round_reports", "Reports in the last closed round's batch.", lastRound(func(r *RoundReport) float64 { return f(r.Reports) })),
	gauge("last_round_closed_timestamp_seconds", "When the relay closed the last closed round (Unix seconds; 0: none).", lastRound(func(r *RoundReport) float64 {
		if r.ClosedAt.IsZero() {
			return 0
		}
		return float64(r.ClosedAt.UnixNano()) / 1e9
	})),
	labelled("secagg_rounds_total", "Secure-summation rounds with a prepared batch, by how they ended.", "outcome", func(s *Snapshot) map[string]uint64 { return s.SecAgg.Rounds }),
	labelled("secagg_reports_dropped_total", "Secure-summation reports the relay left out of a batch, by reason.", "reason", func(s *Snapshot) map[string]uint64 { return s.SecAgg.Dropped }),
	labelled("secagg_reports_rejected_total", "Secure-summation reports preparation kept out of the sum, by reason.", "reason", func(s *Snapshot) map[string]uint64 { return s.SecAgg.Rejected }),
	labelled("secagg_reports_prepared_total", "Secure-summation reports the helper prepared, by where: apart (as leased jobs, -prep-jobs: by the relay's replicas, or by this relay while it waited) or here (outside the jobs).", "where", func(s *Snapshot) map[string]uint64 { return s.SecAgg.Prepared }),
	counter("prep_jobs_completed_total", "Preparation jobs this relay completed itself while it waited for them (-prep-jobs); its replicas completed the others.", func(s *Snapshot) float64 { return f(s.SecAgg.PrepJobs) }),
	counter("secagg_reports_answered_total", "Secure-summation reports in chunks the aggregator answered (each acknowledged to its volunteer then).", func(s *Snapshot) float64 { return f(s.SecAgg.Answered) }),
	counter("secagg_reports_aggregated_total", "Reports in the aggregate shares delivered.", func(s *Snapshot) float64 { return f(s.SecAgg.Aggregated) }),
	counter("secagg_closes_persisted_total", "Secure-summation closes persisted (each before its first send).", func(s *Snapshot) float64 { return f(s.SecAgg.Closes) }),
	counter("secagg_shares_persisted_total", "Noised aggregate shares persisted (each before its first send).", func(s *Snapshot) float64 { return f(s.SecAgg.Shares) }),
	counter("secagg_requests_total", "Requests to the aggregator's /v1/secagg/*.", func(s *Snapshot) float64 { return f(s.SecAgg.Attempts) }),
	counter("secagg_request_failures_total", "Requests to /v1/secagg/* without a definitive answer.", func(s *Snapshot) float64 { return f(s.SecAgg.Failures) }),
	gauge("large_frame_slots", "The budget of large (Shares) frames read or held at once.", func(s *Snapshot) float64 { return f(s.LargeFrames.Slots) }),
	counter("large_frame_waits_total", "Large frames that waited for a slot.", func(s *Snapshot) float64 { return f(s.LargeFrames.Waits) }),
	counter("large_frame_wait_seconds_total", "Time large frames waited for a slot, in all.", func(s *Snapshot) float64 { return s.LargeFrames.WaitSeconds }),
	gauge("large_frames_held_max", "The most large frames held at once since the start.", func(s *Snapshot) float64 { return f(s.LargeFrames.MaxHeld) }),
	counter("datastore_commits_total", "Datastore transactions that wrote and committed.", store(func(d *DatastoreStats) int64 { return d.Commits })),
	counter("datastore_fsyncs_total", "Fsyncs of the datastore's log, snapshots and directory.", store(func(d *DatastoreStats) int64 { return d.Fsyncs })),
	counter("datastore_written_bytes_total", "Bytes written to the datastore's log and snapshots.", store(func(d *DatastoreStats) int64 { return d.BytesWritten })),
	counter("datastore_compactions_total", "Rewrites of the datastore's log.", store(func(d *DatastoreStats) int64 { return d.Compactions })),
	gauge("datastore_log_size_bytes", "The datastore log's current size.", store(func(d *DatastoreStats) int64 { return d.LogSize })),
}

// SeriesNames returns the name of every family of Series, without Prefix.
func SeriesNames() []string {
	names := make([]string, len(Series))
	for i, s := range Series {
		names[i] = s.name
	}
	return names
}

// Prefix starts the name of every relay series.
const Prefix = "blanket_relay_"

// collector is a prometheus.Collector reading one Snapshot per scrape:
// the counters have one bookkeeping, Metrics's.
type collector struct {
	src   Source
	descs []*prometheus.Desc
}

func newCollector(src Source) *collector {
	c := &collector{src: src}
	for _, s := range Series {
		var labels []string
		if s.label != "" {
			labels = []string{s.label}
		}
		c.descs = append(c.descs, prometheus.NewDesc(Prefix+s.name, s.help, labels, nil))
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	snap := c.src()
	for i, s := range Series {
		if s.byLabel == nil {
			ch <- prometheus.MustNewConstMetric(c.descs[i], s.typ, s.value(&snap))
			continue
		}
		for v, n := range s.byLabel(&snap) {
			ch <- prometheus.MustNewConstMetric(c.descs[i], s.typ, float64(n), v)
		}
	}
}

// Registry returns a registry of the relay's series; with runtime, also
// the Go runtime's and the process's (memory, GC, CPU, threads, file
// descriptors). Those depend on how much work the relay does, which
// includes sealing the dummies whose count depends on the volunteers'
// top-k sets (docs/privacy.md), so they are served only on the
// operator's own listener (-ops-listen), never on the public /metrics.
func Registry(src Source, runtime bool) *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(newCollector(src))
	if runtime {
		r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return r
}

// Handler serves Registry(src, runtime) in the Prometheus text format.
func Handler(src Source, runtime bool) http.Handler {
	return promhttp.HandlerFor(Registry(src, runtime), promhttp.HandlerOpts{})
}
