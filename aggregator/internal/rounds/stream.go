package rounds

// Streaming secure summation at the aggregator (docs/secagg.md,
// "Streaming"): the relay's chunks are prepared as they arrive (a few in
// flight; folded in sequence), each verdict folding the report's output
// share into the running aggregate (analysis.SecAggLeader); the running
// state is checkpointed once per group of chunks, before any answer of the
// group leaves; the relay's close charges the round.

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/analysis"
	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/aggregator/internal/outcome"
	"github.com/blanket-fl/blanket/aggregator/internal/prepjob"
	"github.com/blanket-fl/blanket/shared/ledger"
	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/secagg"
	"github.com/blanket-fl/blanket/shared/wire"
)

// secaggFinish is what closing a round needs, at a chunk refused or at the
// relay's close.
type secaggFinish struct {
	r      int
	rc     *RoundConfig
	sr     *secagg.Round
	leader *analysis.SecAggLeader
	dig    string // of the frame that asks for the charge
	rec    checkpoint.RoundRecord
	start  time.Time
	ok     func(accepted int) ([]byte, error) // the reply once charged
	fail   func(status uint8) []byte          // the reply refused or invalid
}

func (fc *secaggFinish) answer(in outcome.Intake, frame []byte, detail string) (outcome.SecAggAnswer, error) {
	if frame == nil {
		frame = fc.fail(wire.BatchStatusInvalid)
	}
	return outcome.SecAggAnswer{Answer: outcome.Answer{Round: uint64(fc.r), Outcome: in, Detail: detail}, Frame: frame}, nil
}

// counts copies the leader's counts into the record.
func (fc *secaggFinish) counts() {
	l, rec := fc.leader, &fc.rec
	accepted := l.Accepted()
	rec.N, rec.Accepted, rec.RejectedOpen = accepted, accepted, l.Unopened()
	rec.RejectedValue = l.Reports() - accepted
	rec.Rejections = nil
	if rej := l.Rejected(); len(rej) > 0 {
		rec.Rejections = make(map[string]int)
		for reason, n := range rej {
			rec.Rejections[reason.String()] = n
		}
		// A share that did not open has the wire verdict "wrong length";
		// the record says what it means (another consent text, key, round).
		if u := l.Unopened(); u > 0 {
			wl := secagg.RejectWrongLength.String()
			if rec.Rejections[wl] -= u; rec.Rejections[wl] <= 0 {
				delete(rec.Rejections, wl)
			}
			rec.Rejections[analysis.UnopenedReason] = u
		}
	}
	if rec.Population > 0 {
		rec.CheckInRate = float64(rec.CheckedIn) / float64(rec.Population)
	}
}

// closeInvalid closes the round at the aggregator with nothing charged.
// The caller holds procMu.
func (fc *secaggFinish) closeInvalid(m *Machine, detail string) (outcome.SecAggAnswer, error) {
	fc.counts()
	rec := fc.rec
	st := wire.BatchStatusInvalid
	rec.Status, rec.Detail, rec.Reply, rec.FinishedAt = checkpoint.StatusInvalid, detail, &st, time.Now()
	rec.Seconds = time.Since(fc.start).Seconds()
	m.log.Warn("secagg round closed, nothing charged", "round", fc.r, "reason", detail)
	m.dropCollect("the round was closed, nothing charged: " + detail)
	m.commit(func(c *checkpoint.State) { c.History = append(c.History, rec); c.Round, c.Open = fc.r, nil })
	m.notify()
	return fc.answer(outcome.Invalid, fc.fail(st), detail)
}

