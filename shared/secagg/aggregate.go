package secagg

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/blanket-fl/blanket/shared/counts"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/pine"
)

// AggregateShare is one server's share of the round's sum: the sum of
// its output shares over the accepted reports, plus its noise once
// AddNoise has run.
type AggregateShare struct {
	r      *Round
	count  int
	noised bool
	pshare *pine.AggShare
	cshare *counts.Aggregate // the count blocks' (nil without counts)
}

// Count returns the number of reports aggregated.
func (a *AggregateShare) Count() int { return a.count }

// Noised tells whether AddNoise has been applied.
func (a *AggregateShare) Noised() bool { return a.noised }

// AddNoise adds, to every coordinate, K drawn from the discrete Gaussian
// N_Z(0, Sigma^2) (Canonne, Kamath and Steinke 2020, Algorithm 3; see
// discreteGaussian), as the Field64 element K mod q: the sum decodes as a
// signed integer. It must be called exactly once per server, with
// noise.Secure() in production.
//
// Guarantee: whatever the other server does, the unsharded sum released
// by the leader, as a function of the volunteers' encoded vectors, is
// rho-zCDP with rho = Sensitivity()^2 / (2 Sigma^2) under add/remove of
// one volunteer, by this server's noise alone: PINE's proof bounds the L2
// norm of every accepted report by Sensitivity() = NormBound
// (docs/secagg.md), so the sum has L2 sensitivity Sensitivity(); the
// discrete Gaussian is delta_i^2/(2 Sigma^2)-zCDP per coordinate at
// sensitivity delta_i (Canonne, Kamath and Steinke 2020, arXiv:2004.00010,
// Thm. 4); Renyi divergences of independent coordinates add, so the
// vector is sum_i delta_i^2/(2 Sigma^2) <= Delta^2/(2 Sigma^2)-zCDP; and
// everything else the leader sees (its own noise, the other server's
// share) is independent of this noise, so the release is
// post-processing. The same holds against the leader, who knows its own
// noise.
//
// With count blocks (Params.Counts) the same call adds N_Z(0,
// CountSigmas[i]²) to every coordinate of block i (counts.Aggregate.AddNoise)
// from the same source, so the blocks are noised exactly when, and as
// often as, the update: once per server and round. The round's joint
// release (update and blocks) is then accounted by privacy.SecAggJoint
// (counts.Spec.Release, roundspec.Spec.Release; docs/counts.md).
func (a *AggregateShare) AddNoise(src noise.Source) error {
	if a.noised {
		return errors.New("secagg: noise already added to this aggregate share")
	}
	g, err := newDiscreteGaussian(a.r.p.Sigma)
	if err != nil {
		return fmt.Errorf("secagg: add noise: %w", err)
	}
	k := make([]int64, a.r.p.Dim)
	for i := range k {
		k[i] = g.sample(src)
	}
	if a.cshare != nil {
		// Drawn before the update's noise is added, so that a failure
		// leaves the share un-noised (it cannot be sent: MarshalBinary).
		if err := a.cshare.AddNoise(a.r.p.CountSigmas, src); err != nil {
			return fmt.Errorf("secagg: add noise: %w", err)
		}
	}
	if err := a.pshare.AddSigned(k); err != nil {
		return fmt.Errorf("secagg: add noise: %w", err)
	}
	a.noised = true
	return nil
}

// MarshalBinary encodes the share as an 'A' message (the helper sends it
// to the leader). With Sigma > 0 it refuses a share without noise, so a
// server cannot send its exact share by mistake.
func (a *AggregateShare) MarshalBinary() ([]byte, error) {
	if a.r.p.Sigma > 0 && !a.noised {
		return nil, fmt.Errorf("secagg: aggregate share without noise: %w", ErrProtocol)
	}
	enc, err := a.pshare.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("secagg: encoding aggregate share: %w", err)
	}
	if a.count < 0 || a.count > a.r.p.MaxReports {
		return nil, fmt.Errorf("secagg: aggregate of %d reports exceeds max %d", a.count, a.r.p.MaxReports)
	}
	b := a.r.header(kindAggShare)
	b = binary.BigEndian.AppendUint32(b, uint32(a.count))
	var nz byte
	if a.noised {
		nz = 1
	}
	b = append(b, nz)
	b = append(b, enc...)
	if a.cshare != nil {
		c, err := a.cshare.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("secagg: encoding aggregate share: %w", err)
		}
		b = append(b, c...)
	}
	return b, nil
}

// ParseAggregateShare strictly decodes an 'A' message of this round; with
// Sigma > 0 it refuses a share without noise.
func (r *Round) ParseAggregateShare(b []byte) (*AggregateShare, error) {
	if _, err := r.checkHeader(b, kindAggShare); err != nil {
		return nil, err
	}
	if want := headerLen + 5 + r.aggShareLen; len(b) != want {
		return nil, fmt.Errorf("secagg: aggregate share of %d bytes, want %d: %w", len(b), want, ErrMalformed)
	}
	n := binary.BigEndian.Uint32(b[headerLen:])
	if uint64(n) > uint64(r.p.MaxReports) {
		return nil, fmt.Errorf("secagg: aggregate of %d reports exceeds max %d: %w", n, r.p.MaxReports, ErrMalformed)
	}
	nz := b[headerLen+4]
	if nz > 1 {
		return nil, fmt.Errorf("secagg: noised flag %d: %w", nz, ErrMalformed)
	}
	if nz == 0 && r.p.Sigma > 0 {
		return nil, fmt.Errorf("secagg: aggregate share without noise in a round with sigma=%v: %w", r.p.Sigma, ErrMalformed)
	}
	u := headerLen + 5 + pineElemSize*r.p.Dim
	ps, err := r.pn.ParseAggShare(b[headerLen+5:u], int(n))
	if err != nil {
		return nil, fmt.Errorf("secagg: aggregate share: %w: %w", ErrMalformed, err)
	}
	a := &AggregateShare{r: r, count: int(n), noised: nz == 1, pshare: ps}
	if r.cl != nil {
		if a.cshare, err = r.cl.spec.ParseAggregate(b[u:], int(n), nz == 1); err != nil {
			return nil, fmt.Errorf("secagg: aggregate share: %w: %w", ErrMalformed, err)
		}
	}
	return a, nil
}

