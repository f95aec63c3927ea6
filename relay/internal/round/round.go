// Package round is the relay's round state machine: the rules of
// docs/protocol.md for one relay, without sockets, timers or files. It
// opens a round on an announcement, judges every client frame (accept, or
// reject with a reason, an Ack status and whether the connection must
// end), closes the round exactly once (deadline or quota, as its caller
// decides) and says what the closed round owes the aggregator (a batch to
// pad, or an abort and why).
//
// The transport (relay/internal/server) owns the websockets, the timer
// (it calls Tick when NextTick says), the outbox and the counters; it
// hands this package one Participant per connection and one frame at a
// time.
//
// # Closing a round
//
// A round closes at the first of (docs/protocol.md, "Closing a round"):
//
//   - quota: Params.Quota complete reports (0: no quota);
//   - complete: every volunteer expected has reported. The expected ones
//     are those who checked in (a volunteer sends its CheckIn as soon as
//     its coin says yes, before it trains) minus those whose report can no
//     longer come (left, or disqualified). The round closes when all
//     invited participants are accounted for (reported, failed or left;
//     with no report at all, not before the end of the check-in window:
//     the first fifth of the round, CheckInWindow), or, once the check-in
//     window has passed, when every volunteer who checked in has reported
//     and they are at least MinBatch;
//   - deadline: the announced deadline, the round's cap. The aggregator
//     chooses it (its round timeout); the round waits for the volunteers
//     who checked in until then.
//
// Closing on the count of arrivals releases nothing the aggregator does
// not already receive: the close time is the arrival of the last expected
// report (a time the relay sees for every frame), and the report and
// check-in counts are in the batch (docs/privacy.md; docs/secagg.md: "the
// released count of accepted reports is not noised"). The quota rule has
// always closed rounds on a count. A Machine is safe
// for concurrent use: frames of different connections are judged in
// parallel (a Report is decoded outside the lock).
//
// Replays: the HPKE encapsulated key that starts every sealed part is a
// fresh X25519 public key per seal, so two honest messages never share
// one. The machine remembers the keys of every Report frame it admitted in
// the open round and in the round before, and rejects a frame carrying one
// again (ReasonReplay): a captured report replayed on a new connection,
// within the round or into the next one with its round field rewritten
// (which the aggregator could not open anyway: the seal is bound to its
// round).
//
// Secure summation (docs/secagg.md, protocol secagg): a report is the
// CheckIn followed by exactly one Shares frame of the round's exact size
// (the sealed leader and helper shares, sizes from roundspec); one report
// per connection and round. The replay rule covers the pair of sealed
// shares: a Shares frame whose leader and helper shares start with the
// encapsulated keys of a frame admitted this round or the last is
// rejected as a replay (a frame reusing only one share is left to the
// servers' preparation, where it fails without displacing the genuine
// report).
// A Report frame in a secure-summation round, or a Shares frame in a
// shuffle round, is a frame of another protocol (ReasonUnexpected).
package round

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/wire"
)

// Rejection reasons of the rules. Every frame the transport hands to
// Machine.Frame is accepted or rejected with exactly one of these.
const (
	ReasonMalformed   = "malformed"     // wire decoding failed (Ack 4, close invalid)
	ReasonUnexpected  = "unexpected"    // a frame type clients never send, or another protocol's (Ack 4, close policy)
	ReasonNoOpenRound = "no_open_round" // no round is open (Ack 1)
	ReasonNotInvited  = "not_invited"   // connected after the round opened (Ack 1)
	ReasonWrongRound  = "wrong_round"   // frame for another round (Ack 2)
	ReasonTooLate     = "too_late"      // frame for the round that just closed (Ack 5)
	ReasonNoCheckIn   = "no_checkin"    // report without a check-in (Ack 4, close policy)
	ReasonDuplicate   = "duplicate"     // second check-in, replayed frame or second report on one connection (Ack 3, close policy)
	ReasonOutOfOrder  = "out_of_order"  // seq skips ahead (Ack 4, close policy)
	ReasonReplay      = "replay"        // sealed content already seen this round or the last (Ack 3, close policy)
)

