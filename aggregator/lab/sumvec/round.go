package sumvec

import (
	"encoding/binary"
	"fmt"

	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/secagg"
	"github.com/cloudflare/circl/vdaf/prio3/sumvec"
)

// Byte-string layouts (all integers big-endian). Every message starts
// with the header
//
//	version (1) = 1 | kind (1) | round (8)
//
// and then, by kind:
//
//	'L' leader input share: nonce (16) | public share (64) | Prio3 leader share
//	                        (measurement share Dim*Bits*16, proof share, blind 32)
//	'H' helper input share: nonce (16) | public share (64) | seed (32) | blind (32)
//	'P' helper prep shares: count (4) | count x [nonce (16) | reason (1) |
//	                        Prio3 prep share (verifier*16 + 32) iff reason = 0]
//	'M' leader prep messages: count (4) | count x [nonce (16) | reason (1) |
//	                        joint randomness seed (32) iff reason = 0]
//	'A' aggregate share:    count (4) | noised (1) = 0 or 1 | Dim x Field128 (16)
//
// Field elements are Field128 little-endian and must be canonical (< p);
// decoders refuse trailing bytes, unknown kinds and reasons, and counts
// above Params.MaxReports, so every accepted string has one encoding.
const (
	// version is the version byte of every message of this package.
	version    = 1
	headerLen  = 10
	nonceSize  = 16
	seedSize   = 32
	publicSize = 2 * seedSize
	// VerifyKeySize is the length of the verification key that the two
	// servers share for a round (fresh random bytes, agreed over their
	// authenticated channel).
	VerifyKeySize = secagg.VerifyKeySize

	kindLeaderShare byte = 'L'
	kindHelperShare byte = 'H'
	kindHelperPrep  byte = 'P'
	kindLeaderPrep  byte = 'M'
	kindAggShare    byte = 'A'
)

// contextPrefix domain-separates Blanket's use of Prio3; the round number
// follows it, so shares, proofs and prep messages of one round are
// useless in another (the joint randomness and query randomness differ).
const contextPrefix = "blanket/secagg/v1/round:"

// ErrMalformed is wrapped by every decoding error of this package
// (shared/secagg's).
var ErrMalformed = secagg.ErrMalformed

// Round is one secure-summation round: the Params and the round number
// that every share of the round is bound to. It is immutable and safe for
// concurrent use.
type Round struct {
	p  Params
	id uint64
	// vdaf is used only for its (read-only) parameters; every operation
	// that runs the XOF gets its own instance (SumVec is not safe for
	// concurrent use).
	vdaf *sumvec.SumVec

	publicLen      int // public share bytes
	leaderShareLen int // Prio3 leader input share bytes
	helperShareLen int
	prepShareLen   int
	prepMsgLen     int
	aggShareLen    int
}

// NewRound validates p and prepares round id.
func NewRound(p Params, id uint64) (*Round, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	r := &Round{p: p, id: id, publicLen: publicSize}
	v, err := r.newVDAF()
	if err != nil {
		return nil, err
	}
	r.vdaf = v
	vp := v.Params()
	var ls, hs sumvec.InputShare
	ls.New(&vp, 0)
	hs.New(&vp, 1)
	var ps sumvec.PrepShare
	ps.New(&vp)
	var pm sumvec.PrepMessage
	pm.New(&vp)
	agg := v.AggregateInit()
	for _, c := range []struct {
		m interface{ MarshalBinary() ([]byte, error) }
		n *int
	}{{&ls, &r.leaderShareLen}, {&hs, &r.helperShareLen}, {&ps, &r.prepShareLen}, {&pm, &r.prepMsgLen}, {&agg, &r.aggShareLen}} {
		b, err := c.m.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("sumvec: sizing prio3 messages: %w", err)
		}
		*c.n = len(b)
	}
	if r.helperShareLen != 2*seedSize || r.prepMsgLen != seedSize || r.aggShareLen != 16*p.Dim {
		return nil, fmt.Errorf("sumvec: unexpected prio3 sizes helper=%d prep=%d agg=%d", r.helperShareLen, r.prepMsgLen, r.aggShareLen)
	}
	return r, nil
}

