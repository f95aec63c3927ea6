package sumrelay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/blanket-fl/blanket/relay/internal/aggclient"
	"github.com/blanket-fl/blanket/relay/internal/helper"
	"github.com/blanket-fl/blanket/relay/internal/metrics"
	"github.com/blanket-fl/blanket/relay/internal/outbox"
	"github.com/blanket-fl/blanket/relay/internal/round"
	"github.com/blanket-fl/blanket/shared/ledger"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/secagg"
	"github.com/blanket-fl/blanket/shared/wire"
)

// Close ends secure-summation round c at the relay: it hands the stream
// the round machine's count of accepted reports, waits for the stream to
// end, and then aborts the round (the relay's floor, a stream that ended
// early, a helper that failed) or persists its close and posts it
// (closeRound). Nothing is posted that is not persisted first.
func (rl *Relay) Close(ctx context.Context, c *round.Closed) {
	ob := rl.cfg.Store
	rep := metrics.ReportOf(c)
	rl.mu.Lock()
	st := rl.streams[c.Num]
	delete(rl.streams, c.Num)
	rl.mu.Unlock()
	if ob.Has(c.Num, outbox.Batch) || ob.Has(c.Num, outbox.Abort) || ob.Has(c.Num, outbox.SecAggClose) {
		rl.roundLog(c.Num).Error("round already has a persisted outcome; not closing it again")
		return
	}
	abort := func(reason uint8, why string) {
		rl.Receipts.Settle(c.Num, "the round was cancelled: "+why) // GET /api/receipt
		if e, ok := rl.cfg.Abort(c, rep, reason, why); ok {
			rl.dropChunks(c.Num)
			rl.cfg.Enqueue(e)
		}
	}
	if st == nil {
		rl.roundLog(c.Num).Error("secure-summation round without a stream")
		abort(wire.AbortOverflow, "batch construction failed")
		return
	}
	st.closeC <- c.Reports
	<-st.done
	if f := st.firstAt.Load(); f != 0 {
		rep.FirstReportAt = time.Unix(0, f)
	}
	rep.DrainedAt = time.Now()
	if st.unopened > 0 {
		rl.cfg.Metrics.SecAggDrop(DropUnopened, st.unopened)
		rl.roundLog(c.Num).Warn("reports dropped: their helper share does not open", "dropped", st.unopened)
	}
	if st.late > 0 {
		rl.cfg.Metrics.SecAggDrop(DropLate, st.late)
		rl.roundLog(c.Num).Warn("reports dropped: not prepared within the drain bound after the close", "dropped", st.late)
	}
	floorErr := error(nil)
	if st.h != nil {
		floorErr = st.h.CheckFloor()
	}
	step := decide(c, st.Result(), floorErr, rl.cfg.Floor)
	switch {
	case step.setup:
		rl.roundLog(c.Num).Error("cannot prepare the secure-summation round", "err", st.setupErr)
	case step.floor:
		rl.roundLog(c.Num).Warn("secure-summation round refused by the relay's floor", "reason", step.why,
			"reports", st.sent, "accepted", st.h.Accepted())
	}
	switch {
	case step.outcome != "":
		rl.end(c.Num, rep, step.outcome, step.why)
		return
	case step.stopped != nil:
		rl.stopped(c.Num, rep, step.stopped)
		return
	}
	if !step.setup {
		c.Reports, rep.Reports = st.sent, st.sent // the reports the aggregator has
	}
	if step.close == nil {
		abort(step.reason, step.why)
		return
	}
	cl := step.close
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
		err = rl.putResume(c.Num, resumeClose{Close: frame, Aggregate: agg, Params: pj})
	}
	if err != nil {
		rl.roundLog(c.Num).Error("cannot persist the secure-summation close", "err", err)
		abort(wire.AbortOverflow, "batch persistence failed")
		return
	}
	rl.cfg.Metrics.SecAggCloses.Add(1)
	rl.dropChunks(c.Num) // the persisted close holds the running aggregate now
	ob.Remove(c.Num, outbox.OpenRound)
	rep.Outcome = "pending"
	rl.cfg.Metrics.SetLast(rep)
	rl.roundLog(c.Num).Info("secure-summation round forwarded; closing it", "reports", st.sent, "chunks", st.chunks,
		"accepted", st.h.Accepted())
	rl.postClose(ctx, c.Num, rep, st.h, frame, c.Params)
}