// Reasons lists every rejection reason of the rules.
var Reasons = []string{ReasonMalformed, ReasonUnexpected, ReasonNoOpenRound, ReasonNotInvited, ReasonWrongRound,
	ReasonTooLate, ReasonNoCheckIn, ReasonDuplicate, ReasonOutOfOrder, ReasonReplay}

// End says whether a connection must end after a frame, and why.
type End uint8

const (
	Keep         End = iota // the connection stays open
	EndMalformed            // the frame was not a valid frame (websocket 1007)
	EndPolicy               // a protocol violation (websocket 1008)
)

// Accepted names what an accepted frame was.
type Accepted uint8

const (
	Rejected Accepted = iota
	CheckIn
	Report
	Shares // a secure-summation report (one Shares frame)
)

// Verdict is the answer to one frame.
type Verdict struct {
	Accepted Accepted
	Reason   string // "" when accepted
	Status   uint8  // the Ack status (wire.Ack*)
	Round    uint64 // the Ack round: the frame's, or 0 if unknown
	Received uint16 // the Ack's count of the participant's messages so far
	End      End
	// Discarded: the participant's partial report was discarded.
	Discarded bool
	// Complete: this frame completed the participant's report.
	Complete bool
	// Closed is set when this frame reached the quota and closed the round.
	Closed *Closed
	// Shares is the accepted secure-summation report when the machine
	// streams them (SetStreamShares): the transport forwards it as it
	// arrives and the machine keeps nothing of it.
	Shares *SharesReport
}

// TooLate is the verdict a volunteer gets instead of v when its accepted
// report did not make it into the round after all (the round ended
// before the report reached the aggregator, or the relay that owns the
// round could not be reached): too late (Ack 5), never accepted.
func TooLate(v Verdict) Verdict {
	return Verdict{Reason: ReasonTooLate, Status: wire.AckTooLate, Round: v.Round, Closed: v.Closed}
}

// Participant is one connection's state in the rounds. The transport
// creates it with Machine.Join and ends it with Machine.Leave.
type Participant struct {
	// guarded by Machine.mu
	invited uint64 // round whose announcement this participant was sent
	round   uint64 // round this participant checked in for
	done    bool   // report complete or disqualified for round
	pending []wire.BatchMessage
}

// Round is an open (or closed) round. Its exported fields are fixed at
// Open.
type Round struct {
	Num        uint64
	Ann        []byte // the announcement exactly as received
	Params     wire.Params
	HPKEPub    [32]byte
	RelayPub   [32]byte // secure summation: the helper key the announcement names
	Deadline   time.Time
	Msgs       int // M, messages per client (1 Shares frame in secure summation)
	FrameSize  int // the Report (or Shares) frame size
	Population uint32
	// SecAgg is the round's spec for secure summation, nil for a shuffle
	// protocol; LeaderLen and HelperLen are its sealed share sizes.
	SecAgg               *roundspec.Spec
	LeaderLen, HelperLen int

	// CheckInBy ends the check-in window (see "Closing a round").
	CheckInBy time.Time
	// Opened is when the relay opened the round; Cap is the latest it
	// waits past the deadline for reports still arriving
	// (roundspec.CloseCap).
	Opened, Cap time.Time

	// guarded by Machine.mu
	closed    bool
	checkedIn uint32
	reports   uint32
	lastAt    time.Time // when the last complete report came in (the opening before any)
	floor     uint32    // the machine's SetMinBatchFloor when the round opened
	failed    uint32    // checked in, report can no longer complete (left, disqualified)
	absent    uint32    // invited, left before checking in
	real      []wire.BatchMessage
	shares    []SharesReport
	// Edges (edge.go): the edges that opened the round and have not closed
	// it, and the population of those that did.
	edgesOpen int
	edgePop   uint32
	// full: the quota was reached while edges had the round open; it
	// closes ("quota") once they sent their counts, or EdgeWait after
	// fullAt, and takes no report meanwhile.
	full   bool
	fullAt time.Time
}

