package analysis

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/blanket-fl/blanket/shared/secagg"
)

// A chunk of a secure-summation round can be prepared apart from the
// leader's running state, by any replica of the aggregator that holds the
// key (aggregator/internal/prepjob leases such jobs through PostgreSQL),
// and folded into the running state afterwards, in the relay's order:
//
//	PrepareApart: opens and prepares the chunk's reports, applies the
//	              replay rule within the chunk, and sums the accepted
//	              output shares into a partial aggregate (ChunkPrep).
//	FoldPrepared: the leader checks the result against the chunk (its
//	              verdicts name the reports of the helper's 'P' message,
//	              in order; no nonce accepted twice in it) and that no
//	              accepted nonce of the chunk was accepted earlier in the
//	              round, then adds the partial aggregate and the counts.
//	              Otherwise it changes nothing and returns an error: a
//	              replay across chunks, which the relay should have
//	              stopped, is ErrNonceSeen. The caller then prepares the
//	              chunk with PrepareChunk, whose per-report fold rejects
//	              the replay.
//
// The verdicts and the running aggregate are exactly those of
// PrepareChunk on the same chunk (TestPrepareApartMatchesPrepareChunk),
// so the guarantee of the leader (nothing unshards before the charge) is
// unchanged: a partial aggregate is the same un-noised leader share of a
// partial sum as the running aggregate, kept where the key is kept.

// ErrNonceSeen: a chunk prepared apart accepts a report whose nonce the
// round accepted before; nothing of it was folded.
var ErrNonceSeen = errors.New("analysis: a report's nonce was accepted earlier in the round")

// ChunkPrep is one chunk prepared apart (PrepareApart): the 'M' message,
// the count of shares that did not open and the partial aggregate of the
// accepted reports.
type ChunkPrep struct {
	msg      []byte
	entries  []secagg.Entry // parsed msg
	unopened int
	partial  *secagg.Aggregate
}

// Reports is the number of reports of the chunk.
func (c *ChunkPrep) Reports() int { return len(c.entries) }

// PrepareApart prepares the chunk (sealed leader shares and the helper's
// 'P' message for the same reports) on workers goroutines without
// touching l's running state (it is safe to call on a fresh leader of the
// round, in another process), applying Fold's replay rule within the
// chunk: a report accepted after an accepted one with the same nonce is
// rejected as a duplicate.
func (l *SecAggLeader) PrepareApart(sealed [][]byte, prep []byte, workers int) (*ChunkPrep, error) {
	entries, err := l.r.ParsePrep(prep)
	if err != nil {
		return nil, fmt.Errorf("analysis: the helper's prep shares: %w", err)
	}
	if len(entries) != len(sealed) {
		return nil, fmt.Errorf("analysis: %d prep shares for %d reports: %w", len(entries), len(sealed), secagg.ErrProtocol)
	}
	decided := make([]Decided, len(sealed))
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(max(workers, 1), len(sealed)) {
		wg.Go(func() {
			for i := range next {
				decided[i] = l.Prepare(sealed[i], entries[i])
			}
		})
	}
	for i := range sealed {
		next <- i
	}
	close(next)
	wg.Wait()
	cp := &ChunkPrep{partial: l.eng.NewAggregate(), entries: make([]secagg.Entry, len(decided))}
	seen := make(map[[16]byte]struct{})
	for i, d := range decided {
		if d.unopened {
			cp.unopened++
		}
		m := d.m
		if m.Reason == secagg.Accepted {
			if _, dup := seen[m.Nonce]; dup {
				m = secagg.Entry{Nonce: m.Nonce, Reason: secagg.RejectDuplicateNonce}
			} else if err := cp.partial.Fold(d.out); err != nil {
				return nil, err
			} else {
				seen[m.Nonce] = struct{}{}
			}
		}
		cp.entries[i] = m
		decided[i] = Decided{}
	}
	if cp.msg, err = l.r.MarshalVerdicts(cp.entries); err != nil {
		return nil, err
	}
	return cp, nil
}

