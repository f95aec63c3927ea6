package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/blanket-fl/blanket/relay/internal/helper"
	"github.com/blanket-fl/blanket/relay/internal/outbox"
	"github.com/blanket-fl/blanket/relay/internal/round"
	"github.com/blanket-fl/blanket/shared/ledger"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/secagg"
	"github.com/blanket-fl/blanket/shared/wire"
)

// The relay's side of a secure-summation round (docs/secagg.md,
// "Streaming"), the transport around relay/internal/helper:
//
//   - while the round is open, every accepted report goes to the round's
//     stream (streamReport): its helper share is opened and prepared
//     (helper.Prepare) as it arrives, on a pool of GOMAXPROCS workers, and
//     added (helper.Add) strictly in arrival order; its sealed leader share
//     and 'P' entry join the next chunk; a chunk of ChunkReports reports,
//     or whatever waited ChunkEvery while no chunk was at the aggregator,
//     is posted to /v1/secagg/chunk, one at a time (the aggregator takes a
//     round's chunks strictly in sequence), while the next one is
//     prepared; its verdicts ('M') fold the accepted reports into the
//     helper's running aggregate (helper.Verdicts); the report is then gone
//     from the relay (runStream describes the pipeline and its bound);
//   - at the close (secAggRound), the stream waits at most DrainBound for
//     the reports the round machine accepted but the stream has not yet
//     received, drops the rest (counted, never sent: the aggregator never
//     sees them either), and posts its last chunk;
//   - the close: the SecAggClose frame and the helper's running aggregate
//     are persisted (outbox.SecAggClose) before /v1/secagg/close is posted;
//     a SecAggCharged ok with exactly the helper's accepted count, at least
//     the minimum batch, releases the noised aggregate share
//     (helper.Release), which is persisted (outbox.SecAggAggregate) before
//     it is posted to /v1/secagg/aggregate.
//
// Every request is resent with the identical bytes until a definitive
// answer (outbox.Classify), the relay's stop, or the aggregator's next
// announcement. A relay restart before the close is persisted aborts the
// round (its open marker: nothing was charged); after it, the round
// resumes from the persisted close or aggregate share (resumeSecAgg).

// Secure-summation paths at the aggregator.
const (
	secAggChunkPath     = "/v1/secagg/chunk"
	secAggClosePath     = "/v1/secagg/close"
	secAggAggregatePath = "/v1/secagg/aggregate"
)

// Reports the relay drops before they reach the aggregator
// (/metrics secagg.dropped).
const (
	// DropUnopened: the helper share does not open (another key, round or
	// role, or altered bytes).
	DropUnopened = "helper_unopened"
	// DropLate: accepted by the round but not received by the round's
	// stream within DrainBound after the close.
	DropLate = "late"
)

// How a secure-summation round ended at the relay once it had reports
// (/metrics secagg.rounds and last_round.outcome; rounds aborted before
// are counted in rounds_aborted).
const (
	SecAggForwarded  = "forwarded"  // the noised aggregate share was delivered (accepted or duplicate)
	SecAggRefused    = "refused"    // the aggregator's ledger refused the round's charge
	SecAggInvalid    = "invalid"    // the aggregator found a chunk, the close or the aggregate invalid
	SecAggObsolete   = "obsolete"   // the round is closed at the aggregator another way
	SecAggSuperseded = "superseded" // no definitive answer before the aggregator announced a later round
	SecAggFailed     = "failed"     // the helper could not finish (the aggregator's answer contradicts it)
)

var secAggOutcomes = []string{SecAggForwarded, SecAggRefused, SecAggInvalid, SecAggObsolete, SecAggSuperseded, SecAggFailed}

// Streaming defaults (secaggRelay).
const (
	defaultChunkReports = 8                      // about 8.6 MB of leader shares at d = 7850
	defaultChunkEvery   = 250 * time.Millisecond // a partial chunk waits at most this
	defaultDrainBound   = 10 * time.Second       // at the close, for reports still on their way
)

// errStopped and errSuperseded end a secure-summation conversation without
// a definitive answer.
var (
	errStopped    = errors.New("relay stopping")
	errSuperseded = errors.New("aggregator announced a later round")
)

// secaggRelay is the relay's secure-summation state: the open round's
// stream, and the streaming knobs (tests shorten them).
type secaggRelay struct {
	mu      sync.Mutex
	ctx     context.Context // Run's; nil before Run
	streams map[uint64]*saStream
	resume  []outbox.Entry // persisted closes and aggregate shares found at start

	ChunkReports int
	ChunkEvery   time.Duration
	DrainBound   time.Duration

	// workers prepares reports (helper.Prepare) in parallel; 0:
	// runtime.GOMAXPROCS. serial selects runStreamSerial, the one-goroutine
	// stream this pipeline replaced (BenchmarkSecAggStream compares them).
	// wrapOpen, if set, wraps the helper's opener (tests observe it).
	workers  int
	serial   bool
	wrapOpen func(helper.Opener) helper.Opener
}

