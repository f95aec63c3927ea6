package secagg

import (
	"errors"
	"fmt"
	"sync"

	"github.com/blanket-fl/blanket/shared/counts"
	"github.com/blanket-fl/blanket/shared/pine"
)

// PineEngine is Engine for PINE (shared/pine, draft-chen-cfrg-vdaf-pine):
// the product's secure summation. Every report the two servers accept has
// an encoded gradient of L2 norm at most Params.NormBound (pine's
// Sensitivity, rounding included), except with the probability
// pine.Pine.Soundness states; that bound is what each server's noise is
// calibrated to (AggregateShare.AddNoise).
type PineEngine struct {
	r     *Round
	aggID int
	vk    []byte
	pool  sync.Pool // *pine.Verifier: not safe for concurrent use
	cpool sync.Pool // *counts.Server (rounds with count blocks)
}

var _ Engine = (*PineEngine)(nil)

// NewPineEngine returns the PINE engine of a PINE round for the leader
// (leader = true) or the helper, with the round's 32-byte verify key
// (DeriveVerifyKey).
func NewPineEngine(r *Round, leader bool, verifyKey []byte) (*PineEngine, error) {
	if r == nil || r.pn == nil {
		return nil, errors.New("secagg: not a PINE round")
	}
	if len(verifyKey) != VerifyKeySize {
		return nil, fmt.Errorf("secagg: verify key of %d bytes, want %d", len(verifyKey), VerifyKeySize)
	}
	e := &PineEngine{r: r, aggID: 1, vk: append([]byte(nil), verifyKey...)}
	if leader {
		e.aggID = 0
	}
	return e, nil
}

// Leader implements Engine.
func (e *PineEngine) Leader() bool { return e.aggID == 0 }

type pineOut struct {
	o  pine.OutShare
	co counts.Out // the count blocks' (rounds with counts)
}

func (pineOut) isOutShare() {}

type pineState struct {
	st *pine.PrepState
	cs counts.Prep // the count blocks' (rounds with counts)
}

// pineReason maps a PINE rejection to the round's Reason.
func pineReason(err error) Reason {
	switch pine.ReasonOf(err) {
	case pine.RejectMalformed:
		return RejectMalformed
	case pine.RejectNormEquality, pine.RejectInvalidProof:
		return RejectInvalidProof
	case pine.RejectJointRand:
		return RejectJointRand
	case pine.RejectEvalPoint:
		return RejectInvalidProof
	}
	return RejectInternal
}

// PrepInit implements Engine.
func (e *PineEngine) PrepInit(share []byte) Prep {
	s, reason, err := e.r.ParseReportShare(share, e.Leader())
	if err != nil {
		return Prep{Entry: Entry{Reason: reason}, Err: err}
	}
	p := Prep{Entry: Entry{Nonce: s.Nonce}}
	vf, ok := e.pool.Get().(*pine.Verifier)
	if !ok {
		vf = e.r.pn.NewVerifier()
	}
	defer e.pool.Put(vf)
	st, ps, err := vf.PrepInit(e.vk, e.aggID, s.Nonce[:], s.pub, s.in)
	if err != nil {
		p.Reason, p.Err = pineReason(err), fmt.Errorf("secagg: prep init: %w", err)
		return p
	}
	state := pineState{st: st}
	if e.r.cl != nil {
		cs, err := e.countPrep(s)
		if err != nil {
			p.Reason, p.Err = RejectCountBlock, fmt.Errorf("secagg: prep init: %w", err)
			return p
		}
		state.cs = cs
		ps = append(ps[:len(ps):len(ps)], concat(cs.Share)...)
	}
	p.Payload, p.state = ps, state
	return p
}

func concat(bs [][]byte) []byte {
	var out []byte
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}

// Decide implements Engine: PrepSharesToPrep decides every proof (the
// norm-equality and main PINE circuits, which include the L2 bound and
// the wraparound checks), then PrepNext.
func (e *PineEngine) Decide(own Prep, helper Entry) (Entry, OutShare) {
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
	st, ok := own.state.(pineState)
	if !ok || st.st == nil {
		m.Reason = RejectInternal
		return m, nil
	}
	if len(helper.Payload) != e.r.prepShareLen {
		m.Reason = RejectMalformed
		return m, nil
	}
	u := e.r.pn.PrepShareSize()
	msg, err := e.r.pn.PrepSharesToPrep(own.Payload[:u], helper.Payload[:u])
	if err != nil {
		m.Reason = pineReason(err)
		return m, nil
	}
	out, err := e.r.pn.PrepNext(st.st, msg)
	if err != nil {
		m.Reason = pineReason(err)
		return m, nil
	}
	o := pineOut{o: out}
	if e.r.cl != nil {
		cm, co, err := e.countDecide(st.cs, own.Payload[u:], helper.Payload[u:])
		if err != nil {
			m.Reason = RejectCountBlock
			return m, nil
		}
		msg, o.co = append(msg[:len(msg):len(msg)], cm...), co
	}
	m.Payload = msg
	return m, o
}

// Next implements Engine.
func (e *PineEngine) Next(own Prep, leader Entry) (OutShare, error) {
	if leader.Reason != Accepted {
		return nil, nil
	}
	if own.Reason != Accepted {
		return nil, fmt.Errorf("secagg: the leader accepted a report the helper rejected (%v): %w", own.Reason, ErrProtocol)
	}
	if leader.Nonce != own.Nonce {
		return nil, fmt.Errorf("secagg: the leader's entry has another nonce: %w", ErrProtocol)
	}
	st, ok := own.state.(pineState)
	if !ok || st.st == nil {
		return nil, fmt.Errorf("secagg: report without a prep state: %w", ErrProtocol)
	}
	if len(leader.Payload) != e.r.prepMsgLen {
		return nil, fmt.Errorf("secagg: malformed prep message: %w", ErrProtocol)
	}
	u := e.r.pn.PrepMsgSize()
	out, err := e.r.pn.PrepNext(st.st, leader.Payload[:u])
	if err != nil {
		return nil, fmt.Errorf("secagg: the leader's prep message does not match: %w: %w", ErrProtocol, err)
	}
	o := pineOut{o: out}
	if e.r.cl != nil {
		if o.co, err = e.countNext(st.cs, leader.Payload[u:]); err != nil {
			return nil, fmt.Errorf("secagg: the leader's count prep messages do not match: %w: %w", ErrProtocol, err)
		}
	}
	return o, nil
}

// NewAggregate implements Engine.
func (e *PineEngine) NewAggregate() *Aggregate { return e.r.newAggregate() }
