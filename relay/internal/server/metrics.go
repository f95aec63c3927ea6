package server

import (
	"encoding/json"
	"maps"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/blanket-fl/blanket/relay/internal/outbox"
	"github.com/blanket-fl/blanket/relay/internal/round"
)

// Rejection reasons of client frames. Every received frame is counted once
// in Metrics.Received and once in either an accepted counter or exactly one
// of these. The transport rejects oversized and text frames; the others are
// the round rules' (relay/internal/round).
const (
	ReasonOversized   = "oversized"             // frame above the round's Report size (close 1009)
	ReasonText        = "text_frame"            // text frame (close 1003)
	ReasonMalformed   = round.ReasonMalformed   // wire decoding failed (Ack 4, close 1007)
	ReasonUnexpected  = round.ReasonUnexpected  // a frame type clients never send (Ack 4, close 1008)
	ReasonNoOpenRound = round.ReasonNoOpenRound // no round is open (Ack 1)
	ReasonNotInvited  = round.ReasonNotInvited  // connected after the round opened (Ack 1)
	ReasonWrongRound  = round.ReasonWrongRound  // frame for another round (Ack 2)
	ReasonTooLate     = round.ReasonTooLate     // frame for the round that just closed (Ack 5)
	ReasonNoCheckIn   = round.ReasonNoCheckIn   // report without a check-in (Ack 4, close 1008)
	ReasonDuplicate   = round.ReasonDuplicate   // second check-in, replayed frame or second report (Ack 3, close 1008)
	ReasonOutOfOrder  = round.ReasonOutOfOrder  // seq skips ahead (Ack 4, close 1008)
	ReasonReplay      = round.ReasonReplay      // sealed content already admitted this round or the last (Ack 3, close 1008)
)

var reasons = append([]string{ReasonOversized, ReasonText}, round.Reasons...)

// metrics are the relay's counters. They hold counts only, never payloads.
type metrics struct {
	received       atomic.Uint64
	acceptedCheck  atomic.Uint64
	acceptedReport atomic.Uint64 // accepted Report frames
	acceptedShares atomic.Uint64 // accepted Shares frames (secure summation)
	rejected       map[string]*atomic.Uint64

	reportsComplete  atomic.Uint64
	partialDiscarded atomic.Uint64 // partial reports dropped (disconnect, round close, error)
	timeouts         atomic.Uint64 // connections cut by a read deadline (idle without pong, or a slow frame)
	connsOpen        atomic.Int64
	connsTotal       atomic.Uint64
	originRejected   atomic.Uint64
	roundsOpened     atomic.Uint64
	roundsForwarded  atomic.Uint64
	roundsAborted    atomic.Uint64
	sender           *outbox.Sender // delivery attempts and outcomes

	secAggAggregated atomic.Uint64 // reports in the aggregate shares delivered
	secAggAttempts   atomic.Uint64
	secAggFailures   atomic.Uint64

	mu             sync.Mutex
	last           *RoundReport
	secAggRounds   map[string]uint64 // by outcome (secagg.go)
	secAggDropped  map[string]uint64 // reports dropped before preparation, by reason
	secAggRejected map[string]uint64 // reports preparation kept out of the sum, by secagg reason
}

func newMetrics() *metrics {
	m := &metrics{rejected: make(map[string]*atomic.Uint64, len(reasons)),
		secAggRounds: make(map[string]uint64), secAggDropped: map[string]uint64{DropUnopened: 0},
		secAggRejected: make(map[string]uint64)}
	for _, r := range reasons {
		m.rejected[r] = new(atomic.Uint64)
	}
	for _, o := range secAggOutcomes {
		m.secAggRounds[o] = 0
	}
	return m
}

func (m *metrics) reject(reason string) { m.rejected[reason].Add(1) }

func (m *metrics) secAggRound(outcome string) {
	m.mu.Lock()
	m.secAggRounds[outcome]++
	m.mu.Unlock()
}

func (m *metrics) secAggDrop(reason string, n int) {
	m.mu.Lock()
	m.secAggDropped[reason] += uint64(n)
	m.mu.Unlock()
}

func (m *metrics) secAggReject(reason string) {
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
}

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
	SecAgg    SecAggStats       `json:"secagg"`
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
	// Attempts and Failures count requests to /v1/secagg/* and those
	// without a definitive answer.
	Attempts uint64 `json:"attempts"`
	Failures uint64 `json:"failures"`
}

func (m *metrics) snapshot() Snapshot {
	s := Snapshot{
		Received: m.received.Load(),
		Accepted: map[string]uint64{
			"checkin": m.acceptedCheck.Load(),
			"report":  m.acceptedReport.Load(),
			"shares":  m.acceptedShares.Load(),
		},
		Rejected:         make(map[string]uint64, len(reasons)),
		ReportsComplete:  m.reportsComplete.Load(),
		PartialDiscarded: m.partialDiscarded.Load(),
		Timeouts:         m.timeouts.Load(),
		Connections:      m.connsOpen.Load(),
		ConnectionsTotal: m.connsTotal.Load(),
		OriginRejected:   m.originRejected.Load(),
		RoundsOpened:     m.roundsOpened.Load(),
		RoundsForwarded:  m.roundsForwarded.Load(),
		RoundsAborted:    m.roundsAborted.Load(),
	}
	if m.sender != nil {
		st := m.sender.Stats()
		s.SendAttempts, s.SendFailures, s.Delivered, s.Pending = st.Attempts, st.Failures, st.Outcomes, st.Pending
	}
	for r, c := range m.rejected {
		s.Rejected[r] = c.Load()
	}
	s.SecAgg = SecAggStats{Aggregated: m.secAggAggregated.Load(), Attempts: m.secAggAttempts.Load(),
		Failures: m.secAggFailures.Load()}
	m.mu.Lock()
	if m.last != nil {
		l := *m.last
		s.LastRound = &l
	}
	s.SecAgg.Rounds, s.SecAgg.Dropped, s.SecAgg.Rejected = maps.Clone(m.secAggRounds), maps.Clone(m.secAggDropped),
		maps.Clone(m.secAggRejected)
	m.mu.Unlock()
	return s
}

func (m *metrics) setLast(r RoundReport) {
	m.mu.Lock()
	m.last = &r
	m.mu.Unlock()
}

func (s *Server) handleMetrics(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(s.m.snapshot())
}
