package round

import (
	"errors"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/shared/wire"
)

// TestEdgeSharesRules: a Shares frame an edge forwards is judged by the
// owner's rules: its replay rule spans the owner's own connections and
// every edge (the same frame from two edges, or from an edge after the
// owner's own connection, is a replay), the quota counts every edge's
// reports, a frame for another round or after the close is refused, and a
// malformed one is refused without counting.
func TestEdgeSharesRules(t *testing.T) {
	p := secAggParams() // min batch 2, quota 3
	m := newAt(0)
	own := m.Join()
	if err := m.EdgeOpened(1); !errors.Is(err, ErrEdgeRound) {
		t.Fatalf("EdgeOpened before the round: %v", err)
	}
	r := openSecAgg(t, m, 1, p)
	if err := m.EdgeOpened(1); err != nil {
		t.Fatal(err)
	}
	var s sharesSealer
	f1 := s.frame(t, 1, r, nil, nil)
	expect(t, m.EdgeShares(1, f1), Shares, "", 0, Keep)
	expect(t, m.EdgeShares(1, f1), Rejected, ReasonReplay, wire.AckDuplicate, EndPolicy) // another edge, the same report
	expect(t, m.Frame(own, checkIn(1)), CheckIn, "", 0, Keep)
	expect(t, m.Frame(own, f1), Rejected, ReasonReplay, wire.AckDuplicate, EndPolicy) // the owner's own connection
	expect(t, m.EdgeShares(2, s.frame(t, 2, r, nil, nil)), Rejected, ReasonWrongRound, wire.AckWrongRound, Keep)
	expect(t, m.EdgeShares(1, s.frame(t, 1, r, nil, nil)[:r.FrameSize-1]), Rejected, ReasonMalformed, wire.AckMalformed, EndMalformed)
	expect(t, m.EdgeShares(1, checkIn(1)), Rejected, ReasonMalformed, wire.AckMalformed, EndMalformed)
	v := m.EdgeShares(1, s.frame(t, 1, r, nil, nil))
	expect(t, v, Shares, "", 0, Keep)
	if v.Shares == nil && len(r.shares) != 2 {
		t.Fatal("an accepted edge report is neither streamed nor kept")
	}
	v = m.EdgeShares(1, s.frame(t, 1, r, nil, nil)) // the third report: the quota
	if v.Accepted != Shares || v.Closed != nil {
		t.Fatalf("the quota's report: %+v, want accepted, the round waiting for the edge's counts", v)
	}
	// Full: no report more.
	expect(t, m.EdgeShares(1, s.frame(t, 1, r, nil, nil)), Rejected, ReasonTooLate, wire.AckTooLate, Keep)
	cl := m.EdgeClosed(1, EdgeCounts{Population: 9, CheckedIn: 4, Failed: 1, Absent: 5})
	if cl == nil || cl.Why != "quota" || cl.Reports != 3 || len(cl.Shares) != 3 || cl.Population != 1+9 || cl.CheckedIn != 1+4 {
		t.Fatalf("closed %+v, want the quota of 3 edge reports with the edge's population and check-ins", cl)
	}
	if m.EdgeClosed(1, EdgeCounts{Population: 9}) != nil {
		t.Fatal("an edge's counts closed a round already closed")
	}

	// Full with an edge that never sends its counts: closed EdgeWait later.
	now := t0.Add(time.Hour)
	m.now = func() time.Time { return now }
	a2 := &wire.Announcement{Round: 2, Deadline: now.Add(time.Minute), Params: p, Model: make([]float64, p.D), RelayPub: [32]byte{5}}
	ab, err := a2.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	r2, err := m.Open(a2, ab, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.EdgeOpened(2); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		expect(t, m.EdgeShares(2, s.frame(t, 2, r2, nil, nil)), Shares, "", 0, Keep)
	}
	if next := m.NextTick(r2, now); !next.Equal(now.Add(EdgeWait)) {
		t.Fatalf("next tick %v after the quota, want EdgeWait later", next.Sub(now))
	}
	if c := m.Tick(r2, now.Add(EdgeWait-time.Millisecond)); c != nil {
		t.Fatalf("closed (%q) before EdgeWait", c.Why)
	}
	if c := m.Tick(r2, now.Add(EdgeWait)); c == nil || c.Why != "quota" || c.Reports != 3 {
		t.Fatalf("full past EdgeWait: %+v, want closed at the quota", c)
	}
}

