package secagg

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/pine"
)

// Byte-string layouts (all integers big-endian). Every message starts
// with the header
//
//	version (1) = 1 | kind (1) | round (8)
//
// and then, by kind:
//
//	'L' leader input share: nonce (16) | PINE public share | PINE leader share
//	'H' helper input share: nonce (16) | PINE public share | PINE helper share
//	                        (four 32-byte seeds)
//	'P' helper prep shares: count (4) | count x [nonce (16) | reason (1) |
//	                        PINE prep share iff reason = 0]
//	'M' leader prep messages: count (4) | count x [nonce (16) | reason (1) |
//	                        PINE prep message iff reason = 0]
//	'A' aggregate share:    count (4) | noised (1) = 0 or 1 | Dim x Field64 (8)
//	'R' running aggregate:  count (4) | Dim x Field64 (never leaves a server)
//	'S' helper Prep:        format (1) = 1 | nonce (16) | reason (1) | ...
//	                        (helperprep.go; never leaves the relay's party)
//
// The PINE parts are shared/pine's encodings (their sizes are the
// pine.Pine's). Field elements are Field64 little-endian and must be
// canonical (< q);
// decoders refuse trailing bytes, unknown kinds and reasons, and counts
// above Params.MaxReports, so every accepted string has one encoding.
const (
	// version is the version byte of every message of this package.
	version   = 1
	headerLen = 10
	nonceSize = 16
	// pineElemSize is the bytes of one Field64 element.
	pineElemSize = 8
	// VerifyKeySize is the length of the verification key that the two
	// servers share for a round (fresh random bytes, agreed over their
	// authenticated channel).
	VerifyKeySize = 32

	kindLeaderShare byte = 'L'
	kindHelperShare byte = 'H'
	kindHelperPrep  byte = 'P'
	kindLeaderPrep  byte = 'M'
	kindAggShare    byte = 'A'
)

// ErrMalformed is wrapped by every decoding error of this package.
var ErrMalformed = errors.New("malformed message")

// Round is one secure-summation round: the Params and the round number
// that every share of the round is bound to. It is immutable and safe for
// concurrent use.
type Round struct {
	p  Params
	id uint64
	// pn is the round's PINE instance; immutable and safe for concurrent
	// use.
	pn *pine.Pine

	publicLen      int // public share bytes
	leaderShareLen int // PINE leader input share bytes
	helperShareLen int
	prepShareLen   int
	prepMsgLen     int
	aggShareLen    int
	// cl is the count blocks' layout (nil without counts, counts.go);
	// prepShareLen, prepMsgLen and aggShareLen include the blocks'.
	cl *countLayout
}

// NewRound validates p and prepares round id.
func NewRound(p Params, id uint64) (*Round, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	pn, err := pine.ForBlanket(p.Dim, p.Clip)
	if err != nil {
		return nil, fmt.Errorf("secagg: %w", err)
	}
	r := &Round{p: p, id: id, pn: pn, publicLen: pn.PublicShareSize()}
	r.leaderShareLen, r.helperShareLen = pn.LeaderShareSize(), pn.HelperShareSize()
	r.prepShareLen, r.prepMsgLen = pn.PrepShareSize(), pn.PrepMsgSize()
	r.aggShareLen = pineElemSize * p.Dim
	if p.Counts != nil {
		r.cl = newCountLayout(p.Counts)
		r.prepShareLen += r.cl.prepShareLen
		r.prepMsgLen += r.cl.prepMsgLen
		r.aggShareLen += r.cl.aggLen
	}
	return r, nil
}

// countsLen returns the blocks' bytes in the leader's (leader = true) or
// the helper's input share.
func (r *Round) countsLen(leader bool) int {
	switch {
	case r.cl == nil:
		return 0
	case leader:
		return r.cl.leadLen
	}
	return r.cl.helpLen
}

// Params returns the round's parameters.
func (r *Round) Params() Params { return r.p }

// ID returns the round number the shares are bound to.
func (r *Round) ID() uint64 { return r.id }

// LeaderShareSize and HelperShareSize return the exact lengths of the
// byte strings Shard returns (before sealing); they do not depend on the
// data.
func (r *Round) LeaderShareSize() int {
	return headerLen + nonceSize + r.publicLen + r.leaderShareLen + r.countsLen(true)
}

// HelperShareSize: see LeaderShareSize.
func (r *Round) HelperShareSize() int {
	return headerLen + nonceSize + r.publicLen + r.helperShareLen + r.countsLen(false)
}