// CheckInWindow is the fraction of a round (from its opening to its
// deadline) after which the volunteers who have not checked in are no
// longer waited for.
const CheckInWindow = 0.2

// completeLocked reports whether every expected report is in (see
// "Closing a round").
func (r *Round) completeLocked(now time.Time) bool {
	if r.edgesOpen > 0 {
		return false // an edge's volunteers are still at work (edge.go)
	}
	pop := r.Population + r.edgePop
	if r.reports+r.failed < r.checkedIn {
		return false // a volunteer who checked in is still at work
	}
	if r.reports == 0 && r.reports+r.failed+r.absent >= pop {
		// Nobody was connected, or all left: nothing can come, but the
		// round waits for the check-in window, so that empty rounds
		// follow each other at most that often.
		return !now.Before(r.CheckInBy)
	}
	if r.reports < max(r.Params.MinBatch, r.floor, 1) {
		// Closed now, the round could only abort, and the next one would
		// be announced at once (a class of one phone would spin through
		// rounds): below the minimum batch it waits for its deadline,
		// when a volunteer who connects late may still check in.
		return false
	}
	// Every invited participant accounted for, or everyone who checked
	// in has reported once the check-in window is over.
	return r.reports+r.failed+r.absent >= pop || !now.Before(r.CheckInBy)
}

// pollEvery is how often Tick asks to be called after the check-in window:
// a participant leaving (or being disqualified) can complete a round
// between two reports.
const pollEvery = time.Second

// SharesReport is one volunteer's secure-summation report: its two sealed
// shares, aliasing the Shares frame as received.
type SharesReport struct {
	Leader, Helper []byte
}

// Closed is a round that ended: what it collected and who took part.
type Closed struct {
	Num        uint64
	Params     wire.Params
	HPKEPub    [32]byte
	Why        string    // "deadline", "quota", ...
	At         time.Time // when the machine closed it (its clock)
	Population uint32
	CheckedIn  uint32
	Failed     uint32              // checked in, report never completed (left, disqualified)
	Reports    uint32              // complete reports
	Real       []wire.BatchMessage // their messages, in arrival order (shuffle protocols)
	Discarded  int                 // partial reports discarded at the close
	Floor      uint32              // the relay's own minimum batch (Machine.SetMinBatchFloor)
	// Secure summation: the round's spec (nil for a shuffle protocol) and
	// the reports' sealed shares in arrival order.
	SecAgg *roundspec.Spec
	Shares []SharesReport
}

// Plan is what a closed round owes the aggregator: a batch built from
// Real, or an abort with a reason.
type Plan struct {
	Abort  bool
	Reason uint8  // wire.Abort* when Abort
	Why    string // for logs and metrics
}

// Plan decides what to forward: an abort below the announced minimum
// batch of complete reports, or below the relay's own (Floor, which no
// announcement lowers), else a batch (whose padding may still turn out
// infeasible: AbortFor wire.AbortOverflow).
func (c *Closed) Plan() Plan {
	if c.Reports < c.Params.MinBatch {
		return Plan{Abort: true, Reason: wire.AbortBelowMinBatch, Why: "below minimum batch"}
	}
	if c.Reports < c.Floor {
		return Plan{Abort: true, Reason: wire.AbortRelayFloor, Why: "below the relay's own minimum batch"}
	}
	return Plan{}
}

// AbortFor returns the Abort frame of the round for reason.
func (c *Closed) AbortFor(reason uint8) wire.Abort {
	return wire.Abort{Round: c.Num, Reason: reason, Reports: c.Reports, CheckedIn: c.CheckedIn, Population: c.Population}
}

// Errors of Open.
var (
	ErrStillOpen = errors.New("round: a round is still open")
	ErrStale     = errors.New("round: round number not after the last one")
	ErrDeadline  = errors.New("round: deadline already passed")
	ErrHalted    = errors.New("round: relay shutting down")
	ErrParams    = errors.New("round: parameters the relay cannot run")
)