func (r *Round) newVDAF() (*sumvec.SumVec, error) {
	ctx := binary.BigEndian.AppendUint64([]byte(contextPrefix), r.id)
	v, err := sumvec.New(2, uint(r.p.Dim), r.p.Bits, r.p.ChunkLength, ctx)
	if err != nil {
		return nil, fmt.Errorf("sumvec: sumvec: %w", err)
	}
	return v, nil
}

// Params returns the round's parameters.
func (r *Round) Params() Params { return r.p }

// ID returns the round number the shares are bound to.
func (r *Round) ID() uint64 { return r.id }

// LeaderShareSize and HelperShareSize return the exact lengths of the
// byte strings Shard returns (before sealing); they do not depend on the
// data.
func (r *Round) LeaderShareSize() int { return headerLen + nonceSize + r.publicLen + r.leaderShareLen }

// HelperShareSize: see LeaderShareSize.
func (r *Round) HelperShareSize() int { return headerLen + nonceSize + r.publicLen + r.helperShareLen }

// PrepShareSize returns the bytes per accepted report in the helper's
// prep-share message.
func (r *Round) PrepShareSize() int { return nonceSize + 1 + r.prepShareLen }

func (r *Round) header(kind byte) []byte {
	b := make([]byte, headerLen, 64)
	b[0] = version
	b[1] = kind
	binary.BigEndian.PutUint64(b[2:], r.id)
	return b
}

// checkHeader returns the reason a message's header is refused, or
// Accepted.
func (r *Round) checkHeader(b []byte, kind byte) (Reason, error) {
	if len(b) < headerLen {
		return RejectWrongLength, fmt.Errorf("sumvec: %d bytes, shorter than a header: %w", len(b), ErrMalformed)
	}
	if b[0] != version || b[1] != kind {
		return RejectMalformed, fmt.Errorf("sumvec: version %d kind %q, want %d %q: %w", b[0], b[1], version, kind, ErrMalformed)
	}
	if id := binary.BigEndian.Uint64(b[2:]); id != r.id {
		return RejectWrongRound, fmt.Errorf("sumvec: message of round %d in round %d: %w", id, r.id, ErrMalformed)
	}
	return Accepted, nil
}

// Shard is the volunteer's side (VDAF Shard, draft-irtf-cfrg-vdaf §7.2.1):
// it quantizes the update x with Quantize (L2 clip to Clip, conditional
// randomized rounding, so ||q||_2 <= Sensitivity() — the guarantee the
// servers' noise is calibrated to), encodes q_i + EntryBound() as a SumVec
// measurement in [0, 2^Bits), draws a fresh 16-byte nonce and the Prio3
// randomness from src, and returns the encodings of the leader's and the
// helper's input shares, each carrying the nonce and public share. Their
// lengths are LeaderShareSize() and HelperShareSize() whatever x is.
//
// Each share alone is uniformly distributed given x's length (additive
// sharing over Field128, the helper's share a seed); the caller must seal
// leader to the aggregator and helper to the relay. src must be
// noise.Secure() in production (the nonce and seeds are secrets until
// sealed); a seeded source makes Shard deterministic for tests.
func (r *Round) Shard(x []float64, src noise.Source) (leader, helper []byte, err error) {
	q, err := Quantize(r.p, x, src)
	if err != nil {
		return nil, nil, err
	}
	return r.shardQuantized(q, src)
}

