package server

import (
	"encoding/json"
	"net/http"

	"github.com/blanket-fl/blanket/relay/internal/metrics"
	"github.com/blanket-fl/blanket/relay/internal/round"
	"github.com/blanket-fl/blanket/relay/internal/sumrelay"
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

// Snapshot is the JSON document served at GET /api/metrics (and, as
// Prometheus series, at GET /metrics); RoundReport
// describes the last closed round in it; SecAggStats its secure-summation
// counters (relay/internal/metrics).
type (
	Snapshot    = metrics.Snapshot
	RoundReport = metrics.RoundReport
	SecAggStats = metrics.SecAggStats
)

func newMetrics() *metrics.Metrics {
	return metrics.New(reasons, sumrelay.Outcomes, []string{sumrelay.DropUnopened})
}

// Snapshot is the relay's counters with its datastore's (GET /metrics and
// GET /api/metrics).
func (s *Server) Snapshot() Snapshot {
	snap := s.Metrics()
	if s.cfg.StoreStats != nil {
		st := s.cfg.StoreStats()
		snap.Datastore = &metrics.DatastoreStats{Commits: st.Commits, Fsyncs: st.Fsyncs, BytesWritten: st.BytesWritten,
			Compactions: st.Compactions, LogSize: st.LogSize}
	}
	return snap
}

// handleMetricsJSON serves GET /api/metrics: the Snapshot as JSON, with
// the recent rounds' timings that the Prometheus series of GET /metrics
// (metrics.Handler) do not carry.
func (s *Server) handleMetricsJSON(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(s.Snapshot())
}
