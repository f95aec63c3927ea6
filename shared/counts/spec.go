package counts

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/blanket-fl/blanket/shared/internal/dgauss"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/pine"
)

// VerifyKeySize is the length of a round's PINE verify key (secure
// summation's, shared/secagg.VerifyKeySize, which may be reused here).
const VerifyKeySize = 32

// Spec is the list of count blocks of a task's reports: at most one
// evaluation block, then one block per survey question.
type Spec struct {
	blocks []*Block
}

// MaxBlocks bounds the blocks of a report.
const MaxBlocks = 256

// NewSpec returns the spec of the given blocks (in report order).
func NewSpec(blocks ...*Block) (*Spec, error) {
	if len(blocks) == 0 || len(blocks) > MaxBlocks {
		return nil, fmt.Errorf("counts: %d blocks outside [1, %d]", len(blocks), MaxBlocks)
	}
	evals := 0
	for i, b := range blocks {
		if b == nil || b.p == nil {
			return nil, fmt.Errorf("counts: block %d is nil", i)
		}
		if b.kind == KindEval {
			evals++
		}
	}
	if evals > 1 {
		return nil, errors.New("counts: at most one evaluation block")
	}
	return &Spec{blocks: append([]*Block(nil), blocks...)}, nil
}

// Blocks returns the blocks (do not modify them).
func (s *Spec) Blocks() []*Block { return s.blocks }

// BlockShare is what a volunteer sends for one block: PINE's public share
// and the two servers' input shares (the leader's: measurement and proof
// shares; the helper's: four 32-byte seeds).
type BlockShare struct {
	Public, Leader, Helper []byte
}

// Report is a volunteer's count report: one BlockShare per block, bound
// to the report's nonce (BlockNonce).
type Report struct {
	Blocks []BlockShare
}

// BlockNonce is the PINE nonce of block i of the report whose nonce is
// nonce (the update's PINE nonce): SHA-256("blanket counts nonce" ||
// nonce || uint16 i) truncated to 16 bytes. Both servers recompute it, so
// a count block cannot be moved to another report or position: its joint
// randomness and query randomness depend on the nonce.
func BlockNonce(nonce [16]byte, i int) [16]byte {
	h := sha256.New()
	h.Write([]byte("blanket counts nonce"))
	h.Write(nonce[:])
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], uint16(i))
	h.Write(b[:])
	var out [16]byte
	copy(out[:], h.Sum(nil))
	return out
}

// Shard encodes a volunteer's values (one per block, in order), proves
// each block's L2 bound with PINE and splits it between the servers. The
// randomness is drawn from src: noise.Secure() in production. A value an
// honest volunteer cannot have (correct > evaluated, more rows than the
// bound, an answer out of range) is refused.
func (s *Spec) Shard(values []Value, nonce [16]byte, src noise.Source) (Report, error) {
	if len(values) != len(s.blocks) {
		return Report{}, fmt.Errorf("counts: %d values for %d blocks", len(values), len(s.blocks))
	}
	if src == nil {
		return Report{}, errors.New("counts: nil randomness source")
	}
	r := Report{Blocks: make([]BlockShare, len(s.blocks))}
	for i, b := range s.blocks {
		x, err := b.encode(values[i])
		if err != nil {
			return Report{}, fmt.Errorf("counts: block %d: %w", i, err)
		}
		pub, lead, help, err := b.p.Shard(x, BlockNonce(nonce, i), src)
		if err != nil {
			return Report{}, fmt.Errorf("counts: block %d: %w", i, err)
		}
		r.Blocks[i] = BlockShare{Public: pub, Leader: lead, Helper: help}
	}
	return r, nil
}

// Server is one server's preparation of count reports (not safe for
// concurrent use: one per goroutine). The check it runs is PINE's, block
// by block: a report is accepted only if every block's proofs pass, and
// then each block's encoded vector has L2 norm at most its Sensitivity
// (except with PINE's soundness error).
type Server struct {
	s     *Spec
	aggID int
	vk    []byte
	vf    []*pine.Verifier
}

// NewServer returns the leader's (leader = true) or the helper's
// preparer, with the round's 32-byte PINE verify key (the update's key
// may be reused: the blocks' algorithm identifiers separate the domains).
func (s *Spec) NewServer(leader bool, verifyKey []byte) (*Server, error) {
	if len(verifyKey) != VerifyKeySize {
		return nil, fmt.Errorf("counts: verify key of %d bytes, want %d", len(verifyKey), VerifyKeySize)
	}
	sv := &Server{s: s, aggID: 1, vk: append([]byte(nil), verifyKey...)}
	if leader {
		sv.aggID = 0
	}
	for _, b := range s.blocks {
		sv.vf = append(sv.vf, b.p.NewVerifier())
	}
	return sv, nil
}

