package secagg

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/blanket-fl/blanket/shared/pine"
	"github.com/cloudflare/circl/vdaf/prio3/sumvec"
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
// Engine is the interface another VDAF (PINE, shared/pine) implements to
// plug into the same two state machines (aggregator/internal/analysis,
// relay/internal/helper); SumVec implements it today.

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

// SumVecEngine is Engine for Prio3 SumVec (the round's parameters).
type SumVecEngine struct {
	r     *Round
	aggID uint8
	vk    sumvec.VerifyKey
	pool  sync.Pool // *sumvec.SumVec: not safe for concurrent use
}

var _ Engine = (*SumVecEngine)(nil)

// NewEngine returns the engine of round r (PineEngine for a PINE round,
// SumVecEngine for a SumVec one) for the leader (leader = true) or the
// helper, with the round's verify key (DeriveVerifyKey).
func NewEngine(r *Round, leader bool, verifyKey []byte) (Engine, error) {
	if r != nil && r.pn != nil {
		return NewPineEngine(r, leader, verifyKey)
	}
	return NewSumVecEngine(r, leader, verifyKey)
}

// NewSumVecEngine returns the SumVec engine of a SumVec round (the
// baseline of tests and benchmarks).
func NewSumVecEngine(r *Round, leader bool, verifyKey []byte) (*SumVecEngine, error) {
	if r == nil || r.vdaf == nil {
		return nil, errors.New("secagg: not a SumVec round")
	}
	if len(verifyKey) != VerifyKeySize {
		return nil, fmt.Errorf("secagg: verify key of %d bytes, want %d", len(verifyKey), VerifyKeySize)
	}
	e := &SumVecEngine{r: r, aggID: 1}
	if leader {
		e.aggID = 0
	}
	copy(e.vk[:], verifyKey)
	return e, nil
}

// Round returns the engine's round.
func (e *SumVecEngine) Round() *Round { return e.r }

// Leader implements Engine.
func (e *SumVecEngine) Leader() bool { return e.aggID == 0 }

func (e *SumVecEngine) get() (*sumvec.SumVec, error) {
	if v, ok := e.pool.Get().(*sumvec.SumVec); ok {
		return v, nil
	}
	return e.r.newVDAF()
}

type sumvecOut struct{ o *sumvec.OutShare }

func (sumvecOut) isOutShare() {}

type sumvecState struct{ st *sumvec.PrepState }

// PrepInit implements Engine.
func (e *SumVecEngine) PrepInit(share []byte) Prep {
	s, reason, err := e.r.ParseReportShare(share, e.Leader())
	if err != nil {
		return Prep{Entry: Entry{Reason: reason}, Err: err}
	}
	p := Prep{Entry: Entry{Nonce: s.Nonce}}
	v, err := e.get()
	if err != nil {
		p.Reason, p.Err = RejectInternal, err
		return p
	}
	defer e.pool.Put(v)
	nonce := sumvec.Nonce(s.Nonce)
	st, ps, err := v.PrepInit(&e.vk, &nonce, e.aggID, s.public, s.input)
	if err != nil {
		p.Reason, p.Err = classify(err), fmt.Errorf("secagg: prep init: %w", err)
		return p
	}
	enc, err := ps.MarshalBinary()
	if err != nil {
		p.Reason, p.Err = RejectInternal, fmt.Errorf("secagg: encoding prep share: %w", err)
		return p
	}
	p.Payload, p.state = enc, sumvecState{st}
	return p
}

// Decide implements Engine.
func (e *SumVecEngine) Decide(own Prep, helper Entry) (Entry, OutShare) {
	m := Entry{Nonce: own.Nonce, Reason: own.Reason}
	switch {
	case !e.Leader():
		m.Reason = RejectInternal
		return m, nil
	case own.Reason != Accepted:
		return m, nil
	case helper.Reason != Accepted:
		m.Reason = helper.Reason
		return m, nil
	case helper.Nonce != own.Nonce:
		m.Reason = RejectNonceMismatch
		return m, nil
	}
	st, ok := own.state.(sumvecState)
	if !ok || st.st == nil {
		m.Reason = RejectInternal
		return m, nil
	}
	vp := e.r.vdaf.Params()
	var mine, theirs sumvec.PrepShare
	mine.New(&vp)
	theirs.New(&vp)
	if len(helper.Payload) != e.r.prepShareLen || theirs.UnmarshalBinary(helper.Payload) != nil || mine.UnmarshalBinary(own.Payload) != nil {
		m.Reason = RejectMalformed
		return m, nil
	}
	v, err := e.get()
	if err != nil {
		m.Reason = RejectInternal
		return m, nil
	}
	defer e.pool.Put(v)
	msg, err := v.PrepSharesToPrep([]sumvec.PrepShare{mine, theirs})
	if err != nil {
		m.Reason = classify(err)
		return m, nil
	}
	out, err := v.PrepNext(st.st, msg)
	if err != nil {
		m.Reason = classify(err)
		return m, nil
	}
	enc, err := msg.MarshalBinary()
	if err != nil {
		m.Reason = RejectInternal
		return m, nil
	}
	m.Payload = enc
	return m, sumvecOut{out}
}

