package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

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
				s.wg.Go(func() { s.secAggRound(ctx, c) })
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
	rep := roundReport(c)
	if ob.Has(c.Num, outbox.Batch) || ob.Has(c.Num, outbox.Abort) {
		s.log.Error("round already has a persisted outcome; not padding again", "round", c.Num)
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
		s.log.Error("cannot build batch", "round", c.Num, "err", err)
		return abort(wire.AbortOverflow, "batch construction failed")
	}
	b, err := batch.MarshalBinary()
	if err == nil {
		// Persisted (fsync, atomic rename) before the first send.
		err = ob.Put(c.Num, outbox.Batch, b)
	}
	if err != nil {
		s.log.Error("cannot persist batch; round lost", "round", c.Num, "err", err)
		return abort(wire.AbortOverflow, "batch persistence failed")
	}
	ob.Remove(c.Num, outbox.OpenRound)
	rep.Outcome = "pending"
	rep.TargetNP, rep.RealizedNP, rep.Raised = st.TargetNP, st.RealizedNP, st.Raised
	rep.Messages = len(batch.Messages) // padding statistics stay in the log (RoundReport)
	s.m.setLast(rep)
	if st.Raised {
		s.log.Warn("n_p raised to pad the round", "round", c.Num, "target_np", st.TargetNP,
			"realized_np", st.RealizedNP, "overflowed_dims", st.Overflowed)
	}
	s.log.Info("batch persisted", "round", c.Num, "reports", c.Reports, "real", st.RealMessages,
		"dummies", st.DummyMessages, "np", st.RealizedNP, "bytes", len(b))
	return outbox.Entry{Round: c.Num, Kind: outbox.Batch}, true
}

// roundReport starts the /metrics description of closed round c.
func roundReport(c *round.Closed) RoundReport {
	rep := RoundReport{Round: c.Num, Population: c.Population, CheckedIn: c.CheckedIn, Reports: c.Reports}
	if c.Population > 0 {
		rep.CheckInRate = float64(c.CheckedIn) / float64(c.Population)
	}
	return rep
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
		s.log.Error("cannot persist abort", "round", c.Num, "err", err)
		return outbox.Entry{}, false
	}
	ob.Remove(c.Num, outbox.OpenRound)
	s.m.roundsAborted.Add(1)
	rep.Outcome, rep.Reason = "aborted", why
	s.m.setLast(rep)
	s.log.Warn("round aborted", "round", c.Num, "reason", why, "reports", c.Reports,
		"min_batch", c.Params.MinBatch, "checked_in", c.CheckedIn, "population", c.Population)
	return outbox.Entry{Round: c.Num, Kind: outbox.Abort}, true
}

// OutcomeHeader is the response header in which the aggregator names the
// outcome of a batch or an abort (docs/protocol.md, "Relay-aggregator
// outcomes"); the status code says the same.
const OutcomeHeader = "Blanket-Outcome"

// classify maps the aggregator's answer to a batch or an abort to an
// outcome (outbox.Classify; an abort's other 2xx is accepted). A 2xx
// answer to a batch must carry the BatchReply of its round, else it is
// retried.
func classify(kind outbox.Kind, round uint64, status int, body []byte) (outbox.Outcome, string) {
	out := outbox.Classify(status)
	if out == outbox.Retry {
		if kind == outbox.Abort && status/100 == 2 {
			return outbox.Accepted, fmt.Sprintf("HTTP %d", status) // 204 of an older aggregator
		}
		return outbox.Retry, fmt.Sprintf("HTTP %d", status)
	}
	if kind == outbox.Batch && (out == outbox.Accepted || out == outbox.Duplicate) {
		rep, err := wire.ParseBatchReply(body)
		if err != nil || rep.Round != round {
			return outbox.Retry, fmt.Sprintf("HTTP %d without a batch reply for the round", status)
		}
		if out == outbox.Accepted && rep.Status == wire.BatchStatusDuplicate {
			out = outbox.Duplicate // an aggregator that answers duplicates with 200
		}
		return out, fmt.Sprintf("reply status %d, accepted %d, rejectedOpen %d, rejectedValue %d",
			rep.Status, rep.Accepted, rep.RejectedOpen, rep.RejectedValue)
	}
	var ans struct {
		Outcome string `json:"outcome"`
		Detail  string `json:"detail"`
	}
	if json.Unmarshal(body, &ans) == nil && ans.Detail != "" {
		return out, ans.Detail
	}
	return out, fmt.Sprintf("HTTP %d", status)
}

// post makes one delivery attempt of a stored frame (the outbox's
// DeliverFunc).
func (s *Server) post(ctx context.Context, e outbox.Entry, b []byte) (outbox.Outcome, string) {
	path := "/v1/batch"
	if e.Kind == outbox.Abort {
		path = "/v1/abort"
	}
	u := strings.TrimSuffix(s.cfg.Aggregator, "/") + path
	ctx, cancel := context.WithTimeout(ctx, s.cfg.SendTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(b))
	if err != nil {
		return outbox.Retry, err.Error()
	}
	req.Header.Set("Authorization", "Bearer "+s.cfg.Token)
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return outbox.Retry, "request failed"
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return outbox.Retry, "reading reply failed"
	}
	return classify(e.Kind, e.Round, resp.StatusCode, body)
}

// delivered records a frame's definitive outcome (the sender's OnFinal).
func (s *Server) delivered(e outbox.Entry, o outbox.Outcome, _ string) {
	if e.Kind != outbox.Batch {
		return
	}
	outcome := o.String()
	if o == outbox.Accepted || o == outbox.Duplicate {
		s.m.roundsForwarded.Add(1)
		outcome = "forwarded"
	}
	s.m.mu.Lock()
	if s.m.last != nil && s.m.last.Round == e.Round {
		s.m.last.Outcome = outcome
	}
	s.m.mu.Unlock()
}