// Prep is one server's state of one report between PrepInit and PrepNext.
type Prep struct {
	st    []*pine.PrepState
	Share [][]byte // per block: the prep share for the leader
}

// PrepInit runs PINE's PrepInit on every block of a report: inputs[i] is
// this server's input share of block i (BlockShare.Leader or .Helper),
// publics[i] the block's public share. A rejected block rejects the report
// (the error wraps pine's *RejectError).
func (sv *Server) PrepInit(nonce [16]byte, publics, inputs [][]byte) (Prep, error) {
	n := len(sv.s.blocks)
	if len(publics) != n || len(inputs) != n {
		return Prep{}, fmt.Errorf("counts: %d public and %d input shares for %d blocks", len(publics), len(inputs), n)
	}
	p := Prep{st: make([]*pine.PrepState, n), Share: make([][]byte, n)}
	for i := range n {
		bn := BlockNonce(nonce, i)
		st, ps, err := sv.vf[i].PrepInit(sv.vk, sv.aggID, bn[:], publics[i], inputs[i])
		if err != nil {
			return Prep{}, fmt.Errorf("counts: block %d: %w", i, err)
		}
		p.st[i], p.Share[i] = st, ps
	}
	return p, nil
}

// PrepSharesToPrep is the leader's decision: it combines both servers'
// prep shares of every block (PINE's PrepSharesToPrep decides every proof:
// norm equality, bits, the squared-norm range and the wraparound checks)
// and returns the per-block prep messages for the helper. An error
// rejects the report.
func (s *Spec) PrepSharesToPrep(leader, helper [][]byte) ([][]byte, error) {
	if len(leader) != len(s.blocks) || len(helper) != len(s.blocks) {
		return nil, fmt.Errorf("counts: %d and %d prep shares for %d blocks", len(leader), len(helper), len(s.blocks))
	}
	msgs := make([][]byte, len(s.blocks))
	for i, b := range s.blocks {
		m, err := b.p.PrepSharesToPrep(leader[i], helper[i])
		if err != nil {
			return nil, fmt.Errorf("counts: block %d: %w", i, err)
		}
		msgs[i] = m
	}
	return msgs, nil
}

// Out is one server's output share of one accepted report.
type Out struct{ o []pine.OutShare }

// Blocks is the number of blocks of the output share (0 for the zero Out).
func (o Out) Blocks() int { return len(o.o) }

// PrepNext checks the leader's messages against this server's state and
// returns the report's output share.
func (s *Spec) PrepNext(p Prep, msgs [][]byte) (Out, error) {
	if len(p.st) != len(s.blocks) || len(msgs) != len(s.blocks) {
		return Out{}, errors.New("counts: prep state or messages of another spec")
	}
	out := Out{o: make([]pine.OutShare, len(s.blocks))}
	for i, b := range s.blocks {
		if p.st[i] == nil {
			return Out{}, fmt.Errorf("counts: block %d: no prep state", i)
		}
		o, err := b.p.PrepNext(p.st[i], msgs[i])
		if err != nil {
			return Out{}, fmt.Errorf("counts: block %d: %w", i, err)
		}
		out.o[i] = o
	}
	return out, nil
}

// Aggregate is one server's running sum of the accepted reports' output
// shares, block by block, then its noise.
type Aggregate struct {
	s      *Spec
	agg    []*pine.AggShare
	n      int
	noised bool
}

// NewAggregate returns an empty aggregate share.
func (s *Spec) NewAggregate() *Aggregate {
	a := &Aggregate{s: s}
	for _, b := range s.blocks {
		a.agg = append(a.agg, b.p.NewAggShare())
	}
	return a
}

// Add folds one accepted report's output share.
func (a *Aggregate) Add(o Out) error {
	if a.noised {
		return errors.New("counts: aggregate already noised")
	}
	if len(o.o) != len(a.agg) {
		return errors.New("counts: output share of another spec")
	}
	for i := range a.agg {
		if err := a.agg[i].Add(o.o[i]); err != nil {
			return fmt.Errorf("counts: block %d: %w", i, err)
		}
	}
	a.n++
	return nil
}

// Count is the number of reports folded.
func (a *Aggregate) Count() int { return a.n }

// Merge adds b, a running sum of the same spec over other reports, into
// a; b is unchanged. Neither may be noised. On error a is unchanged.
func (a *Aggregate) Merge(b *Aggregate) error {
	if a.noised || b == nil || b.noised {
		return errors.New("counts: merging a noised aggregate")
	}
	if b.s != a.s || len(b.agg) != len(a.agg) {
		return errors.New("counts: merging an aggregate of another spec")
	}
	for i := range a.agg { // all checked first: on error a is unchanged
		if a.agg[i].Len() != b.agg[i].Len() {
			return fmt.Errorf("counts: block %d: merging an aggregate of another length", i)
		}
	}
	for i := range a.agg {
		if err := a.agg[i].Merge(b.agg[i]); err != nil {
			return fmt.Errorf("counts: block %d: %w", i, err)
		}
	}
	a.n += b.n
	return nil
}