// secaggCharge charges a round whose reports are all folded
// (analysis.ChargeSecAgg): it persists the prepared round (PendingFile)
// and the Charging marker, charges the ledger, and only then answers with
// fc.ok — the reply after which the relay sends its aggregate share. The
// caller holds procMu.
func (m *Machine) secaggCharge(fc *secaggFinish) (outcome.SecAggAnswer, error) {
	r := fc.r
	params := fc.rc.Params
	var okFrame []byte
	var pending *Pending
	// With the ledger in the machine's own datastore (DBStore), the
	// prepared round, the Charging marker and the ledger's record are one
	// transaction (chargeTx): the round is resumable exactly when it is
	// charged. Otherwise (FileStore, a file ledger) they are written in
	// turn, the prepared round first: read at a restart only if the ledger
	// holds the charge (restorePending).
	oneTx := m.chargeInTx()
	persist := func(aggregate []byte) error {
		fc.counts()
		f, err := fc.ok(fc.leader.Accepted())
		if err != nil {
			return fmt.Errorf("%w: encoding the reply: %w", errPersist, err)
		}
		okFrame = f
		pending = &Pending{Round: r, Digest: fc.dig, Reply: f, Rec: fc.rec, Aggregate: aggregate}
		if oneTx {
			return nil
		}
		if err := m.store.SavePending(pending); err != nil {
			return fmt.Errorf("%w: %w", errPersist, err)
		}
		if err := m.commit(func(c *checkpoint.State) { c.Charging = &checkpoint.Charging{Round: r, Digest: fc.dig, SecAgg: true} }); err != nil {
			return fmt.Errorf("%w: recording the secagg round before its charge: %w", errPersist, err)
		}
		return nil
	}
	charge := m.ledger.Charge
	if oneTx {
		charge = func(rel privacy.Release) error {
			return m.chargeTx(rel, pending, &checkpoint.Charging{Round: r, Digest: fc.dig, SecAgg: true})
		}
	}
	release := func(n int) privacy.Release { return fc.rc.Proto.Spec.Release(r, n, 0) }
	err := analysis.ChargeSecAgg(fc.leader, int(params.MinBatch), release, persist, charge)
	fc.counts()
	if err != nil && !errors.Is(err, analysis.ErrBelowMinBatch) && !errors.Is(err, analysis.ErrTooManyRejected) &&
		!errors.Is(err, ledger.ErrBudgetExhausted) && !errors.Is(err, ledger.ErrInvalidRelease) {
		// A failure that may pass (the datastore, a ledger whose charges
		// are suspended until its start check against the relay's anchor):
		// nothing was charged and the answer is an error, so the relay
		// sends its close again. The round's chunks are read back from
		// their checkpoint (written before the charge, so it holds every
		// chunk folded) for that close: dropping them would make it
		// obsolete and lose the round.
		m.sa.collect = nil
		m.restoreCollect()
		m.wakeChunks()
	} else {
		m.dropCollect("the round is closed")
	}
	if err != nil {
		m.removePending()
		switch {
		case errors.Is(err, analysis.ErrBelowMinBatch):
			return fc.closeInvalid(m, fmt.Sprintf("%d reports accepted, fewer than the minimum batch %d", fc.leader.Accepted(), params.MinBatch))
		case errors.Is(err, analysis.ErrTooManyRejected):
			return fc.closeInvalid(m, fmt.Sprintf("%d of %d reports failed verification, more than the relay releases a round with",
				fc.leader.Reports()-fc.leader.Accepted(), fc.leader.Reports()))
		case errors.Is(err, errPersist):
			m.commit(func(c *checkpoint.State) { c.Charging = nil })
			return outcome.SecAggAnswer{}, fmt.Errorf("server: secagg round %d: %w", r, err)
		case errors.Is(err, ledger.ErrBudgetExhausted):
			rec := fc.rec
			st := wire.BatchStatusRefused
			rec.Status, rec.Detail, rec.Reply, rec.FinishedAt = checkpoint.StatusRefused, err.Error(), &st, time.Now()
			m.log.Warn("secagg round refused: privacy budget", "round", r, "err", err)
			m.commit(func(c *checkpoint.State) {
				c.History = append(c.History, rec)
				c.Round, c.Open, c.Charging = r, nil, nil
			})
			m.Stop("privacy budget: " + err.Error())
			return fc.answer(outcome.Accepted, fc.fail(st), err.Error())
		case errors.Is(err, ledger.ErrInvalidRelease):
			m.commit(func(c *checkpoint.State) { c.Charging = nil })
			return fc.closeInvalid(m, "invalid release: "+err.Error())
		default:
			m.log.Error("ledger charge failed; nothing answered", "round", r, "err", err)
			return outcome.SecAggAnswer{}, fmt.Errorf("server: charging secagg round %d: %w", r, err)
		}
	}
	rec := fc.rec
	m.fillEpsilon(&rec)
	st := wire.BatchStatusOK
	rec.Reply = &st
	rec.Seconds = time.Since(fc.start).Seconds()
	m.sa.pending = &secaggPending{round: r, sr: fc.sr, leader: fc.leader, digest: fc.dig, reply: okFrame, rec: rec,
		until: time.Now().Add(m.opt.BatchGrace)}
	m.log.Info("secagg round prepared and charged; waiting for the relay's aggregate share", "round", r,
		"reports", rec.Reports, "accepted", rec.Accepted, "rejected", rec.RejectedValue, "rejected_open", rec.RejectedOpen,
		"seconds", rec.Seconds)
	m.publishStatus()
	m.notify() // the round loop times the aggregate share's grace from now
	return fc.answer(outcome.Accepted, okFrame, "")
}

// secaggCollect is the open round's streaming state: the leader folding
// the relay's chunks, the next chunk expected, the answers of the chunks
// checkpointed (an identical re-send gets its answer again; a relay's
// resume gets it by seq), the group of chunks folded since the last
// checkpoint, whose answers are held until the next one, and the seal a
// relay's resume set (SecAggResumeIntake).
type secaggCollect struct {
	round    int
	sr       *secagg.Round
	leader   *analysis.SecAggLeader
	next     uint32
	answered map[string][]byte // digest -> reply, of every chunk checkpointed
	// bySeq is seq -> reply of every chunk checkpointed (the same slices as
	// answered); after a restart, of those the store kept (DBStore: all).
	bySeq map[uint32][]byte
	group *chunkGroup // folded since the last checkpoint (nil: none)
	// sealed, if not 0, is the seq from which no chunk is folded: a
	// relay's resume found it not folded (SecAggResumeIntake). It only
	// ever decreases, and is never below next.
	sealed uint32
	start  time.Time
}

