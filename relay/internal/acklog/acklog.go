// Package acklog keeps the relay's promise to a volunteer of a shuffle
// protocol (SS-Simple, SS-Double, SS-Topk): a frame is acknowledged only
// once a small durable record of it is in the relay's store, and a relay
// restarted in the middle of collecting a round rebuilds that round from
// its records and closes it (a padded batch of the reports it acknowledged,
// or an abort below the minimum batch) instead of aborting it: no report
// the relay told its volunteer was in is silently lost.
//
// The records are a round's accepted check-ins and Report frames, byte for
// byte, keyed by connection; the round's announcement and population are
// in its open-round marker (Marker). Rebuild is a pure function of them.
// Privacy: the rebuilt round is what a close at that moment would have
// been (the same reports, check-ins and population; the batch is padded
// with fresh dummies at close as always, relay/internal/shuffler), so
// the guarantee the aggregator accounts for a batch is unchanged
// (docs/privacy.md).
package acklog

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/blanket-fl/blanket/relay/internal/round"
	"github.com/blanket-fl/blanket/shared/wire"
)

// Log is where the records are kept. Append is durable when it returns
// nil; concurrent Appends may share one fsync.
type Log interface {
	Append(num, conn uint64, key string, frame []byte) error
	// Frames returns round num's records: by connection, by key.
	Frames(num uint64) (map[uint64]map[string][]byte, error)
	// Rounds returns the rounds that have records, in order.
	Rounds() ([]uint64, error)
	// Drop removes round num's records (nothing is owed for them any more:
	// the round's batch or abort is persisted).
	Drop(num uint64) error
}

// CheckInKey is a connection's check-in record.
const CheckInKey = "c"

// ReportKey is the record of a connection's Report frame seq.
func ReportKey(seq int) string { return fmt.Sprintf("r%05d", seq) }

// Marker is the content of a shuffle round's open-round marker: its
// announcement as received and its population (the connections invited).
type Marker struct {
	Ann        []byte `json:"ann"`
	Population uint32 `json:"population"`
}

// MarshalMarker encodes m.
func MarshalMarker(m Marker) ([]byte, error) { return json.Marshal(m) }

// ErrNoMarker: the marker does not hold a round to rebuild (a marker of
// the former, empty format, or of a secure-summation round).
var ErrNoMarker = errors.New("acklog: no round to rebuild in the marker")

// Rebuild returns the round the marker and the records describe, closed
// now ("relay restart"): its population and announced parameters from the
// marker, its check-ins and complete reports (every Report frame of the
// connection, seq 0..M-1, present and well formed) from the records, the
// partial ones counted as discarded; floor is the relay's own minimum
// batch. The caller forwards it as any closed round (round.Closed.Plan).
func Rebuild(num uint64, marker []byte, frames map[uint64]map[string][]byte, floor uint32) (*round.Closed, error) {
	var m Marker
	if len(marker) == 0 || json.Unmarshal(marker, &m) != nil || len(m.Ann) == 0 {
		return nil, ErrNoMarker
	}
	a, err := wire.ParseAnnouncement(m.Ann, wire.DefaultLimits())
	if err != nil {
		return nil, fmt.Errorf("acklog: round %d's announcement: %w", num, err)
	}
	if a.Round != num || a.Params.Protocol == wire.ProtocolSecAgg {
		return nil, ErrNoMarker
	}
	c := &round.Closed{Num: num, Params: a.Params, HPKEPub: a.HPKEPub, Why: "relay restart",
		Population: m.Population, Floor: floor}
	msgs := a.Params.Messages()
	conns := make([]uint64, 0, len(frames))
	for id := range frames {
		conns = append(conns, id)
	}
	sort.Slice(conns, func(i, j int) bool { return conns[i] < conns[j] }) // arrival order does not matter: the batch is shuffled
	for _, id := range conns {
		recs := frames[id]
		if _, ok := recs[CheckInKey]; ok {
			c.CheckedIn++
		}
		var rep []wire.BatchMessage
		for seq := range msgs {
			b, ok := recs[ReportKey(seq)]
			if !ok {
				break
			}
			r, err := wire.ParseReport(b, a.Params)
			if err != nil || int(r.Seq) != seq || r.Round != num {
				break
			}
			rep = append(rep, wire.BatchMessage{Indices: r.Indices, Sealed: r.Sealed})
		}
		switch {
		case len(rep) == msgs:
			c.Real = append(c.Real, rep...)
			c.Reports++
		case hasReport(recs):
			c.Discarded++
		}
	}
	c.Failed = c.CheckedIn - min(c.CheckedIn, c.Reports)
	return c, nil
}

func hasReport(recs map[string][]byte) bool {
	for k := range recs {
		if strings.HasPrefix(k, "r") {
			return true
		}
	}
	return false
}
