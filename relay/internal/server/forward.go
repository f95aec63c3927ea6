package server

import (
	"context"
	"errors"

	"github.com/blanket-fl/blanket/relay/internal/metrics"
	"github.com/blanket-fl/blanket/relay/internal/outbox"
	"github.com/blanket-fl/blanket/relay/internal/round"
	"github.com/blanket-fl/blanket/relay/internal/shuffler"
	"github.com/blanket-fl/blanket/shared/wire"
)

// forward is the single goroutine that turns closed rounds into persisted
// frames (padding is CPU-heavy: one round at a time) and hands them to the
// outbox's sender, which delivers every frame independently.
func (s *Server) forward(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case c := <-s.jobs:
			if c.SecAgg != nil {
				// Secure summation: a conversation with the aggregator that
				// may take minutes; it must not hold up other rounds.
				s.sa.Closed(ctx, c)
				continue
			}
			if e, ok := s.finish(c); ok {
				s.sender.Enqueue(e)
			}
		}
	}
}

// finish persists the outcome of a closed round (a padded batch, or an
// abort) and returns the outbox entry to send. A batch already persisted
// for the round is never rebuilt: padding happens at most once per round.
func (s *Server) finish(c *round.Closed) (outbox.Entry, bool) {
	ob := s.cfg.Outbox
	real := c.Real
	c.Real = nil
	rep := metrics.ReportOf(c)
	if ob.Has(c.Num, outbox.Batch) || ob.Has(c.Num, outbox.Abort) {
		s.roundLog(c.Num).Error("round already has a persisted outcome; not padding again")
		return outbox.Entry{}, false
	}
	abort := func(reason uint8, why string) (outbox.Entry, bool) {
		return s.abortRound(c, rep, reason, why)
	}
	if plan := c.Plan(); plan.Abort {
		return abort(plan.Reason, plan.Why)
	}
	in := shuffler.Round{Round: c.Num, Params: c.Params, HPKEPub: c.HPKEPub,
		Reports: c.Reports, CheckedIn: c.CheckedIn, Population: c.Population}
	batch, st, err := s.preseal.Build(in, real, s.cfg.NewSource(), s.cfg.SealWorkers)
	if err != nil {
		if errors.Is(err, shuffler.ErrInfeasible) {
			return abort(wire.AbortOverflow, "infeasible padding")
		}
		s.roundLog(c.Num).Error("cannot build batch", "err", err)
		return abort(wire.AbortOverflow, "batch construction failed")
	}
	b, err := batch.MarshalBinary()
	if err == nil {
		// Persisted (fsync, atomic rename) before the first send.
		err = ob.Put(c.Num, outbox.Batch, b)
	}
	if err != nil {
		s.roundLog(c.Num).Error("cannot persist batch; round lost", "err", err)
		return abort(wire.AbortOverflow, "batch persistence failed")
	}
	ob.Remove(c.Num, outbox.OpenRound)
	s.dropAcked(c.Num)
	rep.Outcome = "pending"
	rep.TargetNP, rep.RealizedNP, rep.Raised = st.TargetNP, st.RealizedNP, st.Raised
	rep.Messages = len(batch.Messages) // padding statistics stay in the log (RoundReport)
	s.m.SetLast(rep)
	if st.Raised {
		s.roundLog(c.Num).Warn("n_p raised to pad the round", "target_np", st.TargetNP,
			"realized_np", st.RealizedNP, "overflowed_dims", st.Overflowed)
	}
	s.roundLog(c.Num).Info("batch persisted", "reports", c.Reports, "real", st.RealMessages,
		"dummies", st.DummyMessages, "np", st.RealizedNP, "bytes", len(b))
	return outbox.Entry{Round: c.Num, Kind: outbox.Batch}, true
}

// abortRound persists the Abort of closed round c (reason: a wire.Abort*
// code; why: for logs and metrics), removes its open-round marker and
// returns the outbox entry to send.
func (s *Server) abortRound(c *round.Closed, rep RoundReport, reason uint8, why string) (outbox.Entry, bool) {
	ob := s.cfg.Outbox
	a := c.AbortFor(reason)
	b, err := a.MarshalBinary()
	if err == nil {
		err = ob.Put(c.Num, outbox.Abort, b)
	}
	if err != nil {
		s.roundLog(c.Num).Error("cannot persist abort", "err", err)
		return outbox.Entry{}, false
	}
	ob.Remove(c.Num, outbox.OpenRound)
	s.dropAcked(c.Num)
	s.m.RoundsAborted.Add(1)
	rep.Outcome, rep.Reason = "aborted", why
	s.m.SetLast(rep)
	s.roundLog(c.Num).Warn("round aborted", "reason", why, "reports", c.Reports,
		"min_batch", c.Params.MinBatch, "checked_in", c.CheckedIn, "population", c.Population)
	return outbox.Entry{Round: c.Num, Kind: outbox.Abort}, true
}

// OutcomeHeader is the response header in which the aggregator names the
// outcome of a batch or an abort (docs/protocol.md, "Relay-aggregator
// outcomes"); the status code says the same.
const OutcomeHeader = "Blanket-Outcome"

// delivered records a frame's definitive outcome (the sender's OnFinal).
func (s *Server) delivered(e outbox.Entry, o outbox.Outcome, _ string) {
	if e.Kind != outbox.Batch {
		return
	}
	outcome := o.String()
	if o == outbox.Accepted || o == outbox.Duplicate {
		s.m.RoundsForwarded.Add(1)
		outcome = "forwarded"
	}
	s.m.SetLastOutcome(e.Round, outcome)
}
