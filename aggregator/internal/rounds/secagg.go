package rounds

// The aggregator's side of secure summation (docs/secagg.md, steps 1, 5
// and 6): it fetches the relay's helper key for the announcement, prepares
// the leader shares of the relay's chunks with the relay's 'P' messages
// and charges the ledger at the relay's close (secagg_stream.go), and
// unshards the relay's noised aggregate share with its own.

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/analysis"
	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/aggregator/internal/outcome"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/secagg"
	"github.com/blanket-fl/blanket/shared/wire"
)

// secaggState is the aggregator's secure-summation state, guarded by
// Machine.procMu. The open
// round's collection and the charged round's pending aggregate are
// persisted at each step (CollectFile, PendingFile), so a restart resumes
// them (restoreCollect, restorePending).
type secaggState struct {
	collect *secaggCollect // the open round's chunks (secagg_stream.go)
	pending *secaggPending // the charged round awaiting its aggregate
	last    *secaggLast    // the last finished round's frames (identical re-sends)
}

// secaggPending is a charged round whose 'M' was answered: the leader
// holds the accepted reports' aggregate share until the relay's 'A'.
type secaggPending struct {
	round  int
	sr     *secagg.Round
	leader *analysis.SecAggLeader
	digest string // of the close frame
	reply  []byte // the SecAggCharged frame answered (ok)
	rec    checkpoint.RoundRecord
	until  time.Time // no aggregate by then: the round is lost
}

// secaggLast remembers the last secure-summation round answered, so that
// an identical re-send of its close or aggregate gets its answer again.
type secaggLast struct {
	round       int
	closeDigest string
	closeReply  []byte
	aggDigest   string
}

func digestOf(frame []byte) string {
	d := sha256.Sum256(frame)
	return hex.EncodeToString(d[:])
}

// prepFrame encodes a SecAggPrep without a message (a chunk refused or
// invalid).
func prepFrame(round uint64, status uint8) []byte {
	b, err := (&wire.SecAggPrep{Round: round, Status: status}).MarshalBinary()
	if err != nil {
		return nil // round 0: no frame
	}
	return b
}

// SecAggAggregateIntake is POST /v1/secagg/aggregate after authentication
// (docs/secagg.md step 6): for the round whose close was charged and
// answered ok, it noises its own aggregate share, unshards it with the
// relay's 'A' and moves the model by ServerLR times the noisy mean.
//
// Guarantee: the leader's aggregate share is released into the sum only
// with its own discrete Gaussian noise (noise.Secure()), so the model
// update is a post-processing of a release the ledger already charged
// (SecAggCloseIntake); it happens at most once per round (the leader hands
// out its aggregate share once, and the pending round is cleared before
// anything else can fail).
func (m *Machine) SecAggAggregateIntake(frame []byte) outcome.Answer {
	dig := digestOf(frame)
	a, err := wire.ParseSecAggAggregate(frame)
	if err != nil {
		_, round, _ := wire.PeekRound(frame)
		return outcome.Answer{Round: round, Outcome: outcome.Invalid, Detail: "invalid secagg aggregate: " + err.Error()}
	}
	m.procMu.Lock()
	defer m.procMu.Unlock()
	r := int(a.Round)
	ans := outcome.Answer{Round: a.Round}
	p := m.sa.pending
	if p == nil || p.round != r || a.Round > uint64(m.st.Round+1) {
		if l := m.sa.last; l != nil && l.round == r && l.aggDigest == dig {
			ans.Outcome, ans.Detail = outcome.Duplicate, fmt.Sprintf("round %d already applied", r)
			return ans
		}
		ans.Outcome = outcome.Obsolete
		if rec := m.record(r); rec != nil {
			ans.Detail = fmt.Sprintf("round %d already closed: %s", r, rec.Status)
		} else {
			ans.Detail = fmt.Sprintf("round %d has no charged close here", r)
		}
		m.log.Info("secagg aggregate ignored", "round", r, "reason", ans.Detail)
		return ans
	}
	// Check the relay's share before taking the leader's own, which can
	// be taken only once: a malformed 'A' leaves the round pending.
	h, err := p.sr.ParseAggregateShare(a.Share)
	if err != nil {
		ans.Outcome, ans.Detail = outcome.Invalid, "invalid aggregate share: "+err.Error()
		return ans
	}
	if h.Count() != p.leader.Accepted() {
		ans.Outcome, ans.Detail = outcome.Invalid, fmt.Sprintf("aggregate share over %d reports, the leader accepted %d", h.Count(), p.leader.Accepted())
		return ans
	}
	start := time.Now()
	model, counts, err := m.unshardInto(p, a.Share)
	if err != nil {
		m.loseSecAgg(p, "charged, not applied: "+err.Error())
		ans.Outcome, ans.Detail = outcome.Invalid, err.Error()
		return ans
	}
	rec := p.rec
	if rec.EpsilonTightest == nil { // resumed after a restart (restorePending)
		m.fillEpsilon(&rec)
	}
	rec.Status, rec.FinishedAt = checkpoint.StatusOK, time.Now()
	rec.Seconds += time.Since(start).Seconds()
	rec.Counts = counts
	m.evaluate(&rec, model.model)
	m.sa.pending = nil
	m.sa.last = &secaggLast{round: r, closeDigest: p.digest, closeReply: p.reply, aggDigest: dig}
	m.commit(func(c *checkpoint.State) {
		model.store(c)
		c.History = append(c.History, rec)
		c.Round, c.Open, c.Charging = r, nil, nil
	})
	m.removePending()
	m.notify()
	m.finishLog(&rec, "reports", rec.Reports)
	ans.Outcome = outcome.Accepted
	return ans
}

