package round

import (
	"errors"
	"fmt"

	"github.com/blanket-fl/blanket/shared/wire"
)

// Edges (docs/deploy.md, "Relay edges"): an edge relay holds volunteers'
// websockets for the relay that owns the round (this machine's relay),
// runs the rules above for its own connections with a machine of its own,
// and hands the owner each Shares frame its machine accepted (EdgeShares)
// and, when its round closes, its counts (EdgeClosed). The owner's machine
// keeps what only it can: the replay rule across every edge (one seen
// set), the quota, the report count, and the round's completeness, which
// waits for every edge that opened the round (EdgeOpened) to close it.
// Edges are run by the relay's own organization: the owner trusts their
// counts as it trusts its own connections.

// ErrEdgeRound: the round an edge names is not the open one (too late, or
// not yet open here).
var ErrEdgeRound = errors.New("round: not the open round")

// EdgeCounts is what an edge's own round counted when it closed: its
// population (connections invited), check-ins, and the reports that will
// not come (Failed: checked in, then left, disqualified, or refused by the
// owner; Absent: invited, left before checking in).
type EdgeCounts struct {
	Population, CheckedIn, Failed, Absent uint32
}

// EdgeOpened records that an edge opened round num for its connections:
// the round does not complete before that edge closes it (EdgeClosed) or
// its deadline passes. ErrEdgeRound if num is not the open round.
func (m *Machine) EdgeOpened(num uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.open
	if r == nil || r.Num != num {
		return fmt.Errorf("%w: round %d", ErrEdgeRound, num)
	}
	r.edgesOpen++
	return nil
}

// EdgeShares judges a Shares frame an edge's machine accepted from one of
// its volunteers, by the rules this machine applies to its own (the
// round open, the exact size, the replay rule over every connection of
// every edge, the quota), as sharesFrame does; an accepted one is
// counted and, streaming, handed over in the Verdict.
func (m *Machine) EdgeShares(num uint64, b []byte) Verdict {
	m.mu.Lock()
	r := m.open
	switch {
	case num != 0 && num == m.lastNum && (r == nil || num != r.Num):
		m.mu.Unlock()
		return Verdict{Reason: ReasonTooLate, Status: wire.AckTooLate, Round: num}
	case r == nil:
		m.mu.Unlock()
		return Verdict{Reason: ReasonNoOpenRound, Status: wire.AckNoRound, Round: num}
	case num != r.Num:
		m.mu.Unlock()
		return Verdict{Reason: ReasonWrongRound, Status: wire.AckWrongRound, Round: num}
	case r.SecAgg == nil:
		m.mu.Unlock()
		return Verdict{Reason: ReasonUnexpected, Status: wire.AckMalformed, Round: num, End: EndPolicy}
	}
	m.mu.Unlock()
	if t, n, err := wire.PeekRound(b); err != nil || t != wire.TypeShares || n != num {
		return Verdict{Reason: ReasonMalformed, Status: wire.AckMalformed, Round: num, End: EndMalformed}
	}
	sh, err := wire.ParseShares(b, r.LeaderLen, r.HelperLen)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		return Verdict{Reason: ReasonMalformed, Status: wire.AckMalformed, Round: num, End: EndMalformed}
	}
	if r.closed || r.full {
		return Verdict{Reason: ReasonTooLate, Status: wire.AckTooLate, Round: num}
	}
	pair := sharesPair(sh.Leader, sh.Helper)
	if [wire.EncSize]byte(sh.Leader[:wire.EncSize]) == [wire.EncSize]byte(sh.Helper[:wire.EncSize]) || m.seenLocked(pair) {
		return Verdict{Reason: ReasonReplay, Status: wire.AckDuplicate, Round: num, End: EndPolicy}
	}
	m.seen[pair] = struct{}{}
	rep := SharesReport{Leader: sh.Leader, Helper: sh.Helper}
	r.reports++
	r.lastAt = m.now()
	v := Verdict{Accepted: Shares, Round: num, Received: 1, Complete: true}
	if m.stream {
		v.Shares = &rep
	} else {
		r.shares = append(r.shares, rep)
	}
	v.Closed = m.afterReportLocked(r)
	return v
}

// EdgeClosed adds an edge's counts to round num, which that edge opened,
// and returns the round closed if it is now complete (nil otherwise, or
// if num is not the open round: the counts of a round already closed are
// too late to count).
func (m *Machine) EdgeClosed(num uint64, c EdgeCounts) *Closed {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.open
	if r == nil || r.Num != num || r.closed {
		return nil
	}
	if r.edgesOpen > 0 {
		r.edgesOpen--
	}
	r.edgePop += c.Population
	r.checkedIn += c.CheckedIn
	r.failed += c.Failed
	r.absent += c.Absent
	if r.full && r.edgesOpen == 0 {
		return m.closeLocked(r, "quota")
	}
	if r.completeLocked(m.now()) {
		return m.closeLocked(r, "complete")
	}
	return nil
}
