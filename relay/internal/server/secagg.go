package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/blanket-fl/blanket/relay/internal/outbox"
	"github.com/blanket-fl/blanket/relay/internal/round"
	"github.com/blanket-fl/blanket/shared/secagg"
	"github.com/blanket-fl/blanket/shared/wire"
)

// The relay's close of a secure-summation round (docs/secagg.md, step 4):
// open every helper share with the relay's helper key (a report whose
// share does not open is dropped), prepare them as the Prio3 helper, post
// the batch (the sealed leader shares in the same order and the helper's
// 'P' message) to the aggregator, finish with its 'M' message, add the
// relay's discrete Gaussian noise to the aggregate share and post it. The
// helper's state lives in memory only: the round's open-round marker stays
// in the outbox until the conversation ends, so a restart in the middle
// turns the round into an Abort (relay restart) at the next start. Neither
// request is ever stored in the outbox: a batch re-sent after a restart
// would be charged at the aggregator without the aggregate that can only
// follow from the lost helper state.
//
// Retries resend the identical bytes (never a second, differently noised
// aggregate share: the helper hands out its share once) until a definitive
// answer, the relay's stop, or the aggregator's next announcement (it opens
// a round only once this one is over there).

// Secure-summation paths at the aggregator.
const (
	secAggBatchPath     = "/v1/secagg/batch"
	secAggAggregatePath = "/v1/secagg/aggregate"
)

// DropUnopened names reports the relay drops before preparation because
// their helper share does not open (another key, round or role, or
// altered bytes): /metrics secagg.dropped.
const DropUnopened = "helper_unopened"

// How a secure-summation round ended at the relay after its batch was
// prepared (/metrics secagg.rounds and last_round.outcome; rounds aborted
// before are counted in rounds_aborted).
const (
	SecAggForwarded  = "forwarded"  // the noised aggregate share was delivered (accepted or duplicate)
	SecAggRefused    = "refused"    // the aggregator's ledger refused the round's charge
	SecAggInvalid    = "invalid"    // the aggregator found the batch or the aggregate invalid
	SecAggObsolete   = "obsolete"   // the round is closed at the aggregator another way
	SecAggSuperseded = "superseded" // no definitive answer before the aggregator announced a later round
	SecAggFailed     = "failed"     // the helper could not finish (the aggregator's 'M' contradicts it)
)

var secAggOutcomes = []string{SecAggForwarded, SecAggRefused, SecAggInvalid, SecAggObsolete, SecAggSuperseded, SecAggFailed}

// errStopped and errSuperseded end a secure-summation conversation without
// a definitive answer.
var (
	errStopped    = errors.New("relay stopping")
	errSuperseded = errors.New("aggregator announced a later round")
)