// newCollect is the streaming state of round r with nothing folded yet.
func newCollect(r int, sr *secagg.Round, l *analysis.SecAggLeader, next uint32) *secaggCollect {
	return &secaggCollect{round: r, sr: sr, leader: l, next: next, answered: make(map[string][]byte),
		bySeq: make(map[uint32][]byte), start: time.Now()}
}

// refuses reports whether chunk seq is at or past the collect's seal.
func (c *secaggCollect) refuses(seq uint32) bool { return c.sealed > 0 && seq >= c.sealed }

// chunkGroup is the chunks folded since the last checkpoint: their answers
// leave only once a checkpoint covering them is durable (done closed, ok).
type chunkGroup struct {
	chunks  []ChunkAnswer
	replies map[string][]byte // by digest
	reports int
	done    chan struct{} // closed when the group's fate is known
	ok      bool          // the checkpoint's Update returned nil
	why     string        // otherwise, the round's end
	// lastFold is when the group's last chunk was folded; timer, if set,
	// settles the group once groupLinger passed since.
	lastFold time.Time
	timer    *time.Timer
}

// Group commit of the chunks (SecAggChunkIntake).
const (
	// groupReports is the reports folded after which a checkpoint is
	// written at once, even while more chunks are on their way. Each
	// checkpoint rewrites the leader's running aggregate (d field
	// elements: 125,600 bytes at d = 7850), so its cost per report is
	// that over the group's size; and the relay posts no chunk beyond its
	// window (sumrelay's defaults: 8 chunks in flight of 8 reports, 64
	// reports) before one of the group is answered, so a larger group
	// would only stall it until groupLinger. At 64: 1.2–1.7 KB written
	// per report at n = 1,000 and 10,000 (make bench-scale; 2.8 KB at
	// 32).
	groupReports = 64
	// groupLinger is how long a group smaller than groupReports waits,
	// with no other chunk on its way through the intake, for the relay's
	// next chunk before it is checkpointed: a chunk prepared while the
	// earlier ones wait joins their checkpoint. The relay keeps posting
	// meanwhile (up to its window), so this costs no throughput while the
	// group is below the window; it delays the answer to a round's last
	// chunks, hence the close, by at most this.
	groupLinger = 100 * time.Millisecond
	// chunkWaitBound bounds how long a chunk that arrives ahead of its
	// predecessors waits for them (then it is answered with a retryable
	// error, 500, and re-sent): the relay posts a round's chunks in order,
	// a few at a time, so a predecessor is at most a slow request behind;
	// generous against a busy machine, and shorter than the relay's
	// attempt timeout (SecAggTimeout, 10 minutes by default).
	chunkWaitBound = 2 * time.Minute
	// maxChunksAhead bounds the chunks waiting for predecessors at once
	// (each holds its frame, up to about 8.6 MB of leader shares at
	// d = 7850): twice the relay's default window, so that only a relay
	// beyond its window is answered "retry" at once.
	maxChunksAhead = 8
)

// errChunkAhead is the retryable answer (500) to a chunk whose
// predecessors did not arrive within chunkWaitBound, or that finds
// maxChunksAhead chunks waiting already.
var errChunkAhead = errors.New("secagg chunk ahead of its predecessors")

// chunkFlow is what concurrent SecAggChunkIntake calls share; procMu
// guards everything but arrivals.
type chunkFlow struct {
	// arrivals counts the chunk intakes started and not yet done with
	// procMu (those waiting for it included): a group is checkpointed
	// only when none of them but the ones waiting for predecessors
	// remains (settle), so the last chunk of a burst commits for all.
	arrivals atomic.Int32
	moved    chan struct{}    // closed (and replaced) when the open round's chunks move on
	ahead    map[chunkKey]int // chunks waiting for predecessors
	wait     time.Duration    // chunkWaitBound (tests shorten it)
	linger   time.Duration    // groupLinger (tests: < 0, none)
	// apart and here count the chunks folded from a result prepared
	// apart (Options.PrepareApart) and those prepared by the intake.
	apart, here atomic.Int64
}

// apartChunk is a chunk's result prepared apart (prepareApart), with the
// chunk as parsed then (the open round's parameters do not change while
// it is open).
type apartChunk struct {
	round int
	ch    *wire.SecAggChunk
	res   []byte
}

// ChunksPrepared returns how many secure-summation chunks were folded
// from results prepared apart (Options.PrepareApart), and how many were
// prepared here.
func (m *Machine) ChunksPrepared() (apart, here int64) {
	return m.flow.apart.Load(), m.flow.here.Load()
}

