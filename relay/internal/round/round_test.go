package round

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/wire"
)

// The rules without sockets: frames are byte slices, participants are
// values, time is a parameter.

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func params() wire.Params {
	return wire.Params{
		Protocol: wire.ProtocolSSDouble, Randomizer: wire.RandomizerLaplace,
		D: 8, K: 2, L: 1, Width: 1, NP: 4, MinBatch: 2, Quota: 0,
		EpsL: 2, Clip: 1, CheckInP: 1,
	}
}

func announcement(t *testing.T, num uint64, p wire.Params) (*wire.Announcement, []byte) {
	t.Helper()
	a := &wire.Announcement{Round: num, Deadline: t0.Add(time.Minute), Params: p, Model: make([]float64, p.D)}
	b, err := a.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return a, b
}

func open(t *testing.T, m *Machine, num uint64, p wire.Params) *Round {
	t.Helper()
	a, b := announcement(t, num, p)
	r, err := m.Open(a, b, t0)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// newAt returns a machine whose clock stands at t0, the rounds' opening
// time (the complete rule reads it).
func newAt(lastRound uint64) *Machine {
	m := New(lastRound)
	m.now = func() time.Time { return t0 }
	return m
}

func checkIn(num uint64) []byte {
	b, _ := (&wire.CheckIn{Round: num}).MarshalBinary()
	return b
}

// sealer makes Report frames whose sealed parts start with distinct
// encapsulated keys (the rules never open them; a counter stands in for
// HPKE's fresh key per seal).
type sealer struct{ n byte }

func (s *sealer) report(t *testing.T, num uint64, p wire.Params, seq int, idx uint32) []byte {
	t.Helper()
	s.n++
	sealed := make([]byte, envelope.SealedLen(int(p.Width)))
	sealed[0], sealed[1] = s.n, byte(num)
	r := wire.Report{Round: num, Seq: uint16(seq), Count: uint16(p.Messages()), Indices: []uint32{idx}, Sealed: sealed}
	b, err := r.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// full returns a client's M report frames.
func (s *sealer) full(t *testing.T, num uint64, p wire.Params) [][]byte {
	out := make([][]byte, p.Messages())
	for i := range out {
		out[i] = s.report(t, num, p, i, uint32(i))
	}
	return out
}

func expect(t *testing.T, v Verdict, acc Accepted, reason string, status uint8, end End) {
	t.Helper()
	if v.Accepted != acc || v.Reason != reason || v.Status != status || v.End != end {
		t.Fatalf("verdict %+v, want accepted %d reason %q status %d end %d", v, acc, reason, status, end)
	}
}

func participate(t *testing.T, m *Machine, p *Participant, frames [][]byte, num uint64) []Verdict {
	t.Helper()
	expect(t, m.Frame(p, checkIn(num)), CheckIn, "", wire.AckAccepted, Keep)
	var vs []Verdict
	for i, f := range frames {
		v := m.Frame(p, f)
		expect(t, v, Report, "", wire.AckAccepted, Keep)
		if int(v.Received) != i+1 {
			t.Fatalf("frame %d: received %d", i, v.Received)
		}
		vs = append(vs, v)
	}
	return vs
}

func TestOpenRules(t *testing.T) {
	m := newAt(4)
	a, b := announcement(t, 4, params())
	if _, err := m.Open(a, b, t0); !errors.Is(err, ErrStale) {
		t.Fatalf("round 4 after the outbox's round 4: %v", err)
	}
	a, b = announcement(t, 5, params())
	if _, err := m.Open(a, b, a.Deadline); !errors.Is(err, ErrDeadline) {
		t.Fatalf("at its deadline: %v", err)
	}
	p1, p2 := m.Join(), m.Join()
	_ = p2
	r, err := m.Open(a, b, t0)
	if err != nil || r.Population != 2 || r.Msgs != 2 || m.ReadLimit() != params().ReportFrameSize() {
		t.Fatalf("open: %+v %v limit %d", r, err, m.ReadLimit())
	}
	a6, b6 := announcement(t, 6, params())
	if err := m.CanOpen(a6, t0); !errors.Is(err, ErrStillOpen) {
		t.Fatalf("second open round: %v", err)
	}
	late := m.Join() // joined after the announcement: not invited
	expect(t, m.Frame(late, checkIn(5)), Rejected, ReasonNotInvited, wire.AckNoRound, Keep)
	expect(t, m.Frame(p1, checkIn(5)), CheckIn, "", 0, Keep)
	if c := m.Close(r, "deadline"); c == nil || c.Population != 2 || c.CheckedIn != 1 || m.Close(r, "again") != nil {
		t.Fatalf("close once: %+v", c)
	}
	if m.LastRound() != 5 || m.ReadLimit() != params().ReportFrameSize() {
		t.Fatalf("after close: last %d, limit %d", m.LastRound(), m.ReadLimit())
	}
	m.Halt()
	if _, err := m.Open(a6, b6, t0); !errors.Is(err, ErrHalted) {
		t.Fatalf("open after halt: %v", err)
	}
	// A halted machine closes nothing: the outbox marker makes the round
	// an abort at the next start.
	m2 := New(0)
	p2 = m2.Join()
	r2 := open(t, m2, 1, params())
	m2.Halt()
	if m2.Close(r2, "deadline") != nil {
		t.Fatal("a halted machine closed a round")
	}
}

// TestFrameRules: every frame gets exactly one verdict, with the reason,
// Ack status and end of the protocol.
func TestFrameRules(t *testing.T) {
	p := params()
	var s sealer
	m := newAt(0)
	c := m.Join()
	expect(t, m.Frame(c, checkIn(1)), Rejected, ReasonNoOpenRound, wire.AckNoRound, Keep)
	r := open(t, m, 1, p)

	cases := []struct {
		name   string
		frame  []byte
		reason string
		status uint8
		end    End
	}{
		{"empty", nil, ReasonMalformed, wire.AckMalformed, EndMalformed},
		{"bad version", []byte{9, 2, 0, 0, 0, 0, 0, 0, 0, 1}, ReasonMalformed, wire.AckMalformed, EndMalformed},
		{"short check-in", []byte{1, 2, 0, 0}, ReasonMalformed, wire.AckMalformed, EndMalformed},
		{"long check-in", append(checkIn(1), 0), ReasonMalformed, wire.AckMalformed, EndMalformed},
		{"short ack", []byte{1, 7, 0}, ReasonUnexpected, wire.AckMalformed, EndPolicy},
		{"ack", func() []byte { b, _ := (&wire.Ack{Round: 1}).MarshalBinary(); return b }(), ReasonUnexpected, wire.AckMalformed, EndPolicy},
		{"wrong round", checkIn(7), ReasonWrongRound, wire.AckWrongRound, Keep},
		{"report without check-in", s.report(t, 1, p, 0, 0), ReasonNoCheckIn, wire.AckMalformed, EndPolicy},
		{"truncated report", s.report(t, 1, p, 0, 0)[:30], ReasonMalformed, wire.AckMalformed, EndMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			expect(t, m.Frame(c, tc.frame), Rejected, tc.reason, tc.status, tc.end)
		})
	}

	a := m.Join() // joined after the open: not invited
	expect(t, m.Frame(a, checkIn(1)), Rejected, ReasonNotInvited, wire.AckNoRound, Keep)
	m.Close(r, "deadline")
	expect(t, m.Frame(c, checkIn(1)), Rejected, ReasonTooLate, wire.AckTooLate, Keep)

	seqs := []struct {
		name   string
		frames func(s *sealer) [][]byte
		reason string
		status uint8
		disc   bool
	}{
		{"second check-in", func(*sealer) [][]byte { return [][]byte{checkIn(2)} }, ReasonDuplicate, wire.AckDuplicate, false},
		{"re-sent frame", func(s *sealer) [][]byte { f := s.report(t, 2, p, 0, 0); return [][]byte{f, f} }, ReasonDuplicate, wire.AckDuplicate, true},
		{"out of order", func(s *sealer) [][]byte { return [][]byte{s.report(t, 2, p, 1, 1)} }, ReasonOutOfOrder, wire.AckMalformed, false},
		{"after a full report", func(s *sealer) [][]byte { return append(s.full(t, 2, p), s.report(t, 2, p, 0, 0)) }, ReasonDuplicate, wire.AckDuplicate, false},
	}
	for _, tc := range seqs {
		t.Run(tc.name, func(t *testing.T) {
			m := newAt(1)
			c := m.Join()
			m.Join() // a silent volunteer: the round stays open
			open(t, m, 2, p)
			expect(t, m.Frame(c, checkIn(2)), CheckIn, "", 0, Keep)
			fs := tc.frames(&sealer{})
			for _, f := range fs[:len(fs)-1] {
				expect(t, m.Frame(c, f), Report, "", 0, Keep)
			}
			v := m.Frame(c, fs[len(fs)-1])
			expect(t, v, Rejected, tc.reason, tc.status, EndPolicy)
			if v.Discarded != tc.disc {
				t.Fatalf("discarded %v, want %v", v.Discarded, tc.disc)
			}
		})
	}
}

// TestReplayRejected: a report captured from one client and replayed on a
// new connection, in the same round or (its round field rewritten) in the
// next, is rejected as a replay and never reaches the batch.
func TestReplayRejected(t *testing.T) {
	p := params()
	var s sealer
	m := newAt(0)
	honest, thief, thief2 := m.Join(), m.Join(), m.Join()
	r := open(t, m, 1, p)
	captured := s.full(t, 1, p)
	participate(t, m, honest, captured, 1)
	expect(t, m.Frame(thief, checkIn(1)), CheckIn, "", 0, Keep)
	v := m.Frame(thief, captured[0])
	expect(t, v, Rejected, ReasonReplay, wire.AckDuplicate, EndPolicy)
	// A thief that sends one fresh frame first, then a captured one: its
	// partial report is discarded.
	expect(t, m.Frame(thief2, checkIn(1)), CheckIn, "", 0, Keep)
	expect(t, m.Frame(thief2, s.report(t, 1, p, 0, 5)), Report, "", 0, Keep)
	v = m.Frame(thief2, captured[1])
	expect(t, v, Rejected, ReasonReplay, wire.AckDuplicate, EndPolicy)
	if !v.Discarded {
		t.Fatal("the replaying client's partial report was kept")
	}
	c := m.Close(r, "deadline")
	if c.Reports != 1 || len(c.Real) != p.Messages() || c.CheckedIn != 3 {
		t.Fatalf("closed %+v", c)
	}

	// The next round: the captured frames with the round field rewritten.
	open(t, m, 2, p)
	g := append([]byte(nil), captured[0]...)
	g[9] = 2 // round 1 -> 2 (big-endian u64 at offset 2)
	for _, pt := range []*Participant{thief, thief2} {
		expect(t, m.Frame(pt, checkIn(2)), CheckIn, "", 0, Keep)
		expect(t, m.Frame(pt, g), Rejected, ReasonReplay, wire.AckDuplicate, EndPolicy)
	}
	// Unchanged, they are for the round that closed.
	expect(t, m.Frame(honest, captured[0]), Rejected, ReasonTooLate, wire.AckTooLate, Keep)
}

// TestQuotaAndPlan: the quota closes the round with the frame that reaches
// it; the plan aborts below MinBatch and forwards otherwise; partial
// reports are discarded at the close.
func TestQuotaAndPlan(t *testing.T) {
	p := params()
	p.Quota = 2
	var s sealer
	m := newAt(0)
	a, b, c := m.Join(), m.Join(), m.Join()
	r := open(t, m, 1, p)
	participate(t, m, a, s.full(t, 1, p), 1)
	expect(t, m.Frame(c, checkIn(1)), CheckIn, "", 0, Keep)
	expect(t, m.Frame(c, s.report(t, 1, p, 0, 3)), Report, "", 0, Keep) // partial
	vs := participate(t, m, b, s.full(t, 1, p), 1)
	last := vs[len(vs)-1]
	if !last.Complete || last.Closed == nil {
		t.Fatalf("quota not reached: %+v", last)
	}
	cl := last.Closed
	if cl.Why != "quota" || cl.Reports != 2 || cl.CheckedIn != 3 || cl.Population != 3 || cl.Discarded != 1 ||
		len(cl.Real) != 2*p.Messages() || cl.Plan().Abort {
		t.Fatalf("closed %+v plan %+v", cl, cl.Plan())
	}
	if m.Close(r, "deadline") != nil {
		t.Fatal("closed twice")
	}
	expect(t, m.Frame(c, s.report(t, 1, p, 1, 4)), Rejected, ReasonTooLate, wire.AckTooLate, Keep)

	// Below MinBatch: abort, with the counts.
	r2 := open(t, m, 2, p)
	participate(t, m, a, s.full(t, 2, p), 2)
	cl = m.Close(r2, "deadline")
	plan := cl.Plan()
	ab := cl.AbortFor(plan.Reason)
	if !plan.Abort || plan.Reason != wire.AbortBelowMinBatch || ab.Round != 2 || ab.Reports != 1 || ab.Population != 3 {
		t.Fatalf("plan %+v abort %+v", plan, ab)
	}
	// Leaving mid-upload discards the partial report.
	open(t, m, 3, p)
	expect(t, m.Frame(b, checkIn(3)), CheckIn, "", 0, Keep)
	expect(t, m.Frame(b, s.report(t, 3, p, 0, 0)), Report, "", 0, Keep)
	if !m.Leave(b) || m.Population() != 2 {
		t.Fatal("leaving mid-upload: partial report not discarded")
	}
}

func secAggParams() wire.Params {
	return wire.Params{
		Protocol: wire.ProtocolSecAgg, Randomizer: wire.RandomizerDiscreteGaussian,
		D: 8, K: 1, L: 1, Width: 1, Sigma: 2, Clip: 1, CheckInP: 1, MinBatch: 2, Quota: 3,
	}
}

func openSecAgg(t *testing.T, m *Machine, num uint64, p wire.Params) *Round {
	t.Helper()
	a := &wire.Announcement{Round: num, Deadline: t0.Add(time.Minute), Params: p, Model: make([]float64, p.D), RelayPub: [32]byte{5}}
	b, err := a.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	r, err := m.Open(a, b, t0)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// sharesSealer makes Shares frames of a round's exact size whose sealed
// shares start with distinct encapsulated keys (the rules never open them).
type sharesSealer struct{ n uint16 }

func (s *sharesSealer) enc() []byte {
	s.n++
	return []byte{byte(s.n >> 8), byte(s.n), 0xEE}
}

func (s *sharesSealer) frame(t *testing.T, num uint64, r *Round, lead, help []byte) []byte {
	t.Helper()
	l, h := make([]byte, r.LeaderLen), make([]byte, r.HelperLen)
	if lead == nil {
		lead = s.enc()
	}
	if help == nil {
		help = s.enc()
	}
	copy(l, lead)
	copy(h, help)
	b, err := (&wire.Shares{Round: num, Leader: l, Helper: h}).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSecAggRules: a secure-summation report is the check-in and exactly
// one Shares frame of the round's size (from roundspec); a second one on
// the connection, a replay of the pair of sealed shares (this round or,
// rewritten, the next), another protocol's frame, a frame of the wrong size or round
// are each rejected with their reason; accepted reports close the round at
// the quota with their shares in arrival order.
func TestSecAggRules(t *testing.T) {
	p := secAggParams()
	m := newAt(0)
	a, thief, b1, b2, c, d, e, f := m.Join(), m.Join(), m.Join(), m.Join(), m.Join(), m.Join(), m.Join(), m.Join()
	r := openSecAgg(t, m, 1, p)
	if r.SecAgg == nil || r.Msgs != 1 || r.FrameSize != wire.SharesSize(r.LeaderLen, r.HelperLen) ||
		m.ReadLimit() != r.FrameSize || r.RelayPub != [32]byte{5} {
		t.Fatalf("secagg round %+v, read limit %d", r, m.ReadLimit())
	}
	if lead, help, err := r.SecAgg.SharesSizes(); err != nil || lead != r.LeaderLen || help != r.HelperLen {
		t.Fatalf("sizes %d %d, spec %d %d (%v)", r.LeaderLen, r.HelperLen, lead, help, err)
	}
	var s sharesSealer
	fa := s.frame(t, 1, r, nil, nil)
	expect(t, m.Frame(a, fa), Rejected, ReasonNoCheckIn, wire.AckMalformed, EndPolicy)
	expect(t, m.Frame(a, checkIn(1)), CheckIn, "", 0, Keep)
	expect(t, m.Frame(a, s.frame(t, 2, r, nil, nil)), Rejected, ReasonWrongRound, wire.AckWrongRound, Keep)
	v := m.Frame(a, fa)
	expect(t, v, Shares, "", 0, Keep)
	if !v.Complete || v.Received != 1 || v.Closed != nil {
		t.Fatalf("accepted shares: %+v", v)
	}
	// A second report on the connection: rejected, the first one kept.
	expect(t, m.Frame(a, s.frame(t, 1, r, nil, nil)), Rejected, ReasonDuplicate, wire.AckDuplicate, EndPolicy)

	// Replays on another connection: the whole frame, or a fresh frame
	// reusing both sealed shares' encapsulated keys, or one whose two
	// shares start with the same key.
	expect(t, m.Frame(thief, checkIn(1)), CheckIn, "", 0, Keep)
	expect(t, m.Frame(thief, fa), Rejected, ReasonReplay, wire.AckDuplicate, EndPolicy)
	same := s.enc()
	for i, fr := range [][]byte{
		s.frame(t, 1, r, fa[18:21], fa[18+r.LeaderLen:][:3]), // both of a's keys
		s.frame(t, 1, r, same, same),
	} {
		pt := []*Participant{b1, b2}[i]
		expect(t, m.Frame(pt, checkIn(1)), CheckIn, "", 0, Keep)
		expect(t, m.Frame(pt, fr), Rejected, ReasonReplay, wire.AckDuplicate, EndPolicy)
	}

	// Wrong size, another protocol's frame.
	expect(t, m.Frame(c, checkIn(1)), CheckIn, "", 0, Keep)
	expect(t, m.Frame(c, s.frame(t, 1, r, nil, nil)[:r.FrameSize-1]), Rejected, ReasonMalformed, wire.AckMalformed, EndMalformed)
	expect(t, m.Frame(d, checkIn(1)), CheckIn, "", 0, Keep)
	var rs sealer
	expect(t, m.Frame(d, rs.report(t, 1, params(), 0, 0)), Rejected, ReasonUnexpected, wire.AckMalformed, EndPolicy)

	// Two more honest reports: the quota (3) closes the round.
	var frames [][]byte
	for _, pt := range []*Participant{e, f} {
		expect(t, m.Frame(pt, checkIn(1)), CheckIn, "", 0, Keep)
		fr := s.frame(t, 1, r, nil, nil)
		frames = append(frames, fr)
		v = m.Frame(pt, fr)
		expect(t, v, Shares, "", 0, Keep)
	}
	cl := v.Closed
	if cl == nil || cl.Why != "quota" || cl.Reports != 3 || cl.SecAgg == nil || len(cl.Shares) != 3 || len(cl.Real) != 0 || cl.Plan().Abort {
		t.Fatalf("closed %+v", cl)
	}
	for i, fr := range [][]byte{fa, frames[0], frames[1]} {
		if !bytes.Equal(cl.Shares[i].Leader, fr[18:18+r.LeaderLen]) || !bytes.Equal(cl.Shares[i].Helper, fr[18+r.LeaderLen:]) {
			t.Fatalf("report %d: shares not in arrival order", i)
		}
	}

	// The next round: a's frame with its round field rewritten is a replay;
	// a shuffle round refuses Shares frames.
	r2 := openSecAgg(t, m, 2, p)
	g := bytes.Clone(fa)
	g[9] = 2
	expect(t, m.Frame(e, checkIn(2)), CheckIn, "", 0, Keep)
	expect(t, m.Frame(e, g), Rejected, ReasonReplay, wire.AckDuplicate, EndPolicy)
	if cl := m.Close(r2, "deadline"); cl.Reports != 0 || !cl.Plan().Abort {
		t.Fatalf("round 2 closed %+v", cl)
	}
	open(t, m, 3, params())
	expect(t, m.Frame(f, checkIn(3)), CheckIn, "", 0, Keep)
	expect(t, m.Frame(f, s.frame(t, 3, r, nil, nil)), Rejected, ReasonUnexpected, wire.AckMalformed, EndPolicy)
}

// TestSecAggRefusedParams: parameters roundspec refuses do not open a
// round.
func TestSecAggRefusedParams(t *testing.T) {
	p := secAggParams()
	p.Quota = 1 << 30 // beyond what the field arithmetic supports
	m := newAt(0)
	a := &wire.Announcement{Round: 1, Deadline: t0.Add(time.Minute), Params: p, Model: make([]float64, p.D), RelayPub: [32]byte{5}}
	b, err := a.MarshalBinary()
	if err != nil {
		t.Skipf("wire refuses the quota already: %v", err)
	}
	if _, err := m.Open(a, b, t0); !errors.Is(err, ErrParams) {
		t.Fatalf("open: %v", err)
	}
	if _, err := m.Open(a, b, t0); !errors.Is(err, ErrParams) || m.ReadLimit() != wire.CheckInSize {
		t.Fatalf("machine changed by a refused round: %v, limit %d", err, m.ReadLimit())
	}
}

// TestSecAggReadLimitMNIST: at d = 7850 (PINE, quota 1000) the read
// limit is the Shares frame's exact size, about 90 KB.
func TestSecAggReadLimitMNIST(t *testing.T) {
	p := secAggParams()
	p.D, p.Sigma, p.Quota = 7850, 300, 1000
	m := newAt(0)
	r := openSecAgg(t, m, 1, p)
	lead, help, err := r.SecAgg.SharesSizes()
	if err != nil {
		t.Fatal(err)
	}
	if want := wire.SharesSize(lead, help); m.ReadLimit() != want || r.FrameSize != want || want < 80_000 || want > 100_000 {
		t.Fatalf("read limit %d, frame %d, want %d (about 90 KB)", m.ReadLimit(), r.FrameSize, want)
	}
	t.Logf("Shares frame at d = 7850: %d bytes", r.FrameSize)
}

// TestSecAggCopiedShareDoesNotDisplace (issue 18): a frame that copies one
// sealed share of a genuine upload still in flight, paired with a share of
// its own, and arrives first, does not get the genuine report refused as a
// replay: the genuine frame is admitted too, and the servers' preparation
// (where the copy fails: its shares do not prepare together) keeps the
// genuine one. Before, a per-share rule refused the genuine frame.
func TestSecAggCopiedShareDoesNotDisplace(t *testing.T) {
	m := New(0)
	genuine, thief, thief2 := m.Join(), m.Join(), m.Join()
	r := openSecAgg(t, m, 1, secAggParams())
	var s sharesSealer
	fg := s.frame(t, 1, r, nil, nil)
	for _, pt := range []*Participant{genuine, thief, thief2} {
		expect(t, m.Frame(pt, checkIn(1)), CheckIn, "", 0, Keep)
	}
	// The copies complete first: the genuine leader share with a fresh
	// helper share, and a fresh leader share with the genuine helper share.
	expect(t, m.Frame(thief, s.frame(t, 1, r, fg[18:21], nil)), Shares, "", 0, Keep)
	expect(t, m.Frame(thief2, s.frame(t, 1, r, nil, fg[18+r.LeaderLen:][:3])), Shares, "", 0, Keep)
	expect(t, m.Frame(genuine, fg), Shares, "", 0, Keep)
}

// TestCloseComplete: the round closes once every expected report is in
// ("complete"): at once when every invited participant is accounted for
// (reported, left or disqualified); after the check-in window when every
// volunteer who checked in has reported and they reach MinBatch; a late
// check-in is waited for; below MinBatch the round waits for its
// deadline; with nobody left who could report, for the check-in window.
func TestCloseComplete(t *testing.T) {
	p := params() // MinBatch 2, no quota; deadline t0 + 1 min, window 12 s
	var s sealer

	t.Run("everyone accounted for", func(t *testing.T) {
		m := newAt(0)
		a, b, c := m.Join(), m.Join(), m.Join()
		r := open(t, m, 1, p)
		for _, pt := range []*Participant{a, b, c} {
			expect(t, m.Frame(pt, checkIn(1)), CheckIn, "", 0, Keep)
		}
		for _, f := range s.full(t, 1, p) {
			if v := m.Frame(a, f); v.Closed != nil {
				t.Fatalf("closed with b and c outstanding: %+v", v.Closed)
			}
		}
		m.Leave(c) // checked in, never reports
		if cl := m.Tick(r, t0.Add(time.Second)); cl != nil {
			t.Fatalf("closed with b outstanding: %+v", cl)
		}
		var v Verdict
		for _, f := range s.full(t, 1, p) {
			v = m.Frame(b, f)
		}
		cl := v.Closed
		if cl == nil || cl.Why != "complete" || cl.Reports != 2 || cl.CheckedIn != 3 || cl.Failed != 1 || cl.Plan().Abort {
			t.Fatalf("closed %+v", cl)
		}
	})

	t.Run("after the check-in window", func(t *testing.T) {
		m := newAt(0)
		a, b, c, d := m.Join(), m.Join(), m.Join(), m.Join()
		r := open(t, m, 1, p)
		if want := t0.Add(12 * time.Second); !r.CheckInBy.Equal(want) || !m.NextTick(r, t0).Equal(want) {
			t.Fatalf("check-in window ends %v (next tick %v), want %v", r.CheckInBy, m.NextTick(r, t0), want)
		}
		participate(t, m, a, s.full(t, 1, p), 1)
		participate(t, m, b, s.full(t, 1, p), 1)
		if cl := m.Tick(r, t0.Add(11*time.Second)); cl != nil {
			t.Fatalf("closed inside the check-in window: %+v", cl)
		}
		// c checks in late: it is waited for.
		expect(t, m.Frame(c, checkIn(1)), CheckIn, "", 0, Keep)
		if cl := m.Tick(r, t0.Add(13*time.Second)); cl != nil {
			t.Fatalf("closed with c outstanding: %+v", cl)
		}
		if next := m.NextTick(r, t0.Add(13*time.Second)); !next.Equal(t0.Add(14 * time.Second)) {
			t.Fatalf("next tick %v, want every second after the window", next)
		}
		m.now = func() time.Time { return t0.Add(20 * time.Second) }
		var v Verdict
		for _, f := range s.full(t, 1, p) {
			v = m.Frame(c, f)
		}
		cl := v.Closed
		if cl == nil || cl.Why != "complete" || cl.Reports != 3 || cl.CheckedIn != 3 || cl.Population != 4 {
			t.Fatalf("closed %+v", cl)
		}
		_ = d // invited, sat out: not waited for after the window
	})

	t.Run("everyone accounted for below MinBatch waits for the deadline", func(t *testing.T) {
		// One phone alone in a class whose minimum batch is 2: its report
		// does not close the round (closing could only abort it, and the
		// next round would follow at once).
		m := newAt(0)
		a := m.Join()
		r := open(t, m, 1, p)
		participate(t, m, a, s.full(t, 1, p), 1)
		if cl := m.Tick(r, r.CheckInBy.Add(time.Second)); cl != nil {
			t.Fatalf("closed below MinBatch before the deadline: %+v", cl)
		}
		if cl := m.Tick(r, r.Deadline); cl == nil || cl.Why != "deadline" || !cl.Plan().Abort {
			t.Fatalf("closed %+v", cl)
		}
	})

	t.Run("below MinBatch waits for the deadline", func(t *testing.T) {
		m := newAt(0)
		a, _ := m.Join(), m.Join()
		r := open(t, m, 1, p)
		participate(t, m, a, s.full(t, 1, p), 1)
		if cl := m.Tick(r, t0.Add(30*time.Second)); cl != nil {
			t.Fatalf("closed below MinBatch before the deadline: %+v", cl)
		}
		if next := m.NextTick(r, t0.Add(59500*time.Millisecond)); !next.Equal(r.Deadline) {
			t.Fatalf("next tick %v after the deadline %v", next, r.Deadline)
		}
		cl := m.Tick(r, r.Deadline)
		if cl == nil || cl.Why != "deadline" || !cl.Plan().Abort {
			t.Fatalf("closed %+v", cl)
		}
		if m.Tick(r, r.Deadline) != nil || !m.NextTick(r, r.Deadline).IsZero() {
			t.Fatal("closed twice")
		}
	})

	t.Run("nobody left to report", func(t *testing.T) {
		m := newAt(0)
		a, b := m.Join(), m.Join()
		r := open(t, m, 1, p)
		m.Leave(a)
		m.Leave(b)
		if cl := m.Tick(r, t0.Add(11*time.Second)); cl != nil {
			t.Fatalf("an empty round closed inside the check-in window: %+v", cl)
		}
		cl := m.Tick(r, r.CheckInBy)
		if cl == nil || cl.Why != "complete" || cl.Reports != 0 || !cl.Plan().Abort {
			t.Fatalf("closed %+v", cl)
		}
		// A round opened with nobody connected: the same.
		r2 := open(t, m, 2, p)
		if r2.Population != 0 || m.Tick(r2, t0) != nil {
			t.Fatal("an empty round closed at once")
		}
		if cl := m.Tick(r2, r2.CheckInBy); cl == nil || cl.Why != "complete" {
			t.Fatalf("closed %+v", cl)
		}
	})
}

// TestWaitsPastDeadlineWhileReportsArrive (issue 25): at its deadline a
// round with reports of checked-in volunteers still missing is not closed
// while they keep arriving: it closes once WaitFor of them are in
// ("deadline"), after StallMin (or StallShare of its length) without a new
// report ("stalled"), or at its cap (roundspec.CloseCap: twice its length
// past the deadline). A round whose expected reports are in closes at the
// deadline as before. The deadline is t0 + 1 min here: stall 6 s, cap t0
// + 3 min.
func TestWaitsPastDeadlineWhileReportsArrive(t *testing.T) {
	p := params() // MinBatch 2, no quota
	var s sealer
	const n = 40
	setup := func() (*Machine, *Round, []*Participant) {
		m := newAt(0)
		ps := make([]*Participant, n)
		for i := range ps {
			ps[i] = m.Join()
		}
		r := open(t, m, 1, p)
		for _, pt := range ps {
			expect(t, m.Frame(pt, checkIn(1)), CheckIn, "", 0, Keep)
		}
		return m, r, ps
	}
	at := func(m *Machine, d time.Duration) time.Time {
		now := t0.Add(d)
		m.now = func() time.Time { return now }
		return now
	}
	report := func(m *Machine, pt *Participant) *Closed {
		var v Verdict
		for _, f := range s.full(t, 1, p) {
			v = m.Frame(pt, f)
		}
		return v.Closed
	}
	if r := open(t, newAt(0), 1, p); !r.Cap.Equal(t0.Add(3 * time.Minute)) {
		t.Fatalf("cap %v, want t0 + 3 min", r.Cap.Sub(t0))
	}

	why := func(cl *Closed) string {
		if cl == nil {
			return "open"
		}
		return fmt.Sprintf("closed (%s) with %d reports", cl.Why, cl.Reports)
	}
	t.Run("arriving", func(t *testing.T) {
		m, r, ps := setup()
		at(m, 58*time.Second)
		for _, pt := range ps[:30] {
			report(m, pt)
		}
		if cl := m.Tick(r, at(m, time.Minute)); cl != nil {
			t.Fatalf("at the deadline with 30 of 40 in, the last 2 s ago: %s", why(cl))
		}
		if next := m.NextTick(r, t0.Add(time.Minute)); !next.Equal(t0.Add(time.Minute + time.Second)) {
			t.Fatalf("next tick %v past the deadline, want every second", next.Sub(t0))
		}
		for i, pt := range ps[30:37] { // one every 5 s: never a stall
			now := time.Minute + time.Duration(5*(i+1))*time.Second
			at(m, now)
			report(m, pt)
			if cl := m.Tick(r, t0.Add(now)); cl != nil {
				t.Fatalf("%d of 40 in: %s", 31+i, why(cl))
			}
		}
		at(m, 100*time.Second)
		report(m, ps[37]) // 38 of 40 = 95%
		if cl := m.Tick(r, t0.Add(100*time.Second)); cl == nil || cl.Why != "deadline" || cl.Reports != 38 {
			t.Fatalf("38 of 40 in: %s", why(cl))
		}
	})

	t.Run("stalled", func(t *testing.T) {
		m, r, ps := setup()
		at(m, 50*time.Second)
		for _, pt := range ps[:20] {
			report(m, pt)
		}
		if cl := m.Tick(r, t0.Add(time.Minute)); cl == nil || cl.Why != "stalled" {
			t.Fatalf("at the deadline, no report for 10 s (stall 6 s): %s", why(cl))
		}
		m, r, ps = setup()
		at(m, 58*time.Second)
		for _, pt := range ps[:20] {
			report(m, pt)
		}
		if cl := m.Tick(r, t0.Add(63*time.Second)); cl != nil {
			t.Fatalf("5 s after the last report: %s", why(cl))
		}
		if cl := m.Tick(r, t0.Add(64*time.Second)); cl == nil || cl.Why != "stalled" || cl.Reports != 20 {
			t.Fatalf("6 s after the last report: %s", why(cl))
		}
	})

	t.Run("cap", func(t *testing.T) {
		m, r, ps := setup()
		for i, pt := range ps[:37] { // one every 4.5 s, from t0 + 10 s: never a stall, never 95%
			at(m, 10*time.Second+time.Duration(i)*4500*time.Millisecond)
			report(m, pt)
		}
		if cl := m.Tick(r, t0.Add(2*time.Minute+50*time.Second)); cl != nil {
			t.Fatalf("before the cap: %s", why(cl))
		}
		at(m, 3*time.Minute)
		if cl := m.Tick(r, t0.Add(3*time.Minute)); cl == nil || cl.Why != "cap" || cl.Reports != 37 {
			t.Fatalf("at the cap: %s", why(cl))
		}
	})

	t.Run("all in", func(t *testing.T) {
		m, r, ps := setup()
		at(m, 50*time.Second)
		for _, pt := range ps[:39] {
			report(m, pt)
		}
		m.Leave(ps[39]) // checked in, can no longer report
		if cl := m.Tick(r, at(m, time.Minute)); cl == nil || cl.Why == "stalled" {
			t.Fatalf("every expected report in: %s", why(cl))
		}
	})
}