// streamKnobs are a stream's settings, read once when it starts.
type streamKnobs struct {
	size         int           // reports per chunk
	every, drain time.Duration // a partial chunk's wait; the drain after the close
	workers      int           // preparing goroutines
	window       int           // reports past the stream's channel not yet in a chunk (runStream)
	serial       bool
	wrapOpen     func(helper.Opener) helper.Opener
}

func (a *secaggRelay) knobs() streamKnobs {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := streamKnobs{size: a.ChunkReports, every: a.ChunkEvery, drain: a.DrainBound, workers: a.workers,
		serial: a.serial, wrapOpen: a.wrapOpen}
	if k.size <= 0 {
		k.size = defaultChunkReports
	}
	if k.every <= 0 {
		k.every = defaultChunkEvery
	}
	if k.drain <= 0 {
		k.drain = defaultDrainBound
	}
	if k.workers <= 0 {
		k.workers = runtime.GOMAXPROCS(0)
	}
	k.window = max(k.size, 2*k.workers)
	return k
}

// saStream is one open secure-summation round's pipeline.
type saStream struct {
	num    uint64
	params wire.Params
	sr     *secagg.Round
	h      *helper.Helper
	in     chan round.SharesReport
	closeC chan uint32 // the round machine's count of accepted reports
	done   chan struct{}

	// helperMu guards h's Add (the assembler, runStream) and Verdicts (the
	// poster, postChunk), which run on different goroutines; h.Prepare
	// needs no lock. After done, one goroutine owns h.
	helperMu sync.Mutex

	// Set by the stream's goroutines (each field by one), read after done.
	chunks, sent   uint32 // chunks and reports forwarded
	received       uint32
	unopened, late int
	end            error  // the aggregator ended the round (endError) or the relay stopped
	setupErr       error  // the helper could not be built
	rep            string // the last chunk's reason, for logs
}

// endError is a definitive answer that ends the round before its close.
type endError struct{ outcome, why string }

func (e *endError) Error() string { return e.outcome + ": " + e.why }

// openStream starts the stream of secure-summation round rd (called when
// the round opens).
func (s *Server) openStream(rd *round.Round) {
	st := &saStream{num: rd.Num, params: rd.Params, in: make(chan round.SharesReport, max(int(rd.Params.Quota), 1)),
		closeC: make(chan uint32, 1), done: make(chan struct{})}
	sr, err := rd.SecAgg.SecAggRound(rd.Num)
	var vk []byte
	if err == nil {
		vk, err = secagg.DeriveVerifyKey([]byte(s.cfg.Token), rd.Num)
	}
	var eng secagg.Engine
	if err == nil {
		eng, err = secagg.NewEngine(sr, false, vk)
	}
	if err == nil {
		st.sr = sr
		var open helper.Opener = s.cfg.HelperKey.OpenHelperShare
		if w := s.sa.knobs().wrapOpen; w != nil {
			open = w(open)
		}
		st.h, err = helper.New(sr, eng, open, int(rd.Params.MinBatch), s.cfg.Floor)
	}
	s.sa.mu.Lock()
	if s.sa.streams == nil {
		s.sa.streams = make(map[uint64]*saStream)
	}
	s.sa.streams[rd.Num] = st
	ctx := s.sa.ctx
	s.sa.mu.Unlock()
	if ctx == nil {
		ctx = context.Background()
	}
	if err != nil {
		st.setupErr = err
		close(st.done)
		return
	}
	s.wg.Go(func() { s.runStream(ctx, st) })
}

// streamReport hands an accepted report to its round's stream, in the
// order the round machine accepted them. It does not wait while the
// round is open: st.in holds the round's quota, and the round machine
// accepts no more. (Waiting here would only delay the volunteer's ack: its
// reader has already read the whole frame, so the memory is held either
// way; what bounds the backlog is the pipeline keeping pace, runStream.)
func (s *Server) streamReport(num uint64, rep *round.SharesReport) {
	s.sa.mu.Lock()
	st := s.sa.streams[num]
	s.sa.mu.Unlock()
	if st == nil || rep == nil {
		return
	}
	select {
	case st.in <- *rep:
	case <-st.done: // the round ended early: the report is counted late
	}
}

