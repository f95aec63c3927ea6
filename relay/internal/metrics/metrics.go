// Package metrics holds the relay's counters (GET /metrics): counts,
// round numbers and outcomes only, never a payload.
package metrics

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blanket-fl/blanket/relay/internal/intake"
	"github.com/blanket-fl/blanket/relay/internal/outbox"
	"github.com/blanket-fl/blanket/relay/internal/round"
)

// Metrics are the relay's counters. They hold counts only, never payloads.
type Metrics struct {
	Received       atomic.Uint64
	AcceptedCheck  atomic.Uint64
	AcceptedReport atomic.Uint64 // accepted Report frames
	AcceptedShares atomic.Uint64 // accepted Shares frames (secure summation)
	rejected       map[string]*atomic.Uint64

	ReportsComplete  atomic.Uint64
	PartialDiscarded atomic.Uint64 // partial reports dropped (disconnect, round close, error)
	Timeouts         atomic.Uint64 // connections cut by a read deadline (idle without pong, or a slow frame)
	ConnsOpen        atomic.Int64
	ConnsTotal       atomic.Uint64
	OriginRejected   atomic.Uint64
	RoundsOpened     atomic.Uint64
	RoundsForwarded  atomic.Uint64
	RoundsAborted    atomic.Uint64
	Sender           *outbox.Sender // delivery attempts and outcomes

	SecAggAggregated atomic.Uint64 // reports in the aggregate shares delivered
	// SecAggCloses and SecAggShares count the closes and the noised
	// aggregate shares persisted (each before its first send).
	SecAggCloses, SecAggShares atomic.Uint64
	SecAggAttempts             atomic.Uint64
	SecAggFailures             atomic.Uint64
	// SecAggApart and SecAggHere count the reports the helper prepared on
	// the relay's replicas (-prep-jobs: relay/internal/prepjob) and here.
	SecAggApart, SecAggHere atomic.Uint64
	// SecAggAnswered counts the reports in chunks the aggregator answered
	// (their verdicts applied: a volunteer's ack waits for it).
	SecAggAnswered atomic.Uint64
	// PrepJobs, if set (-prep-jobs), is the number of preparation jobs
	// this relay completed itself while it waited for them
	// (pgstore.JobWorker.Done); set before the relay serves.
	PrepJobs func() int64

	mu             sync.Mutex
	recent         []RoundReport     // the last recentRounds closed rounds, oldest first
	secAggRounds   map[string]uint64 // by outcome (secagg.go)
	secAggDropped  map[string]uint64 // reports dropped before preparation, by reason
	secAggRejected map[string]uint64 // reports preparation kept out of the sum, by secagg reason
}

// New returns zeroed counters: one per frame rejection reason, and the
// secure-summation round outcomes and drop reasons listed from the start
// (at zero, so that /metrics names them).
func New(reasons, outcomes []string, drops []string) *Metrics {
	m := &Metrics{rejected: make(map[string]*atomic.Uint64, len(reasons)),
		secAggRounds: make(map[string]uint64), secAggDropped: make(map[string]uint64),
		secAggRejected: make(map[string]uint64)}
	for _, r := range reasons {
		m.rejected[r] = new(atomic.Uint64)
	}
	for _, d := range drops {
		m.secAggDropped[d] = 0
	}
	for _, o := range outcomes {
		m.secAggRounds[o] = 0
	}
	return m
}

// Reject counts a rejected frame (reason: one given to New).
func (m *Metrics) Reject(reason string) { m.rejected[reason].Add(1) }

// SecAggRound counts a secure-summation round that ended with outcome.
func (m *Metrics) SecAggRound(outcome string) {
	m.mu.Lock()
	m.secAggRounds[outcome]++
	m.mu.Unlock()
}

// SecAggDrop counts n reports the relay dropped before preparation.
func (m *Metrics) SecAggDrop(reason string, n int) {
	m.mu.Lock()
	m.secAggDropped[reason] += uint64(n)
	m.mu.Unlock()
}

// SecAggReject counts a report preparation kept out of the sum.
func (m *Metrics) SecAggReject(reason string) {
	m.mu.Lock()
	m.secAggRejected[reason]++
	m.mu.Unlock()
}