// secAggRound runs the relay's close of secure-summation round c.
func (s *Server) secAggRound(ctx context.Context, c *round.Closed) {
	ob := s.cfg.Outbox
	shares := c.Shares
	c.Shares = nil
	rep := roundReport(c)
	if ob.Has(c.Num, outbox.Batch) || ob.Has(c.Num, outbox.Abort) {
		s.log.Error("round already has a persisted outcome; not preparing it", "round", c.Num)
		return
	}
	abort := func(reason uint8, why string) {
		if e, ok := s.abortRound(c, rep, reason, why); ok {
			s.sender.Enqueue(e)
		}
	}
	if plan := c.Plan(); plan.Abort {
		abort(plan.Reason, plan.Why)
		return
	}
	setupFailed := func(err error) {
		s.log.Error("cannot prepare the secure-summation batch", "round", c.Num, "err", err)
		abort(wire.AbortOverflow, "batch construction failed")
	}
	sr, err := c.SecAgg.SecAggRound(c.Num)
	if err != nil {
		setupFailed(err)
		return
	}
	want := sr.HelperShareSize()
	leaders := make([][]byte, 0, len(shares))
	helpers := make([][]byte, 0, len(shares))
	for _, r := range shares {
		h, err := s.cfg.HelperKey.OpenHelperShare(c.Num, r.Helper, want)
		if err != nil {
			continue
		}
		leaders, helpers = append(leaders, r.Leader), append(helpers, h)
	}
	if dropped := len(shares) - len(helpers); dropped > 0 {
		s.m.secAggDrop(DropUnopened, dropped)
		s.log.Warn("reports dropped: their helper share does not open", "round", c.Num, "dropped", dropped)
	}
	c.Reports = uint32(len(helpers)) // the reports of the batch
	rep.Reports = c.Reports
	if c.Reports < c.Params.MinBatch {
		abort(wire.AbortBelowMinBatch, "below minimum batch after dropping unopened reports")
		return
	}
	vk, err := secagg.DeriveVerifyKey([]byte(s.cfg.Token), c.Num)
	if err != nil {
		setupFailed(err)
		return
	}
	helper, err := secagg.NewHelper(sr, vk)
	if err != nil {
		setupFailed(err)
		return
	}
	prepMsg, early, err := helper.Prepare(helpers)
	if err != nil {
		setupFailed(err)
		return
	}
	body, err := newBatchBody(&wire.SecAggBatch{Round: c.Num, Reports: c.Reports, CheckedIn: c.CheckedIn,
		Population: c.Population, Leader: leaders, Prep: prepMsg})
	if err != nil {
		setupFailed(err)
		return
	}
	rep.Outcome = "pending"
	s.m.setLast(rep)
	s.log.Info("secure-summation batch prepared", "round", c.Num, "reports", c.Reports,
		"rejected_by_helper", len(early), "bytes", body.size)

	// The aggregator prepares its shares, charges its ledger and answers
	// with its 'M' message (status ok) or why not.
	limit := 1<<16 + int64(c.Reports)<<10 // the 'M' message: tens of bytes per report
	out, reply, why, err := s.secAggPost(ctx, c.Num, secAggBatchPath, body.reader, body.size, limit, func(b []byte) error {
		p, err := wire.ParseSecAggPrep(b)
		if err == nil && p.Round != c.Num {
			err = fmt.Errorf("prep reply for round %d", p.Round)
		}
		return err
	})
	body = nil
	if err != nil {
		s.secAggStopped(c.Num, rep, err)
		return
	}
	if out != outbox.Accepted && out != outbox.Duplicate {
		s.secAggEnd(c.Num, rep, out.String(), why)
		return
	}
	prep, err := wire.ParseSecAggPrep(reply) // checked by secAggPost
	if err != nil {
		s.secAggEnd(c.Num, rep, SecAggInvalid, err.Error())
		return
	}
	switch prep.Status {
	case wire.BatchStatusRefused:
		s.secAggEnd(c.Num, rep, SecAggRefused, "the aggregator's ledger refused the round")
		return
	case wire.BatchStatusInvalid:
		s.secAggEnd(c.Num, rep, SecAggInvalid, "the aggregator found the batch invalid")
		return
	}

	// Finish with the leader's verdicts and send the noised aggregate
	// share, exactly once.
	rejected, err := helper.Finish(prep.Msg)
	if err != nil {
		// Not the error itself: it may quote the reports' nonces.
		s.log.Error("cannot finish the secure-summation round: the aggregator's prepare messages contradict the helper",
			"round", c.Num, "protocol_violation", errors.Is(err, secagg.ErrProtocol))
		s.secAggEnd(c.Num, rep, SecAggFailed, "helper finish failed")
		return
	}
	for _, r := range rejected {
		s.m.secAggReject(strings.ReplaceAll(r.Reason.String(), " ", "_"))
	}
	agg, err := helper.AggregateShare()
	if err == nil {
		err = agg.AddNoise(s.cfg.NewSource())
	}
	var share []byte
	if err == nil {
		share, err = agg.MarshalBinary()
	}
	var frame []byte
	if err == nil {
		frame, err = (&wire.SecAggAggregate{Round: c.Num, Share: share}).MarshalBinary()
	}
	if err != nil {
		s.log.Error("cannot build the aggregate share", "round", c.Num, "err", err)
		s.secAggEnd(c.Num, rep, SecAggFailed, "aggregate share failed")
		return
	}
	s.log.Info("secure-summation aggregate share noised", "round", c.Num, "aggregated", agg.Count(),
		"rejected", len(rejected), "bytes", len(frame))
	out, _, why, err = s.secAggPost(ctx, c.Num, secAggAggregatePath,
		func() io.Reader { return bytes.NewReader(frame) }, int64(len(frame)), 4096, nil)
	if err != nil {
		s.secAggStopped(c.Num, rep, err)
		return
	}
	if out != outbox.Accepted && out != outbox.Duplicate {
		s.secAggEnd(c.Num, rep, out.String(), why)
		return
	}
	s.m.secAggAggregated.Add(uint64(agg.Count()))
	s.m.roundsForwarded.Add(1)
	s.secAggEnd(c.Num, rep, SecAggForwarded, out.String())
}

