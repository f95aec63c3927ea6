package sumvec

import (
	"errors"
	"fmt"
	"math"
)

// maxTailProbability bounds, for every accepted Params, the probability
// that the noise of one round exceeds the offsets so that the unsharded
// value leaves the decodable range (Params.OffsetTailProbability). When
// that happens Unshard returns ErrNoiseOverflow; nothing wraps silently.
const maxTailProbability = 0x1p-40

// defaultBeta is the conditional-rounding parameter of NewParams: the
// probability bound that one randomized rounding exceeds the norm bound
// and is resampled.
const defaultBeta = 0x1p-20

// maxDim, maxBits and maxReports keep every integer in the package within
// int64 with a large margin: |q_i| <= 2^19, sum q_i^2 <= 2^58.
const (
	maxDim     = 1 << 20
	maxBits    = 20
	maxReports = 1 << 24
	maxSigma   = 0x1p40
	// maxTotal bounds the largest unsharded value: it must fit in an int64
	// (and so in the uint64 that circl's SumVec decoder returns), far below
	// the Field128 modulus (about 2^128), so sums never wrap the field.
	maxTotal = 1 << 62
)

// Params are the public parameters of one secure-summation round. All
// parties must use identical Params (they belong in the round spec).
//
// Units: the model update x (float64, length Dim) is clipped to L2 norm
// Clip and multiplied by Scale; "integer units" are the units of the
// quantized vector q = round(Scale * clip(x)). The noisy sum and Sigma,
// NoiseOffset and Sensitivity are in integer units; Result.Mean is back in
// model units.
type Params struct {
	// Dim is the length d of the update (7850 for MNIST softmax
	// regression).
	Dim int
	// Clip is the L2 clipping norm C of the float update.
	Clip float64
	// Bits is the number of bits per SumVec entry. Honest entries are
	// q_i + B in [0, 2B] with B = EntryBound() = 2^(Bits-1) - 1; the
	// validity proof enforces [0, 2^Bits), i.e. q_i in [-B, B+1].
	Bits uint
	// Scale is the number of integer units per model unit. Scale*Clip
	// must be at most EntryBound(), so no honest entry is ever clamped.
	Scale float64
	// Beta is the conditional-rounding parameter (0 < Beta <= 1/2): one
	// randomized rounding exceeds NormBoundSq() with probability at most
	// Beta, and is then resampled (see Quantize).
	Beta float64
	// Sigma is the standard-deviation parameter, in integer units, of
	// the discrete Gaussian N_Z(0, Sigma^2) that EACH server adds to each
	// coordinate of its aggregate share. Alone, one server's noise makes
	// the released sum rho-zCDP with rho = Sensitivity()^2/(2 Sigma^2)
	// for the add/remove-one-volunteer relation (Canonne, Kamath and
	// Steinke 2020, arXiv:2004.00010, Thm. 4 per coordinate, summed over
	// the independent coordinates; see AddNoise). 0 is accepted
	// only so that tests can check exact recovery; AddNoise refuses it.
	Sigma float64
	// NoiseOffset is the public offset each server adds with its noise,
	// so that the unsharded value stays in [0, 2^62) except with
	// probability OffsetTailProbability() <= maxTailProbability. Unshard
	// subtracts it again.
	NoiseOffset uint64
	// MaxReports is the largest number of reports one round may
	// aggregate; the field-overflow check uses it.
	MaxReports int
	// ChunkLength is SumVec's chunk length: the number of range checks
	// folded into one call of the ParallelSum gadget. It trades proof
	// and prep-share size (about 2*ChunkLength field elements) against
	// preparation time (see defaultChunkLength).
	ChunkLength uint
}

// NewParams returns the parameters used by Blanket for an update of
// length dim clipped to L2 norm clip, bits per entry, per-server noise
// sigma (integer units; 0 for noise-free tests) and at most maxReports
// reports per round: the largest scale that needs no clamping
// (Scale*Clip = 2^(bits-1) - 1), Beta = defaultBeta, the smallest offset
// with tail probability <= maxTailProbability, and defaultChunkLength.
func NewParams(dim int, clip float64, bits uint, sigma float64, maxReports int) (Params, error) {
	if bits < 2 || bits > maxBits {
		return Params{}, fmt.Errorf("sumvec: bits=%d outside [2, %d]", bits, maxBits)
	}
	if dim < 1 || dim > maxDim {
		return Params{}, fmt.Errorf("sumvec: dim=%d outside [1, %d]", dim, maxDim)
	}
	p := Params{
		Dim:         dim,
		Clip:        clip,
		Bits:        bits,
		Scale:       float64(int64(1)<<(bits-1)-1) / clip,
		Beta:        defaultBeta,
		Sigma:       sigma,
		NoiseOffset: minNoiseOffset(sigma, dim),
		MaxReports:  maxReports,
		ChunkLength: defaultChunkLength(dim, bits),
	}
	// Scale*Clip may round up past B by an ulp; pull it back.
	for p.Scale*p.Clip > float64(p.EntryBound()) {
		p.Scale = math.Nextafter(p.Scale, 0)
	}
	if err := p.Validate(); err != nil {
		return Params{}, err
	}
	return p, nil
}

