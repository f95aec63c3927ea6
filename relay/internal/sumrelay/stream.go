package sumrelay

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blanket-fl/blanket/relay/internal/aggclient"
	"github.com/blanket-fl/blanket/relay/internal/helper"
	"github.com/blanket-fl/blanket/relay/internal/outbox"
	"github.com/blanket-fl/blanket/relay/internal/round"
	"github.com/blanket-fl/blanket/shared/secagg"
	"github.com/blanket-fl/blanket/shared/wire"
)

// Stream is one open secure-summation round's pipeline.
type Stream struct {
	num    uint64
	params wire.Params
	sr     *secagg.Round
	vk     []byte // the round's verify key (a batch prepared apart carries it)
	h      *helper.Helper
	in     chan streamReport
	closeC chan uint32 // the round machine's count of accepted reports
	done   chan struct{}

	// helperMu guards h's Add (the assembler, runStream) and Verdicts (the
	// poster, applyVerdicts), which run on different goroutines; h.Prepare
	// needs no lock. After done, one goroutine owns h.
	helperMu sync.Mutex

	// firstAt is when the round machine accepted the first report
	// (Report; Unix nanoseconds, 0 before it).
	firstAt atomic.Int64

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

// OpenStream starts the stream of secure-summation round rd (called when
// the round opens) and returns it.
func (rl *Relay) OpenStream(rd *round.Round) {
	st := &Stream{num: rd.Num, params: rd.Params, in: make(chan streamReport, min(max(int(rd.Params.Quota), 1), streamBuffer)),
		closeC: make(chan uint32, 1), done: make(chan struct{})}
	err := rl.setupHelper(st, rd.Params)
	rl.mu.Lock()
	if rl.streams == nil {
		rl.streams = make(map[uint64]*Stream)
	}
	rl.streams[rd.Num] = st
	ctx := rl.ctx
	rl.mu.Unlock()
	if ctx == nil {
		ctx = context.Background()
	}
	if err != nil {
		st.setupErr = err
		close(st.done)
		return
	}
	rl.wg.Go(func() { rl.runStream(ctx, st) })
}

// streamBuffer is how many accepted reports a stream holds before its
// pipeline takes them (Stream.in). Past it, Report waits, and so does
// the volunteer's ack: with the relay's budget of large frames
// (relay/internal/intake), a relay that cannot keep pace slows the
// volunteers down rather than buffer their ~1 MB reports.
const streamBuffer = 16

// streamReport is an accepted report on its way into the stream, with
// the channel its fate is told on (nil: nobody waits).
type streamReport struct {
	rep  round.SharesReport
	fate chan<- bool
}

// Report hands an accepted report to its round's stream, in the
// order the round machine accepted them. It waits while the stream holds
// streamBuffer reports not yet taken by its pipeline (back-pressure: the
// caller is the volunteer's connection), until the stream ends (the
// report is then counted late, as one the pipeline did not take within
// the drain bound after the close).
//
// It returns the report's fate (nil: no report), told once:
// true once the report is in a chunk the aggregator answered (its verdict
// applied: folded into both parties' running state, durably at the
// aggregator, and its helper share persisted here before the chunk was
// posted, so that a relay that takes over finishes the round with it:
// Rebuild), or once its helper share proved not to open (a rejection,
// counted); false if the round ended first (early, or the relay stopped).
// The volunteer's ack waits for it: an acknowledged report is never lost
// with a relay. "In" includes a report the aggregator's verification then
// rejected (counted as rejected, by reason; an honest volunteer's never
// is): the Ack says the relay took the report into the round, not that
// it passed verification. A report whose round's stream is gone already
// (closed between the round machine's verdict and this hand-over) is told
// false at once.
func (rl *Relay) Report(num uint64, rep *round.SharesReport) <-chan bool {
	if rep == nil {
		return nil
	}
	fate := make(chan bool, 1)
	rl.mu.Lock()
	st := rl.streams[num]
	rl.mu.Unlock()
	if st == nil {
		fate <- false // counted late by the close that took the stream
		return fate
	}
	st.firstAt.CompareAndSwap(0, time.Now().UnixNano())
	select {
	case st.in <- streamReport{rep: *rep, fate: fate}:
		select {
		case <-st.done: // ended meanwhile: nobody takes it any more
			st.drainIn()
		default:
		}
	case <-st.done: // the round ended early: the report is counted late
		fate <- false
	}
	return fate
}

// drainIn tells every report left in the stream's buffer, once the stream
// has ended, that it is not in the round. The stream drains it when it
// ends, and so does a Report whose hand-over raced with the end: each
// report left is taken, and told, exactly once.
func (st *Stream) drainIn() {
	for {
		select {
		case r := <-st.in:
			tell([]chan<- bool{r.fate}, false)
		default:
			return
		}
	}
}

// tell tells each report of fates its fate (a nil channel: nobody
// waits). Each channel is told once: it has room for the one value.
func tell(fates []chan<- bool, kept bool) {
	for _, f := range fates {
		if f != nil {
			f <- kept
		}
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
//     full chunk goes to the poster (waiting while all of its slots are
//     taken), a partial one at each ChunkEvery tick when no chunk is in
//     flight;
//   - poster (post): numbers the chunks (seq 1, 2, ...) and posts each on
//     its own goroutine, up to knobs.inFlight (InFlight, default 8) at
//     once, each resent with the identical bytes until a definitive
//     answer; it applies their verdicts to the helper strictly in seq
//     order (a reorder buffer: the aggregator folds them in that order,
//     and the helper's verdicts follow its Add order), and frees a slot
//     when a chunk's verdicts are applied.
//
// Bound: past st.in, the stream holds at most window + (1 + inFlight) ×
// ChunkReports reports: window (max(ChunkReports, 2 × workers): 8 at the
// defaults on 2 cores) being prepared or waiting for an earlier one, one
// chunk built and waiting for a slot, and inFlight chunks posted (their
// leader shares, in the encoded frame only, until the post returns; their
// prep states until the verdicts): 80 reports at the defaults (InFlight
// 8), about 86 MB of sealed leader shares at d = 7850 (1.07 MB each).
// With -prep-jobs (Config.PrepareApart) the workers are replaced by
// batchApart and window is (1 + apartBatches) × ChunkReports, 40 at the
// defaults (up to 4 batches at the replicas and one filling): 112 reports,
// about 120 MB. Before the stream, its buffer (streamBuffer) and the
// relay's large-frame slots (relay/internal/intake) hold at most 32 more.
//
// The close waits for every batch at the replicas: a replica that dies
// holding a batch's lease delays it by the lease (-prep-lease, 10 s), the
// owner leasing the batch again once it expires.
//
// A definitive answer that ends the round (an invalid chunk, a refused
// one, verdicts that contradict the helper), a helper failure or the
// relay's stop ends every stage: nothing more is posted, the reports
// still in the pipeline are discarded with the round.
func (rl *Relay) runStream(ctx context.Context, st *Stream) {
	defer func() {
		close(st.done)
		st.drainIn()
	}()
	k := rl.knobs()
	if k.serial {
		rl.runStreamSerial(ctx, st, k)
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
	chunks := make(chan saChunk) // unbuffered: a chunk is handed over only to a poster with a free slot
	var inflight atomic.Int32    // chunks posted and not yet applied (the assembler's partial chunks wait for 0)
	var workers, stages sync.WaitGroup
	if rl.cfg.PrepareApart != nil {
		workers.Go(func() { rl.batchApart(ctx, st, k, jobs, results, ended, end) })
	} else {
		for range k.workers {
			workers.Go(func() {
				for j := range jobs {
					p, ok := st.h.Prepare(j.rep.Helper)
					rl.cfg.Metrics.SecAggHere.Add(1)
					results <- prepDone{prepJob: j, p: p, ok: ok}
					// Milliseconds of PINE arithmetic each: let the
					// assembler, the poster and the connections' readers
					// run between them rather than wait for preemption.
					runtime.Gosched()
				}
			})
		}
	}
	stages.Go(func() {
		workers.Wait()
		close(results)
	})
	stages.Go(func() { rl.assemble(st, k, results, slots, chunks, &inflight, ended, end) })
	stages.Go(func() { rl.post(ctx, st, k, chunks, &inflight, ended, end) })

	expect := ^uint32(0)
	var drained <-chan time.Time
	var seq uint64
	held := false // a slot for the next report
intake:
	for st.received < expect {
		var in <-chan streamReport
		var slot <-chan struct{}
		if held {
			in = st.in
		} else {
			slot = slots
		}
		select {
		case <-slot:
			held = true
		case r := <-in:
			held = false
			st.received++
			rl.Receipts.Received(st.num, wire.ReportReceipt(r.rep.Helper)) // GET /api/receipt
			jobs <- prepJob{seq: seq, rep: r.rep, fate: r.fate}            // never waits: at most window jobs hold slots
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
			end(aggclient.ErrStopped)
			break intake
		}
	}
	close(jobs)
	stages.Wait()
}

// batchApart is runStream's preparation with -prep-jobs, in place of its
// workers: it takes the numbered reports as they come and hands them in
// batches to the relay's replicas (Config.PrepareApart), up to
// apartBatches at once. A batch is cut when it holds ChunkReports, or
// Knobs.BatchLinger after its first report, or when the reports end: full
// batches when the crowd is large or the replicas fall behind. A batch
// whose job fails (the queue or PostgreSQL failing, a replica of another
// version or key, no result in time) is prepared here, report by report;
// either way each report gives exactly one prepDone. Once the round has
// ended early (ended; a job cut short by the relay's stop ends it, with
// end), nothing more is prepared: the reports' prepDone are empty, and
// the assembler discards them.
func (rl *Relay) batchApart(ctx context.Context, st *Stream, k streamKnobs, jobs <-chan prepJob, results chan<- prepDone,
	ended <-chan struct{}, end func(error)) {
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, apartBatches)
	var batch []prepJob
	flush := func() {
		b := batch
		batch = nil
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			rl.prepareBatch(ctx, st, b, results, ended, end)
		})
	}
	linger := time.NewTimer(0)
	defer linger.Stop()
	for j := range jobs {
		batch = append(batch, j)
		linger.Reset(k.linger)
	fill:
		for len(batch) < k.size {
			select {
			case j, ok := <-jobs:
				if !ok {
					break fill
				}
				batch = append(batch, j)
			case <-linger.C:
				break fill
			}
		}
		flush()
	}
}

// prepareBatch prepares one batch apart, or here if that fails, and
// hands each report's preparation to the assembler.
func (rl *Relay) prepareBatch(ctx context.Context, st *Stream, b []prepJob, results chan<- prepDone,
	ended <-chan struct{}, end func(error)) {
	// discarded: once the round has ended, the assembler discards every
	// prepDone (assemble), so none is prepared.
	discarded := func() bool {
		select {
		case <-ended:
		default:
			return false
		}
		for _, j := range b {
			results <- prepDone{prepJob: j}
		}
		return true
	}
	if discarded() {
		return
	}
	sealed := make([][]byte, len(b))
	for i := range b {
		sealed[i] = b[i].rep.Helper
	}
	preps, err := rl.cfg.PrepareApart(ctx, Apart{Num: st.num, Params: st.params, VerifyKey: st.vk, Round: st.sr}, sealed)
	if err == nil && len(preps) != len(b) {
		err = fmt.Errorf("%d preparations for a batch of %d", len(preps), len(b))
	}
	if err != nil && ctx.Err() != nil {
		end(aggclient.ErrStopped) // the relay stops: so does the round, as at the intake
	}
	if err != nil {
		if discarded() {
			return
		}
		rl.roundLog(st.num).Warn("a batch prepared here: its job failed", "reports", len(b), "err", err)
		for _, j := range b {
			p, ok := st.h.Prepare(j.rep.Helper)
			rl.cfg.Metrics.SecAggHere.Add(1)
			results <- prepDone{prepJob: j, p: p, ok: ok}
		}
		return
	}
	for i, j := range b {
		rl.cfg.Metrics.SecAggApart.Add(1)
		if preps[i] == nil {
			results <- prepDone{prepJob: j}
			continue
		}
		results <- prepDone{prepJob: j, p: helper.PreparedApart(*preps[i]), ok: true}
	}
}

// prepJob is a report numbered in arrival order, with its fate (Report);
// prepDone is it prepared.
type prepJob struct {
	seq  uint64
	rep  round.SharesReport
	fate chan<- bool
}

type prepDone struct {
	prepJob
	p  helper.Prepared
	ok bool // the helper share opened
}

// saChunk is one chunk's reports, in arrival order: their sealed leader
// and helper shares, 'P' entries, receipts (classroom.go) and fates.
type saChunk struct {
	leaders  [][]byte
	helpers  [][]byte
	entries  []secagg.Entry
	receipts [][32]byte
	fates    []chan<- bool
}

// assemble is runStream's assembler: it takes the prepared reports in
// arrival order, adds them to the helper and builds the chunks it hands
// to the poster (chunks, closed when results is). After ended it only
// drains results.
func (rl *Relay) assemble(st *Stream, k streamKnobs, results <-chan prepDone, slots chan<- struct{},
	chunks chan<- saChunk, inflight *atomic.Int32, ended <-chan struct{}, end func(error)) {
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
			tell(cur.fates, false)
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
				tell(cur.fates, false) // the round ended with them unsent (none after hand)
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
					tell([]chan<- bool{d.fate}, false)
					continue
				}
				if !d.ok {
					st.unopened++
					tell([]chan<- bool{d.fate}, true) // rejected, and counted (DropUnopened)
					continue
				}
				st.helperMu.Lock()
				e, err := st.h.Add(d.p)
				st.helperMu.Unlock()
				if err != nil {
					end(&endError{SecAggFailed, err.Error()})
					tell([]chan<- bool{d.fate}, false)
					continue
				}
				cur.leaders, cur.entries = append(cur.leaders, d.rep.Leader), append(cur.entries, e)
				cur.helpers, cur.fates = append(cur.helpers, d.rep.Helper), append(cur.fates, d.fate)
				cur.receipts = append(cur.receipts, wire.ReportReceipt(d.rep.Helper))
				if len(cur.leaders) >= k.size {
					hand()
				}
			}
		case <-tick.C:
			if len(cur.leaders) == 0 || over() || inflight.Load() > 0 {
				continue // nothing, or the aggregator has work: keep filling this one
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
func (rl *Relay) runStreamSerial(ctx context.Context, st *Stream, k streamKnobs) {
	size, every, drain := k.size, k.every, k.drain
	var leaders [][]byte
	var entries []secagg.Entry
	var receipts [][32]byte // GET /api/receipt: the chunk's reports' receipts, in order
	flush := func() bool {
		if len(leaders) == 0 {
			return true
		}
		err := rl.postChunk(ctx, st, leaders, entries, receipts)
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
		case r := <-st.in:
			rep := r.rep
			// The serial stream is BenchmarkSecAggStream's comparison only
			// (Knobs.Serial, never a flag): it writes no chunk record and
			// tells every fate at once, so it is not crash-safe.
			tell([]chan<- bool{r.fate}, true)
			st.received++
			rl.Receipts.Received(st.num, wire.ReportReceipt(rep.Helper)) // GET /api/receipt
			p, ok := st.h.Prepare(rep.Helper)
			rl.cfg.Metrics.SecAggHere.Add(1)
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
			receipts = append(receipts, wire.ReportReceipt(rep.Helper))
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
			st.end = aggclient.ErrStopped
			return
		}
	}
	flush()
}

