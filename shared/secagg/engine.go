package secagg

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/blanket-fl/blanket/shared/counts"
	"github.com/blanket-fl/blanket/shared/pine"
)

// One report at a time (draft-irtf-cfrg-vdaf §5.2, §7.2: PrepInit,
// PrepSharesToPrep, PrepNext, AggregateUpdate), the shape of
// divviup/janus: a server prepares each report when it arrives, folds the
// report's output share into a running aggregate as soon as its verdict
// is known and drops everything else of it. The batch API (Leader,
// Helper) is built on the same steps.
//
//	both:    e.PrepInit(input share)            -> Prep (nonce, verdict so far, prep share)
//	leader:  e.Decide(own Prep, helper's Entry) -> 'M' Entry, output share
//	helper:  e.Next(own Prep, leader's Entry)   -> output share
//	both:    agg.Fold(output share); at the end agg.Share() -> AggregateShare
//
// Engine is the interface of a VDAF's preparation in the two state
// machines (aggregator/internal/analysis, relay/internal/helper); PINE
// (PineEngine) implements it.

// Entry is one report in a 'P' or 'M' message: the report's nonce, its
// verdict, and (iff Reason == Accepted) the encoded prep share ('P') or
// prep message ('M').
type Entry struct {
	Nonce   [nonceSize]byte
	Reason  Reason
	Payload []byte
}

// OutShare is one report's output share, opaque to the state machines:
// only the Engine that made it can fold it.
type OutShare interface{ isOutShare() }

// Prep is one report after PrepInit at one server: its P entry
// (Entry.Payload the encoded prep share when accepted so far) and the
// state needed to finish it. Err explains a rejection.
type Prep struct {
	Entry
	Err   error
	state any
}

// Engine prepares the reports of one round at one server, one report at a
// time. PrepInit, Decide and Next are safe for concurrent use; an
// Aggregate is not.
type Engine interface {
	// Leader tells whether this engine is the leader's (aggregator 0).
	Leader() bool
	// PrepInit strictly decodes one input share of this server and runs
	// VDAF PrepInit on it. A share that does not decode, or whose
	// preparation fails, gives a Prep with a rejection Reason.
	PrepInit(share []byte) Prep
	// Decide is the leader's step: with the helper's entry for the same
	// report, decide it (accepted iff both accepted, the nonces agree and
	// the combined verifier passes: PrepSharesToPrep) and, if accepted,
	// finish it (PrepNext). It returns the 'M' entry and the output share
	// (nil unless accepted).
	Decide(own Prep, helper Entry) (Entry, OutShare)
	// Next is the helper's step: with the leader's 'M' entry, finish an
	// accepted report into its output share. An error is a protocol
	// violation (the leader accepted what the helper rejected, another
	// nonce, or a prep message that does not match).
	Next(own Prep, leader Entry) (OutShare, error)
	// NewAggregate returns an empty running aggregate.
	NewAggregate() *Aggregate
}

// NewEngine returns the engine of round r (NewPineEngine) for the leader
// (leader = true) or the helper, with the round's verify key
// (DeriveVerifyKey).
func NewEngine(r *Round, leader bool, verifyKey []byte) (Engine, error) {
	return NewPineEngine(r, leader, verifyKey)
}

// Aggregate is a server's running aggregate: the sum of the output shares
// folded so far and their count. It is what a server persists between
// steps (MarshalBinary, Round.ParseAggregate) and, at the end, its
// aggregate share (Share). Not safe for concurrent use.
type Aggregate struct {
	r        *Round
	pagg     *pine.AggShare
	cagg     *counts.Aggregate // the count blocks' (nil without counts)
	count    int
	released bool
}

// newAggregate returns an empty running aggregate of r.
func (r *Round) newAggregate() *Aggregate {
	a := &Aggregate{r: r, pagg: r.pn.NewAggShare()}
	if r.cl != nil {
		a.cagg = r.cl.spec.NewAggregate()
	}
	return a
}