// Pine returns the round's PINE instance.
func (r *Round) Pine() *pine.Pine { return r.pn }

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
		return RejectWrongLength, fmt.Errorf("secagg: %d bytes, shorter than a header: %w", len(b), ErrMalformed)
	}
	if b[0] != version || b[1] != kind {
		return RejectMalformed, fmt.Errorf("secagg: version %d kind %q, want %d %q: %w", b[0], b[1], version, kind, ErrMalformed)
	}
	if id := binary.BigEndian.Uint64(b[2:]); id != r.id {
		return RejectWrongRound, fmt.Errorf("secagg: message of round %d in round %d: %w", id, r.id, ErrMalformed)
	}
	return Accepted, nil
}

// Shard is the volunteer's side (VDAF Shard, draft-irtf-cfrg-vdaf §7.2.1,
// PINE's sharding, draft-chen-cfrg-vdaf-pine): it clips the update x to L2
// norm Clip (clipL2), encodes it on PINE's fixed-point grid
// (pine.Pine.Encode: round half to even, so that the encoding's norm is at
// most NormBound = Sensitivity() — the bound the servers' noise is
// calibrated to — and the report is accepted), draws a fresh 16-byte nonce
// and PINE's randomness from src, and returns the encodings of the
// leader's and the helper's input shares (pine.Pine.Shard), each carrying
// the nonce and public share. Their lengths are LeaderShareSize() and
// HelperShareSize() whatever x is.
//
// Each share alone is uniformly distributed given x's length (additive
// sharing over Field64, the helper's share four 32-byte seeds); the caller
// must seal leader to the aggregator and helper to the relay. src must be
// noise.Secure() in production (the nonce and seeds are secrets until
// sealed); a seeded source makes Shard deterministic for tests.
func (r *Round) Shard(x []float64, src noise.Source) (leader, helper []byte, err error) {
	if r.cl != nil {
		return nil, nil, errors.New("secagg: the round has count blocks: shard with ShardCounts")
	}
	if len(x) != r.p.Dim {
		return nil, nil, fmt.Errorf("secagg: update has length %d, want %d", len(x), r.p.Dim)
	}
	c, err := clipL2(x, r.p.Clip)
	if err != nil {
		return nil, nil, err
	}
	return r.shardPineRaw(c, src)
}

// shardPineRaw shards x without clipping (tests use it for an over-norm
// report, which PINE's proof must reject).
func (r *Round) shardPineRaw(x []float64, src noise.Source) (leader, helper []byte, err error) {
	var nonce [nonceSize]byte
	fill(src, nonce[:])
	pub, ls, hs, err := r.pn.Shard(x, nonce, src)
	if err != nil {
		return nil, nil, fmt.Errorf("secagg: pine shard: %w", err)
	}
	out := [2][]byte{}
	for i, kind := range []byte{kindLeaderShare, kindHelperShare} {
		sh := ls
		if i == 1 {
			sh = hs
		}
		m := r.header(kind)
		m = append(m, nonce[:]...)
		m = append(m, pub...)
		out[i] = append(m, sh...)
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
	Nonce [nonceSize]byte
	// pub and in are the report's PINE public and input shares.
	pub, in []byte
	// cpub and cin are the count blocks' (nil without counts).
	cpub, cin [][]byte
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
		return nil, RejectWrongLength, fmt.Errorf("secagg: input share of %d bytes, want %d: %w", len(b), want, ErrMalformed)
	}
	if reason, err := r.checkHeader(b, kind); err != nil {
		return nil, reason, err
	}
	s := &ReportShare{Leader: leader}
	off := headerLen
	copy(s.Nonce[:], b[off:])
	off += nonceSize
	// PINE's PrepInit checks the field elements (strictly canonical) and
	// the lengths are fixed: the bytes are kept as they are.
	end := len(b) - r.countsLen(leader)
	s.pub = append([]byte(nil), b[off:off+r.publicLen]...)
	s.in = append([]byte(nil), b[off+r.publicLen:end]...)
	if r.cl != nil {
		s.cpub, s.cin = r.cl.splitShares(append([]byte(nil), b[end:]...), leader)
	}
	return s, Accepted, nil
}

// marshal re-encodes the share exactly as ParseReportShare read it.
func (s *ReportShare) marshal(r *Round) []byte {
	kind := kindHelperShare
	if s.Leader {
		kind = kindLeaderShare
	}
	m := r.header(kind)
	m = append(m, s.Nonce[:]...)
	m = append(m, s.pub...)
	m = append(m, s.in...)
	for i := range s.cpub {
		m = append(append(m, s.cpub[i]...), s.cin[i]...)
	}
	return m
}

// MarshalReportShare re-encodes a decoded share of this round exactly as
// ParseReportShare read it.
func (r *Round) MarshalReportShare(s *ReportShare) ([]byte, error) { return s.marshal(r), nil }
