package rounds

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/accounting"
	"github.com/blanket-fl/blanket/aggregator/internal/analysis"
	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/aggregator/internal/outcome"
	"github.com/blanket-fl/blanket/shared/ledger"
	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/wire"
)

// Reasons of rejected batches besides analysis'm.
const (
	reasonNotBatch       = "not a batch frame"
	reasonSecAgg         = "secure summation round"
	reasonInvalidRelease = "invalid release"
)

// countRejected counts a batch rejected as invalid.
func (m *Machine) countRejected(reason string) {
	m.mu.Lock()
	if m.ctl.Rejected == nil {
		m.ctl.Rejected = map[string]int{}
	}
	m.ctl.Rejected[reason]++
	m.mu.Unlock()
}

// HandleBatch processes one Batch frame and returns the reply (see
// BatchIntake, which also returns the outcome).
func (m *Machine) HandleBatch(frame []byte) (wire.BatchReply, error) {
	reply, _, err := m.BatchIntake(frame)
	return reply, err
}

// BatchIntake processes one Batch frame and returns the reply and its
// outcome. It is the body of POST /v1/batch after authentication; err is
// non-nil only for internal failures (the ledger could not record the
// charge; nothing was decrypted), answered 500 so the relay retries. The
// reply's Round is 0 only when the frame is not a batch frame of a round.
func (m *Machine) BatchIntake(frame []byte) (wire.BatchReply, outcome.Intake, error) {
	digest := sha256.Sum256(frame)
	dig := hex.EncodeToString(digest[:])
	m.procMu.Lock()
	defer m.procMu.Unlock()

	t, round, err := wire.PeekRound(frame)
	if err != nil || t != wire.TypeBatch || round < 1 {
		m.log.Warn("batch rejected: not a batch frame", "bytes", len(frame))
		m.countRejected(reasonNotBatch)
		return wire.BatchReply{Status: wire.BatchStatusInvalid}, outcome.Invalid, nil
	}
	reply := wire.BatchReply{Round: round}
	if round > uint64(m.st.Round+1) || int(round) <= 0 {
		reply.Status = wire.BatchStatusInvalid
		m.log.Warn("batch ignored: a round never announced", "round", round, "last", m.st.Round)
		return reply, outcome.Obsolete, nil
	}
	r := int(round)
	if rec := m.record(r); rec != nil {
		if rec.Status == checkpoint.StatusLost && rec.Reply == nil && rec.Digest == dig {
			return m.reapply(frame, round, dig)
		}
		if rec.Digest == dig && rec.Reply != nil {
			m.log.Info("identical batch re-sent; answering with the stored reply", "round", r)
			return wire.BatchReply{Round: round, Accepted: uint32(rec.Accepted), RejectedOpen: uint32(rec.RejectedOpen),
				RejectedValue: uint32(rec.RejectedValue), Status: *rec.Reply}, outcome.Duplicate, nil
		}
		m.log.Warn("batch ignored: the round is already closed", "round", r, "status", rec.Status)
		reply.Status = wire.BatchStatusDuplicate
		return reply, outcome.Obsolete, nil
	}
	if m.st.Open == nil || m.st.Open.Round != r {
		// A round below the last finished one with no record cannot
		// happen; a round not open is not accepted.
		reply.Status = wire.BatchStatusInvalid
		m.log.Warn("batch ignored: round not open", "round", r)
		return reply, outcome.Obsolete, nil
	}
	rc := m.Current()
	if rc.Proto.SecAgg() {
		reply.Status = wire.BatchStatusInvalid
		m.log.Warn("batch rejected: the round is secure summation (POST /v1/secagg/chunk)", "round", r)
		m.countRejected(reasonSecAgg)
		return reply, outcome.Invalid, nil
	}
	start := time.Now()
	var rec checkpoint.RoundRecord
	// charge records which batch is being charged, durably, before
	// charging it: a restart between the charge and the checkpoint below
	// then knows the charged batch's digest, and an identical re-send is
	// applied without charging again (reapply) instead of leaving the
	// round lost. Only then does the ledger charge it: nothing of this
	// round is opened, let alone published, unless the ledger has durably
	// recorded it (analysis.Analyze calls charge before opening).
	var markerErr error // recording the batch failed: nothing charged
	charge := func(rel privacy.Release) error {
		if markerErr = m.commit(func(c *checkpoint.State) { c.Charging = &checkpoint.Charging{Round: r, Digest: dig} }); markerErr != nil {
			return markerErr
		}
		return m.ledger.Charge(rel)
	}
	res, err := analysis.Analyze(m.key, charge, rc.Proto, rc.Params, round, frame, m.opt.Workers)
	if b := res.Batch; b != nil {
		rec = checkpoint.RoundRecord{
			Round: r, AnnouncedAt: m.st.Open.AnnouncedAt, Deadline: m.st.Open.Deadline, Digest: dig,
			N: int(b.Reports), NP: int(b.NP), CheckedIn: int(b.CheckedIn), Population: int(b.Population), Messages: len(b.Messages),
		}
		if b.Population > 0 {
			rec.CheckInRate = float64(b.CheckedIn) / float64(b.Population)
		}
	}
	var rej *analysis.Rejected
	switch {
	case errors.As(err, &rej):
		m.log.Warn("batch rejected", "round", r, "reason", rej.Reason, "err", rej.Err)
		m.countRejected(rej.Reason)
		reply.Status = wire.BatchStatusInvalid
		return reply, outcome.Invalid, nil
	case markerErr != nil:
		return wire.BatchReply{}, "", fmt.Errorf("server: recording the batch before its charge, round %d: %w", r, markerErr)
	case !res.Charged && errors.Is(err, ledger.ErrBudgetExhausted):
		reply.Status = wire.BatchStatusRefused
		st := reply.Status
		rec.Status, rec.Detail, rec.Reply, rec.FinishedAt = checkpoint.StatusRefused, err.Error(), &st, time.Now()
		m.log.Warn("batch refused: privacy budget", "round", r, "err", err)
		m.commit(func(c *checkpoint.State) { c.History = append(c.History, rec); c.Round, c.Open = r, nil })
		m.Stop("privacy budget: " + err.Error())
		return reply, outcome.Accepted, nil
	case !res.Charged && errors.Is(err, ledger.ErrInvalidRelease):
		m.log.Warn("batch rejected: invalid release", "round", r, "err", err)
		m.countRejected(reasonInvalidRelease)
		reply.Status = wire.BatchStatusInvalid
		return reply, outcome.Invalid, nil
	case !res.Charged && err != nil:
		m.log.Error("ledger charge failed; nothing decrypted", "round", r, "err", err)
		return wire.BatchReply{}, "", fmt.Errorf("server: charging round %d: %w", r, err)
	}
	model, err := m.applyAnalysis(res, err, &reply, &rec)
	if err != nil {
		// Charged but not applied: the budget stays spent.
		reply.Status = wire.BatchStatusInvalid
		rec.Status, rec.Detail = checkpoint.StatusLost, "charged but not applied: "+err.Error()
		m.log.Error("estimate failed after charging", "round", r, "err", err)
	} else {
		reply.Status = wire.BatchStatusOK
		rec.Status = checkpoint.StatusOK
		m.evaluate(&rec, model.model)
	}
	m.fillEpsilon(&rec)
	st := reply.Status
	rec.Reply, rec.FinishedAt, rec.Seconds = &st, time.Now(), time.Since(start).Seconds()
	// A failed checkpoint is logged by commit; the reply stands (the
	// charge is durable, and after a restart the round is recorded lost).
	m.commit(func(c *checkpoint.State) {
		if rec.Status == checkpoint.StatusOK {
			model.store(c)
		}
		c.History = append(c.History, rec)
		c.Round, c.Open, c.Charging = r, nil, nil
	})
	m.notify()
	m.finishLog(&rec, "n_p", rec.NP, "accepted", rec.Accepted, "rejected_open", rec.RejectedOpen, "rejected_value", rec.RejectedValue)
	return reply, outcome.Accepted, nil
}