// Machine is the relay's round state.
type Machine struct {
	mu        sync.Mutex
	parts     map[*Participant]struct{}
	open      *Round // the open round, or nil
	lastNum   uint64 // the last closed round (frames for it are too late)
	lastRound uint64 // highest round number seen (opened or persisted)
	limit     int    // read limit for every participant's next frame
	halted    bool
	stream    bool             // SetStreamShares
	floor     uint32           // SetMinBatchFloor: the relay's own minimum batch
	now       func() time.Time // the clock of the complete rule (tests set it)

	seen, prevSeen map[[wire.EncSize]byte]struct{} // encapsulated keys admitted
}

// New returns a machine whose next round must be numbered above
// lastRound (the highest round the relay's outbox knows).
func New(lastRound uint64) *Machine {
	return &Machine{parts: make(map[*Participant]struct{}), lastRound: lastRound, limit: wire.CheckInSize, now: time.Now}
}

// SetStreamShares makes the machine hand every accepted secure-summation
// report to its transport in the Verdict instead of keeping it until the
// close (Closed.Shares is then empty; Closed.Reports still counts them).
func (m *Machine) SetStreamShares(on bool) {
	m.mu.Lock()
	m.stream = on
	m.mu.Unlock()
}

// SetMinBatchFloor sets the relay's own minimum batch, fixed at its start
// (roundspec.Floor.MinBatch): a round closing with fewer complete reports
// than the larger of it and the announced minimum aborts (Plan), whatever
// the announcement says.
func (m *Machine) SetMinBatchFloor(n uint32) {
	m.mu.Lock()
	m.floor = n
	m.mu.Unlock()
}

// Join adds a participant (a new connection). It is not invited to a
// round already open.
func (m *Machine) Join() *Participant {
	p := &Participant{}
	m.mu.Lock()
	m.parts[p] = struct{}{}
	m.mu.Unlock()
	return p
}

// Leave removes a participant (its connection ended) and reports whether
// a partial report of it was discarded.
func (m *Machine) Leave(p *Participant) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.parts, p)
	d := p.round != 0 && !p.done && len(p.pending) > 0
	if r := m.open; r != nil && p.invited == r.Num {
		switch {
		case p.round != r.Num:
			r.absent++
		case !p.done:
			r.failed++
		}
	}
	p.pending, p.done = nil, true
	return d
}

// Population returns the number of participants.
func (m *Machine) Population() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.parts)
}

// CheckedIn returns the check-ins round num has counted so far, its
// edges' included once they sent their counts (0 unless it is the open
// round).
func (m *Machine) CheckedIn(num uint64) uint32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.open == nil || m.open.Num != num {
		return 0
	}
	return m.open.checkedIn
}

// LastRound returns the highest round number seen.
func (m *Machine) LastRound() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lastRound
}

// ReadLimit returns the size limit of every participant's next frame: the
// open round's exact Report frame size, or, between rounds, the last
// round's (so late reports get an Ack instead of a close); never below a
// CheckIn, which a client sends first after each announcement.
func (m *Machine) ReadLimit() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.limit
}

// CanOpen reports whether Open would open the round of announcement a at
// time now, without opening it (the transport persists its marker first).
func (m *Machine) CanOpen(a *wire.Announcement, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.canOpenLocked(a, now)
}

func (m *Machine) canOpenLocked(a *wire.Announcement, now time.Time) error {
	switch {
	case !a.Deadline.After(now):
		return ErrDeadline
	case m.halted:
		return ErrHalted
	case m.open != nil:
		return fmt.Errorf("%w: round %d", ErrStillOpen, m.open.Num)
	case a.Round <= m.lastRound:
		return fmt.Errorf("%w: round %d is not after round %d", ErrStale, a.Round, m.lastRound)
	}
	return nil
}

