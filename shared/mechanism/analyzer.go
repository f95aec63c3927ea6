package mechanism

import (
	"errors"
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/shared/noise"
)

// Analyzer is the FLAME analyzer (Algorithm 2 lines 17-19) for SS-Simple,
// SS-Double and SS-Topk. It needs neither to know which messages are
// dummies nor the per-dimension real counts n_j.
//
// Derivation. Let the randomizer have E[R(x)] = a + s*x (Affine) and the
// blanket distribution mean a + s/2 = E[R(1/2)] (randomizer.Randomizer
// contract). Dimension j receives n_p values: n_j real ones R(x~_ij) and
// n_p - n_j blanket samples (relay dummies or SS-Topk decoys). With
// S_j their sum,
//
//	E[S_j - n_p(a + s/2)] / s = sum_{i real in j} (x~_ij - 1/2),
//
// since every dummy, and every real x~ = 1/2, contributes zero in
// expectation. As 2C(x~ - 1/2) = clip(x), multiplying by 2C/n gives
// (1/n) sum_{i real in j} clip(x_ij). For SS-Simple every client reports j,
// so this is the clipped mean. For SS-Double client i reports j with
// probability k/d independently of x, so scaling by d/k makes it unbiased.
// SS-Topk is not rescaled: it estimates the mean of the top-k sparsified
// clipped updates (topkClippedMean) without bias, and is biased for the
// full mean by its sparsification alone.
//
// Without padding (Collect, the LDP-FL path) the same formula is applied
// with each dimension's own count in place of n_p.
type Analyzer struct {
	d      int
	c      float64
	center float64 // a + s/2
	factor float64 // 2C * scale / s, divided by n at estimation
	// apes is set for the APES layout (NewAPESWireAnalyzer).
	apes *apesWire
}

// NewAnalyzer validates cfg (the same public configuration the clients use)
// and prepares the debiasing constants from the randomizer's affine mean.
func NewAnalyzer(cfg FLAMEConfig) (*Analyzer, error) {
	enc, err := NewEncoder(cfg)
	if err != nil {
		return nil, err
	}
	cfg = enc.cfg
	offset, slope := enc.r.Affine()
	if math.IsNaN(offset) || math.IsInf(offset, 0) {
		return nil, fmt.Errorf("mechanism: randomizer %s has invalid offset %v", enc.r.Name(), offset)
	}
	scale := 1.0
	if cfg.Protocol == SSDouble {
		scale = float64(cfg.D) / float64(cfg.K)
	}
	return &Analyzer{
		d:      cfg.D,
		c:      cfg.C,
		center: offset + slope/2,
		factor: 2 * cfg.C * scale / slope,
	}, nil
}

// Estimate returns the estimated mean update (in update units, to be added
// to the model) from one round's batch and the number n of real clients in
// the round (known from check-in). For a padded batch (NP > 0) every
// dimension must appear exactly NP times; anything else is a relay fault
// and is reported as an error.
func (a *Analyzer) Estimate(b Batch, n int) ([]float64, error) {
	return a.EstimateInto(make([]float64, a.d), b, n)
}

// EstimateInto is Estimate writing into dst (length D), allocating only the
// per-dimension counters.
func (a *Analyzer) EstimateInto(dst []float64, b Batch, n int) ([]float64, error) {
	if n < 1 {
		return nil, fmt.Errorf("mechanism: number of clients must be >= 1, got %d", n)
	}
	if a.apes != nil {
		return a.apes.estimate(dst, b, n)
	}
	if b.D != a.d || len(dst) != a.d {
		return nil, fmt.Errorf("mechanism: batch dimension %d, destination %d, analyzer %d", b.D, len(dst), a.d)
	}
	if b.NP < 0 {
		return nil, fmt.Errorf("mechanism: negative n_p %d", b.NP)
	}
	clear(dst)
	counts := make([]int32, a.d)
	for mi, m := range b.Messages {
		if len(m.Indices) != len(m.Values) {
			return nil, fmt.Errorf("mechanism: message %d: %w: %d indices, %d values", mi, ErrMalformed, len(m.Indices), len(m.Values))
		}
		for t, j := range m.Indices {
			if int64(j) >= int64(a.d) {
				return nil, fmt.Errorf("mechanism: message %d: %w: index %d out of range", mi, ErrMalformed, j)
			}
			dst[j] += m.Values[t] - a.center
			counts[j]++
		}
	}
	if b.NP > 0 {
		for j, c := range counts {
			if int(c) != b.NP {
				return nil, fmt.Errorf("mechanism: dimension %d has %d values, want n_p=%d: %w", j, c, b.NP, ErrNotPadded)
			}
		}
	}
	f := a.factor / float64(n)
	for j := range dst {
		// A non-finite value (a faulty or malicious client; values are
		// sealed, so the relay cannot check them) would silently poison
		// the dimension: refuse the batch instead.
		if math.IsNaN(dst[j]) || math.IsInf(dst[j], 0) {
			return nil, fmt.Errorf("mechanism: dimension %d: %w: non-finite sum", j, ErrMalformed)
		}
		dst[j] *= f
	}
	return dst, nil
}

