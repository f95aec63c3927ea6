package rounds

import (
	"fmt"
	"slices"

	"github.com/blanket-fl/blanket/aggregator/internal/outcome"
	"github.com/blanket-fl/blanket/shared/wire"
)

// SecAggResumeIntake is POST /v1/secagg/resume after authentication
// (docs/secagg.md, "Crash safety"): the relay's standby, which took over
// a round whose owner was killed mid-round, asks for the verdicts of
// chunk Seq of the open secure-summation round, a chunk the owner
// persisted before posting it. The answer is a SecAggPrep frame:
//
//   - the chunk was folded: outcome Accepted, the frame first answered for
//     it (status ok, its 'M' message), byte for byte. A chunk folded but
//     not yet checkpointed is checkpointed first (its group's held answers
//     leave with it); if that write fails the round is closed invalid,
//     nothing charged, and the answer is outcome Invalid, status invalid.
//   - the chunk was not folded (no chunk of the round was, or Seq is at or
//     past the next chunk expected): outcome Accepted, status invalid, no
//     message. If the round has chunks here, the round is sealed at Seq
//     first: from then on no chunk with a seq at or past the seal is folded
//     (one that arrives, or waits for its predecessors, is answered
//     Obsolete, status invalid: a former owner still running may post it;
//     the round goes on), so the standby closes the round with the chunks
//     before Seq and the close's counts agree (SecAggCloseIntake). A later
//     resume of a lower unfolded seq lowers the seal; it never rises. The
//     seal is durable before the answer leaves: it is carried by the
//     checkpoint of the chunks not yet checkpointed if there are any, else
//     written alone (Store.SealCollect); a restart keeps it
//     (restoreCollect). If that write fails, nothing is answered (an
//     error: the relay resends) and the round is not sealed.
//   - the round is not the open secure-summation round, or is charged
//     already: the answer secaggOpenRound gives (Obsolete, or Invalid),
//     status invalid.
//   - a malformed frame, or a folded chunk whose answer the store did not
//     keep (only the former file store, which keeps the last checkpoint's
//     answers; DBStore keeps every chunk's): outcome Invalid, status
//     invalid; the round is left as it is, and the relay cannot finish it.
//
// A resume never folds a report, never moves the next chunk expected, and
// charges nothing.
//
// Guarantee: the verdicts answered are the bytes the relay already
// received for that chunk (or would have, had its owner lived), stored
// when the checkpoint covering the chunk became durable; the accept or
// reject of each of its reports, and nothing new about any value: no
// share, no partial sum, no count beyond the chunk's verdicts. Nothing is
// unsharded or charged; the round is charged only by SecAggCloseIntake,
// whose guarantee is unchanged.
func (m *Machine) SecAggResumeIntake(frame []byte) (outcome.SecAggAnswer, error) {
	m.procMu.Lock()
	defer m.procMu.Unlock()
	rs, err := wire.ParseSecAggResume(frame)
	if err != nil {
		_, round, _ := wire.PeekRound(frame)
		return outcome.SecAggAnswer{Answer: outcome.Answer{Round: round, Outcome: outcome.Invalid, Detail: "invalid secagg resume: " + err.Error()},
			Frame: prepFrame(round, wire.BatchStatusInvalid)}, nil
	}
	round, r, seq := rs.Round, int(rs.Round), rs.Seq
	ans := func(in outcome.Intake, f []byte, detail string) (outcome.SecAggAnswer, error) {
		if f == nil {
			f = prepFrame(round, wire.BatchStatusInvalid)
		}
		return outcome.SecAggAnswer{Answer: outcome.Answer{Round: round, Outcome: in, Detail: detail}, Frame: f}, nil
	}
	if _, in, detail, ok := m.secaggOpenRound(round, "resume"); !ok {
		return ans(in, nil, detail)
	}
	c := m.sa.collect
	if c == nil || c.round != r {
		return ans(outcome.Accepted, nil, fmt.Sprintf("chunk %d of round %d was not folded: no chunk of the round was", seq, r))
	}
	if seq < c.next {
		if g := c.group; g != nil && slices.ContainsFunc(g.chunks, func(a ChunkAnswer) bool { return a.Seq == seq }) {
			if !m.checkpoint(c) { // the round is closed invalid
				return ans(outcome.Invalid, nil, "the aggregator could not persist the round")
			}
		}
		reply, ok := c.bySeq[seq]
		if !ok {
			return ans(outcome.Invalid, nil, fmt.Sprintf("chunk %d of round %d was folded, but its answer is not kept here since a restart", seq, r))
		}
		m.log.Info("a relay resumed a secagg chunk: its verdicts answered again", "round", r, "seq", seq)
		return ans(outcome.Accepted, reply, "")
	}
	if c.sealed == 0 || seq < c.sealed {
		prev := c.sealed
		c.sealed = seq
		if c.group != nil {
			// The group's checkpoint carries the seal.
			if !m.checkpoint(c) {
				return ans(outcome.Invalid, nil, "the aggregator could not persist the round")
			}
		} else if err := m.store.SealCollect(r, seq); err != nil {
			c.sealed = prev
			return outcome.SecAggAnswer{}, fmt.Errorf("server: secagg round %d: recording that its chunks end before %d: %w", r, seq, err)
		}
		m.wakeChunks() // the chunks waiting at or past the seal are refused
		m.log.Warn("a relay resumed a secagg round: its chunks end here", "round", r, "seal", seq, "chunks", c.next-1)
	}
	return ans(outcome.Accepted, nil, fmt.Sprintf("chunk %d of round %d was not folded (%d chunks folded); none from %d on will be", seq, r, c.next-1, c.sealed))
}