// prepareApart prepares the chunk in frame with Options.PrepareApart,
// without procMu, if it is a chunk of the open secure-summation round
// that is neither answered nor folded yet; nil otherwise, or if that
// failed (the intake then prepares it itself).
func (m *Machine) prepareApart(frame []byte, dig string) *apartChunk {
	t, round, err := wire.PeekRound(frame)
	if err != nil || t != wire.TypeSecAggChunk || round < 1 {
		return nil
	}
	r := int(round)
	m.procMu.Lock()
	if c := m.sa.collect; c != nil && c.round == r {
		if _, ok := c.answered[dig]; ok {
			m.procMu.Unlock()
			return nil
		}
		if g := c.group; g != nil {
			if _, ok := g.replies[dig]; ok {
				m.procMu.Unlock()
				return nil
			}
		}
	}
	rc, _, _, ok := m.secaggOpenRound(round, "chunk")
	var ch *wire.SecAggChunk
	if ok {
		ch, err = wire.ParseSecAggChunk(frame, rc.Proto.LeaderSealed, int(rc.Params.Quota))
	}
	if c := m.sa.collect; !ok || err != nil || (c != nil && c.round == r && (ch.Seq < c.next || c.refuses(ch.Seq))) {
		m.procMu.Unlock()
		return nil
	}
	pr := prepjob.Round{Round: round, Params: rc.Params, Consent: m.opt.Consent}
	m.procMu.Unlock()
	if pr.VerifyKey, err = secagg.DeriveVerifyKey([]byte(m.opt.Token), round); err != nil {
		return nil
	}
	res, err := m.opt.PrepareApart(context.Background(), pr, ch.Leader, ch.Prep)
	if err != nil {
		m.log.Warn("a secagg chunk was not prepared apart; preparing it here", "round", r, "seq", ch.Seq, "err", err)
		return nil
	}
	return &apartChunk{round: r, ch: ch, res: res}
}

type chunkKey struct {
	round int
	seq   uint32
}

// wakeChunks wakes the chunks waiting for their predecessors: one was
// folded, the collect was made or dropped, or the open round changed.
// The caller holds procMu.
func (m *Machine) wakeChunks() {
	if m.flow.moved != nil {
		close(m.flow.moved)
		m.flow.moved = nil
	}
}

// movedChan is the channel the next wakeChunks closes. The caller holds
// procMu.
func (m *Machine) movedChan() <-chan struct{} {
	if m.flow.moved == nil {
		m.flow.moved = make(chan struct{})
	}
	return m.flow.moved
}

// dropCollect discards the open round's streaming state (the round is
// closed or charged): a group not checkpointed is answered why, without
// its verdicts. The caller holds procMu.
func (m *Machine) dropCollect(why string) {
	if c := m.sa.collect; c != nil && c.group != nil {
		c.group.why = why
		close(c.group.done)
		c.group = nil
	}
	m.sa.collect = nil
	m.removeCollect()
	m.wakeChunks()
}

// checkpoint writes the open round's streaming state (saveCollect: one
// store transaction) covering every chunk folded so far, and then lets
// the held answers of the group leave. If the write fails, none of them
// is answered: the round is closed invalid (the state in memory is ahead
// of the disk and could not be resumed after a restart). It reports
// whether the checkpoint is durable. The caller holds procMu.
func (m *Machine) checkpoint(c *secaggCollect) bool {
	g := c.group
	if g == nil {
		return true
	}
	if err := m.saveCollect(c, g.chunks); err != nil {
		m.log.Error("cannot persist the secagg round's state", "round", c.round, "chunks", len(g.chunks), "err", err)
		last := g.chunks[len(g.chunks)-1]
		fc := &secaggFinish{r: c.round, rc: m.Current(), sr: c.sr, leader: c.leader, dig: last.Digest, start: c.start,
			rec:  m.openRecord(c.round, last.Digest, c.leader.Reports(), 0, 0, time.Time{}),
			fail: func(st uint8) []byte { return prepFrame(uint64(c.round), st) }}
		fc.closeInvalid(m, "the aggregator could not persist the round") // drops the collect: the group is answered invalid
		return false
	}
	c.group = nil
	for _, a := range g.chunks {
		c.answered[a.Digest] = a.Reply
		c.bySeq[a.Seq] = a.Reply
	}
	g.ok = true
	close(g.done)
	return true
}

// settle checkpoints the open round's group when no other chunk intake
// will: none is running or waiting for procMu, apart from those waiting
// for predecessors not yet arrived (group commit), and no chunk was folded
// for groupLinger (else it looks again then). The caller holds procMu.
func (m *Machine) settle() {
	c := m.sa.collect
	if c == nil || c.group == nil {
		return
	}
	g := c.group
	blocked := 0
	for k, n := range m.flow.ahead {
		if k.round == c.round && k.seq > c.next {
			blocked += n
		}
	}
	if int(m.flow.arrivals.Load()) > blocked {
		return // another chunk is processed after this one: it settles
	}
	if wait := time.Until(g.lastFold.Add(m.groupLinger())); wait > 0 {
		if g.timer == nil {
			g.timer = time.AfterFunc(wait, func() {
				m.procMu.Lock()
				defer m.procMu.Unlock()
				g.timer = nil
				if m.sa.collect == c && c.group == g {
					m.settle()
				}
			})
		}
		return
	}
	m.checkpoint(c)
}

