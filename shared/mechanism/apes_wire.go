package mechanism

import (
	"fmt"
	"github.com/blanket-fl/blanket/shared/internal/check"
	"math"
	"slices"

	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/randomizer"
)

// APES over width-1 messages (the network layout of wire.ProtocolAPES and
// wire.ProtocolSAPES; docs/privacy.md, "APES and S-APES"): a report of
// dimension D is D+1 messages of one entry each, index j < D carrying the
// perturbed coordinate j and index D (the budget column) carrying the
// client's level f = eps_i/EpsL in (0, 1], the fraction of the announced
// largest budget it chose. The relay's uniform shuffle of all messages
// separates every column from every other, which is APES Algorithm 1's
// "Shuffling Process" (each dimension's values and the budgets shuffled
// independently).

// apesWire is what an Encoder or Analyzer of the APES layout holds.
type apesWire struct {
	d      int
	epsMax float64 // the largest per-coordinate budget, EpsL/D
	level  float64 // the encoder's f in (0, 1]
	enc    *APESEncoder
	cfg    APESConfig
}

// NewAPESWireEncoder returns the client encoder of the APES layout for
// cfg (RangeRatio, B as APESConfig states), the announced largest
// per-coordinate budget epsMax (EpsL/D) and the client's chosen level f in
// (0, 1]: every coordinate is perturbed with Clip-Laplace at f·epsMax.
//
// Privacy: each value message is f·epsMax-LDP (APES Theorem 1), the D value
// messages together D·f·epsMax = f·EpsL-LDP by basic composition (APES
// Theorem 3); an S-APES report (B < D) is a post-processing of that report
// plus independent noise (see APESEncoder.Encode), so it is f·EpsL-LDP as
// a whole, but its messages are not individually f·epsMax-LDP (the
// selection depends on every coordinate). The budget message carries f,
// which does not depend on the data. For APES, every value message is a
// report of a randomizer that is epsMax-LDP in the cross sense of
// docs/privacy.md (any two Clip-Laplace budgets at most epsMax), whatever
// f is, so a lower level weakens nobody else's guarantee.
func NewAPESWireEncoder(cfg APESConfig, epsMax, level float64) (*Encoder, error) {
	if err := check.Positive(errInvalid, "apes largest per-coordinate budget", epsMax); err != nil {
		return nil, err
	}
	if !(level > 0 && level <= 1) {
		return nil, fmt.Errorf("mechanism: apes level must lie in (0, 1], got %v", level)
	}
	enc, err := NewAPESEncoder(cfg)
	if err != nil {
		return nil, err
	}
	if _, err := randomizer.NewClipLaplace(level*epsMax, cfg.RangeRatio); err != nil {
		return nil, fmt.Errorf("mechanism: apes budget %v: %w", level*epsMax, err)
	}
	w := &apesWire{d: cfg.D, epsMax: epsMax, level: level, enc: enc}
	fc := FLAMEConfig{D: cfg.D, K: cfg.D, L: 1, Width: 1, C: cfg.C, EpsL: epsMax * float64(cfg.D), Keep: 1}
	return &Encoder{cfg: fc, clip: clipper{c: cfg.C}, apes: w}, nil
}

// encodeAPES is Encode for the APES layout: D value messages (index j,
// Clip-Laplace at level·epsMax) and the budget message (index D, value
// level).
func (w *apesWire) encode(x []float64, src noise.Source) ([]Message, error) {
	rep, err := w.enc.Encode(x, w.level*w.epsMax, src)
	if err != nil {
		return nil, err
	}
	idx := make([]uint32, w.d+1)
	vals := make([]float64, w.d+1)
	for j := range w.d {
		idx[j], vals[j] = uint32(j), rep.Values[j]
	}
	idx[w.d], vals[w.d] = uint32(w.d), w.level
	return split(idx, vals, 1), nil
}