// AddNoise adds to every coordinate of block i one draw of the discrete
// Gaussian N_Z(0, sigmas[i]²) (fixed-point units; secagg's sampler,
// Canonne-Kamath-Steinke 2020 Algorithm 3), once per server, with
// noise.Secure() in production.
//
// Guarantee: with σ_i = sigmas[i] and Δ_i = Blocks()[i].Sensitivity(),
// this server's noise alone makes the blocks' released sums satisfy, under
// replacing one volunteer's data, the Rényi bound α·Σ_i (2Δ_i)²/(2σ_i²)
// (CKS'20 Prop. 5, coordinates independent); released with the update's
// noisy sum in the same round, the joint release is accounted by
// privacy.SecAggJoint (docs/counts.md). Each σ_i must
// be in [4, 2^40].
func (a *Aggregate) AddNoise(sigmas []float64, src noise.Source) error {
	if a.noised {
		return errors.New("counts: noise already added")
	}
	if len(sigmas) != len(a.agg) {
		return fmt.Errorf("counts: %d sigmas for %d blocks", len(sigmas), len(a.agg))
	}
	if src == nil {
		return errors.New("counts: nil randomness source")
	}
	for i, s := range sigmas {
		if !(s >= 4) {
			return fmt.Errorf("counts: block %d: sigma %v below 4", i, s)
		}
	}
	for i, s := range sigmas {
		k, err := dgauss.Noise(s, a.s.blocks[i].Dim(), src)
		if err != nil {
			return fmt.Errorf("counts: block %d noise: %w", i, err)
		}
		if err := a.agg[i].AddSigned(k); err != nil {
			return fmt.Errorf("counts: block %d noise: %w", i, err)
		}
	}
	a.noised = true
	return nil
}

// MarshalBinary encodes the aggregate share: the blocks' PINE aggregate
// shares concatenated (8 bytes per coordinate).
func (a *Aggregate) MarshalBinary() ([]byte, error) {
	var out []byte
	for i, g := range a.agg {
		b, err := g.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("counts: block %d: %w", i, err)
		}
		out = append(out, b...)
	}
	return out, nil
}

// Noised tells whether AddNoise has run.
func (a *Aggregate) Noised() bool { return a.noised }

// AggregateSize is the length of an encoded Aggregate
// (Aggregate.MarshalBinary): 8 bytes per coordinate of every block.
func (s *Spec) AggregateSize() int {
	n := 0
	for _, b := range s.blocks {
		n += 8 * b.Dim()
	}
	return n
}

// ParseAggregate strictly decodes an aggregate share (MarshalBinary) of
// n reports, noised or not (the caller's own record says which): exactly
// AggregateSize bytes of canonical field elements.
func (s *Spec) ParseAggregate(b []byte, n int, noised bool) (*Aggregate, error) {
	if len(b) != s.AggregateSize() {
		return nil, fmt.Errorf("counts: aggregate of %d bytes, want %d", len(b), s.AggregateSize())
	}
	if n < 0 {
		return nil, errors.New("counts: negative report count")
	}
	a := &Aggregate{s: s, n: n, noised: noised}
	off := 0
	for i, blk := range s.blocks {
		m := 8 * blk.Dim()
		g, err := blk.p.ParseAggShare(b[off:off+m], n)
		if err != nil {
			return nil, fmt.Errorf("counts: block %d: %w", i, err)
		}
		a.agg = append(a.agg, g)
		off += m
	}
	return a, nil
}

// Sums are the decoded (noisy) count sums of a round: per block, the
// counts (KindEval: correct, evaluated; KindQuestion: the K options, the
// real ones first) over N accepted reports.
type Sums struct {
	N      int
	Counts [][]float64
}

// Unshard adds both servers' encoded aggregate shares of n accepted
// reports and decodes the count sums (Block.decode: exact without noise).
func (s *Spec) Unshard(leader, helper []byte, n int) (Sums, error) {
	want := s.AggregateSize()
	if len(leader) != want || len(helper) != want {
		return Sums{}, fmt.Errorf("counts: aggregate shares of %d and %d bytes, want %d", len(leader), len(helper), want)
	}
	out := Sums{N: n, Counts: make([][]float64, len(s.blocks))}
	off := 0
	for i, b := range s.blocks {
		m := 8 * b.Dim()
		ints, err := b.p.UnshardInts(leader[off:off+m], helper[off:off+m])
		if err != nil {
			return Sums{}, fmt.Errorf("counts: block %d: %w", i, err)
		}
		if out.Counts[i], err = b.decode(ints, n); err != nil {
			return Sums{}, fmt.Errorf("counts: block %d: %w", i, err)
		}
		off += m
	}
	return out, nil
}