// Fold adds one accepted report's output share (VDAF AggregateUpdate);
// the share can be dropped afterwards.
func (a *Aggregate) Fold(out OutShare) error {
	if a.released {
		return fmt.Errorf("secagg: fold after the aggregate share was released: %w", ErrProtocol)
	}
	if a.count >= a.r.p.MaxReports {
		return fmt.Errorf("secagg: fold: more than %d reports: %w", a.r.p.MaxReports, ErrProtocol)
	}
	o, ok := out.(pineOut)
	if !ok {
		return errors.New("secagg: fold: not a PINE output share")
	}
	if a.cagg != nil {
		// Checked first, so that a failure leaves both sums untouched.
		if o.co.Blocks() == 0 {
			return errors.New("secagg: fold: an output share without the count blocks")
		}
	}
	if err := a.pagg.Add(o.o); err != nil {
		return fmt.Errorf("secagg: fold: %w", err)
	}
	if a.cagg != nil {
		if err := a.cagg.Add(o.co); err != nil {
			return fmt.Errorf("secagg: fold: %w", err)
		}
	}
	a.count++
	return nil
}

// Count returns the number of output shares folded.
func (a *Aggregate) Count() int { return a.count }

// Merge adds b, a running aggregate of the same round over other reports
// (a partial aggregate prepared by another replica of the same server),
// into a, as if its output shares had been folded here; b is unchanged.
// It refuses once either was released, or past MaxReports; on error a is
// unchanged.
func (a *Aggregate) Merge(b *Aggregate) error {
	if a.released || b == nil || b.released {
		return fmt.Errorf("secagg: merge after an aggregate share was released: %w", ErrProtocol)
	}
	if b.r.ID() != a.r.ID() || (a.cagg == nil) != (b.cagg == nil) {
		return fmt.Errorf("secagg: merging an aggregate of another round: %w", ErrProtocol)
	}
	if a.count+b.count > a.r.p.MaxReports {
		return fmt.Errorf("secagg: merge: more than %d reports: %w", a.r.p.MaxReports, ErrProtocol)
	}
	if a.pagg.Len() != b.pagg.Len() {
		return fmt.Errorf("secagg: merging an aggregate of another dimension: %w", ErrProtocol)
	}
	// The count blocks first: their Merge checks everything before it
	// adds, and the sum's cannot fail after the check above, so that on
	// error a is unchanged.
	if a.cagg != nil {
		if err := a.cagg.Merge(b.cagg); err != nil {
			return fmt.Errorf("secagg: merge: %w", err)
		}
	}
	if err := a.pagg.Merge(b.pagg); err != nil {
		return fmt.Errorf("secagg: merge: %w", err)
	}
	a.count += b.count
	return nil
}

// Share hands out the aggregate share exactly once (a second noised copy
// of the same sum would let its receiver average the two noises away);
// the caller adds its noise (AggregateShare.AddNoise) before it leaves
// the server.
func (a *Aggregate) Share() (*AggregateShare, error) {
	if a.released {
		return nil, fmt.Errorf("secagg: aggregate share already released: %w", ErrProtocol)
	}
	a.released = true
	s := &AggregateShare{r: a.r, count: a.count, pshare: a.pagg, cshare: a.cagg}
	a.pagg, a.cagg = a.r.pn.NewAggShare(), nil
	return s, nil
}

// aggregateMagic starts a persisted running aggregate.
const kindRunning byte = 'R'

// MarshalBinary encodes the running aggregate for persistence: header
// ('R', round) | count (4) | Dim x Field64. It never leaves the server
// (it is the exact, un-noised partial sum).
func (a *Aggregate) MarshalBinary() ([]byte, error) {
	if a.released {
		return nil, fmt.Errorf("secagg: aggregate already released: %w", ErrProtocol)
	}
	enc, err := a.pagg.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("secagg: encoding aggregate: %w", err)
	}
	b := a.r.header(kindRunning)
	b = binary.BigEndian.AppendUint32(b, uint32(a.count))
	b = append(b, enc...)
	if a.cagg != nil {
		c, err := a.cagg.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("secagg: encoding aggregate: %w", err)
		}
		b = append(b, c...)
	}
	return b, nil
}