func (m *Machine) groupLinger() time.Duration {
	switch {
	case m.flow.linger < 0:
		return 0
	case m.flow.linger > 0:
		return m.flow.linger
	}
	return groupLinger
}

// newLeader builds the leader of secure-summation round r.
func (m *Machine) newLeader(r int, rc *RoundConfig) (*secagg.Round, secagg.Engine, error) {
	sr, err := rc.Proto.Spec.SecAggRound(uint64(r))
	if err != nil {
		return nil, nil, fmt.Errorf("server: secagg round %d: %w", r, err)
	}
	vk, err := secagg.DeriveVerifyKey([]byte(m.opt.Token), uint64(r))
	if err != nil {
		return nil, nil, fmt.Errorf("server: secagg verify key, round %d: %w", r, err)
	}
	eng, err := secagg.NewEngine(sr, true, vk)
	if err != nil {
		return nil, nil, fmt.Errorf("server: secagg engine, round %d: %w", r, err)
	}
	return sr, eng, nil
}

// secaggOpenRound checks that round is the open secure-summation round
// with nothing charged yet; otherwise it returns the answer (obsolete or
// invalid) and ok = false. The caller holds procMu.
func (m *Machine) secaggOpenRound(round uint64, what string) (*RoundConfig, outcome.Intake, string, bool) {
	r := int(round)
	if round > uint64(m.st.Round+1) {
		return nil, outcome.Obsolete, fmt.Sprintf("round %d was never announced (last %d)", round, m.st.Round), false
	}
	if p := m.sa.pending; p != nil && p.round == r {
		return nil, outcome.Obsolete, fmt.Sprintf("round %d is already charged", r), false
	}
	if rec := m.record(r); rec != nil {
		return nil, outcome.Obsolete, fmt.Sprintf("round %d already closed: %s", r, rec.Status), false
	}
	if m.st.Open == nil || m.st.Open.Round != r {
		return nil, outcome.Obsolete, fmt.Sprintf("round %d is not open", r), false
	}
	rc := m.Current()
	if !rc.Proto.SecAgg() {
		return nil, outcome.Invalid, "the open round is not secure summation", false
	}
	return rc, "", "", true
}

// SecAggChunkIntake is POST /v1/secagg/chunk after authentication: the
// next chunk of the open round's reports is prepared (each leader share
// opened, prepared with the helper's 'P' entry, decided, its output share
// folded, the share dropped) and the chunk's 'M' message answered (a
// SecAggPrep frame, status ok) once a checkpoint of the running state
// covers it. Chunks are folded in order (seq 1, 2, ...): one that arrives
// ahead of a predecessor waits for it (at most chunkWaitBound, then a
// retryable error). A checkpoint (saveCollect) is written when the group
// folded since the last one reaches groupReports reports, when no other
// chunk is on its way through the intake and none was folded for
// groupLinger (the last chunk of a burst commits for all), or before the
// close; the identical re-send of any
// chunk gets its answer again (duplicate). A chunk whose 'P' does not
// combine, or another chunk with a seq already folded, closes the round,
// nothing charged (invalid). A chunk at or past the seal a relay's resume
// set (SecAggResumeIntake), arriving or waiting for its predecessors, is
// answered obsolete, nothing folded, the round left open.
//
// Guarantee: a chunk's verdicts let the relay fold its own shares, never
// release them; nothing of the round is unsharded before SecAggCloseIntake
// charged it (analysis.SecAggLeader.Unshard refuses). No verdict leaves
// before the state that folded it is durable, so a restart never loses a
// chunk the relay folded: those not answered are re-sent and folded
// again.
func (m *Machine) SecAggChunkIntake(frame []byte) (outcome.SecAggAnswer, error) {
	dig := digestOf(frame)
	m.flow.arrivals.Add(1)
	var apart *apartChunk
	if m.opt.PrepareApart != nil {
		apart = m.prepareApart(frame, dig)
	}
	m.procMu.Lock()
	a, g, err := m.chunkIntake(frame, dig, apart)
	m.flow.arrivals.Add(-1)
	m.settle()
	m.procMu.Unlock()
	if g == nil {
		return a, err
	}
	<-g.done
	if !g.ok {
		a.Outcome, a.Detail, a.Frame = outcome.Invalid, g.why, prepFrame(a.Round, wire.BatchStatusInvalid)
	}
	return a, nil
}