// Open opens the round of announcement a (frame: its bytes as received) at
// time now and invites every current participant.
//
// A secure-summation round's spec comes from roundspec (the one derivation
// every party shares); parameters it refuses wrap ErrParams.
func (m *Machine) Open(a *wire.Announcement, frame []byte, now time.Time) (*Round, error) {
	r := &Round{
		Num: a.Round, Ann: frame, Params: a.Params, HPKEPub: a.HPKEPub, Deadline: a.Deadline,
		Msgs: a.Params.Messages(), FrameSize: a.Params.ReportFrameSize(),
		CheckInBy: now.Add(time.Duration(CheckInWindow * float64(a.Deadline.Sub(now)))),
		Opened:    now, Cap: roundspec.CloseCap(now, a.Deadline), lastAt: now,
	}
	if a.Params.Protocol == wire.ProtocolSecAgg {
		spec, lead, help, err := SecAggSpec(a.Params)
		if err != nil {
			return nil, err
		}
		r.SecAgg, r.LeaderLen, r.HelperLen, r.RelayPub = spec, lead, help, a.RelayPub
		r.Msgs, r.FrameSize = 1, wire.SharesSize(lead, help)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.canOpenLocked(a, now); err != nil {
		return nil, err
	}
	r.Population, r.floor = uint32(len(m.parts)), m.floor
	for p := range m.parts {
		p.invited = r.Num
	}
	m.lastRound, m.open = r.Num, r
	m.limit = max(r.FrameSize, wire.CheckInSize)
	m.prevSeen, m.seen = m.seen, make(map[[wire.EncSize]byte]struct{})
	return r, nil
}

// SecAggSpec returns the spec of secure-summation parameters p and its
// sealed leader and helper share sizes (errors wrap ErrParams).
func SecAggSpec(p wire.Params) (spec *roundspec.Spec, leaderLen, helperLen int, err error) {
	spec, err = roundspec.New(p)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("%w: %w", ErrParams, err)
	}
	if spec.IsShuffle() {
		return nil, 0, 0, fmt.Errorf("%w: %v is not secure summation", ErrParams, p.Protocol)
	}
	leaderLen, helperLen, err = spec.SharesSizes()
	if err != nil {
		return nil, 0, 0, fmt.Errorf("%w: %w", ErrParams, err)
	}
	return spec, leaderLen, helperLen, nil
}

// Halt stops the machine from opening or closing rounds (the relay is
// shutting down: a round open now stays open, and its outbox marker makes
// it an abort at the next start).
func (m *Machine) Halt() {
	m.mu.Lock()
	m.halted = true
	m.mu.Unlock()
}

// NextTick returns when the transport should call Tick for r next: the
// end of the check-in window, then every pollEvery, never after the
// deadline; the zero time once r is closed.
func (m *Machine) NextTick(r *Round, now time.Time) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r.closed {
		return time.Time{}
	}
	if r.full {
		return r.fullAt.Add(EdgeWait)
	}
	if now.Before(r.CheckInBy) {
		return r.CheckInBy
	}
	if !now.Before(r.Deadline) {
		return minTime(r.Cap, now.Add(pollEvery)) // past the deadline, while reports still arrive
	}
	return minTime(r.Deadline, now.Add(pollEvery))
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// Tick closes r at its deadline ("deadline") or once every expected
// report is in ("complete", see "Closing a round"), and returns it
// closed; nil if it stays open (call again at NextTick), was already
// closed or the machine halted.
func (m *Machine) Tick(r *Round, now time.Time) *Closed {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case r.closed:
		return nil
	case r.full:
		if r.edgesOpen == 0 || now.Sub(r.fullAt) >= EdgeWait {
			return m.closeLocked(r, "quota")
		}
		return nil
	case !now.Before(r.Deadline):
		if why := r.pastDeadlineLocked(now); why != "" {
			return m.closeLocked(r, why)
		}
		return nil
	case r.completeLocked(now):
		return m.closeLocked(r, "complete")
	}
	return nil
}