// runStream is the stream's pipeline, until the close's count of reports
// is received or DrainBound after the close (or the round ends early):
//
//   - intake (this goroutine): takes each report from st.in in arrival
//     order, numbers it, and hands it to the workers once it holds one of
//     window slots;
//   - workers (knobs.workers goroutines, GOMAXPROCS by default): open the
//     helper share and run PrepInit (helper.Prepare), in parallel;
//   - assembler: puts the prepared reports back in arrival order (a
//     reorder buffer keyed by the number), adds each to the helper
//     (helper.Add) and to the chunk being built, and frees its slot; a
//     full chunk goes to the poster (waiting while the poster has one), a
//     partial one at each ChunkEvery tick when the poster is idle;
//   - poster: posts the chunks one at a time, in order (postChunk: the
//     aggregator takes a round's chunks strictly in sequence), and applies
//     their verdicts, while the next chunk is prepared.
//
// Bound: past st.in, the stream holds at most window + 2 × ChunkReports
// reports: window (max(ChunkReports, 2 × workers): 8 at the defaults on 2
// cores) being prepared or waiting for an earlier one, one chunk built
// and waiting for the poster, and one at the aggregator (its leader shares
// until the post returns, its prep states until the verdicts): 24 reports
// at the defaults, about 26 MB of sealed leader shares at d = 7850.
//
// A definitive answer that ends the round (an invalid chunk, a refused
// one, verdicts that contradict the helper), a helper failure or the
// relay's stop ends every stage: nothing more is posted, the reports
// still in the pipeline are discarded with the round.
func (s *Server) runStream(ctx context.Context, st *saStream) {
	defer close(st.done)
	k := s.sa.knobs()
	if k.serial {
		s.runStreamSerial(ctx, st, k)
		return
	}
	var (
		once  sync.Once
		ended = make(chan struct{}) // closed by end: every stage stops
	)
	end := func(err error) {
		once.Do(func() { st.end = err; close(ended) })
	}
	jobs := make(chan prepJob, k.window)
	results := make(chan prepDone, k.window)
	slots := make(chan struct{}, k.window)
	for range k.window {
		slots <- struct{}{}
	}
	chunks := make(chan saChunk) // unbuffered: a chunk is handed over only to an idle poster
	var workers, stages sync.WaitGroup
	for range k.workers {
		workers.Go(func() {
			for j := range jobs {
				p, ok := st.h.Prepare(j.rep.Helper)
				results <- prepDone{prepJob: j, p: p, ok: ok}
				// Milliseconds of PINE arithmetic each: let the assembler,
				// the poster and the connections' readers run between
				// them rather than wait for preemption.
				runtime.Gosched()
			}
		})
	}
	stages.Go(func() {
		workers.Wait()
		close(results)
	})
	stages.Go(func() { s.assemble(st, k, results, slots, chunks, ended, end) })
	stages.Go(func() {
		for c := range chunks {
			select {
			case <-ended: // drained: nothing more is posted
				continue
			default:
			}
			if err := s.postChunk(ctx, st, c.leaders, c.entries, c.receipts); err != nil {
				end(err)
			}
		}
	})

	expect := ^uint32(0)
	var drained <-chan time.Time
	var seq uint64
	held := false // a slot for the next report
intake:
	for st.received < expect {
		var in <-chan round.SharesReport
		var slot <-chan struct{}
		if held {
			in = st.in
		} else {
			slot = slots
		}
		select {
		case <-slot:
			held = true
		case rep := <-in:
			held = false
			st.received++
			s.web.receipts.received(st.num, secAggReceipt(rep.Helper)) // classroom.go
			jobs <- prepJob{seq: seq, rep: rep}                        // never waits: at most window jobs hold slots
			seq++
		case n := <-st.closeC:
			expect = n
			drained = time.After(k.drain)
		case <-drained:
			st.late = int(expect - st.received)
			break intake
		case <-ended:
			break intake
		case <-ctx.Done():
			end(errStopped)
			break intake
		}
	}
	close(jobs)
	stages.Wait()
}

// prepJob is a report numbered in arrival order; prepDone is it prepared.
type prepJob struct {
	seq uint64
	rep round.SharesReport
}

type prepDone struct {
	prepJob
	p  helper.Prepared
	ok bool // the helper share opened
}

// saChunk is one chunk's reports, in arrival order: their sealed leader
// shares, 'P' entries and receipts (classroom.go).
type saChunk struct {
	leaders  [][]byte
	entries  []secagg.Entry
	receipts [][32]byte
}