// Next implements Engine.
func (e *SumVecEngine) Next(own Prep, leader Entry) (OutShare, error) {
	if leader.Reason != Accepted {
		return nil, nil
	}
	if own.Reason != Accepted {
		return nil, fmt.Errorf("secagg: the leader accepted a report the helper rejected (%v): %w", own.Reason, ErrProtocol)
	}
	if leader.Nonce != own.Nonce {
		return nil, fmt.Errorf("secagg: the leader's entry has another nonce: %w", ErrProtocol)
	}
	st, ok := own.state.(sumvecState)
	if !ok || st.st == nil {
		return nil, fmt.Errorf("secagg: report without a prep state: %w", ErrProtocol)
	}
	vp := e.r.vdaf.Params()
	var msg sumvec.PrepMessage
	msg.New(&vp)
	if len(leader.Payload) != e.r.prepMsgLen || msg.UnmarshalBinary(leader.Payload) != nil {
		return nil, fmt.Errorf("secagg: malformed prep message: %w", ErrProtocol)
	}
	v, err := e.get()
	if err != nil {
		return nil, err
	}
	defer e.pool.Put(v)
	out, err := v.PrepNext(st.st, &msg)
	if err != nil {
		return nil, fmt.Errorf("secagg: the leader's prep message does not match: %w: %w", ErrProtocol, err)
	}
	return sumvecOut{out}, nil
}

// NewAggregate implements Engine.
func (e *SumVecEngine) NewAggregate() *Aggregate {
	return &Aggregate{r: e.r, agg: e.r.vdaf.AggregateInit()}
}

// Aggregate is a server's running aggregate: the sum of the output shares
// folded so far and their count. It is what a server persists between
// steps (MarshalBinary, Round.ParseAggregate) and, at the end, its
// aggregate share (Share). Not safe for concurrent use.
type Aggregate struct {
	r        *Round
	agg      sumvec.AggShare
	pagg     *pine.AggShare // PINE rounds
	count    int
	released bool
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
	if a.pagg != nil {
		o, ok := out.(pineOut)
		if !ok {
			return errors.New("secagg: fold: not a PINE output share")
		}
		if err := a.pagg.Add(o.o); err != nil {
			return fmt.Errorf("secagg: fold: %w", err)
		}
		a.count++
		return nil
	}
	o, ok := out.(sumvecOut)
	if !ok || o.o == nil {
		return errors.New("secagg: fold: not a SumVec output share")
	}
	a.r.vdaf.AggregateUpdate(&a.agg, o.o)
	a.count++
	return nil
}

// Count returns the number of output shares folded.
func (a *Aggregate) Count() int { return a.count }

// Share hands out the aggregate share exactly once (a second noised copy
// of the same sum would let its receiver average the two noises away);
// the caller adds its noise (AggregateShare.AddNoise) before it leaves
// the server.
func (a *Aggregate) Share() (*AggregateShare, error) {
	if a.released {
		return nil, fmt.Errorf("secagg: aggregate share already released: %w", ErrProtocol)
	}
	a.released = true
	if a.pagg != nil {
		s := &AggregateShare{r: a.r, count: a.count, pshare: a.pagg}
		a.pagg = a.r.pn.NewAggShare()
		return s, nil
	}
	s := &AggregateShare{r: a.r, count: a.count, share: a.agg}
	a.agg = a.r.vdaf.AggregateInit()
	return s, nil
}

// aggregateMagic starts a persisted running aggregate.
const kindRunning byte = 'R'

// MarshalBinary encodes the running aggregate for persistence: header
// ('R', round) | count (4) | Dim x Field128. It never leaves the server
// (it is the exact, un-noised partial sum).
func (a *Aggregate) MarshalBinary() ([]byte, error) {
	if a.released {
		return nil, fmt.Errorf("secagg: aggregate already released: %w", ErrProtocol)
	}
	var enc []byte
	var err error
	if a.pagg != nil {
		enc, err = a.pagg.MarshalBinary()
	} else {
		enc, err = a.agg.MarshalBinary()
	}
	if err != nil {
		return nil, fmt.Errorf("secagg: encoding aggregate: %w", err)
	}
	b := a.r.header(kindRunning)
	b = binary.BigEndian.AppendUint32(b, uint32(a.count))
	return append(b, enc...), nil
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
	if r.pn != nil {
		pa, err := r.pn.ParseAggShare(b[headerLen+4:], int(n))
		if err != nil {
			return nil, fmt.Errorf("secagg: running aggregate: %w: %w", ErrMalformed, err)
		}
		return &Aggregate{r: r, count: int(n), pagg: pa}, nil
	}
	a := &Aggregate{r: r, count: int(n), agg: r.vdaf.AggregateInit()}
	if err := a.agg.UnmarshalBinary(b[headerLen+4:]); err != nil {
		return nil, fmt.Errorf("secagg: running aggregate: %w: %w", ErrMalformed, err)
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
