package sumvec

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/secagg"
	"github.com/cloudflare/circl/vdaf/prio3/sumvec"
)

// AggregateShare is one server's share of the round's sum: the sum of
// its output shares over the accepted reports, plus its noise once
// AddNoise has run.
type AggregateShare struct {
	r      *Round
	count  int
	noised bool
	share  sumvec.AggShare
}

// Count returns the number of reports aggregated.
func (a *AggregateShare) Count() int { return a.count }

// Noised tells whether AddNoise has been applied.
func (a *AggregateShare) Noised() bool { return a.noised }

// AddNoise adds, to every coordinate, NoiseOffset + K with K drawn from
// the discrete Gaussian N_Z(0, Sigma^2) (Canonne, Kamath and Steinke
// 2020, Algorithm 3; see discreteGaussian), as a Field128 element (K < 0
// is p - |K|). It must be called exactly once per server, with
// noise.Secure() in production.
//
// Guarantee: whatever the other server does, the unsharded sum released
// by the leader, as a function of the honest volunteers' quantized
// vectors, is rho-zCDP with rho = Sensitivity()^2 / (2 Sigma^2) under
// add/remove of one volunteer, by this server's noise alone: the sum
// of the vectors has L2 sensitivity Sensitivity() (Quantize), the
// discrete Gaussian is delta_i^2/(2 Sigma^2)-zCDP per coordinate at
// sensitivity delta_i (Canonne, Kamath and Steinke 2020, arXiv:2004.00010,
// Thm. 4), Renyi divergences of independent coordinates add, so the
// vector is sum_i delta_i^2/(2 Sigma^2) <= Delta^2/(2 Sigma^2)-zCDP, and
// everything else the leader sees (its own noise, the other
// server's share) is independent of this noise, so the release is
// post-processing. The same holds against the leader, who knows its own
// noise. The offset is public and deterministic.
func (a *AggregateShare) AddNoise(src noise.Source) error {
	if a.noised {
		return errors.New("sumvec: noise already added to this aggregate share")
	}
	ks, err := secagg.DiscreteGaussianNoise(a.r.p.Sigma, a.r.p.Dim, src)
	if err != nil {
		return fmt.Errorf("sumvec: add noise: %w", err)
	}
	off := int64(a.r.p.NoiseOffset) // <= 2^60 by Validate
	v := make(sumvec.Vec, a.r.p.Dim)
	for i := range v {
		k := off + ks[i]
		if k >= 0 {
			_ = v[i].SetUint64(uint64(k))
		} else {
			var t sumvec.Fp
			_ = t.SetUint64(uint64(-k))
			v[i].Sub(&v[i], &t)
		}
	}
	// AggShare's vector is not exported: add the noise as an output
	// share (both are Dim Field128 elements with the same encoding).
	enc, err := v.MarshalBinary()
	if err != nil {
		return fmt.Errorf("sumvec: encoding noise: %w", err)
	}
	vp := a.r.vdaf.Params()
	var out sumvec.OutShare
	out.New(&vp)
	if err := out.UnmarshalBinary(enc); err != nil {
		return fmt.Errorf("sumvec: noise as output share: %w", err)
	}
	a.r.vdaf.AggregateUpdate(&a.share, &out)
	a.noised = true
	return nil
}

// MarshalBinary encodes the share as an 'A' message (the helper sends it
// to the leader). With Sigma > 0 it refuses a share without noise, so a
// server cannot send its exact share by mistake.
func (a *AggregateShare) MarshalBinary() ([]byte, error) {
	if a.r.p.Sigma > 0 && !a.noised {
		return nil, fmt.Errorf("sumvec: aggregate share without noise: %w", ErrProtocol)
	}
	enc, err := a.share.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("sumvec: encoding aggregate share: %w", err)
	}
	if a.count < 0 || a.count > a.r.p.MaxReports {
		return nil, fmt.Errorf("sumvec: aggregate of %d reports exceeds max %d", a.count, a.r.p.MaxReports)
	}
	b := a.r.header(kindAggShare)
	b = binary.BigEndian.AppendUint32(b, uint32(a.count))
	var nz byte
	if a.noised {
		nz = 1
	}
	b = append(b, nz)
	return append(b, enc...), nil
}