// post is runStream's poster: it takes the assembler's chunks (chunks,
// closed when the assembler ends) while one of k.inFlight slots is free,
// posts each on its own goroutine (postFrame) and applies the answers'
// verdicts in seq order (applyVerdicts), freeing the chunk's slot. The
// first error ends the round (end): a definitive answer other than ok,
// verdicts that contradict the helper, the relay's stop; the posts still
// in flight are then cancelled and nothing more is applied. It returns
// once every chunk posted is answered or cancelled, so the close is
// posted only after every chunk's answer.
func (rl *Relay) post(ctx context.Context, st *Stream, k streamKnobs, chunks <-chan saChunk, inflight *atomic.Int32,
	ended <-chan struct{}, end func(error)) {
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		seq      uint32
		n        int
		receipts [][32]byte
		fates    []chan<- bool
		reply    []byte
		err      error
	}
	answers := make(chan answer, k.inFlight) // never waits: at most inFlight posts
	waiting := make(map[uint32]answer, k.inFlight)
	var posts sync.WaitGroup
	defer posts.Wait()
	seq, next := uint32(0), uint32(1) // the last chunk numbered; the next whose verdicts apply
	busy := 0
	in, stop := chunks, ended
	for in != nil || busy > 0 {
		var take <-chan saChunk
		if busy < k.inFlight {
			take = in
		}
		select {
		case c, ok := <-take:
			if !ok {
				in = nil
				continue
			}
			select {
			case <-ended: // drained: nothing more is posted
				tell(c.fates, false)
				continue
			default:
			}
			seq++
			busy++
			inflight.Add(1)
			a := answer{seq: seq, n: len(c.leaders), receipts: c.receipts, fates: c.fates}
			posts.Go(func() {
				// Persisted before it is posted: a relay that takes over
				// finds every chunk the aggregator may have folded.
				err := rl.persistChunk(pctx, st, a.seq, c.helpers)
				var frame []byte
				if err == nil {
					frame, err = rl.encodeChunk(st, a.seq, c.leaders, c.entries)
				}
				c = saChunk{} // the frame holds the leader shares now
				if err == nil {
					a.reply, err = rl.postFrame(pctx, st, frame, a.n)
				}
				a.err = err
				answers <- a
			})
		case a := <-answers:
			if a.err != nil {
				end(a.err) // the first error ends the round; the others follow it
				cancel()
			}
			waiting[a.seq] = a
			for {
				a, ok := waiting[next]
				if !ok {
					break
				}
				delete(waiting, next)
				next++
				busy--
				inflight.Add(-1)
				select {
				case <-ended:
					tell(a.fates, false)
					continue
				default:
				}
				if err := rl.applyVerdicts(st, a.reply, a.n, a.receipts); err != nil {
					end(err)
					cancel()
					tell(a.fates, false)
					continue
				}
				tell(a.fates, true)
			}
		case <-stop: // another stage ended the round: the posts in flight stop
			cancel()
			stop = nil
		}
	}
}