// unshardInto takes the leader's aggregate share, adds the aggregator's
// discrete Gaussian noise, unshards with the relay's 'A' and returns the
// current model moved by the server optimiser's step for the noisy mean
// (moveModel; not yet stored).
// The caller holds procMu; p cannot be unsharded again afterwards.
func (m *Machine) unshardInto(p *secaggPending, helperMsg []byte) (*moved, *checkpoint.CountsRecord, error) {
	src := m.opt.Noise
	if src == nil {
		src = noise.Secure()
	}
	res, err := p.leader.Unshard(src, helperMsg)
	if err != nil {
		return nil, nil, err
	}
	mv, err := m.moveModel(res.Mean)
	if err != nil {
		return nil, nil, err
	}
	return mv, countsRecord(p.sr, res), nil
}

// loseSecAgg closes a charged secure-summation round without applying it:
// the ledger keeps its charge, the model stays, the next round follows.
// The caller holds procMu.
func (m *Machine) loseSecAgg(p *secaggPending, why string) {
	rec := p.rec
	rec.Status, rec.Detail, rec.FinishedAt = checkpoint.StatusLost, why, time.Now()
	// The relay's later frames for the round are obsolete.
	m.sa.pending, m.sa.last = nil, nil
	m.log.Warn("secagg round lost: charged, not applied", "round", p.round, "reason", why)
	m.commit(func(c *checkpoint.State) {
		c.History = append(c.History, rec)
		c.Round, c.Open, c.Charging = p.round, nil, nil
	})
	m.removePending()
	m.notify()
}

// PendingUntil returns when the pending aggregate of round expires
// (zero if the round has none).
func (m *Machine) PendingUntil(round int) time.Time {
	m.procMu.Lock()
	defer m.procMu.Unlock()
	if p := m.sa.pending; p != nil && p.round == round {
		return p.until
	}
	return time.Time{}
}

// extendPending moves the expiry of round's pending aggregate to
// until (nothing if the round has none).
func (m *Machine) extendPending(round int, until time.Time) {
	m.procMu.Lock()
	defer m.procMu.Unlock()
	if p := m.sa.pending; p != nil && p.round == round {
		p.until = until
	}
}

// loseSecAggIfPending records round lost if it is charged and awaiting its
// aggregate, and reports whether it did. The caller holds procMu.
func (m *Machine) loseSecAggIfPending(round int, why string) bool {
	p := m.sa.pending
	if p == nil || p.round != round {
		return false
	}
	m.loseSecAgg(p, why)
	return true
}

// errPersist marks a failure to persist the round before its charge
// (nothing was charged; answered 500, the relay resends).
var errPersist = errors.New("persisting the prepared round")

// removePending deletes the pending round (it ended, or was never
// charged).
func (m *Machine) removePending() {
	if err := m.store.RemovePending(); err != nil {
		m.log.Error("cannot remove the prepared secagg round", "err", err)
	}
}

// restorePending resumes a charged secure-summation round whose aggregate
// share had not arrived when the aggregator stopped: the stored Pending
// names the open round, the ledger holds its charge and the checkpoint has not
// closed it. The round stays open and waits BatchGrace from now for the
// relay's (re-sent) aggregate share. Anything else deletes the record: a
// round not charged was never answered with 'M'. Called by Open before
// reconcile, which then leaves the round open.
func (m *Machine) restorePending() {
	p, err := m.store.LoadPending()
	if p == nil && err == nil {
		return
	}
	defer func() {
		if m.sa.pending == nil {
			m.removePending()
		}
	}()
	if err != nil {
		m.log.Error("unreadable prepared secagg round; ignored", "err", err)
		return
	}
	charged := false
	for _, rel := range m.ledger.Releases() {
		if rel.Round == p.Round {
			charged = true
		}
	}
	if !charged || p.Round <= m.st.Round || m.st.Open == nil || m.st.Open.Round != p.Round {
		return
	}
	rc := m.Current()
	if !rc.Proto.SecAgg() {
		return
	}
	sr, eng, err := m.newLeader(p.Round, rc)
	if err != nil {
		return
	}
	leader, err := analysis.RestoreSecAggLeader(m.key, m.opt.Consent, sr, eng, p.Aggregate)
	if err != nil {
		m.log.Error("prepared secagg round does not restore; it is recorded lost", "round", p.Round, "err", err)
		return
	}
	m.sa.pending = &secaggPending{round: p.Round, sr: sr, leader: leader, digest: p.Digest, reply: p.Reply, rec: p.Rec,
		until: time.Now().Add(m.opt.BatchGrace)}
	m.log.Info("resumed a charged secure-summation round; waiting for the relay's aggregate share", "round", p.Round,
		"accepted", leader.Accepted())
}

// resumedRound is the charged round restorePending resumed (0: none):
// reconcile leaves it open.
func (m *Machine) resumedRound() int {
	if m.sa.pending == nil {
		return 0
	}
	return m.sa.pending.round
}