// Closing past the deadline (docs/protocol.md, "Closing a round"): the
// announced deadline is when a round is expected to end, not when its
// volunteers' work is thrown away. While reports still arrive, the round
// waits past it, up to its cap.
const (
	// EdgeWait is how long past the deadline a round waits at least for
	// the edges that opened it and have not closed it (edge.go): an edge
	// closes its own round by the same rules and sends its counts at once;
	// the round waits for one still open while reports arrive, and closes
	// without its counts ("stalled") once none came for the stall time.
	EdgeWait = 5 * time.Second
	// WaitFor is the share of the volunteers who checked in (and can still
	// report) whose reports end the wait at the deadline.
	WaitFor = roundspec.CloseWaitFor
	// StallShare of the round's length (from its opening to its deadline),
	// at least StallMin, without a new report ends the wait: the
	// volunteers still out are not coming.
	StallShare = 0.1
	StallMin   = 5 * time.Second
)

// pastDeadlineLocked decides a round at or past its deadline: the reason
// to close it now ("deadline": WaitFor of the expected reports are in,
// or nobody who checked in is still out; "stalled": no report for the
// stall time; "cap": its cap), or "" to keep waiting.
func (r *Round) pastDeadlineLocked(now time.Time) string {
	expected := r.checkedIn - min(r.failed, r.checkedIn)
	switch {
	case !now.Before(r.Cap):
		return "cap"
	case r.edgesOpen > 0:
		// An edge closes its own round by these rules and sends its
		// counts; one still open is waited for while reports arrive, and
		// given up (gone) once none came for the stall time and EdgeWait.
		if now.Sub(r.Deadline) >= EdgeWait && now.Sub(r.lastAt) >= max(StallMin, time.Duration(StallShare*float64(r.Deadline.Sub(r.Opened)))) {
			return "stalled"
		}
		return ""
	case r.reports >= expected || float64(r.reports) >= WaitFor*float64(expected):
		return "deadline"
	case now.Sub(r.lastAt) >= max(StallMin, time.Duration(StallShare*float64(r.Deadline.Sub(r.Opened)))):
		return "stalled"
	}
	return ""
}

// Close closes r exactly once (why: "deadline", "quota", ...): partial
// reports are discarded and the complete ones returned. It returns nil if
// r was already closed or the machine halted.
func (m *Machine) Close(r *Round, why string) *Closed {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closeLocked(r, why)
}

func (m *Machine) closeLocked(r *Round, why string) *Closed {
	if r.closed || m.halted {
		return nil
	}
	r.closed = true
	if m.open == r {
		m.open, m.lastNum = nil, r.Num
	}
	c := &Closed{Num: r.Num, Params: r.Params, HPKEPub: r.HPKEPub, Why: why, At: m.now(), Population: r.Population + r.edgePop,
		CheckedIn: r.checkedIn, Failed: r.failed, Reports: r.reports, Real: r.real, SecAgg: r.SecAgg, Shares: r.shares,
		Floor: m.floor}
	r.real, r.shares = nil, nil
	for p := range m.parts {
		if p.round == r.Num {
			if !p.done && len(p.pending) > 0 {
				c.Discarded++
			}
			p.pending = nil
		}
	}
	return c
}

// admitLocked decides whether a frame for round num can go to the open
// round.
func (m *Machine) admitLocked(p *Participant, num uint64) (Verdict, bool) {
	r := m.open
	switch {
	case num != 0 && num == m.lastNum && (r == nil || num != r.Num):
		return Verdict{Reason: ReasonTooLate, Status: wire.AckTooLate, Round: num}, false
	case r == nil:
		return Verdict{Reason: ReasonNoOpenRound, Status: wire.AckNoRound, Round: num}, false
	case num != r.Num:
		return Verdict{Reason: ReasonWrongRound, Status: wire.AckWrongRound, Round: num}, false
	case p.invited != r.Num:
		return Verdict{Reason: ReasonNotInvited, Status: wire.AckNoRound, Round: num}, false
	}
	return Verdict{}, true
}

// disqualifyLocked discards the participant's partial report for the open
// round and reports whether there was one.
func (m *Machine) disqualifyLocked(p *Participant) bool {
	if m.open == nil || p.round != m.open.Num {
		return false
	}
	if !p.done {
		m.open.failed++
	}
	d := !p.done && len(p.pending) > 0
	p.done, p.pending = true, nil
	return d
}