// shardQuantized shards an already quantized vector (tests use it to
// build out-of-range reports, which Shard itself refuses).
func (r *Round) shardQuantized(q []int64, src noise.Source) (leader, helper []byte, err error) {
	if len(q) != r.p.Dim {
		return nil, nil, fmt.Errorf("sumvec: quantized update has length %d, want %d", len(q), r.p.Dim)
	}
	meas := make([]uint64, len(q))
	b := r.p.EntryBound()
	for i, v := range q {
		meas[i] = uint64(v + b)
	}
	v, err := r.newVDAF()
	if err != nil {
		return nil, nil, err
	}
	var nonce sumvec.Nonce
	fill(src, nonce[:])
	vp := v.Params()
	rnd := make([]byte, vp.RandSize())
	fill(src, rnd)
	pub, shares, err := v.Shard(meas, &nonce, rnd)
	if err != nil {
		return nil, nil, fmt.Errorf("sumvec: prio3 shard: %w", err)
	}
	if len(shares) != 2 || len(pub) != publicSize {
		return nil, nil, fmt.Errorf("sumvec: prio3 shard returned %d shares, public share %d bytes", len(shares), len(pub))
	}
	out := [2][]byte{}
	for i, kind := range []byte{kindLeaderShare, kindHelperShare} {
		enc, err := shares[i].MarshalBinary()
		if err != nil {
			return nil, nil, fmt.Errorf("sumvec: encoding input share: %w", err)
		}
		m := r.header(kind)
		m = append(m, nonce[:]...)
		m = append(m, pub...)
		out[i] = append(m, enc...)
	}
	return out[0], out[1], nil
}

// fill writes uniformly random bytes from src into b.
func fill(src noise.Source, b []byte) {
	var w [8]byte
	for i := 0; i < len(b); i += 8 {
		binary.LittleEndian.PutUint64(w[:], src.Uint64())
		copy(b[i:], w[:])
	}
}

// ReportShare is one server's decoded share of one report.
type ReportShare struct {
	// Leader tells whether this is the leader's share.
	Leader bool
	// Nonce is the report's public nonce (its identifier in the round).
	Nonce  [nonceSize]byte
	public sumvec.PublicShare
	input  sumvec.InputShare
}

// ParseReportShare strictly decodes a leader (leader = true) or helper
// input share of this round. The returned Reason classifies a failure
// (RejectWrongLength, RejectMalformed, RejectWrongRound); the error wraps
// ErrMalformed.
func (r *Round) ParseReportShare(b []byte, leader bool) (*ReportShare, Reason, error) {
	kind, want := kindHelperShare, r.HelperShareSize()
	if leader {
		kind, want = kindLeaderShare, r.LeaderShareSize()
	}
	if len(b) != want {
		return nil, RejectWrongLength, fmt.Errorf("sumvec: input share of %d bytes, want %d: %w", len(b), want, ErrMalformed)
	}
	if reason, err := r.checkHeader(b, kind); err != nil {
		return nil, reason, err
	}
	s := &ReportShare{Leader: leader}
	off := headerLen
	copy(s.Nonce[:], b[off:])
	off += nonceSize
	s.public = append(sumvec.PublicShare(nil), b[off:off+publicSize]...)
	off += publicSize
	vp := r.vdaf.Params()
	aggID := uint(1)
	if leader {
		aggID = 0
	}
	s.input.New(&vp, aggID)
	if err := s.input.UnmarshalBinary(b[off:]); err != nil {
		return nil, RejectMalformed, fmt.Errorf("sumvec: input share: %w: %w", ErrMalformed, err)
	}
	return s, Accepted, nil
}

// marshal re-encodes the share exactly as ParseReportShare read it.
func (s *ReportShare) marshal(r *Round) ([]byte, error) {
	kind := kindHelperShare
	if s.Leader {
		kind = kindLeaderShare
	}
	m := r.header(kind)
	m = append(m, s.Nonce[:]...)
	enc, err := s.input.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("sumvec: encoding input share: %w", err)
	}
	m = append(m, s.public...)
	return append(m, enc...), nil
}

// MarshalReportShare re-encodes a decoded share of this round exactly as
// ParseReportShare read it.
func (r *Round) MarshalReportShare(s *ReportShare) ([]byte, error) { return s.marshal(r) }