// assemble is runStream's assembler: it takes the prepared reports in
// arrival order, adds them to the helper and builds the chunks it hands
// to the poster (chunks, closed when results is). After ended it only
// drains results.
func (s *Server) assemble(st *saStream, k streamKnobs, results <-chan prepDone, slots chan<- struct{},
	chunks chan<- saChunk, ended <-chan struct{}, end func(error)) {
	defer close(chunks)
	tick := time.NewTicker(k.every)
	defer tick.Stop()
	waiting := make(map[uint64]prepDone, k.window) // prepared before an earlier report
	var next uint64
	var cur saChunk
	over := func() bool {
		select {
		case <-ended:
			return true
		default:
			return false
		}
	}
	hand := func() {
		select {
		case chunks <- cur:
		case <-ended:
		}
		cur = saChunk{}
	}
	for {
		select {
		case d, ok := <-results:
			if !ok {
				if len(cur.leaders) > 0 && !over() {
					hand()
				}
				return
			}
			waiting[d.seq] = d
			for {
				d, ok := waiting[next]
				if !ok {
					break
				}
				delete(waiting, next)
				next++
				slots <- struct{}{} // never waits: the slot was taken for this report
				if over() {
					continue
				}
				if !d.ok {
					st.unopened++
					continue
				}
				st.helperMu.Lock()
				e, err := st.h.Add(d.p)
				st.helperMu.Unlock()
				if err != nil {
					end(&endError{SecAggFailed, err.Error()})
					continue
				}
				cur.leaders, cur.entries = append(cur.leaders, d.rep.Leader), append(cur.entries, e)
				cur.receipts = append(cur.receipts, secAggReceipt(d.rep.Helper))
				if len(cur.leaders) >= k.size {
					hand()
				}
			}
		case <-tick.C:
			if len(cur.leaders) == 0 || over() {
				continue
			}
			select {
			case chunks <- cur: // the poster is idle: a partial chunk
				cur = saChunk{}
			default: // the poster is busy: keep filling this one
			}
		}
	}
}