// applyAnalysis fills the counts of reply and rec from a charged batch's
// analysis and returns the model with the round's update applied (not
// yet stored), or an error if the estimate (err) or the update is
// unusable.
func (m *Machine) applyAnalysis(res analysis.Result, err error, reply *wire.BatchReply, rec *checkpoint.RoundRecord) (*moved, error) {
	if res.Opened {
		m.opened.Add(int64(len(res.Batch.Messages)))
	}
	c := res.Counts
	reply.Accepted, reply.RejectedOpen, reply.RejectedValue = uint32(c.Accepted), uint32(c.RejectedOpen), uint32(c.RejectedValue)
	rec.Accepted, rec.RejectedOpen, rec.RejectedValue = c.Accepted, c.RejectedOpen, c.RejectedValue
	if err != nil {
		return nil, err
	}
	return m.moveModel(res.Update)
}

// reapply applies the identical re-send of a batch that was charged before
// a restart but never applied (reconcile recorded the round lost with the
// digest of the batch being charged): the ledger already holds the round's
// release, so nothing is charged again (every decrypted round is charged
// exactly once). The caller holds procMu. The round's model update lands
// on the current model, after any round announced since (an asynchronous
// update, as federated averaging tolerates).
func (m *Machine) reapply(frame []byte, round uint64, dig string) (wire.BatchReply, outcome.Intake, error) {
	r := int(round)
	reply := wire.BatchReply{Round: round}
	b, err := wire.ParseBatch(frame, m.Current().Params)
	if err != nil {
		m.log.Warn("re-sent batch of a lost round rejected: malformed", "round", r, "err", err)
		m.countRejected(analysis.ReasonMalformed)
		reply.Status = wire.BatchStatusInvalid
		return reply, outcome.Invalid, nil
	}
	start := time.Now()
	rec := *m.record(r)
	res := analysis.Result{Batch: b, Charged: true}
	res.Counts, res.Opened, res.Update, err = analysis.Estimate(m.key, m.Current().Proto, round, b, m.opt.Workers)
	model, err := m.applyAnalysis(res, err, &reply, &rec)
	if err != nil {
		reply.Status = wire.BatchStatusInvalid
		rec.Detail = "charged, re-sent after a restart, not applied: " + err.Error()
		m.log.Error("estimate of a re-sent charged batch failed", "round", r, "err", err)
	} else {
		reply.Status = wire.BatchStatusOK
		rec.Status, rec.Detail = checkpoint.StatusOK, "charged before a restart; its identical re-sent batch applied without a second charge"
		rec.N, rec.NP, rec.CheckedIn, rec.Population, rec.Messages = int(b.Reports), int(b.NP), int(b.CheckedIn), int(b.Population), len(b.Messages)
		m.evaluate(&rec, model.model)
	}
	st := reply.Status
	rec.Digest, rec.Reply, rec.FinishedAt, rec.Seconds = dig, &st, time.Now(), time.Since(start).Seconds()
	m.commit(func(c *checkpoint.State) {
		if rec.Status == checkpoint.StatusOK {
			model.store(c)
		}
		for i := range c.History {
			if c.History[i].Round == r {
				c.History[i] = rec
			}
		}
	})
	m.notify()
	m.log.Info("re-sent batch of a charged round applied without charging again", "round", r, "status", rec.Status, "accepted", rec.Accepted)
	return reply, outcome.Accepted, nil
}