// closeStep is what Close does with a round whose stream ended (decide):
// end it with outcome (the aggregator ended it early), leave it to the next
// start (stopped: no definitive answer), persist and post close, or else
// abort it (reason, why).
type closeStep struct {
	outcome, why string
	stopped      error
	close        *wire.SecAggClose
	reason       uint8
	setup, floor bool // the abort is the helper's setup failing, the relay's floor
}

// decide is Close's decision over explicit state: closed round c, what its
// stream did (r), and the relay's floor on the helper's verdicts
// (floorErr: helper.CheckFloor). It reads and writes nothing. Only a round
// whose stream ended normally, with at least the announced minimum batch
// sent and the relay's floor met, gets a close; its counts are the
// stream's (the reports the aggregator has), never the round machine's.
func decide(c *round.Closed, r Result, floorErr error, f roundspec.Floor) closeStep {
	var ee *endError
	switch {
	case r.SetupErr != nil:
		return closeStep{reason: wire.AbortOverflow, why: "batch construction failed", setup: true}
	case errors.As(r.End, &ee):
		return closeStep{outcome: ee.outcome, why: ee.why}
	case r.End != nil:
		return closeStep{stopped: r.End}
	case r.Sent < c.Params.MinBatch:
		return closeStep{reason: wire.AbortBelowMinBatch, why: "below minimum batch after dropping unopened or late reports"}
	case floorErr != nil:
		// The relay's own floor, before anything is charged: an aggregator
		// whose verdicts cut the round below the relay's minimum batch, or
		// rejected most of its reports, gets an abort instead of a close.
		reason, why := floorAbort(floorErr, c.Params.MinBatch, f)
		return closeStep{reason: reason, why: why, floor: true}
	}
	return closeStep{close: &wire.SecAggClose{Round: c.Num, Chunks: r.Chunks, Reports: r.Sent, Accepted: uint32(r.Accepted),
		CheckedIn: c.CheckedIn, Population: c.Population}}
}

// resumeClose is outbox.SecAggClose's content.
type resumeClose struct {
	Close     []byte `json:"close"`     // the SecAggClose frame
	Aggregate []byte `json:"aggregate"` // helper.Helper.MarshalAggregate
	Params    []byte `json:"params"`    // the round's wire.Params (JSON)
}

func (rl *Relay) putResume(num uint64, r resumeClose) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return rl.cfg.Store.Put(num, outbox.SecAggClose, b)
}