// runStreamSerial is the stream as one goroutine, each report prepared
// and each chunk posted in turn (the relay before the pipeline; kept for
// BenchmarkSecAggStream's comparison only).
func (s *Server) runStreamSerial(ctx context.Context, st *saStream, k streamKnobs) {
	size, every, drain := k.size, k.every, k.drain
	var leaders [][]byte
	var entries []secagg.Entry
	var receipts [][32]byte // classroom.go: the chunk's reports' receipts, in order
	flush := func() bool {
		if len(leaders) == 0 {
			return true
		}
		err := s.postChunk(ctx, st, leaders, entries, receipts)
		clear(leaders)
		leaders, entries, receipts = leaders[:0], entries[:0], receipts[:0]
		if err != nil {
			st.end = err
			return false
		}
		return true
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	expect := ^uint32(0)
	var drained <-chan time.Time
	for st.received < expect {
		select {
		case rep := <-st.in:
			st.received++
			s.web.receipts.received(st.num, secAggReceipt(rep.Helper)) // classroom.go
			p, ok := st.h.Prepare(rep.Helper)
			if !ok {
				st.unopened++
				continue
			}
			st.helperMu.Lock()
			e, err := st.h.Add(p)
			st.helperMu.Unlock()
			if err != nil {
				st.end = &endError{SecAggFailed, err.Error()}
				return
			}
			leaders, entries = append(leaders, rep.Leader), append(entries, e)
			receipts = append(receipts, secAggReceipt(rep.Helper))
			if len(leaders) >= size && !flush() {
				return
			}
		case <-tick.C:
			if !flush() {
				return
			}
		case n := <-st.closeC:
			expect = n
			drained = time.After(drain)
		case <-drained:
			st.late = int(expect - st.received)
			expect = st.received
		case <-ctx.Done():
			st.end = errStopped
			return
		}
	}
	flush()
}

// postChunk posts one chunk and applies its verdicts.
func (s *Server) postChunk(ctx context.Context, st *saStream, leaders [][]byte, entries []secagg.Entry, receipts [][32]byte) error {
	prep, err := st.sr.MarshalPrep(entries)
	if err != nil {
		return &endError{SecAggFailed, "encoding the prep shares: " + err.Error()}
	}
	frame, err := (&wire.SecAggChunk{Round: st.num, Seq: st.chunks + 1, Leader: leaders, Prep: prep}).MarshalBinary()
	if err != nil {
		return &endError{SecAggFailed, "encoding the chunk: " + err.Error()}
	}
	limit := 1<<12 + int64(len(leaders))<<10 // the 'M' message: tens of bytes per report
	out, reply, why, err := s.secAggPost(ctx, st.num, secAggChunkPath, frame, limit, func(b []byte) error {
		p, err := wire.ParseSecAggPrep(b)
		if err == nil && p.Round != st.num {
			err = fmt.Errorf("prep reply for round %d", p.Round)
		}
		return err
	})
	if err != nil {
		return err
	}
	if out != outbox.Accepted && out != outbox.Duplicate {
		return &endError{out.String(), why}
	}
	p, err := wire.ParseSecAggPrep(reply) // checked by secAggPost
	if err != nil || p.Status != wire.BatchStatusOK {
		return &endError{SecAggInvalid, "the aggregator found a chunk invalid"}
	}
	ms, err := st.sr.ParseVerdicts(p.Msg)
	if err == nil && len(ms) != len(leaders) {
		err = fmt.Errorf("%d verdicts for %d reports: %w", len(ms), len(leaders), secagg.ErrProtocol)
	}
	if err == nil {
		st.helperMu.Lock()
		err = st.h.Verdicts(ms)
		st.helperMu.Unlock()
	}
	if err != nil {
		// Not the error itself: it may quote the reports' nonces.
		s.log.Error("the aggregator's verdicts contradict the helper", "round", st.num,
			"protocol_violation", errors.Is(err, secagg.ErrProtocol))
		return &endError{SecAggFailed, "helper verdicts failed"}
	}
	for i, e := range ms {
		if e.Reason != secagg.Accepted {
			s.m.secAggReject(strings.ReplaceAll(e.Reason.String(), " ", "_"))
		} else if i < len(receipts) {
			s.web.receipts.include(st.num, receipts[i]) // classroom.go
		}
	}
	st.chunks++
	st.sent += uint32(len(leaders))
	return nil
}

// secAggRound ends secure-summation round c at the relay (its close).
func (s *Server) secAggRound(ctx context.Context, c *round.Closed) {
	ob := s.cfg.Outbox
	rep := roundReport(c)
	s.sa.mu.Lock()
	st := s.sa.streams[c.Num]
	delete(s.sa.streams, c.Num)
	s.sa.mu.Unlock()
	if ob.Has(c.Num, outbox.Batch) || ob.Has(c.Num, outbox.Abort) || ob.Has(c.Num, outbox.SecAggClose) {
		s.log.Error("round already has a persisted outcome; not closing it again", "round", c.Num)
		return
	}
	abort := func(reason uint8, why string) {
		s.web.receipts.settle(c.Num, "the round was cancelled: "+why) // classroom.go
		if e, ok := s.abortRound(c, rep, reason, why); ok {
			s.sender.Enqueue(e)
		}
	}
	if st == nil {
		s.log.Error("secure-summation round without a stream", "round", c.Num)
		abort(wire.AbortOverflow, "batch construction failed")
		return
	}
	st.closeC <- c.Reports
	<-st.done
	if st.unopened > 0 {
		s.m.secAggDrop(DropUnopened, st.unopened)
		s.log.Warn("reports dropped: their helper share does not open", "round", c.Num, "dropped", st.unopened)
	}
	if st.late > 0 {
		s.m.secAggDrop(DropLate, st.late)
		s.log.Warn("reports dropped: not prepared within the drain bound after the close", "round", c.Num, "dropped", st.late)
	}
	if st.setupErr != nil {
		s.log.Error("cannot prepare the secure-summation round", "round", c.Num, "err", st.setupErr)
		abort(wire.AbortOverflow, "batch construction failed")
		return
	}
	var ee *endError
	switch {
	case errors.As(st.end, &ee):
		s.secAggEnd(c.Num, rep, ee.outcome, ee.why)
		return
	case st.end != nil:
		s.secAggStopped(c.Num, rep, st.end)
		return
	}
	c.Reports, rep.Reports = st.sent, st.sent // the reports the aggregator has
	if st.sent < c.Params.MinBatch {
		abort(wire.AbortBelowMinBatch, "below minimum batch after dropping unopened or late reports")
		return
	}
	// The relay's own floor, before anything is charged: an aggregator
	// whose verdicts cut the round below the relay's minimum batch, or
	// rejected most of its reports, gets an abort instead of a close.
	if err := st.h.CheckFloor(); err != nil {
		reason, why := floorAbort(err, c.Params.MinBatch, s.cfg.Floor)
		s.log.Warn("secure-summation round refused by the relay's floor", "round", c.Num, "reason", why,
			"reports", st.sent, "accepted", st.h.Accepted())
		abort(reason, why)
		return
	}
	cl := &wire.SecAggClose{Round: c.Num, Chunks: st.chunks, Reports: st.sent, Accepted: uint32(st.h.Accepted()),
		CheckedIn: c.CheckedIn, Population: c.Population}
	frame, err := cl.MarshalBinary()
	var agg []byte
	if err == nil {
		agg, err = st.h.MarshalAggregate()
	}
	var pj []byte
	if err == nil {
		pj, err = json.Marshal(c.Params)
	}
	if err == nil {
		// Persisted before the close is sent: the aggregator may charge on
		// receipt, and a restarted relay must still release the round.
		err = s.putResume(c.Num, resumeClose{Close: frame, Aggregate: agg, Params: pj})
	}
	if err != nil {
		s.log.Error("cannot persist the secure-summation close", "round", c.Num, "err", err)
		abort(wire.AbortOverflow, "batch persistence failed")
		return
	}
	ob.Remove(c.Num, outbox.OpenRound)
	rep.Outcome = "pending"
	s.m.setLast(rep)
	s.log.Info("secure-summation round forwarded; closing it", "round", c.Num, "reports", st.sent, "chunks", st.chunks,
		"accepted", st.h.Accepted())
	s.secAggClose(ctx, c.Num, rep, st.h, frame, c.Params)
}

// resumeClose is outbox.SecAggClose's content.
type resumeClose struct {
	Close     []byte `json:"close"`     // the SecAggClose frame
	Aggregate []byte `json:"aggregate"` // helper.Helper.MarshalAggregate
	Params    []byte `json:"params"`    // the round's wire.Params (JSON)
}

func (s *Server) putResume(num uint64, r resumeClose) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return s.cfg.Outbox.Put(num, outbox.SecAggClose, b)
}

