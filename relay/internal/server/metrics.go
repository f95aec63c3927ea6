package server

import (
	"encoding/json"
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

	mu   sync.Mutex
	last *RoundReport
}

func newMetrics() *metrics {
	m := &metrics{rejected: make(map[string]*atomic.Uint64, len(reasons))}
	for _, r := range reasons {
		m.rejected[r] = new(atomic.Uint64)
	}
	return m
}

func (m *metrics) reject(reason string) { m.rejected[reason].Add(1) }

// RoundReport describes the last closed round.
type RoundReport struct {
	Round      uint64 `json:"round"`
	Outcome    string `json:"outcome"` // "pending", "forwarded", "aborted", or the aggregator's "obsolete" / "invalid" for a dropped batch
	Reason     string `json:"reason,omitempty"`
	Population uint32 `json:"population"`
	CheckedIn  uint32 `json:"checkedIn"`
	// CheckInRate is the empirical check-in rate checkedIn/population.
	CheckInRate float64 `json:"checkInRate"`
	Reports     uint32  `json:"reports"`
	TargetNP    int     `json:"targetNP,omitempty"`
	RealizedNP  int     `json:"realizedNP,omitempty"`
	Raised      bool    `json:"raised,omitempty"`
	Overflowed  int     `json:"overflowedDims,omitempty"`
	Dummies     int     `json:"dummies,omitempty"`
	Messages    int     `json:"messages,omitempty"`
}

// Snapshot is the JSON document served at GET /metrics.
type Snapshot struct {
	Received uint64            `json:"received"`
	Accepted map[string]uint64 `json:"accepted"`
	Rejected map[string]uint64 `json:"rejected"`

	ReportsComplete  uint64 `json:"reportsComplete"`
	PartialDiscarded uint64 `json:"partialDiscarded"`
	Timeouts         uint64 `json:"timeouts"`
	Connections      int64  `json:"connections"`
	ConnectionsTotal uint64 `json:"connectionsTotal"`
	OriginRejected   uint64 `json:"originRejected"`
	RoundsOpened     uint64 `json:"roundsOpened"`
	RoundsForwarded  uint64 `json:"roundsForwarded"`
	RoundsAborted    uint64 `json:"roundsAborted"`
	SendAttempts     uint64 `json:"sendAttempts"`
	SendFailures     uint64 `json:"sendFailures"`
	// Delivered counts the aggregator's definitive answers to batches and
	// aborts by outcome (accepted, duplicate, obsolete, invalid); dropped
	// frames are the last three. Pending: frames still being delivered.
	Delivered map[string]uint64 `json:"delivered"`
	Pending   int               `json:"pending"`
	LastRound *RoundReport      `json:"lastRound,omitempty"`
}

func (m *metrics) snapshot() Snapshot {
	s := Snapshot{
		Received: m.received.Load(),
		Accepted: map[string]uint64{
			"checkin": m.acceptedCheck.Load(),
			"report":  m.acceptedReport.Load(),
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
	m.mu.Lock()
	if m.last != nil {
		l := *m.last
		s.LastRound = &l
	}
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