// FoldPrepared folds a chunk prepared apart into the running state, as
// PrepareChunk would have folded it, and returns its 'M' message; prep is
// the chunk's 'P' message from the relay. A result that does not match
// the chunk (another count or order of nonces, a nonce accepted twice in
// it, a partial sum of another count) is an error, and an accepted
// report whose nonce the round accepted before is ErrNonceSeen; either
// way nothing is folded.
func (l *SecAggLeader) FoldPrepared(cp *ChunkPrep, prep []byte) ([]byte, error) {
	if l.state != secAggCollecting {
		return nil, fmt.Errorf("analysis: chunk folded after the round closed: %w", secagg.ErrProtocol)
	}
	entries, err := l.r.ParsePrep(prep)
	if err != nil {
		return nil, fmt.Errorf("analysis: the helper's prep shares: %w", err)
	}
	if len(entries) != len(cp.entries) {
		return nil, fmt.Errorf("analysis: a prepared chunk of %d reports for %d: %w", len(cp.entries), len(entries), secagg.ErrProtocol)
	}
	accepted := 0
	inChunk := make(map[[16]byte]struct{})
	for i, m := range cp.entries {
		if m.Nonce != entries[i].Nonce {
			return nil, fmt.Errorf("analysis: a prepared chunk's report %d is another report: %w", i, secagg.ErrProtocol)
		}
		if m.Reason != secagg.Accepted {
			continue
		}
		accepted++
		if _, dup := inChunk[m.Nonce]; dup {
			return nil, fmt.Errorf("analysis: a prepared chunk accepts a nonce twice: %w", secagg.ErrProtocol)
		}
		inChunk[m.Nonce] = struct{}{}
		if _, dup := l.nonces[m.Nonce]; dup {
			return nil, ErrNonceSeen
		}
	}
	if accepted != cp.partial.Count() || cp.unopened > len(cp.entries) {
		return nil, fmt.Errorf("analysis: a prepared chunk of %d accepted reports sums %d: %w", accepted, cp.partial.Count(), secagg.ErrProtocol)
	}
	if err := l.agg.Merge(cp.partial); err != nil {
		return nil, err
	}
	l.reports += len(cp.entries)
	l.unopened += cp.unopened
	for _, m := range cp.entries {
		if m.Reason == secagg.Accepted {
			l.nonces[m.Nonce] = struct{}{}
		} else {
			l.rejected[m.Reason]++
		}
	}
	return cp.msg, nil
}

// MarshalBinary encodes the prepared chunk for the job's result: the
// 'M' message's length (4) | the 'M' message | unopened (4) | the partial
// aggregate (secagg.Aggregate.MarshalBinary). It holds an un-noised
// leader share of a partial sum: it is kept where the key is.
func (c *ChunkPrep) MarshalBinary() ([]byte, error) {
	agg, err := c.partial.MarshalBinary()
	if err != nil {
		return nil, err
	}
	b := binary.BigEndian.AppendUint32(nil, uint32(len(c.msg)))
	b = append(b, c.msg...)
	b = binary.BigEndian.AppendUint32(b, uint32(c.unopened))
	return append(b, agg...), nil
}

// ParseChunkPrep strictly decodes a chunk of l's round prepared apart
// (ChunkPrep.MarshalBinary).
func (l *SecAggLeader) ParseChunkPrep(b []byte) (*ChunkPrep, error) {
	if len(b) < 4 {
		return nil, errors.New("analysis: prepared chunk: truncated")
	}
	n := binary.BigEndian.Uint32(b)
	if uint64(len(b)) < 8+uint64(n) {
		return nil, errors.New("analysis: prepared chunk: truncated")
	}
	cp := &ChunkPrep{msg: b[4 : 4+n]}
	var err error
	if cp.entries, err = l.r.ParseVerdicts(cp.msg); err != nil {
		return nil, fmt.Errorf("analysis: prepared chunk: %w", err)
	}
	cp.unopened = int(binary.BigEndian.Uint32(b[4+n:]))
	if cp.partial, err = l.r.ParseAggregate(b[8+n:]); err != nil {
		return nil, fmt.Errorf("analysis: prepared chunk: %w", err)
	}
	return cp, nil
}