// reject returns a rejection that ends the connection and disqualifies
// the participant for the open round.
func (m *Machine) rejectLocked(p *Participant, v Verdict) Verdict {
	v.Discarded = m.disqualifyLocked(p)
	return v
}

// Frame judges one complete binary frame from participant p.
func (m *Machine) Frame(p *Participant, b []byte) Verdict {
	typ, num, err := wire.PeekRound(b)
	if err != nil {
		// typ is 0 unless the header is valid and the frame too short to
		// carry its round.
		v := Verdict{Reason: ReasonMalformed, Status: wire.AckMalformed, End: EndMalformed}
		if typ != 0 && typ != wire.TypeCheckIn && typ != wire.TypeReport && typ != wire.TypeShares {
			v.Reason, v.End = ReasonUnexpected, EndPolicy
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.rejectLocked(p, v)
	}
	switch typ {
	case wire.TypeCheckIn:
		return m.checkIn(p, b, num)
	case wire.TypeReport:
		return m.report(p, b, num)
	case wire.TypeShares:
		return m.sharesFrame(p, b, num)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rejectLocked(p, Verdict{Reason: ReasonUnexpected, Status: wire.AckMalformed, Round: num, End: EndPolicy})
}

func (m *Machine) checkIn(p *Participant, b []byte, num uint64) Verdict {
	ci, err := wire.ParseCheckIn(b)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		return m.rejectLocked(p, Verdict{Reason: ReasonMalformed, Status: wire.AckMalformed, Round: num, End: EndMalformed})
	}
	if v, ok := m.admitLocked(p, ci.Round); !ok {
		return v
	}
	r := m.open
	if p.round == r.Num {
		return m.rejectLocked(p, Verdict{Reason: ReasonDuplicate, Status: wire.AckDuplicate, Round: r.Num, End: EndPolicy})
	}
	p.round, p.done, p.pending = r.Num, false, nil
	r.checkedIn++
	return Verdict{Accepted: CheckIn, Round: r.Num}
}

func (m *Machine) report(p *Participant, b []byte, num uint64) Verdict {
	m.mu.Lock()
	v, ok := m.admitLocked(p, num)
	r := m.open
	m.mu.Unlock()
	if !ok {
		return v
	}
	if r.SecAgg != nil {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.rejectLocked(p, Verdict{Reason: ReasonUnexpected, Status: wire.AckMalformed, Round: num, End: EndPolicy})
	}
	// Decoded outside the lock: frames of other connections go on.
	rep, err := wire.ParseReport(b, r.Params)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		return m.rejectLocked(p, Verdict{Reason: ReasonMalformed, Status: wire.AckMalformed, Round: num, End: EndMalformed})
	}
	if r.closed {
		return Verdict{Reason: ReasonTooLate, Status: wire.AckTooLate, Round: num}
	}
	if p.round != r.Num {
		return Verdict{Reason: ReasonNoCheckIn, Status: wire.AckMalformed, Round: num, End: EndPolicy}
	}
	recv := len(p.pending)
	if p.done {
		// A second report, or anything after a complete one.
		return Verdict{Reason: ReasonDuplicate, Status: wire.AckDuplicate, Round: num, Received: uint16(r.Msgs), End: EndPolicy}
	}
	if int(rep.Seq) != recv {
		v := Verdict{Reason: ReasonOutOfOrder, Status: wire.AckMalformed, Round: num, Received: uint16(recv), End: EndPolicy}
		if int(rep.Seq) < recv {
			v.Reason, v.Status = ReasonDuplicate, wire.AckDuplicate // a frame re-sent on its connection
		}
		return m.rejectLocked(p, v)
	}
	enc := rep.Enc()
	_, dup := m.seen[enc]
	if _, old := m.prevSeen[enc]; dup || old {
		return m.rejectLocked(p, Verdict{Reason: ReasonReplay, Status: wire.AckDuplicate, Round: num, Received: uint16(recv), End: EndPolicy})
	}
	m.seen[enc] = struct{}{}
	p.pending = append(p.pending, wire.BatchMessage{Indices: rep.Indices, Sealed: rep.Sealed})
	recv++
	v = Verdict{Accepted: Report, Round: num, Received: uint16(recv)}
	if recv == r.Msgs {
		r.real = append(r.real, p.pending...)
		p.pending, p.done = nil, true
		r.reports++
		r.lastAt = m.now()
		v.Complete = true
		v.Closed = m.afterReportLocked(r)
	}
	return v
}