// fillEpsilon stores the cumulative guarantee after the round by every
// accounting method (cached from the ledger's own Charge).
func (m *Machine) fillEpsilon(rec *checkpoint.RoundRecord) {
	eps, _, method := m.ledger.Spent()
	rec.EpsilonTightest, rec.Method = accounting.FinitePtr(eps), method
	rels := m.ledger.Releases()
	if len(rels) == 0 {
		return
	}
	rep, err := m.acct.Report(m.ledger, m.opt.TargetDelta)
	if err != nil {
		m.log.Warn("accounting rows unavailable", "round", rec.Round, "err", err)
		return
	}
	rec.Epsilon = accounting.RowsOf(rep)
}

// HandleAbort processes an Abort frame (see AbortIntake): it reports
// whether the abort matched the open round or an already aborted one.
func (m *Machine) HandleAbort(frame []byte) (bool, error) {
	ans := m.AbortIntake(frame)
	if ans.Outcome == outcome.Invalid {
		return false, errors.New(ans.Detail)
	}
	return ans.Outcome == outcome.Accepted || ans.Outcome == outcome.Duplicate, nil
}

// AbortIntake processes an Abort frame: the open round is closed with
// nothing charged and the next round follows (accepted). An abort of a
// round already aborted is a duplicate; of a round closed another way, or
// not open, obsolete; bytes that are not an Abort frame, invalid.
func (m *Machine) AbortIntake(frame []byte) outcome.Answer {
	a, err := wire.ParseAbort(frame)
	if err != nil {
		_, round, _ := wire.PeekRound(frame)
		return outcome.Answer{Round: round, Outcome: outcome.Invalid, Detail: "invalid abort: " + err.Error()}
	}
	m.procMu.Lock()
	defer m.procMu.Unlock()
	ans := outcome.Answer{Round: a.Round}
	r := int(a.Round)
	if r <= 0 {
		ans.Outcome, ans.Detail = outcome.Obsolete, "round out of range"
		return ans
	}
	if rec := m.record(r); rec != nil {
		if rec.Status == checkpoint.StatusAborted {
			ans.Outcome, ans.Detail = outcome.Duplicate, fmt.Sprintf("round %d already aborted", r)
		} else {
			ans.Outcome, ans.Detail = outcome.Obsolete, fmt.Sprintf("round %d already closed: %s", r, rec.Status)
			m.log.Info("abort ignored: the round is already closed", "round", r, "status", rec.Status)
		}
		return ans
	}
	if m.st.Open == nil || m.st.Open.Round != r {
		ans.Outcome, ans.Detail = outcome.Obsolete, fmt.Sprintf("round %d is not open (last %d)", r, m.st.Round)
		m.log.Info("abort ignored: round not open", "round", r, "last", m.st.Round)
		return ans
	}
	if m.loseSecAggIfPending(r, "charged, not applied: aborted by the relay after its batch ("+abortReason(a.Reason)+")") {
		ans.Outcome = outcome.Accepted
		return ans
	}
	o := *m.st.Open
	rec := checkpoint.RoundRecord{Round: r, Status: checkpoint.StatusAborted, Detail: abortReason(a.Reason), AnnouncedAt: o.AnnouncedAt,
		Deadline: o.Deadline, FinishedAt: time.Now(), N: int(a.Reports), CheckedIn: int(a.CheckedIn), Population: int(a.Population)}
	if a.Population > 0 {
		rec.CheckInRate = float64(a.CheckedIn) / float64(a.Population)
	}
	m.log.Info("round aborted by the relay; nothing charged", "round", r, "reason", rec.Detail, "reports", a.Reports,
		"checked_in", a.CheckedIn, "population", a.Population)
	m.commit(func(c *checkpoint.State) { c.History = append(c.History, rec); c.Round, c.Open = r, nil })
	m.notify()
	ans.Outcome = outcome.Accepted
	return ans
}

func abortReason(r uint8) string {
	switch r {
	case wire.AbortBelowMinBatch:
		return "below min batch"
	case wire.AbortRelayRestart:
		return "relay restart"
	case wire.AbortOverflow:
		return "overflow"
	case wire.AbortNoRelease:
		return "the relay released no aggregate share: its noise ledger or its helper refused"
	case wire.AbortRelayFloor:
		return "below the relay's own min batch: fewer reports passed verification than the relay's minimum, which no announcement lowers"
	case wire.AbortRejected:
		return "the relay released nothing: more than half of the round's reports failed verification (honest reports almost never do)"
	case wire.AbortRelayBudget:
		return "the relay's own privacy budget is spent: its noise ledger refused the round"
	}
	return fmt.Sprintf("reason %d", r)
}