// defaultChunkLength returns the SumVec chunk length Blanket uses for a
// measurement of dim*bits field elements: the one that makes the number
// of gadget calls 31, so that the gadget's wire polynomials are
// interpolated on 32 points (a power of two, no padding). Preparation
// time falls as the chunk grows while the prep share and proof grow as
// 2*ChunkLength elements. BenchmarkChunkLength at d = 7850, 8 bits (CPU
// for leader plus helper per report, prep share): 7 calls 22.9 ms 287
// KB, 15 calls 23.4 ms 134 KB, 31 calls 23.8 ms 65 KB, 63 calls 25.7 ms
// 32 KB, 127 calls 26.4 ms 16 KB, 255 calls 30.7 ms 8 KB; the leader's
// share is 1.02-1.07 MB from 31 calls down. 31 calls is within 4% of the
// fastest with a prep share a quarter of its size.
func defaultChunkLength(dim int, bits uint) uint {
	l := uint(dim) * bits
	const calls = 31
	c := (l + calls - 1) / calls
	if c == 0 {
		c = 1
	}
	return c
}

// minNoiseOffset returns the smallest per-server offset o with
// d*exp(-o^2/sigma^2) <= maxTailProbability (see OffsetTailProbability);
// 0 for sigma = 0.
func minNoiseOffset(sigma float64, dim int) uint64 {
	if !(sigma > 0) || dim < 1 || sigma > maxSigma {
		return 0
	}
	o := math.Ceil(sigma * math.Sqrt(math.Log(float64(dim))-math.Log(maxTailProbability)))
	for o > 0 && tailProb(sigma, dim, o-1) <= maxTailProbability {
		o--
	}
	for tailProb(sigma, dim, o) > maxTailProbability {
		o++
	}
	return uint64(o)
}

func tailProb(sigma float64, dim int, o float64) float64 {
	return float64(dim) * math.Exp(-o*o/(sigma*sigma))
}

// EntryBound returns B = 2^(Bits-1) - 1: honest quantized entries lie in
// [-B, B] and are encoded as q_i + B in [0, 2B].
func (p Params) EntryBound() int64 { return int64(1)<<(p.Bits-1) - 1 }

// ClipUnits returns c = Scale*Clip, the clipping norm in integer units.
func (p Params) ClipUnits() float64 { return p.Scale * p.Clip }

// NormBoundSq returns the integer bound on ||q||_2^2 that Quantize
// enforces by resampling (conditional randomized rounding, Kairouz, Liu
// and Steinke, "The Distributed Discrete Gaussian Mechanism for Federated
// Learning with Secure Aggregation", ICML 2021, arXiv:2102.06387, §3):
//
//	floor(min(c^2 + d/4 + sqrt(2 ln(1/Beta)) (c + sqrt(d)/2), (c + sqrt(d))^2))
//
// with c = ClipUnits(). Why one rounding exceeds it with probability at
// most Beta: with y = Scale*clip(x), ||y|| <= c, each rounded q_i is
// floor(y_i) or floor(y_i)+1, so E[q_i^2] = y_i^2 + p(1-p) <= y_i^2 + 1/4
// and q_i^2 ranges over an interval of length |2 floor(y_i) + 1| <=
// 2|y_i| + 1; the squared lengths sum to at most (2c + sqrt(d))^2, and
// Hoeffding's inequality gives Pr[||q||^2 > ||y||^2 + d/4 + t] <= Beta at
// t = sqrt(2 ln(1/Beta)) (c + sqrt(d)/2). The second term of the min is
// the deterministic bound ||q|| <= ||y|| + sqrt(d).
func (p Params) NormBoundSq() int64 {
	c := p.ClipUnits()
	d := float64(p.Dim)
	hoeff := c*c + d/4 + math.Sqrt(2*math.Log(1/p.Beta))*(c+math.Sqrt(d)/2)
	det := (c + math.Sqrt(d)) * (c + math.Sqrt(d))
	return int64(math.Floor(math.Min(hoeff, det)))
}

// Sensitivity returns Δ = sqrt(NormBoundSq()), the L2 sensitivity in
// integer units of the sum of honest volunteers' quantized vectors under
// the add/remove-one-volunteer relation: every honest vector has
// ||q||_2 <= Δ exactly (checked in integers by Quantize), whatever the
// float input. Under replace-one the sensitivity is 2Δ. The count of
// accepted reports is released too and is not protected by this noise
// (the relay knows who connected).
func (p Params) Sensitivity() float64 {
	return math.Sqrt(float64(p.NormBoundSq()))
}