// secAggClose posts the persisted close, and on a charge releases and
// posts the aggregate share.
func (s *Server) secAggClose(ctx context.Context, num uint64, rep RoundReport, h *helper.Helper, frame []byte, params wire.Params) {
	out, reply, why, err := s.secAggPost(ctx, num, secAggClosePath, frame, wire.SecAggChargedSize, func(b []byte) error {
		c, err := wire.ParseSecAggCharged(b)
		if err == nil && c.Round != num {
			err = fmt.Errorf("charged reply for round %d", c.Round)
		}
		return err
	})
	if err != nil {
		s.secAggStopped(num, rep, err)
		return
	}
	if out != outbox.Accepted && out != outbox.Duplicate {
		s.secAggEnd(num, rep, out.String(), why)
		return
	}
	ch, err := wire.ParseSecAggCharged(reply) // checked by secAggPost
	if err != nil {
		s.secAggEnd(num, rep, SecAggInvalid, err.Error())
		return
	}
	switch ch.Status {
	case wire.BatchStatusRefused:
		s.secAggEnd(num, rep, SecAggRefused, "the aggregator's ledger refused the round")
		return
	case wire.BatchStatusInvalid:
		s.secAggEnd(num, rep, SecAggInvalid, "the aggregator found the round invalid")
		return
	}
	// Released once, noised, only for a charge of exactly the helper's
	// accepted reports and at least the minimum batch (helper.Release).
	var share []byte
	if h.Awaiting() == 0 && int(ch.Accepted) == h.Accepted() { // else Release refuses: nothing to charge
		err = s.chargeNoise(ctx, num, params, int(ch.Accepted)) // anchor.go: the relay's own ledger first
	}
	if errors.Is(err, errStopped) {
		s.secAggStopped(num, rep, err) // the persisted close stays: the next start resumes it
		return
	}
	if err == nil {
		share, err = h.Release(int(ch.Accepted), s.cfg.NewSource())
	}
	var agg []byte
	if err == nil {
		agg, err = (&wire.SecAggAggregate{Round: num, Share: share}).MarshalBinary()
	}
	if err == nil {
		err = s.cfg.Outbox.Put(num, outbox.SecAggAggregate, agg)
	}
	if err != nil {
		s.log.Error("no aggregate share released", "round", num, "err", err,
			"below_min_batch", errors.Is(err, helper.ErrBelowMinBatch), "count_mismatch", errors.Is(err, helper.ErrCountMismatch),
			"too_many_rejected", errors.Is(err, helper.ErrTooManyRejected))
		s.secAggNoRelease(num, rep, noReleaseReason(err, params.MinBatch, s.cfg.Floor))
		s.secAggEnd(num, rep, SecAggFailed, "aggregate share refused: "+err.Error())
		return
	}
	s.cfg.Outbox.Remove(num, outbox.SecAggClose)
	s.log.Info("secure-summation aggregate share noised", "round", num, "aggregated", ch.Accepted, "bytes", len(agg))
	s.secAggSendAggregate(ctx, num, rep, agg, int(ch.Accepted))
}

// floorAbort names a refusal of the relay's floor (helper.CheckFloor) for
// an abort: the reason code and words an operator can act on.
func floorAbort(err error, announced uint32, f roundspec.Floor) (uint8, string) {
	switch {
	case errors.Is(err, roundspec.ErrTooManyRejected):
		return wire.AbortRejected, "the relay released nothing: " + err.Error()
	case errors.Is(err, roundspec.ErrBelowFloor) && f.MinBatch > int(announced):
		return wire.AbortRelayFloor, fmt.Sprintf("the relay released nothing: %v (the relay's own minimum batch %d is above the announced %d)",
			err, f.MinBatch, announced)
	}
	return wire.AbortBelowMinBatch, "below minimum batch after verification: " + err.Error()
}

// noReleaseReason is the abort reason of a charged round the relay
// releases nothing for (secAggNoRelease).
func noReleaseReason(err error, announced uint32, f roundspec.Floor) uint8 {
	switch {
	case errors.Is(err, ledger.ErrBudgetExhausted):
		return wire.AbortRelayBudget
	case errors.Is(err, roundspec.ErrTooManyRejected), errors.Is(err, roundspec.ErrBelowFloor):
		r, _ := floorAbort(err, announced, f)
		return r
	}
	return wire.AbortNoRelease
}