// ParseAggregate strictly decodes a running aggregate of this round
// (Aggregate.MarshalBinary).
func (r *Round) ParseAggregate(b []byte) (*Aggregate, error) {
	if _, err := r.checkHeader(b, kindRunning); err != nil {
		return nil, err
	}
	if want := headerLen + 4 + r.aggShareLen; len(b) != want {
		return nil, fmt.Errorf("secagg: running aggregate of %d bytes, want %d: %w", len(b), want, ErrMalformed)
	}
	n := binary.BigEndian.Uint32(b[headerLen:])
	if uint64(n) > uint64(r.p.MaxReports) {
		return nil, fmt.Errorf("secagg: running aggregate of %d reports exceeds max %d: %w", n, r.p.MaxReports, ErrMalformed)
	}
	u := headerLen + 4 + pineElemSize*r.p.Dim
	pa, err := r.pn.ParseAggShare(b[headerLen+4:u], int(n))
	if err != nil {
		return nil, fmt.Errorf("secagg: running aggregate: %w: %w", ErrMalformed, err)
	}
	a := &Aggregate{r: r, count: int(n), pagg: pa}
	if r.cl != nil {
		if a.cagg, err = r.cl.spec.ParseAggregate(b[u:], int(n), false); err != nil {
			return nil, fmt.Errorf("secagg: running aggregate: %w: %w", ErrMalformed, err)
		}
	}
	return a, nil
}

// MarshalPrep encodes a 'P' message (the helper's prep shares) from
// entries, in order.
func (r *Round) MarshalPrep(entries []Entry) ([]byte, error) {
	return r.marshalRaw(kindHelperPrep, entries, r.prepShareLen)
}

// ParsePrep strictly decodes a 'P' message of this round into entries
// (payloads alias b).
func (r *Round) ParsePrep(b []byte) ([]Entry, error) {
	return r.parseRaw(b, kindHelperPrep, r.prepShareLen)
}

// MarshalVerdicts encodes an 'M' message (the leader's verdicts and prep
// messages) from entries, in order.
func (r *Round) MarshalVerdicts(entries []Entry) ([]byte, error) {
	return r.marshalRaw(kindLeaderPrep, entries, r.prepMsgLen)
}

// ParseVerdicts strictly decodes an 'M' message of this round into
// entries (payloads alias b).
func (r *Round) ParseVerdicts(b []byte) ([]Entry, error) {
	return r.parseRaw(b, kindLeaderPrep, r.prepMsgLen)
}

type rawPayload []byte

func (p rawPayload) MarshalBinary() ([]byte, error) { return p, nil }

func (r *Round) marshalRaw(kind byte, entries []Entry, payloadLen int) ([]byte, error) {
	for i, e := range entries {
		if e.Reason == Accepted && len(e.Payload) != payloadLen {
			return nil, fmt.Errorf("secagg: entry %d payload of %d bytes, want %d", i, len(e.Payload), payloadLen)
		}
	}
	return r.marshalEntries(kind, r.id, len(entries), func(i int) ([nonceSize]byte, Reason, binaryMarshaler) {
		e := entries[i]
		if e.Payload == nil {
			return e.Nonce, e.Reason, nil
		}
		return e.Nonce, e.Reason, rawPayload(e.Payload)
	})
}

func (r *Round) parseRaw(b []byte, kind byte, payloadLen int) ([]Entry, error) {
	var out []Entry
	n, err := r.parseEntries(b, kind, payloadLen, func(_ int, nonce [nonceSize]byte, reason Reason, payload []byte) error {
		out = append(out, Entry{Nonce: nonce, Reason: reason, Payload: payload})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = make([]Entry, n)
	}
	return out, nil
}