// RoundReport describes the last closed round. /metrics is served to
// anyone, so it holds only what the aggregator's view of the round already
// holds (the batch header: reports, check-ins, population, n_p, message
// count) and the outcome. The padding statistics (dummies, dimensions
// truncated or raised past n_p) are not here: for SS-Topk they are a
// function of the volunteers' top-k sets, whose truncation count
// docs/privacy.md says is never sent (neighbouring datasets moved the
// dummy count by 0.75 sd a round). They stay in the relay's own log.
type RoundReport struct {
	Round      uint64 `json:"round"`
	Outcome    string `json:"outcome"` // "pending", "forwarded", "aborted", or the aggregator's "obsolete" / "invalid" for a dropped batch; secure summation also "refused", "superseded", "failed" (secagg.go)
	Reason     string `json:"reason,omitempty"`
	Population uint32 `json:"population"`
	CheckedIn  uint32 `json:"checked_in"`
	// CheckInRate is the empirical check-in rate checked_in/population.
	CheckInRate float64 `json:"check_in_rate"`
	Reports     uint32  `json:"reports"`
	TargetNP    int     `json:"target_np,omitempty"`
	RealizedNP  int     `json:"realized_np,omitempty"`
	Raised      bool    `json:"raised,omitempty"`
	// Messages is the batch's message count, d·n_p/width.
	Messages int `json:"messages,omitempty"`

	// When the round's steps happened at the relay (secure summation;
	// zero when not reached): its first report received, the relay's
	// decision to close it, every accepted report prepared and answered
	// by the aggregator (drained), the close answered (charged), and the
	// aggregate share delivered (ended). The round's time from the
	// relay's close to the model is the aggregator's finished_at minus
	// closed_at (make bench-scale). Round timing is already public
	// (/api/rounds); these say nothing of any one report.
	FirstReportAt time.Time `json:"first_report_at,omitzero"`
	ClosedAt      time.Time `json:"closed_at,omitzero"`
	DrainedAt     time.Time `json:"drained_at,omitzero"`
	ChargedAt     time.Time `json:"charged_at,omitzero"`
	EndedAt       time.Time `json:"ended_at,omitzero"`
}

// recentRounds is how many closed rounds /metrics describes (recent_rounds).
const recentRounds = 8

// Snapshot is the JSON document served at GET /metrics.
type Snapshot struct {
	Received uint64            `json:"received"`
	Accepted map[string]uint64 `json:"accepted"`
	Rejected map[string]uint64 `json:"rejected"`

	ReportsComplete  uint64 `json:"reports_complete"`
	PartialDiscarded uint64 `json:"partial_discarded"`
	Timeouts         uint64 `json:"timeouts"`
	Connections      int64  `json:"connections"`
	ConnectionsTotal uint64 `json:"connections_total"`
	OriginRejected   uint64 `json:"origin_rejected"`
	RoundsOpened     uint64 `json:"rounds_opened"`
	RoundsForwarded  uint64 `json:"rounds_forwarded"`
	RoundsAborted    uint64 `json:"rounds_aborted"`
	SendAttempts     uint64 `json:"send_attempts"`
	SendFailures     uint64 `json:"send_failures"`
	// Delivered counts the aggregator's definitive answers to batches and
	// aborts by outcome (accepted, duplicate, obsolete, invalid); dropped
	// frames are the last three. Pending: frames still being delivered.
	Delivered map[string]uint64 `json:"delivered"`
	Pending   int               `json:"pending"`
	LastRound *RoundReport      `json:"last_round,omitempty"`
	// RecentRounds describes the last recentRounds closed rounds, oldest
	// first (the last one is LastRound).
	RecentRounds []RoundReport `json:"recent_rounds,omitempty"`
	SecAgg       SecAggStats   `json:"secagg"`
	// Datastore is the relay's store's work (set by the server when it
	// has one): it counts commits and bytes, never a value.
	Datastore *DatastoreStats `json:"datastore,omitempty"`
	// LargeFrames is the relay's budget for large frames (Shares frames):
	// its slots, how often a volunteer's frame waited for one and for how
	// long in all, and the most held at once (relay/internal/intake).
	LargeFrames intake.Stats `json:"large_frames"`
}

// DatastoreStats is datastore.Stats as published.
type DatastoreStats struct {
	Commits      int64 `json:"commits"`
	Fsyncs       int64 `json:"fsyncs"`
	BytesWritten int64 `json:"bytes_written"`
	Compactions  int64 `json:"compactions"`
	LogSize      int64 `json:"log_size"`
}