// secAggNoRelease tells the aggregator, through the outbox (persisted,
// retried), that the round it charged gets no aggregate share, so that it
// records the round lost now and says why (reason: wire.AbortNoRelease,
// or the more precise AbortRelayBudget, AbortRelayFloor, AbortRejected),
// rather than after its grace. The abort carries the round's counts only:
// nothing about any value.
func (s *Server) secAggNoRelease(num uint64, rep RoundReport, reason uint8) {
	a := wire.Abort{Round: num, Reason: reason, Reports: rep.Reports, CheckedIn: rep.CheckedIn, Population: rep.Population}
	b, err := a.MarshalBinary()
	if err == nil {
		err = s.cfg.Outbox.Put(num, outbox.Abort, b)
	}
	if err != nil {
		s.log.Error("cannot persist the no-release abort; the aggregator will wait out its grace", "round", num, "err", err)
		return
	}
	s.sender.Enqueue(outbox.Entry{Round: num, Kind: outbox.Abort})
}

// secAggSendAggregate posts the persisted noised aggregate share.
func (s *Server) secAggSendAggregate(ctx context.Context, num uint64, rep RoundReport, frame []byte, accepted int) {
	out, _, why, err := s.secAggPost(ctx, num, secAggAggregatePath, frame, 4096, nil)
	if err != nil {
		s.secAggStopped(num, rep, err)
		return
	}
	if out != outbox.Accepted && out != outbox.Duplicate {
		s.secAggEnd(num, rep, out.String(), why)
		return
	}
	s.m.secAggAggregated.Add(uint64(accepted))
	s.m.roundsForwarded.Add(1)
	s.secAggEnd(num, rep, SecAggForwarded, out.String())
}

// resumeSecAgg finishes, after a restart, a round whose close or
// aggregate share was persisted (recover found it).
func (s *Server) resumeSecAgg(ctx context.Context, e outbox.Entry) {
	rep := RoundReport{Round: e.Round, Outcome: "pending"}
	b, err := s.cfg.Outbox.Get(e.Round, e.Kind)
	if err != nil {
		s.log.Error("cannot read a persisted secure-summation step", "round", e.Round, "err", err)
		return
	}
	s.log.Info("resuming a secure-summation round after a restart", "round", e.Round, "step", string(e.Kind))
	if e.Kind == outbox.SecAggAggregate {
		if _, err := wire.ParseSecAggAggregate(b); err != nil {
			s.secAggEnd(e.Round, rep, SecAggFailed, "persisted aggregate share unreadable")
			return
		}
		s.secAggSendAggregate(ctx, e.Round, rep, b, 0)
		return
	}
	var rc resumeClose
	var h *helper.Helper
	err = json.Unmarshal(b, &rc)
	var cl *wire.SecAggClose
	if err == nil {
		cl, err = wire.ParseSecAggClose(rc.Close)
	}
	if err == nil {
		h, err = s.restoreHelper(e.Round, rc, int(cl.Reports))
	}
	if err != nil {
		s.log.Error("persisted secure-summation close does not restore", "round", e.Round, "err", err)
		s.secAggEnd(e.Round, rep, SecAggFailed, "persisted close unreadable")
		return
	}
	rep.Reports, rep.CheckedIn, rep.Population = cl.Reports, cl.CheckedIn, cl.Population
	var p wire.Params
	if err := json.Unmarshal(rc.Params, &p); err != nil { // restoreHelper parsed it
		s.secAggEnd(e.Round, rep, SecAggFailed, "persisted close unreadable")
		return
	}
	s.secAggClose(ctx, e.Round, rep, h, rc.Close, p)
}

// restoreHelper rebuilds a helper whose every report has its verdict
// from a persisted close (its round's parameters are those persisted;
// reports is the close's count of reports sent, so that the relay's floor
// still sees the rejected ones).
func (s *Server) restoreHelper(num uint64, rc resumeClose, reports int) (*helper.Helper, error) {
	var p wire.Params
	if err := json.Unmarshal(rc.Params, &p); err != nil {
		return nil, err
	}
	spec, _, _, err := round.SecAggSpec(p)
	if err != nil {
		return nil, err
	}
	sr, err := spec.SecAggRound(num)
	if err != nil {
		return nil, err
	}
	vk, err := secagg.DeriveVerifyKey([]byte(s.cfg.Token), num)
	if err != nil {
		return nil, err
	}
	eng, err := secagg.NewEngine(sr, false, vk)
	if err != nil {
		return nil, err
	}
	return helper.Restore(sr, eng, s.cfg.HelperKey.OpenHelperShare, int(p.MinBatch), s.cfg.Floor, rc.Aggregate, reports)
}