// NewAPESWireAnalyzer returns the aggregator's estimator of the APES
// layout for cfg and the announced largest per-coordinate budget epsMax.
// Its Estimate takes a batch of D+1 columns (every column exactly NP
// values) and n, the number of real reports (1 <= n <= NP): it reads the
// budget column, turns each level f into the per-coordinate budget
// f·epsMax, and calibrates every dimension's mean per APES eq. (1) (the
// mixture mean (1/n) sum_i E[CLap_{eps_i}(g)] inverted by
// randomizer.ClipLaplaceCalibrator, then C(2g - 1)).
//
// Range check. A level outside (0, 1] (not finite, <= 0 or > 1) is no
// honest client's and no dummy's; it enters as the centre 1/2, the value
// the aggregator substitutes for any message it rejects on opening
// (roundspec.Spec.Center), so one dishonest budget moves the calibration
// no further than an honest one can.
//
// Dummies (NP > n). The relay pads with virtual clients at the largest
// level (roundspec.Spec.Dummy): value dummies are Clip-Laplace draws at
// epsMax of the centre (mean exactly 1/2, by symmetry) and budget dummies
// carry level 1, the largest a client can send. The analyzer removes the
// NP - n largest levels from the budget column (the dummies' when the relay
// is honest) and NP - n halves from every column's sum, and calibrates the
// n real clients' mean: (S_j - (NP - n)/2)/n = (1/n) sum_i E[CLap_i(g)]
// solved for g. As APESAnalyzer.Estimate states, the calibration is exact
// when a dimension's clients share the value and approximate otherwise
// (APES eq. (1)).
func NewAPESWireAnalyzer(cfg APESConfig, epsMax float64) (*Analyzer, error) {
	if err := check.Positive(errInvalid, "apes largest per-coordinate budget", epsMax); err != nil {
		return nil, err
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Analyzer{d: cfg.D, c: cfg.C, apes: &apesWire{d: cfg.D, epsMax: epsMax, cfg: cfg}}, nil
}

// estimate is Analyzer.EstimateInto for the APES layout.
func (w *apesWire) estimate(dst []float64, b Batch, n int) ([]float64, error) {
	if b.D != w.d+1 || len(dst) != w.d {
		return nil, fmt.Errorf("mechanism: apes batch has %d columns, destination %d, want %d and %d", b.D, len(dst), w.d+1, w.d)
	}
	if b.NP < 1 || n < 1 || n > b.NP {
		return nil, fmt.Errorf("mechanism: apes batch n_p = %d with %d reports: want 1 <= n <= n_p", b.NP, n)
	}
	np := b.NP
	cols := ColumnBatch{D: w.d, N: np, Values: make([]float64, w.d*np), Eps: make([]float64, 0, np)}
	counts := make([]int, w.d)
	for mi, m := range b.Messages {
		if len(m.Indices) != 1 || len(m.Values) != 1 {
			return nil, fmt.Errorf("mechanism: message %d: %w: width %d, apes needs 1", mi, ErrMalformed, len(m.Indices))
		}
		j, v := int64(m.Indices[0]), m.Values[0]
		switch {
		case j == int64(w.d):
			if len(cols.Eps) == np {
				return nil, fmt.Errorf("mechanism: budget column has more than n_p=%d values: %w", np, ErrNotPadded)
			}
			cols.Eps = append(cols.Eps, APESLevelOrCentre(v)*w.epsMax)
		case j >= 0 && j < int64(w.d):
			if counts[j] == np {
				return nil, fmt.Errorf("mechanism: dimension %d has more than n_p=%d values: %w", j, np, ErrNotPadded)
			}
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("mechanism: dimension %d: %w: non-finite value", j, ErrMalformed)
			}
			cols.Values[int(j)*np+counts[j]] = v
			counts[j]++
		default:
			return nil, fmt.Errorf("mechanism: message %d: %w: index %d out of range", mi, ErrMalformed, j)
		}
	}
	if len(cols.Eps) != np {
		return nil, fmt.Errorf("mechanism: budget column has %d values, want n_p=%d: %w", len(cols.Eps), np, ErrNotPadded)
	}
	for j, c := range counts {
		if c != np {
			return nil, fmt.Errorf("mechanism: dimension %d has %d values, want n_p=%d: %w", j, c, np, ErrNotPadded)
		}
	}
	// The NP - n largest levels are the dummies' (level 1).
	slices.Sort(cols.Eps)
	real := cols.Eps[:n]
	cal, err := randomizer.NewClipLaplaceCalibrator(real, w.cfg.RangeRatio)
	if err != nil {
		return nil, fmt.Errorf("mechanism: apes calibration: %w", err)
	}
	clip := clipper{c: w.cfg.C}
	dummies := float64(np-n) / 2
	for j := range dst {
		s := 0.0
		for _, v := range cols.Column(j) {
			s += v
		}
		g, err := cal.Invert((s - dummies) / float64(n))
		if err != nil {
			return nil, fmt.Errorf("mechanism: apes dimension %d: %w", j, err)
		}
		dst[j] = clip.Denormalize(g)
	}
	return dst, nil
}

// APESLevelOrCentre returns v if it is a level an honest client or a dummy
// can send, in (0, 1], and the centre 1/2 otherwise (see
// NewAPESWireAnalyzer, "Range check").
func APESLevelOrCentre(v float64) float64 {
	if v > 0 && v <= 1 {
		return v
	}
	return 0.5
}