// SecAggStats counts the relay's side of secure summation
// (docs/secagg.md). Every report the round machine accepted (accepted.shares)
// is in a batch, dropped here, or in a round that was aborted or ended
// without an aggregate.
type SecAggStats struct {
	// Rounds counts the secure-summation rounds whose batch was prepared,
	// by how they ended: forwarded, refused, invalid, obsolete,
	// superseded, failed (secagg.go). Aborted ones are in rounds_aborted.
	Rounds map[string]uint64 `json:"rounds"`
	// Dropped counts reports left out of a batch by the relay, by reason
	// (helper_unopened: the helper share does not open).
	Dropped map[string]uint64 `json:"dropped"`
	// Rejected counts reports of a batch that preparation kept out of the
	// sum (the helper's and the leader's verdicts), by secagg reason.
	Rejected map[string]uint64 `json:"rejected"`
	// Aggregated counts the reports in the aggregate shares delivered.
	Aggregated uint64 `json:"aggregated"`
	// Closes and Shares count the closes and the noised aggregate shares
	// this process persisted (each before its first send): a step of the
	// round an outside observer (the chaos tier) can wait for.
	Closes uint64 `json:"closes_persisted"`
	Shares uint64 `json:"shares_persisted"`
	// Attempts and Failures count requests to /v1/secagg/* and those
	// without a definitive answer.
	Attempts uint64 `json:"attempts"`
	Failures uint64 `json:"failures"`
	// Prepared counts the reports the helper prepared (its share opened
	// or not), by where: apart (as leased jobs, -prep-jobs: by a replica,
	// or by this relay while it waited) or here (outside the jobs).
	Prepared map[string]uint64 `json:"prepared"`
	// Answered counts the reports in chunks the aggregator answered (each
	// acknowledged to its volunteer then).
	Answered uint64 `json:"answered"`
	// PrepJobs counts the preparation jobs this relay completed itself
	// (-prep-jobs; the rest of "apart" was its replicas').
	PrepJobs uint64 `json:"prep_jobs_completed"`
}

// Snapshot returns the current counters.
func (m *Metrics) Snapshot() Snapshot {
	s := Snapshot{
		Received: m.Received.Load(),
		Accepted: map[string]uint64{
			"checkin": m.AcceptedCheck.Load(),
			"report":  m.AcceptedReport.Load(),
			"shares":  m.AcceptedShares.Load(),
		},
		Rejected:         make(map[string]uint64, len(m.rejected)),
		ReportsComplete:  m.ReportsComplete.Load(),
		PartialDiscarded: m.PartialDiscarded.Load(),
		Timeouts:         m.Timeouts.Load(),
		Connections:      m.ConnsOpen.Load(),
		ConnectionsTotal: m.ConnsTotal.Load(),
		OriginRejected:   m.OriginRejected.Load(),
		RoundsOpened:     m.RoundsOpened.Load(),
		RoundsForwarded:  m.RoundsForwarded.Load(),
		RoundsAborted:    m.RoundsAborted.Load(),
	}
	if m.Sender != nil {
		st := m.Sender.Stats()
		s.SendAttempts, s.SendFailures, s.Delivered, s.Pending = st.Attempts, st.Failures, st.Outcomes, st.Pending
	}
	for r, c := range m.rejected {
		s.Rejected[r] = c.Load()
	}
	s.SecAgg = SecAggStats{Aggregated: m.SecAggAggregated.Load(), Closes: m.SecAggCloses.Load(), Shares: m.SecAggShares.Load(),
		Attempts: m.SecAggAttempts.Load(),
		Failures: m.SecAggFailures.Load(),
		Prepared: map[string]uint64{"apart": m.SecAggApart.Load(), "here": m.SecAggHere.Load()},
		Answered: m.SecAggAnswered.Load()}
	if m.PrepJobs != nil {
		s.SecAgg.PrepJobs = uint64(max(m.PrepJobs(), 0))
	}
	m.mu.Lock()
	if len(m.recent) > 0 {
		l := m.recent[len(m.recent)-1]
		s.LastRound = &l
		s.RecentRounds = slices.Clone(m.recent)
	}
	s.SecAgg.Rounds, s.SecAgg.Dropped, s.SecAgg.Rejected = maps.Clone(m.secAggRounds), maps.Clone(m.secAggDropped),
		maps.Clone(m.secAggRejected)
	m.mu.Unlock()
	return s
}

// SetLast records the report of a closed round: it replaces the report
// of the same round, or else becomes the last one.
func (m *Metrics) SetLast(r RoundReport) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.recent {
		if m.recent[i].Round == r.Round {
			m.recent[i] = r
			return
		}
	}
	if len(m.recent) == recentRounds {
		m.recent = slices.Delete(m.recent, 0, 1)
	}
	m.recent = append(m.recent, r)
}

// SetLastOutcome sets the outcome of the last round's report if it is
// round num's (a batch's definitive delivery).
func (m *Metrics) SetLastOutcome(num uint64, outcome string) {
	m.mu.Lock()
	if n := len(m.recent); n > 0 && m.recent[n-1].Round == num {
		m.recent[n-1].Outcome = outcome
	}
	m.mu.Unlock()
}

// ReportOf starts the /metrics description of closed round c.
func ReportOf(c *round.Closed) RoundReport {
	rep := RoundReport{Round: c.Num, Population: c.Population, CheckedIn: c.CheckedIn, Reports: c.Reports,
		ClosedAt: c.At}
	if c.Population > 0 {
		rep.CheckInRate = float64(c.CheckedIn) / float64(c.Population)
	}
	return rep
}