// chunkIntake is SecAggChunkIntake under procMu (released while the
// chunk waits for a predecessor). A non-nil group holds the answer until
// its checkpoint.
func (m *Machine) chunkIntake(frame []byte, dig string, apart *apartChunk) (outcome.SecAggAnswer, *chunkGroup, error) {
	t, round, err := wire.PeekRound(frame)
	if err != nil || t != wire.TypeSecAggChunk || round < 1 {
		return outcome.SecAggAnswer{Answer: outcome.Answer{Outcome: outcome.Invalid, Detail: "not a secagg chunk frame"}}, nil, nil
	}
	ans := func(in outcome.Intake, f []byte, detail string) (outcome.SecAggAnswer, *chunkGroup, error) {
		if f == nil {
			f = prepFrame(round, wire.BatchStatusInvalid)
		}
		return outcome.SecAggAnswer{Answer: outcome.Answer{Round: round, Outcome: in, Detail: detail}, Frame: f}, nil, nil
	}
	r := int(round)
	var ch *wire.SecAggChunk
	var deadline time.Time
	for {
		if c := m.sa.collect; c != nil && c.round == r {
			if reply, ok := c.answered[dig]; ok {
				return ans(outcome.Duplicate, reply, "")
			}
			if g := c.group; g != nil {
				if reply, ok := g.replies[dig]; ok { // folded, not yet checkpointed: the same wait
					a, _, _ := ans(outcome.Duplicate, reply, "")
					return a, g, nil
				}
			}
		}
		rc, in, detail, ok := m.secaggOpenRound(round, "chunk")
		if !ok {
			return ans(in, nil, detail)
		}
		if ch == nil && apart != nil && apart.round == r {
			ch = apart.ch
		}
		if ch == nil {
			if ch, err = wire.ParseSecAggChunk(frame, rc.Proto.LeaderSealed, int(rc.Params.Quota)); err != nil {
				return ans(outcome.Invalid, nil, "malformed secagg chunk: "+err.Error())
			}
		}
		c := m.sa.collect
		if c != nil && c.round == r && c.refuses(ch.Seq) {
			// A relay's resume found the round's chunks stop before this
			// one (SecAggResumeIntake): a former owner's late chunk.
			return ans(outcome.Obsolete, nil, fmt.Sprintf("chunk %d of round %d: the round's chunks end before %d (a relay resumed it)", ch.Seq, r, c.sealed))
		}
		if (c == nil || c.round != r) && ch.Seq == 1 {
			sr, eng, err := m.newLeader(r, rc)
			if err != nil {
				return outcome.SecAggAnswer{}, nil, err
			}
			l, err := analysis.NewSecAggLeader(m.key, m.opt.Consent, sr, eng)
			if err != nil {
				return outcome.SecAggAnswer{}, nil, err
			}
			c = newCollect(r, sr, l, 1)
			m.sa.collect = c
			m.wakeChunks()
		}
		if c == nil || c.round != r || ch.Seq > c.next {
			// Ahead of a predecessor: wait for it.
			if deadline.IsZero() {
				deadline = time.Now().Add(m.chunkWait())
			}
			waiting := 0
			for _, n := range m.flow.ahead {
				waiting += n
			}
			if waiting >= maxChunksAhead || !time.Now().Before(deadline) {
				if c == nil || c.round != r {
					return ans(outcome.Obsolete, nil, fmt.Sprintf("chunk %d of round %d without its predecessors here", ch.Seq, r))
				}
				return outcome.SecAggAnswer{}, nil, fmt.Errorf("server: secagg round %d: chunk %d, %d expected (%d waiting): %w",
					r, ch.Seq, c.next, waiting, errChunkAhead)
			}
			k := chunkKey{r, ch.Seq}
			if m.flow.ahead == nil {
				m.flow.ahead = make(map[chunkKey]int)
			}
			m.flow.ahead[k]++
			moved := m.movedChan()
			m.settle() // this chunk does not settle the group before its predecessor
			m.procMu.Unlock()
			tm := time.NewTimer(time.Until(deadline))
			select {
			case <-moved:
			case <-tm.C:
			}
			tm.Stop()
			m.procMu.Lock()
			if m.flow.ahead[k]--; m.flow.ahead[k] <= 0 {
				delete(m.flow.ahead, k)
			}
			continue
		}
		// A chunk the relay should never send closes the round, nothing
		// charged: the relay ends it too on the invalid answer.
		fc := &secaggFinish{r: r, rc: rc, sr: c.sr, leader: c.leader, dig: dig, start: c.start,
			rec: m.openRecord(r, dig, c.leader.Reports(), 0, 0, time.Time{}), fail: func(st uint8) []byte { return prepFrame(round, st) }}
		if ch.Seq != c.next {
			a, err := fc.closeInvalid(m, fmt.Sprintf("chunk %d again with other bytes (next expected %d)", ch.Seq, c.next))
			return a, nil, err
		}
		if c.leader.Reports()+len(ch.Leader) > int(rc.Params.Quota) {
			a, err := fc.closeInvalid(m, fmt.Sprintf("more than the quota of %d reports", rc.Params.Quota))
			return a, nil, err
		}
		msg := m.foldApart(c, ch, apart)
		var err error
		if msg == nil {
			m.flow.here.Add(1)
			msg, err = c.leader.PrepareChunk(ch.Leader, ch.Prep, m.workers())
		}
		if err != nil {
			a, err := fc.closeInvalid(m, "the relay's prepare shares do not combine: "+err.Error())
			return a, nil, err
		}
		reply, err := (&wire.SecAggPrep{Round: round, Status: wire.BatchStatusOK, Msg: msg}).MarshalBinary()
		if err != nil {
			// Folded but never answered: the state is ahead of what the
			// relay will re-send, so the round cannot go on.
			a, _ := fc.closeInvalid(m, "encoding the chunk's reply: "+err.Error())
			return a, nil, nil
		}
		c.next++
		g := c.group
		if g == nil {
			g = &chunkGroup{replies: make(map[string][]byte), done: make(chan struct{})}
			c.group = g
		}
		g.chunks = append(g.chunks, ChunkAnswer{Seq: ch.Seq, Digest: dig, Reply: reply})
		g.replies[dig] = reply
		g.reports += len(ch.Leader)
		g.lastFold = time.Now()
		m.wakeChunks()
		if g.reports >= groupReports {
			m.checkpoint(c) // else settle, when no other chunk is on its way
		}
		a, _, _ := ans(outcome.Accepted, reply, "")
		return a, g, nil
	}
}