// OffsetTailProbability bounds the probability that one round's noise
// pushes some unsharded coordinate out of [0, 2^62): per coordinate the
// two servers' noise N1 + N2 is 2 Sigma^2-subgaussian (the discrete
// Gaussian is Sigma^2-subgaussian, E[exp(tK)] <= exp(t^2 Sigma^2/2), as
// Canonne, Kamath and Steinke 2020 show), so Pr[N1 + N2 < -2 NoiseOffset] <= exp(-NoiseOffset^2/Sigma^2),
// and a union bound over the d coordinates gives d exp(-o^2/Sigma^2).
// The upper side has the same bound and is covered by Validate's
// headroom (the value exceeds 2^62 only if N1 + N2 > 2 o). It
// returns 0 for Sigma = 0.
func (p Params) OffsetTailProbability() float64 {
	if p.Sigma == 0 {
		return 0
	}
	return tailProb(p.Sigma, p.Dim, float64(p.NoiseOffset))
}

// MeasurementLength returns the number of Field128 elements of a SumVec
// measurement, Dim*Bits (each entry is sent as its bits).
func (p Params) MeasurementLength() int { return p.Dim * int(p.Bits) }

var errParams = errors.New("invalid parameters")

// Validate checks every field and refuses parameters under which the
// field arithmetic could overflow: the largest unsharded value,
// MaxReports*(2^Bits - 1) (sum of entries the proof admits) + 4*NoiseOffset (the offsets of both
// servers plus an upper noise tail of the same size), must stay below
// 2^62, far below the Field128 modulus (about 2^128) and within the
// uint64 that SumVec's decoder returns; below 0 it is protected by the
// offsets with probability 1 - OffsetTailProbability() >= 1 - 2^-40.
func (p Params) Validate() error {
	switch {
	case p.Dim < 1 || p.Dim > maxDim:
		return fmt.Errorf("sumvec: dim=%d outside [1, %d]: %w", p.Dim, maxDim, errParams)
	case !(p.Clip > 0) || math.IsInf(p.Clip, 0):
		return fmt.Errorf("sumvec: clip=%v must be finite and > 0: %w", p.Clip, errParams)
	case p.Bits < 2 || p.Bits > maxBits:
		return fmt.Errorf("sumvec: bits=%d outside [2, %d]: %w", p.Bits, maxBits, errParams)
	case !(p.Scale > 0) || math.IsInf(p.Scale, 0):
		return fmt.Errorf("sumvec: scale=%v must be finite and > 0: %w", p.Scale, errParams)
	case p.ClipUnits() > float64(p.EntryBound()):
		return fmt.Errorf("sumvec: scale*clip=%v exceeds the entry bound %d of %d bits: %w",
			p.ClipUnits(), p.EntryBound(), p.Bits, errParams)
	case !(p.Beta > 0) || p.Beta > 0.5:
		return fmt.Errorf("sumvec: beta=%v outside (0, 1/2]: %w", p.Beta, errParams)
	case !(p.Sigma >= 0) || p.Sigma > maxSigma:
		return fmt.Errorf("sumvec: sigma=%v outside [0, 2^40]: %w", p.Sigma, errParams)
	case p.Sigma > 0 && p.Sigma < 1:
		return fmt.Errorf("sumvec: sigma=%v below one integer unit: %w", p.Sigma, errParams)
	case p.Sigma == 0 && p.NoiseOffset != 0:
		return fmt.Errorf("sumvec: noise offset %d without noise: %w", p.NoiseOffset, errParams)
	case p.OffsetTailProbability() > maxTailProbability:
		return fmt.Errorf("sumvec: noise offset %d for sigma=%v leaves tail probability %.3g > 2^-40 (need >= %d): %w",
			p.NoiseOffset, p.Sigma, p.OffsetTailProbability(), minNoiseOffset(p.Sigma, p.Dim), errParams)
	case p.MaxReports < 1 || p.MaxReports > maxReports:
		return fmt.Errorf("sumvec: max reports %d outside [1, %d]: %w", p.MaxReports, maxReports, errParams)
	case p.ChunkLength < 1 || p.ChunkLength > uint(p.MeasurementLength()):
		return fmt.Errorf("sumvec: chunk length %d outside [1, dim*bits=%d]: %w",
			p.ChunkLength, p.MeasurementLength(), errParams)
	}
	// The proof admits entries up to 2^Bits - 1 (one more than an honest
	// 2B); MaxReports <= 2^24 and Bits <= 20 keep their sum below 2^44.
	entries := uint64(p.MaxReports) * (uint64(1)<<p.Bits - 1)
	if p.NoiseOffset > (maxTotal-entries)/4 {
		return fmt.Errorf("sumvec: max reports %d x entries %d + 4 x offset %d reaches 2^62: %w",
			p.MaxReports, uint64(1)<<p.Bits-1, p.NoiseOffset, errParams)
	}
	return nil
}
