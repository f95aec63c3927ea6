package roundspec

import (
	"math"

	"fmt"

	"github.com/blanket-fl/blanket/shared/counts"
	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/wire"
)

// Count blocks (shared/counts, docs/counts.md): a secure-summation round
// may announce private count blocks next to the update (wire.Params.Counts:
// kind, rows or options, per-server σ). Every party derives the same
// counts.Spec from them here, and the round's privacy release is the joint
// one (countsRelease).

// buildCounts derives the count blocks' spec from the announced blocks and
// puts it, with the blocks' σ, into the secagg parameters.
func (s *Spec) buildCounts() error {
	spec, err := CountSpec(s.p)
	if err != nil || spec == nil {
		return err
	}
	sigmas := make([]float64, s.p.Counts.Len())
	for i := range sigmas {
		sigmas[i] = s.p.Counts.At(i).Sigma
	}
	sp, err := s.sa.WithCounts(spec, sigmas)
	if err != nil {
		return fmt.Errorf("roundspec: secagg count blocks: %w", err)
	}
	s.sa = &sp
	return nil
}

// CountSpec is the counts.Spec of announced parameters' count blocks (nil
// without blocks): counts.NewEval(N) for an evaluation block,
// counts.NewQuestion(N) for a question, in the announced order.
func CountSpec(p wire.Params) (*counts.Spec, error) {
	if p.Counts.Len() == 0 {
		return nil, nil
	}
	var blocks []*counts.Block
	for i, c := range p.Counts.Blocks() {
		var b *counts.Block
		var err error
		switch c.Kind {
		case wire.CountEval:
			b, err = counts.NewEval(int(c.N))
		case wire.CountQuestion:
			b, err = counts.NewQuestion(int(c.N))
		default:
			err = fmt.Errorf("unknown kind %d", c.Kind)
		}
		if err != nil {
			return nil, fmt.Errorf("roundspec: count block %d: %w", i, err)
		}
		blocks = append(blocks, b)
	}
	spec, err := counts.NewSpec(blocks...)
	if err != nil {
		return nil, fmt.Errorf("roundspec: %w", err)
	}
	return spec, nil
}

// Counts returns the round's count blocks and their per-server σ (nil, nil
// without blocks or for a shuffle protocol).
func (s *Spec) Counts() (*counts.Spec, []float64) {
	if s.sa == nil || s.sa.Counts == nil {
		return nil, nil
	}
	return s.sa.Counts, append([]float64(nil), s.sa.CountSigmas...)
}

// countsRelease turns the update's secure-summation release r into the
// round's joint release when the round has count blocks (unchanged
// otherwise): SecAggSigma, SecAggSensitivity and D from
// counts.Spec.Release (privacy.SecAggJoint: every ledger row charges that
// Release at least the joint cost of the update and the blocks, each
// noised by one server with its own σ, under replace-one), K = D, and
// every part in SecAggParts for the audit.
//
// Guarantee: privacy.SecAggJoint's (docs/counts.md, "The noise and the
// charge"). Should the joint derivation fail (a σ below 4, which
// wire.Params.Validate refuses), the release is r with an infinite
// sensitivity, which every row refuses to charge rather than undercharge.
func (s *Spec) countsRelease(r privacy.Release) privacy.Release {
	cs, sigmas := s.Counts()
	if cs == nil {
		return r
	}
	sigma, sens, d, err := cs.Release(r.SecAggSigma, r.SecAggSensitivity, r.D, sigmas)
	parts, perr := cs.Parts(sigmas)
	if err != nil || perr != nil {
		r.SecAggSensitivity = math.Inf(1)
		return r
	}
	r.SecAggParts = append([]privacy.SecAggPart{{Sigma: r.SecAggSigma, Sensitivity: r.SecAggSensitivity, D: r.D}}, parts...)
	r.SecAggSigma, r.SecAggSensitivity, r.D, r.K = sigma, sens, d, d
	return r
}

// CalibrateCounts returns p (a secure-summation round without count
// blocks) with the blocks announced, each block's per-server σ calibrated
// by counts.Spec.Calibrate (privacy.CalibrateSecAggExtra): the smallest
// common noise multiplier σ_i/Δ_i such that `rounds` joint rounds at
// check-in rate p.CheckInP charge, at delta, at most the update's own
// charge plus extraEps (replace-one, the ledger's relation). The blocks'
// Sigma fields are ignored (calibrated here).
func CalibrateCounts(p wire.Params, blocks []wire.CountBlock, rounds int, delta, extraEps float64) (wire.Params, error) {
	if len(blocks) == 0 {
		return p, nil
	}
	if p.Protocol != wire.ProtocolSecAgg || p.Counts.Len() != 0 {
		return wire.Params{}, fmt.Errorf("roundspec: count blocks need a secure-summation round without blocks, got %v with %d", p.Protocol, p.Counts.Len())
	}
	s, err := New(p)
	if err != nil {
		return wire.Params{}, err
	}
	q := p
	blocks = append([]wire.CountBlock(nil), blocks...)
	for i := range blocks {
		blocks[i].Sigma = 4 // placeholder for CountSpec, which reads kinds only
	}
	q.Counts = wire.NewCountList(blocks...)
	spec, err := CountSpec(q)
	if err != nil {
		return wire.Params{}, err
	}
	sigmas, err := spec.Calibrate(s.sa.Sigma, s.sa.Sensitivity(), int(p.D), p.CheckInP, rounds, delta, extraEps)
	if err != nil {
		return wire.Params{}, fmt.Errorf("roundspec: %w", err)
	}
	for i := range blocks {
		blocks[i].Sigma = sigmas[i]
	}
	q.Counts = wire.NewCountList(blocks...)
	if _, err := New(q); err != nil {
		return wire.Params{}, err
	}
	return q, nil
}