// secAggEnd records how a secure-summation round ended and removes its
// persisted state: nothing more is owed for it.
func (s *Server) secAggEnd(num uint64, rep RoundReport, outcome, why string) {
	for _, k := range []outbox.Kind{outbox.OpenRound, outbox.SecAggClose, outbox.SecAggAggregate} {
		if err := s.cfg.Outbox.Remove(num, k); err != nil {
			s.log.Error("cannot remove the round's state", "round", num, "kind", string(k), "err", err)
		}
	}
	s.m.secAggRound(outcome)
	if outcome == SecAggForwarded { // classroom.go: what each volunteer may ask of its own report
		s.web.receipts.settleSum(num)
	} else {
		s.web.receipts.settle(num, receiptWhy(outcome))
	}
	rep.Outcome, rep.Reason = outcome, why
	s.m.setLast(rep)
	if outcome == SecAggForwarded {
		s.log.Info("secure-summation round done", "round", num, "outcome", outcome, "reports", rep.Reports)
		return
	}
	s.log.Warn("secure-summation round ended without an aggregate", "round", num, "outcome", outcome, "detail", why)
}

// secAggStopped handles a conversation cut without a definitive answer.
func (s *Server) secAggStopped(num uint64, rep RoundReport, err error) {
	if errors.Is(err, errSuperseded) {
		s.secAggEnd(num, rep, SecAggSuperseded, err.Error())
		return
	}
	// What is persisted stays: the next start aborts the round (open
	// marker) or resumes it (close, aggregate share).
	s.log.Warn("relay stopped during a secure-summation round; the next start aborts or resumes it", "round", num)
}

// secAggPost posts body to path until a definitive answer, resending the
// identical bytes with exponential backoff. It returns the outcome
// (outbox.Classify), the reply (at most limit bytes; for accepted and
// duplicate, one that check accepts, else the answer is retried) and a
// short reason for logs; or errStopped when ctx ends, errSuperseded when
// the aggregator has announced a later round meanwhile.
func (s *Server) secAggPost(ctx context.Context, num uint64, path string, body []byte, limit int64,
	check func([]byte) error) (outbox.Outcome, []byte, string, error) {
	wait := s.cfg.RetryMin
	for attempt := 1; ; attempt++ {
		s.m.secAggAttempts.Add(1)
		out, reply, why := s.secAggAttempt(ctx, path, body, limit, check)
		if out.Final() {
			return out, reply, why, nil
		}
		if ctx.Err() != nil {
			return outbox.Retry, nil, "", errStopped
		}
		s.m.secAggFailures.Add(1)
		if s.rounds.LastRound() > num {
			return outbox.Retry, nil, "", errSuperseded
		}
		s.log.Warn("secure-summation request failed; will resend the same bytes", "round", num, "path", path,
			"attempt", attempt, "reason", why, "retry_in", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return outbox.Retry, nil, "", errStopped
		case <-t.C:
		}
		wait = min(2*wait, s.cfg.RetryMax)
	}
}

// secAggAttempt makes one request, its outcome by outbox.Classify; an
// accepted or duplicate reply that check refuses is retried.
func (s *Server) secAggAttempt(ctx context.Context, path string, body []byte, limit int64,
	check func([]byte) error) (outbox.Outcome, []byte, string) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.SecAggTimeout)
	defer cancel()
	u := strings.TrimSuffix(s.cfg.Aggregator, "/") + path
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return outbox.Retry, nil, err.Error()
	}
	req.Header.Set("Authorization", "Bearer "+s.cfg.Token)
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return outbox.Retry, nil, "request failed"
	}
	defer resp.Body.Close()
	reply, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return outbox.Retry, nil, "reading reply failed"
	}
	out := outbox.Classify(resp.StatusCode)
	if out == outbox.Retry {
		return outbox.Retry, nil, fmt.Sprintf("HTTP %d", resp.StatusCode)
	}
	if int64(len(reply)) > limit {
		if out == outbox.Accepted || out == outbox.Duplicate {
			return outbox.Retry, nil, fmt.Sprintf("HTTP %d with a reply above %d bytes", resp.StatusCode, limit)
		}
		reply = reply[:limit]
	}
	if (out == outbox.Accepted || out == outbox.Duplicate) && check != nil {
		if err := check(reply); err != nil {
			return outbox.Retry, nil, fmt.Sprintf("HTTP %d without a valid reply for the round", resp.StatusCode)
		}
	}
	why := fmt.Sprintf("HTTP %d", resp.StatusCode)
	var ans struct {
		Detail string `json:"detail"`
	}
	if out != outbox.Accepted && out != outbox.Duplicate && json.Unmarshal(reply, &ans) == nil && ans.Detail != "" {
		why = ans.Detail
	}
	return out, reply, why
}