// foldApart folds the chunk's result prepared apart, if there is one for
// it: it returns its 'M' message, or nil when the intake should prepare
// the chunk itself: no result, one that does not parse or does not match
// the chunk (a replica of another version, say), or a nonce accepted
// before (ErrNonceSeen); FoldPrepared folds nothing then. The caller
// holds procMu.
func (m *Machine) foldApart(c *secaggCollect, ch *wire.SecAggChunk, apart *apartChunk) []byte {
	if apart == nil || apart.round != c.round || apart.ch != ch {
		return nil
	}
	cp, err := c.leader.ParseChunkPrep(apart.res)
	if err == nil {
		var msg []byte
		if msg, err = c.leader.FoldPrepared(cp, ch.Prep); err == nil {
			m.flow.apart.Add(1)
			return msg
		}
	}
	if errors.Is(err, analysis.ErrNonceSeen) {
		m.log.Warn("a secagg chunk repeats a nonce accepted before; preparing it here", "round", c.round, "seq", ch.Seq)
	} else {
		m.log.Warn("a secagg chunk's result prepared apart does not fit it; preparing it here", "round", c.round, "seq", ch.Seq, "err", err)
	}
	return nil
}

func (m *Machine) chunkWait() time.Duration {
	if m.flow.wait > 0 {
		return m.flow.wait
	}
	return chunkWaitBound
}

// openRecord is the record of the open round r with the relay's counts.
func (m *Machine) openRecord(r int, dig string, reports, checkedIn, population int, closedAt time.Time) checkpoint.RoundRecord {
	rec := checkpoint.RoundRecord{Round: r, Digest: dig, Reports: reports, CheckedIn: checkedIn, Population: population, ClosedAt: closedAt}
	if o := m.st.Open; o != nil && o.Round == r {
		rec.AnnouncedAt, rec.Deadline = o.AnnouncedAt, o.Deadline
	}
	return rec
}

// chargedFrame encodes a SecAggCharged without a count (refused,
// invalid).
func chargedFrame(round uint64, status uint8) []byte {
	b, err := (&wire.SecAggCharged{Round: round, Status: status}).MarshalBinary()
	if err != nil {
		return nil
	}
	return b
}