// Result is the unsharded output of a round.
type Result struct {
	// Count is the number of accepted reports n.
	Count int
	// NoiseShares is how many of the two aggregate shares carried noise:
	// 2 whenever Sigma > 0 (Unshard refuses anything else), 0 for the
	// noise-free parameters of tests.
	NoiseShares int
	// Sum is the noisy sum of the encoded vectors in integer units:
	// sum_j q_j + N, N the servers' discrete Gaussian noise (variance
	// NoiseShares * Sigma^2 per coordinate, up to the discrete
	// Gaussian's variance being at most Sigma^2).
	Sum []int64
	// Mean is Sum / (Count * Scale): the estimate of the mean clipped
	// update in model units, up to the encoding's rounding to the grid
	// (at most 1/(2 Scale) per coordinate and report).
	Mean []float64
	// Counts are the count blocks' decoded noisy sums over the same Count
	// reports (counts.Spec.Unshard; nil without counts).
	Counts *counts.Sums
	// CountAggregates are the two aggregate shares of the blocks, leader's
	// then helper's (counts.Aggregate.MarshalBinary), kept so that a
	// record can decode the counts again (nil without counts).
	CountAggregates [2][]byte
}

// Unshard is the leader's last step (VDAF Unshard, draft-irtf-cfrg-vdaf
// §7.2.5): it merges its own aggregate share with the helper's 'A'
// message, checks that both cover the same number of reports, and
// removes the public offsets: n*EntryBound() for the measurement
// encoding and NoiseOffset per noised share. A coordinate outside
// [0, 2^62) before the offsets are removed returns ErrNoiseOverflow
// (probability at most OffsetTailProbability() <= 2^-40 for honest
// servers).
func (l *Leader) Unshard(own *AggregateShare, helperMsg []byte) (*Result, error) {
	if own != nil && own.count != l.p.count {
		return nil, fmt.Errorf("secagg: unshard: leader aggregated %d reports, its share holds %d: %w", l.p.count, own.count, ErrProtocol)
	}
	return l.p.r.Unshard(own, helperMsg)
}

// Unshard is Leader.Unshard for an aggregate share the leader built one
// report at a time (Engine, Aggregate.Share): own, noised, and the
// helper's 'A' message over the same number of reports.
func (r *Round) Unshard(own *AggregateShare, helperMsg []byte) (*Result, error) {
	if own == nil || own.r != r {
		return nil, errors.New("secagg: unshard: leader's aggregate share is not from this round")
	}
	h, err := r.ParseAggregateShare(helperMsg)
	if err != nil {
		return nil, err
	}
	if h.count != own.count {
		return nil, fmt.Errorf("secagg: unshard: leader aggregated %d reports, helper %d: %w", own.count, h.count, ErrProtocol)
	}
	if own.count == 0 {
		return nil, errors.New("secagg: unshard: no accepted reports")
	}
	return r.unshardPine(own, h)
}

// unshardPine merges two PINE aggregate shares: the signed Field64 sum in
// fixed-point units, refused (ErrNoiseOverflow) if a coordinate reaches
// 2^62 in absolute value, which Validate makes an event of probability at
// most 2^-40 for honest servers.
func (r *Round) unshardPine(own, h *AggregateShare) (*Result, error) {
	a, err := own.pshare.MarshalBinary()
	if err != nil {
		return nil, err
	}
	b, err := h.pshare.MarshalBinary()
	if err != nil {
		return nil, err
	}
	sum, err := r.pn.UnshardInts(a, b)
	if err != nil {
		return nil, fmt.Errorf("secagg: unshard: %w", err)
	}
	res := &Result{Count: own.count, Sum: sum, Mean: make([]float64, r.p.Dim)}
	for _, s := range []*AggregateShare{own, h} {
		if s.noised {
			res.NoiseShares++
		}
	}
	if r.p.Sigma > 0 && res.NoiseShares != 2 {
		return nil, fmt.Errorf("secagg: unshard: %d of 2 aggregate shares carry noise: %w", res.NoiseShares, ErrProtocol)
	}
	denom := float64(own.count) * r.p.Scale
	for i, v := range sum {
		if v >= maxTotal || v <= -maxTotal {
			return nil, fmt.Errorf("secagg: unshard: coordinate %d is %d: %w", i, v, ErrNoiseOverflow)
		}
		res.Mean[i] = float64(v) / denom
	}
	if r.cl != nil {
		if own.cshare == nil || h.cshare == nil {
			return nil, fmt.Errorf("secagg: unshard: an aggregate share without its count blocks: %w", ErrProtocol)
		}
		la, err := own.cshare.MarshalBinary()
		if err != nil {
			return nil, err
		}
		ha, err := h.cshare.MarshalBinary()
		if err != nil {
			return nil, err
		}
		sums, err := r.cl.spec.Unshard(la, ha, own.count)
		if err != nil {
			return nil, fmt.Errorf("secagg: unshard: %w", err)
		}
		res.Counts, res.CountAggregates = &sums, [2][]byte{la, ha}
	}
	return res, nil
}