// postChunk posts one chunk (the next seq) and applies its verdicts
// (runStreamSerial).
func (rl *Relay) postChunk(ctx context.Context, st *Stream, leaders [][]byte, entries []secagg.Entry, receipts [][32]byte) error {
	frame, err := rl.encodeChunk(st, st.chunks+1, leaders, entries)
	if err != nil {
		return err
	}
	reply, err := rl.postFrame(ctx, st, frame, len(leaders))
	if err != nil {
		return err
	}
	return rl.applyVerdicts(st, reply, len(leaders), receipts)
}

// encodeChunk encodes chunk seq of the stream's round.
func (rl *Relay) encodeChunk(st *Stream, seq uint32, leaders [][]byte, entries []secagg.Entry) ([]byte, error) {
	prep, err := st.sr.MarshalPrep(entries)
	if err != nil {
		return nil, &endError{SecAggFailed, "encoding the prep shares: " + err.Error()}
	}
	frame, err := (&wire.SecAggChunk{Round: st.num, Seq: seq, Leader: leaders, Prep: prep}).MarshalBinary()
	if err != nil {
		return nil, &endError{SecAggFailed, "encoding the chunk: " + err.Error()}
	}
	return frame, nil
}

// postFrame posts a chunk frame of n reports until a definitive answer
// (Poster: the identical bytes each time) and returns its SecAggPrep
// reply; any other definitive answer is the round's end.
func (rl *Relay) postFrame(ctx context.Context, st *Stream, frame []byte, n int) ([]byte, error) {
	limit := 1<<12 + int64(n)<<10 // the 'M' message: tens of bytes per report
	out, reply, why, err := rl.cfg.Post.Post(ctx, st.num, ChunkPath, frame, limit, func(b []byte) error {
		p, err := wire.ParseSecAggPrep(b)
		if err == nil && p.Round != st.num {
			err = fmt.Errorf("prep reply for round %d", p.Round)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if out != outbox.Accepted && out != outbox.Duplicate {
		return nil, &endError{out.String(), why}
	}
	return reply, nil
}

// applyVerdicts applies the verdicts of the next chunk (n reports, in the
// order the helper added them) to the helper, counts the rejections,
// includes the accepted reports' receipts, and counts the chunk.
func (rl *Relay) applyVerdicts(st *Stream, reply []byte, n int, receipts [][32]byte) error {
	p, err := wire.ParseSecAggPrep(reply) // checked by postFrame
	if err != nil || p.Status != wire.BatchStatusOK {
		return &endError{SecAggInvalid, "the aggregator found a chunk invalid"}
	}
	ms, err := st.sr.ParseVerdicts(p.Msg)
	if err == nil && len(ms) != n {
		err = fmt.Errorf("%d verdicts for %d reports: %w", len(ms), n, secagg.ErrProtocol)
	}
	if err == nil {
		st.helperMu.Lock()
		err = st.h.Verdicts(ms)
		st.helperMu.Unlock()
	}
	if err != nil {
		// Not the error itself: it may quote the reports' nonces.
		rl.roundLog(st.num).Error("the aggregator's verdicts contradict the helper",
			"protocol_violation", errors.Is(err, secagg.ErrProtocol))
		return &endError{SecAggFailed, "helper verdicts failed"}
	}
	for i, e := range ms {
		if e.Reason != secagg.Accepted {
			rl.cfg.Metrics.SecAggReject(strings.ReplaceAll(e.Reason.String(), " ", "_"))
		} else if i < len(receipts) {
			rl.Receipts.Include(st.num, receipts[i]) // GET /api/receipt
		}
	}
	st.chunks++
	st.sent += uint32(n)
	rl.cfg.Metrics.SecAggAnswered.Add(uint64(n))
	return nil
}

// Take removes round num's stream from the relay and returns it (nil:
// none): its caller then ends it (Stream.End) in place of Close.
func (rl *Relay) Take(num uint64) *Stream {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	st := rl.streams[num]
	delete(rl.streams, num)
	return st
}

// Feed hands the stream a report directly (Report looks its stream up),
// nobody waiting for its fate.
func (st *Stream) Feed(rep round.SharesReport) { st.in <- streamReport{rep: rep} }

// End tells the stream the round machine accepted n reports, and waits
// for it to end: it has received them all, or waited DrainBound for the
// missing ones, or the round ended early.
func (st *Stream) End(n uint32) Result {
	st.closeC <- n
	<-st.done
	return st.Result()
}

// Result is what a stream did, read after it ended.
type Result struct {
	Received, Sent, Chunks uint32
	Unopened, Late         int
	Accepted               int   // reports in the helper's running aggregate
	End, SetupErr          error // the round ended early; the helper could not be built
}

// Result returns what the stream did; only after it ended.
func (st *Stream) Result() Result {
	r := Result{Received: st.received, Sent: st.sent, Chunks: st.chunks, Unopened: st.unopened, Late: st.late,
		End: st.end, SetupErr: st.setupErr}
	if st.h != nil {
		r.Accepted = st.h.Accepted()
	}
	return r
}