// ErrNotPadded is wrapped when a batch claiming padding to n_p has a
// dimension with a different number of values.
var ErrNotPadded = errors.New("batch not padded to n_p")

// topkClippedMean returns (1/n) sum_i clip(x_i) restricted to each client's
// top-k coordinates by |x_ij| (ties to the lower index): the quantity
// SS-Topk estimates without bias.
func topkClippedMean(cl clipper, updates [][]float64, d, k int) ([]float64, error) {
	if len(updates) == 0 {
		return nil, errors.New("mechanism: no updates")
	}
	if k < 1 || k > d {
		return nil, fmt.Errorf("mechanism: need 1 <= k <= d, got k=%d d=%d", k, d)
	}
	out := make([]float64, d)
	top := make([]uint32, k)
	for i, x := range updates {
		if err := checkVector(x, d); err != nil {
			return nil, fmt.Errorf("update %d: %w", i, err)
		}
		topK(x, top)
		for _, j := range top {
			out[j] += cl.Clip(x[j])
		}
	}
	inv := 1 / float64(len(updates))
	for j := range out {
		out[j] *= inv
	}
	return out, nil
}

// expectedCount is the expected number of real entries per dimension in a
// round of n clients: n*K*L/D (n for SS-Simple). Pick n_p above it (FLAME
// Figure 7 varies n/n_p); SS-Topk's popular dimensions exceed it.
func expectedCount(cfg FLAMEConfig, n int) (float64, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return 0, err
	}
	return float64(n) * float64(cfg.K*cfg.L) / float64(cfg.D), nil
}

// roundResult is the outcome of simulateFLAME.
type roundResult struct {
	Estimate []float64
	Relay    RelayStats
	NP       int // realized n_p (0 on the LDP-FL path)
}

// simulateFLAME runs one FLAME round in process: every update is encoded,
// the relay pads and shuffles (or, with relay == nil, the LDP-FL path
// collects without padding or shuffle), and the analyzer estimates the mean
// with n = len(updates). It is what the experiment runner needs per round;
// a deployment runs the same three stages on different machines.
func simulateFLAME(enc *Encoder, relay *Relay, an *Analyzer, updates [][]float64, src noise.Source) (roundResult, error) {
	if enc == nil || an == nil {
		return roundResult{}, errors.New("mechanism: nil encoder or analyzer")
	}
	if len(updates) == 0 {
		return roundResult{}, errors.New("mechanism: no updates")
	}
	shape := enc.Shape()
	msgs := make([]Message, 0, len(updates)*shape.Messages)
	for i, x := range updates {
		rep, err := enc.Encode(x, src)
		if err != nil {
			return roundResult{}, fmt.Errorf("mechanism: client %d: %w", i, err)
		}
		msgs = append(msgs, rep...)
	}
	var (
		b   Batch
		err error
	)
	if relay != nil {
		b, err = relay.Process(msgs, src)
	} else {
		b, err = Collect(enc.cfg.D, msgs)
	}
	if err != nil {
		return roundResult{}, err
	}
	est, err := an.Estimate(b, len(updates))
	if err != nil {
		return roundResult{}, err
	}
	return roundResult{Estimate: est, Relay: b.Stats, NP: b.NP}, nil
}