// ParseAggregateShare strictly decodes an 'A' message of this round; with
// Sigma > 0 it refuses a share without noise.
func (r *Round) ParseAggregateShare(b []byte) (*AggregateShare, error) {
	if _, err := r.checkHeader(b, kindAggShare); err != nil {
		return nil, err
	}
	if want := headerLen + 5 + r.aggShareLen; len(b) != want {
		return nil, fmt.Errorf("sumvec: aggregate share of %d bytes, want %d: %w", len(b), want, ErrMalformed)
	}
	n := binary.BigEndian.Uint32(b[headerLen:])
	if uint64(n) > uint64(r.p.MaxReports) {
		return nil, fmt.Errorf("sumvec: aggregate of %d reports exceeds max %d: %w", n, r.p.MaxReports, ErrMalformed)
	}
	nz := b[headerLen+4]
	if nz > 1 {
		return nil, fmt.Errorf("sumvec: noised flag %d: %w", nz, ErrMalformed)
	}
	if nz == 0 && r.p.Sigma > 0 {
		return nil, fmt.Errorf("sumvec: aggregate share without noise in a round with sigma=%v: %w", r.p.Sigma, ErrMalformed)
	}
	a := &AggregateShare{r: r, count: int(n), noised: nz == 1, share: r.vdaf.AggregateInit()}
	if err := a.share.UnmarshalBinary(b[headerLen+5:]); err != nil {
		return nil, fmt.Errorf("sumvec: aggregate share: %w: %w", ErrMalformed, err)
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
	// Sum is the noisy sum of the quantized vectors in integer units:
	// sum_j q_j + N, N the servers' discrete Gaussian noise (variance
	// NoiseShares * Sigma^2 per coordinate, up to the discrete
	// Gaussian's variance being at most Sigma^2).
	Sum []int64
	// Mean is Sum / (Count * Scale): the estimate of the mean clipped
	// update in model units. It is unbiased up to the conditional
	// rounding bias of Quantize (L2 norm at most
	// sqrt(d) Beta/(1-Beta)/Scale, negligible).
	Mean []float64
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
		return nil, fmt.Errorf("sumvec: unshard: leader aggregated %d reports, its share holds %d: %w", l.p.count, own.count, ErrProtocol)
	}
	return l.p.r.unshard(own, helperMsg)
}

// unshard merges the leader's noised aggregate share own with the helper's
// 'A' message over the same number of reports.
func (r *Round) unshard(own *AggregateShare, helperMsg []byte) (*Result, error) {
	if own == nil || own.r != r {
		return nil, errors.New("sumvec: unshard: leader's aggregate share is not from this round")
	}
	h, err := r.ParseAggregateShare(helperMsg)
	if err != nil {
		return nil, err
	}
	if h.count != own.count {
		return nil, fmt.Errorf("sumvec: unshard: leader aggregated %d reports, helper %d: %w", own.count, h.count, ErrProtocol)
	}
	if own.count == 0 {
		return nil, errors.New("sumvec: unshard: no accepted reports")
	}
	vals, err := r.vdaf.Unshard([]sumvec.AggShare{own.share, h.share}, uint(own.count))
	if err != nil {
		return nil, fmt.Errorf("sumvec: unshard: %w: %w", ErrNoiseOverflow, err)
	}
	if vals == nil || len(*vals) != r.p.Dim {
		return nil, fmt.Errorf("sumvec: unshard returned a vector of the wrong length: %w", ErrProtocol)
	}
	res := &Result{Count: own.count, Sum: make([]int64, r.p.Dim), Mean: make([]float64, r.p.Dim)}
	for _, a := range []*AggregateShare{own, h} {
		if a.noised {
			res.NoiseShares++
		}
	}
	if r.p.Sigma > 0 && res.NoiseShares != 2 {
		return nil, fmt.Errorf("sumvec: unshard: %d of 2 aggregate shares carry noise: %w", res.NoiseShares, ErrProtocol)
	}
	offset := int64(own.count)*r.p.EntryBound() + int64(res.NoiseShares)*int64(r.p.NoiseOffset)
	denom := float64(own.count) * r.p.Scale
	for i, u := range *vals {
		if u >= maxTotal {
			return nil, fmt.Errorf("sumvec: unshard: coordinate %d is %d: %w", i, u, ErrNoiseOverflow)
		}
		res.Sum[i] = int64(u) - offset
		res.Mean[i] = float64(res.Sum[i]) / denom
	}
	return res, nil
}