// afterReportLocked closes r if a complete report reached the quota or
// completed the round.
func (m *Machine) afterReportLocked(r *Round) *Closed {
	if q := r.Params.Quota; q > 0 && r.reports >= q {
		if r.edgesOpen > 0 { // the edges' counts first (edge.go)
			r.full, r.fullAt = true, m.now()
			return nil
		}
		return m.closeLocked(r, "quota")
	}
	if r.completeLocked(m.now()) {
		return m.closeLocked(r, "complete")
	}
	return nil
}

// sharesFrame judges a secure-summation report: one Shares frame of the
// round's exact size after the check-in, at most one per connection, with
// sealed shares whose encapsulated keys were never admitted this round or
// the last.
func (m *Machine) sharesFrame(p *Participant, b []byte, num uint64) Verdict {
	m.mu.Lock()
	v, ok := m.admitLocked(p, num)
	r := m.open
	m.mu.Unlock()
	if !ok {
		return v
	}
	if r.SecAgg == nil {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.rejectLocked(p, Verdict{Reason: ReasonUnexpected, Status: wire.AckMalformed, Round: num, End: EndPolicy})
	}
	sh, err := wire.ParseShares(b, r.LeaderLen, r.HelperLen)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		return m.rejectLocked(p, Verdict{Reason: ReasonMalformed, Status: wire.AckMalformed, Round: num, End: EndMalformed})
	}
	if r.closed || r.full {
		return Verdict{Reason: ReasonTooLate, Status: wire.AckTooLate, Round: num}
	}
	if p.round != r.Num {
		return Verdict{Reason: ReasonNoCheckIn, Status: wire.AckMalformed, Round: num, End: EndPolicy}
	}
	if p.done {
		return Verdict{Reason: ReasonDuplicate, Status: wire.AckDuplicate, Round: num, Received: 1, End: EndPolicy}
	}
	// A replay is the same pair of sealed shares again (its first 32
	// bytes each). A frame that reuses only one of another report's
	// shares is admitted: it cannot be a complete report (its shares do
	// not prepare together, and only accepted reports claim their nonce
	// at the servers), so it never displaces the genuine upload, which
	// a per-share rule would refuse if the copy arrived first.
	pair := sharesPair(sh.Leader, sh.Helper)
	if [wire.EncSize]byte(sh.Leader[:wire.EncSize]) == [wire.EncSize]byte(sh.Helper[:wire.EncSize]) || m.seenLocked(pair) {
		return m.rejectLocked(p, Verdict{Reason: ReasonReplay, Status: wire.AckDuplicate, Round: num, End: EndPolicy})
	}
	m.seen[pair] = struct{}{}
	rep := SharesReport{Leader: sh.Leader, Helper: sh.Helper}
	p.done = true
	r.reports++
	r.lastAt = m.now()
	v = Verdict{Accepted: Shares, Round: num, Received: 1, Complete: true}
	if m.stream {
		v.Shares = &rep
	} else {
		r.shares = append(r.shares, rep)
	}
	v.Closed = m.afterReportLocked(r)
	return v
}

// sharesPair is the replay key of a Shares frame: SHA-256 of both sealed
// shares' encapsulated keys.
func sharesPair(lead, help []byte) [wire.EncSize]byte {
	return sha256.Sum256(append(append(make([]byte, 0, 2*wire.EncSize), lead[:wire.EncSize]...), help[:wire.EncSize]...))
}

// seenLocked reports whether enc was admitted this round or the last.
func (m *Machine) seenLocked(enc [wire.EncSize]byte) bool {
	_, now := m.seen[enc]
	_, before := m.prevSeen[enc]
	return now || before
}