// secAggEnd records how a secure-summation round ended and removes its
// open-round marker: nothing more is owed for it.
func (s *Server) secAggEnd(num uint64, rep RoundReport, outcome, why string) {
	if err := s.cfg.Outbox.Remove(num, outbox.OpenRound); err != nil {
		s.log.Error("cannot remove the round marker", "round", num, "err", err)
	}
	s.m.secAggRound(outcome)
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
	// The marker stays: the next start aborts the round.
	s.log.Warn("relay stopped during a secure-summation round; it is aborted at the next start", "round", num)
}

// batchBody is a SecAggBatch frame as a stream over the leader shares it
// carries, so that the shares (about 1 MB per report at d = 7850) are
// never copied into one buffer: its bytes are exactly those of
// wire.SecAggBatch.MarshalBinary (TestBatchBodyIsTheWireFrame), and every
// reader starts them again, so a retry resends the identical bytes.
type batchBody struct {
	head, tail []byte
	leaders    [][]byte
	size       int64
}

// newBatchBody checks b as wire.SecAggBatch.MarshalBinary does and returns
// its body.
func newBatchBody(b *wire.SecAggBatch) (*batchBody, error) {
	n := len(b.Leader)
	if b.Round < 1 || n < 1 || uint64(n) != uint64(b.Reports) || len(b.Prep) > wire.MaxSecAggPayload {
		return nil, fmt.Errorf("secagg batch: round %d, %d shares for %d reports, %d prep bytes", b.Round, n, b.Reports, len(b.Prep))
	}
	sl := len(b.Leader[0])
	if sl < 1 || uint64(sl)*uint64(n) > wire.MaxSecAggPayload {
		return nil, fmt.Errorf("secagg batch: %d shares of %d bytes", n, sl)
	}
	for i, l := range b.Leader {
		if len(l) != sl {
			return nil, fmt.Errorf("secagg batch: share %d has %d bytes, want %d", i, len(l), sl)
		}
	}
	head := make([]byte, 26)
	head[0], head[1] = wire.Version, byte(wire.TypeSecAggBatch)
	be := binary.BigEndian
	be.PutUint64(head[2:], b.Round)
	be.PutUint32(head[10:], b.Reports)
	be.PutUint32(head[14:], b.CheckedIn)
	be.PutUint32(head[18:], b.Population)
	be.PutUint32(head[22:], uint32(sl))
	tail := be.AppendUint32(make([]byte, 0, 4+len(b.Prep)), uint32(len(b.Prep)))
	tail = append(tail, b.Prep...)
	return &batchBody{head: head, tail: tail, leaders: b.Leader,
		size: int64(len(head)) + int64(n)*int64(sl) + int64(len(tail))}, nil
}

// reader returns the frame's bytes from the start.
func (b *batchBody) reader() io.Reader {
	parts := make([]io.Reader, 0, len(b.leaders)+2)
	parts = append(parts, bytes.NewReader(b.head))
	for _, l := range b.leaders {
		parts = append(parts, bytes.NewReader(l))
	}
	return io.MultiReader(append(parts, bytes.NewReader(b.tail))...)
}

// secAggPost posts a body (each call of body returns its size bytes from
// the start) to path until a definitive answer, resending the identical
// bytes with exponential backoff. It returns the outcome, the
// reply (at most limit bytes; for accepted and duplicate, one that check
// accepts, else the answer is retried), and a short reason for logs; or
// errStopped when ctx ends, errSuperseded when the aggregator has announced
// a later round meanwhile.
func (s *Server) secAggPost(ctx context.Context, num uint64, path string, body func() io.Reader, size, limit int64,
	check func([]byte) error) (outbox.Outcome, []byte, string, error) {
	wait := s.cfg.RetryMin
	for attempt := 1; ; attempt++ {
		s.m.secAggAttempts.Add(1)
		out, reply, why := s.secAggAttempt(ctx, path, body(), size, limit, check)
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

// secAggAttempt makes one request: 200 accepted, 208 duplicate, 409
// obsolete, 400/413/422 invalid (docs/protocol.md); anything else, no
// answer, or an accepted or duplicate reply that check refuses is retried.
func (s *Server) secAggAttempt(ctx context.Context, path string, body io.Reader, size, limit int64,
	check func([]byte) error) (outbox.Outcome, []byte, string) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.SecAggTimeout)
	defer cancel()
	u := strings.TrimSuffix(s.cfg.Aggregator, "/") + path
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, body)
	if err != nil {
		return outbox.Retry, nil, err.Error()
	}
	req.ContentLength = size
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