// postClose posts the persisted close, and on a charge releases and
// posts the aggregate share.
func (rl *Relay) postClose(ctx context.Context, num uint64, rep metrics.RoundReport, h *helper.Helper, frame []byte, params wire.Params) {
	out, reply, why, err := rl.cfg.Post.Post(ctx, num, ClosePath, frame, wire.SecAggChargedSize, func(b []byte) error {
		c, err := wire.ParseSecAggCharged(b)
		if err == nil && c.Round != num {
			err = fmt.Errorf("charged reply for round %d", c.Round)
		}
		return err
	})
	if err != nil {
		rl.stopped(num, rep, err)
		return
	}
	if out != outbox.Accepted && out != outbox.Duplicate {
		rl.end(num, rep, out.String(), why)
		return
	}
	rep.ChargedAt = time.Now()
	ch, err := wire.ParseSecAggCharged(reply) // checked by Post
	if err != nil {
		rl.end(num, rep, SecAggInvalid, err.Error())
		return
	}
	switch ch.Status {
	case wire.BatchStatusRefused:
		rl.end(num, rep, SecAggRefused, "the aggregator's ledger refused the round")
		return
	case wire.BatchStatusInvalid:
		rl.end(num, rep, SecAggInvalid, "the aggregator found the round invalid")
		return
	}
	// Released once, noised, only for a charge of exactly the helper's
	// accepted reports and at least the minimum batch (helper.Release).
	var share []byte
	if h.Awaiting() == 0 && int(ch.Accepted) == h.Accepted() { // else Release refuses: nothing to charge
		err = rl.cfg.Charge(ctx, num, params, int(ch.Accepted)) // the relay's own noise ledger first
	}
	if errors.Is(err, aggclient.ErrStopped) {
		rl.stopped(num, rep, err) // the persisted close stays: the next start resumes it
		return
	}
	if err == nil {
		share, err = h.Release(int(ch.Accepted), rl.cfg.NewSource())
	}
	var agg []byte
	if err == nil {
		agg, err = (&wire.SecAggAggregate{Round: num, Share: share}).MarshalBinary()
	}
	if err == nil {
		err = rl.cfg.Store.Put(num, outbox.SecAggAggregate, agg)
	}
	if err != nil {
		rl.roundLog(num).Error("no aggregate share released", "err", err,
			"below_min_batch", errors.Is(err, helper.ErrBelowMinBatch), "count_mismatch", errors.Is(err, helper.ErrCountMismatch),
			"too_many_rejected", errors.Is(err, helper.ErrTooManyRejected))
		rl.noRelease(num, rep, noReleaseReason(err, params.MinBatch, rl.cfg.Floor))
		rl.end(num, rep, SecAggFailed, "aggregate share refused: "+err.Error())
		return
	}
	rl.cfg.Metrics.SecAggShares.Add(1)
	rl.cfg.Store.Remove(num, outbox.SecAggClose)
	rl.roundLog(num).Info("secure-summation aggregate share noised", "aggregated", ch.Accepted, "bytes", len(agg))
	rl.postAggregate(ctx, num, rep, agg, int(ch.Accepted))
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
// releases nothing for (noRelease).
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

// noRelease tells the aggregator, through the outbox (persisted,
// retried), that the round it charged gets no aggregate share, so that it
// records the round lost now and says why (reason: wire.AbortNoRelease,
// or the more precise AbortRelayBudget, AbortRelayFloor, AbortRejected),
// rather than after its grace. The abort carries the round's counts only:
// nothing about any value.
func (rl *Relay) noRelease(num uint64, rep metrics.RoundReport, reason uint8) {
	a := wire.Abort{Round: num, Reason: reason, Reports: rep.Reports, CheckedIn: rep.CheckedIn, Population: rep.Population}
	b, err := a.MarshalBinary()
	if err == nil {
		err = rl.cfg.Store.Put(num, outbox.Abort, b)
	}
	if err != nil {
		rl.roundLog(num).Error("cannot persist the no-release abort; the aggregator will wait out its grace", "err", err)
		return
	}
	rl.cfg.Enqueue(outbox.Entry{Round: num, Kind: outbox.Abort})
}

// postAggregate posts the persisted noised aggregate share.
func (rl *Relay) postAggregate(ctx context.Context, num uint64, rep metrics.RoundReport, frame []byte, accepted int) {
	out, _, why, err := rl.cfg.Post.Post(ctx, num, AggregatePath, frame, 4096, nil)
	if err != nil {
		rl.stopped(num, rep, err)
		return
	}
	if out != outbox.Accepted && out != outbox.Duplicate {
		rl.end(num, rep, out.String(), why)
		return
	}
	rl.cfg.Metrics.SecAggAggregated.Add(uint64(accepted))
	rl.cfg.Metrics.RoundsForwarded.Add(1)
	rl.end(num, rep, SecAggForwarded, out.String())
}

// Resume finishes, after a restart, a round whose close or aggregate
// share was persisted (outbox.Recover found it): the persisted bytes are
// posted as they are, and a close's helper is restored from its
// persisted running aggregate (never from the reports, gone by then).
func (rl *Relay) Resume(ctx context.Context, e outbox.Entry) {
	rep := metrics.RoundReport{Round: e.Round, Outcome: "pending"}
	b, err := rl.cfg.Store.Get(e.Round, e.Kind)
	if err != nil {
		rl.roundLog(e.Round).Error("cannot read a persisted secure-summation step", "err", err)
		return
	}
	rl.roundLog(e.Round).Info("resuming a secure-summation round after a restart", "step", string(e.Kind))
	if e.Kind == outbox.SecAggAggregate {
		if _, err := wire.ParseSecAggAggregate(b); err != nil {
			rl.end(e.Round, rep, SecAggFailed, "persisted aggregate share unreadable")
			return
		}
		rl.postAggregate(ctx, e.Round, rep, b, 0)
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
		h, err = rl.restoreHelper(e.Round, rc, int(cl.Reports))
	}
	if err != nil {
		rl.roundLog(e.Round).Error("persisted secure-summation close does not restore", "err", err)
		rl.end(e.Round, rep, SecAggFailed, "persisted close unreadable")
		return
	}
	rep.Reports, rep.CheckedIn, rep.Population = cl.Reports, cl.CheckedIn, cl.Population
	var p wire.Params
	if err := json.Unmarshal(rc.Params, &p); err != nil { // restoreHelper parsed it
		rl.end(e.Round, rep, SecAggFailed, "persisted close unreadable")
		return
	}
	rl.postClose(ctx, e.Round, rep, h, rc.Close, p)
}

// restoreHelper rebuilds a helper whose every report has its verdict
// from a persisted close (its round's parameters are those persisted;
// reports is the close's count of reports sent, so that the relay's floor
// still sees the rejected ones).
func (rl *Relay) restoreHelper(num uint64, rc resumeClose, reports int) (*helper.Helper, error) {
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
	vk, err := secagg.DeriveVerifyKey([]byte(rl.cfg.Token), num)
	if err != nil {
		return nil, err
	}
	eng, err := secagg.NewEngine(sr, false, vk)
	if err != nil {
		return nil, err
	}
	return helper.Restore(sr, eng, rl.cfg.Open, int(p.MinBatch), rl.cfg.Floor, rc.Aggregate, reports)
}

// end records how a secure-summation round ended and removes its
// persisted state: nothing more is owed for it.
//
// Privacy: the removals stop at the first that fails, so that the close is
// never left without the aggregate share beside it (the order removes the
// close first). A lone close is resumed at the next start (Resume) and
// would be noised again: a second, differently noised share of a sum whose
// first share was sent would let the aggregator average the relay's noise
// down (docs/secagg.md, "Crash safety"). What remains after a failure is
// the close with the share (the share is resent byte for byte, the close
// deleted: outbox.Recover), the share alone, or the open marker with them.
func (rl *Relay) end(num uint64, rep metrics.RoundReport, outcome, why string) {
	removed := true
	for _, k := range []outbox.Kind{outbox.OpenRound, outbox.SecAggClose, outbox.SecAggAggregate} {
		if err := rl.cfg.Store.Remove(num, k); err != nil {
			rl.roundLog(num).Error("cannot remove the round's state; the rest stays for the next start", "kind", string(k), "err", err)
			removed = false
			break
		}
	}
	if removed {
		rl.dropChunks(num)
	}
	rl.cfg.Metrics.SecAggRound(outcome)
	if outcome == SecAggForwarded { // GET /api/receipt: what each volunteer may ask of its own report
		rl.Receipts.SettleSum(num)
	} else {
		rl.Receipts.Settle(num, ReceiptWhy(outcome))
	}
	rep.Outcome, rep.Reason, rep.EndedAt = outcome, why, time.Now()
	rl.cfg.Metrics.SetLast(rep)
	if outcome == SecAggForwarded {
		rl.roundLog(num).Info("secure-summation round done", "outcome", outcome, "reports", rep.Reports)
		return
	}
	rl.roundLog(num).Warn("secure-summation round ended without an aggregate", "outcome", outcome, "detail", why)
}

// stopped handles a conversation cut without a definitive answer.
func (rl *Relay) stopped(num uint64, rep metrics.RoundReport, err error) {
	if errors.Is(err, aggclient.ErrSuperseded) {
		rl.end(num, rep, SecAggSuperseded, err.Error())
		return
	}
	// What is persisted stays: the next start aborts the round (open
	// marker) or resumes it (close, aggregate share).
	rl.roundLog(num).Warn("relay stopped during a secure-summation round; the next start aborts or resumes it")
}