// SecAggCloseIntake is POST /v1/secagg/close after authentication: the
// relay has forwarded all of the round's chunks. If its counts agree with
// the leader's (chunks, reports, and the helper's accepted count), the
// round is charged (secaggCharge: persisted, then charged) and answered
// with a SecAggCharged frame (status ok, the accepted count); fewer than
// MinBatch accepted, or counts that disagree, close it with nothing
// charged (invalid); a refused budget answers refused.
//
// Guarantee: the ok answer — after which the relay sends its noised
// aggregate share and the aggregator could unshard — leaves only after
// the ledger has durably charged spec.Release(r, accepted, 0), the
// release of a sum of `accepted` quantized updates of L2 norm at most
// Sensitivity with one server's discrete Gaussian noise at the check-in
// rate (docs/accounting.md §4; Canonne-Kamath-Steinke 2020 Prop. 5,
// Zhu-Wang 2019 Thm 6). A round with fewer than MinBatch accepted
// reports, or refused by the budget, is answered without a count and the
// leader's state is discarded, so nothing of it can be released. Each
// round is charged at most once: a close is taken only for the open round
// not yet charged nor closed.
func (m *Machine) SecAggCloseIntake(frame []byte) (outcome.SecAggAnswer, error) {
	dig := digestOf(frame)
	m.procMu.Lock()
	defer m.procMu.Unlock()
	cl, err := wire.ParseSecAggClose(frame)
	if err != nil {
		_, round, _ := wire.PeekRound(frame)
		return outcome.SecAggAnswer{Answer: outcome.Answer{Round: round, Outcome: outcome.Invalid, Detail: "invalid secagg close: " + err.Error()},
			Frame: chargedFrame(round, wire.BatchStatusInvalid)}, nil
	}
	round, r := cl.Round, int(cl.Round)
	ans := func(in outcome.Intake, f []byte, detail string) (outcome.SecAggAnswer, error) {
		if f == nil {
			f = chargedFrame(round, wire.BatchStatusInvalid)
		}
		return outcome.SecAggAnswer{Answer: outcome.Answer{Round: round, Outcome: in, Detail: detail}, Frame: f}, nil
	}
	if p := m.sa.pending; p != nil && p.round == r && p.digest == dig {
		m.log.Info("identical secagg close re-sent; answering with the stored reply", "round", r)
		return ans(outcome.Duplicate, p.reply, "")
	}
	if l := m.sa.last; l != nil && l.round == r && l.closeDigest == dig {
		return ans(outcome.Duplicate, l.closeReply, "")
	}
	if rec := m.record(r); rec != nil && rec.Digest == dig && rec.Reply != nil && *rec.Reply != wire.BatchStatusOK {
		return ans(outcome.Duplicate, chargedFrame(round, *rec.Reply), "")
	}
	rc, in, detail, ok := m.secaggOpenRound(round, "close")
	if !ok {
		return ans(in, nil, detail)
	}
	c := m.sa.collect
	if c == nil || c.round != r {
		return ans(outcome.Obsolete, nil, fmt.Sprintf("round %d has no chunks here", r))
	}
	fc := &secaggFinish{r: r, rc: rc, sr: c.sr, leader: c.leader, dig: dig, start: c.start,
		rec:  m.openRecord(r, dig, int(cl.Reports), int(cl.CheckedIn), int(cl.Population), time.Now()),
		fail: func(st uint8) []byte { return chargedFrame(round, st) },
		ok: func(n int) ([]byte, error) {
			return (&wire.SecAggCharged{Round: round, Status: wire.BatchStatusOK, Accepted: uint32(n)}).MarshalBinary()
		}}
	// The chunks folded but not yet answered are checkpointed first (the
	// relay closes only after every chunk's answer, so normally none).
	if !m.checkpoint(c) {
		return ans(outcome.Invalid, nil, "the aggregator could not persist the round")
	}
	if cl.Chunks != c.next-1 || int(cl.Reports) != c.leader.Reports() || int(cl.Accepted) != c.leader.Accepted() {
		return fc.closeInvalid(m, fmt.Sprintf("the relay closes %d chunks, %d reports, %d accepted; the leader has %d, %d, %d",
			cl.Chunks, cl.Reports, cl.Accepted, c.next-1, c.leader.Reports(), c.leader.Accepted()))
	}
	return m.secaggCharge(fc)
}

// saveCollect writes the checkpoint of c covering chunks (those folded
// since the previous checkpoint).
func (m *Machine) saveCollect(c *secaggCollect, chunks []ChunkAnswer) error {
	st, err := c.leader.MarshalState()
	if err != nil {
		return err
	}
	return m.store.SaveCollect(&Collect{Round: c.round, Next: c.next, Sealed: c.sealed, Chunks: chunks, Leader: st})
}

func (m *Machine) removeCollect() {
	if err := m.store.RemoveCollect(); err != nil {
		m.log.Error("cannot remove the secagg round's streaming state", "err", err)
	}
}

// restoreCollect resumes the open round's streaming state after a
// restart (called by Open after reconcile): a file for another round than
// the open one is deleted.
func (m *Machine) restoreCollect() {
	f, err := m.store.LoadCollect()
	if f == nil && err == nil {
		return
	}
	if err != nil || m.st.Open == nil || m.st.Open.Round != f.Round || m.sa.pending != nil {
		m.removeCollect()
		return
	}
	rc := m.Current()
	if !rc.Proto.SecAgg() {
		m.removeCollect()
		return
	}
	sr, eng, err := m.newLeader(f.Round, rc)
	if err == nil {
		var l *analysis.SecAggLeader
		if l, err = analysis.RestoreCollecting(m.key, m.opt.Consent, sr, eng, f.Leader); err == nil {
			c := newCollect(f.Round, sr, l, f.Next)
			for _, a := range f.answers() {
				c.answered[a.Digest] = a.Reply
				c.bySeq[a.Seq] = a.Reply
			}
			if f.Sealed > 0 && f.Sealed >= f.Next {
				c.sealed = f.Sealed
			}
			m.sa.collect = c
			m.log.Info("resumed a secure-summation round's chunks", "round", f.Round, "chunks", f.Next-1, "reports", l.Reports())
			return
		}
	}
	m.log.Error("the secagg round's streaming state does not restore", "round", f.Round, "err", err)
	m.removeCollect()
}