// TestEdgeCompleteness: the owner's round does not complete while an edge
// that opened it has not closed it, though every volunteer of its own
// has reported; the edge's counts then complete it, and the closed round
// counts the edge's population and check-ins. Past the deadline, a silent
// edge is waited for at least EdgeWait and the stall time, then given up.
func TestEdgeCompleteness(t *testing.T) {
	p := secAggParams()
	p.Quota = 100
	now := t0
	m := New(0)
	m.now = func() time.Time { return now }
	a, b := m.Join(), m.Join()
	r := openSecAgg(t, m, 1, p)
	if err := m.EdgeOpened(1); err != nil {
		t.Fatal(err)
	}
	var s sharesSealer
	for _, pt := range []*Participant{a, b} {
		expect(t, m.Frame(pt, checkIn(1)), CheckIn, "", 0, Keep)
		if v := m.Frame(pt, s.frame(t, 1, r, nil, nil)); v.Accepted != Shares || v.Closed != nil {
			t.Fatalf("own report: %+v (closed with an edge still open?)", v)
		}
	}
	expect(t, m.EdgeShares(1, s.frame(t, 1, r, nil, nil)), Shares, "", 0, Keep)
	now = r.CheckInBy.Add(time.Second)
	if c := m.Tick(r, now); c != nil {
		t.Fatalf("complete (%q) with an edge still open", c.Why)
	}
	cl := m.EdgeClosed(1, EdgeCounts{Population: 4, CheckedIn: 2, Failed: 1, Absent: 2})
	if cl == nil || cl.Why != "complete" || cl.Population != 6 || cl.CheckedIn != 4 || cl.Reports != 3 {
		t.Fatalf("after the edge's counts: %+v, want complete, population 2+4, check-ins 2+2, 3 reports", cl)
	}

	// Round 2: an edge opens it and falls silent.
	now = t0.Add(time.Hour)
	a2 := &wire.Announcement{Round: 2, Deadline: now.Add(time.Minute), Params: p, Model: make([]float64, p.D), RelayPub: [32]byte{5}}
	ab, err := a2.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	r2, err := m.Open(a2, ab, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.EdgeOpened(2); err != nil {
		t.Fatal(err)
	}
	for _, pt := range []*Participant{a, b} {
		expect(t, m.Frame(pt, checkIn(2)), CheckIn, "", 0, Keep)
		expect(t, m.Frame(pt, s.frame(t, 2, r2, nil, nil)), Shares, "", 0, Keep)
	}
	if c := m.Tick(r2, r2.Deadline); c != nil {
		t.Fatalf("closed (%q) at the deadline with an edge open", c.Why)
	}
	stall := max(StallMin, time.Duration(StallShare*float64(r2.Deadline.Sub(r2.Opened))))
	last := r2.Deadline.Add(EdgeWait) // the last report (at the opening) is older than the stall time by then
	if l := now.Add(stall); l.After(last) {
		last = l
	}
	if c := m.Tick(r2, last.Add(-time.Millisecond)); c != nil {
		t.Fatalf("closed (%q) before EdgeWait and the stall time", c.Why)
	}
	if c := m.Tick(r2, last); c == nil || c.Why != "stalled" || c.Reports != 2 {
		t.Fatalf("a silent edge past EdgeWait and the stall time: %+v, want stalled with 2 reports", c)
	}
}
