package mechanism

import (
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/shared/internal/check"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/randomizer"
)

// APESConfig configures APES and S-APES (Liu et al., "Echo of Neighbors",
// AAAI 2023): every client perturbs every coordinate with Clip-Laplace at
// its own personalized budget eps_i and sends eps_i apart from the values;
// the relay shuffles each dimension's values and, separately, the budgets.
type APESConfig struct {
	// D is the model dimension, >= 1.
	D int
	// C is the clipping bound, positive and finite.
	C float64
	// RangeRatio is r = A/C of Clip-Laplace: outputs lie in
	// [1/2 - r/2, 1/2 + r/2] on the normalized scale; r >= 1 (APES
	// experiments: r = 1).
	RangeRatio float64
	// B selects S-APES post-sparsification when 1 <= B < D: after
	// perturbing all D coordinates, a client keeps the B largest
	// |y_j - 1/2| and replaces the rest by perturbed zeros (fresh
	// Clip-Laplace draws at the centre, i.e. blanket samples; APES
	// Algorithm 2). B = 0 (or B = D) is plain APES.
	B int
}

func (cfg APESConfig) validate() error {
	if cfg.D < 1 {
		return fmt.Errorf("mechanism: apes dimension D must be >= 1, got %d", cfg.D)
	}
	if err := check.Positive(errInvalid, "clipping bound C", cfg.C); err != nil {
		return err
	}
	if math.IsNaN(cfg.RangeRatio) || math.IsInf(cfg.RangeRatio, 0) || cfg.RangeRatio < 1 {
		return fmt.Errorf("mechanism: apes range ratio must be finite and >= 1, got %v", cfg.RangeRatio)
	}
	if cfg.B < 0 || cfg.B > cfg.D {
		return fmt.Errorf("mechanism: s-apes B must lie in [0, D=%d], got %d", cfg.D, cfg.B)
	}
	// Probe the randomizer constructor once so that its own range limits
	// surface at construction.
	if _, err := randomizer.NewClipLaplace(1, cfg.RangeRatio); err != nil {
		return fmt.Errorf("mechanism: apes: %w", err)
	}
	return nil
}

// Sparse reports whether cfg is S-APES.
func (cfg APESConfig) Sparse() bool { return cfg.B > 0 && cfg.B < cfg.D }

// APESReport is one client's APES report: D values (Values[j] belongs to
// dimension j; the relay separates dimensions) and the personalized budget,
// which the relay shuffles separately from the values.
type APESReport struct {
	Eps    float64
	Values []float64
}

// APESEncoder is the client side of APES / S-APES. It is immutable and safe
// for concurrent use.
type APESEncoder struct {
	cfg  APESConfig
	clip clipper
}

// NewAPESEncoder validates cfg.
func NewAPESEncoder(cfg APESConfig) (*APESEncoder, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &APESEncoder{cfg: cfg, clip: clipper{c: cfg.C}}, nil
}

// Config returns the configuration.
func (e *APESEncoder) Config() APESConfig { return e.cfg }

// Encode clips, normalizes and perturbs x (length D) with Clip-Laplace at
// the personalized per-coordinate budget eps (finite, > 0).
//
// Privacy: each coordinate is eps-LDP (APES Theorem 1, normalized
// sensitivity 1), the report eps-LDP per dimension and D*eps-LDP per user
// by composition (APES Theorem 3). S-APES selects after perturbing and
// replaces the unselected coordinates by fresh, data-independent centre
// draws, so its report is a post-processing of the APES report plus
// independent noise and keeps the same local guarantee; APES Proposition
// 1's B-dependent user-level bound is a central bound for the accountant.
// The report size (D values) never depends on x or eps.
func (e *APESEncoder) Encode(x []float64, eps float64, src noise.Source) (APESReport, error) {
	if err := checkVector(x, e.cfg.D); err != nil {
		return APESReport{}, err
	}
	r, err := randomizer.NewClipLaplace(eps, e.cfg.RangeRatio)
	if err != nil {
		return APESReport{}, fmt.Errorf("mechanism: apes budget: %w", err)
	}
	y := make([]float64, e.cfg.D)
	for j, v := range x {
		y[j] = r.Randomize(e.clip.Normalize(v), src)
	}
	if e.cfg.Sparse() {
		postSparsify(y, e.cfg.B, r, src)
	}
	return APESReport{Eps: eps, Values: y}, nil
}

// postSparsify keeps the b entries of y with the largest |y_j - 1/2| (ties
// to the lower index) and replaces every other entry by a blanket draw
// (APES Algorithm 2: top-b after perturbation, dummy padding with perturbed
// zeros).
func postSparsify(y []float64, b int, blanket randomizer.Randomizer, src noise.Source) {
	centred := make([]float64, len(y))
	for j, v := range y {
		centred[j] = v - 0.5
	}
	keep := make([]uint32, b)
	topK(centred, keep)
	kept := make([]bool, len(y))
	for _, j := range keep {
		kept[j] = true
	}
	for j := range y {
		if !kept[j] {
			y[j] = blanket.Blanket(src)
		}
	}
}

// ColumnBatch is what the APES analyzer receives: for each dimension the n
// values of that dimension (column-major, Values[j*N:(j+1)*N]) and the n
// budgets, each shuffled independently (APES Algorithm 1, "Shuffling
// Process") or in arrival order on the PLDP path.
type ColumnBatch struct {
	D, N   int
	Values []float64
	Eps    []float64
}

// Column returns dimension j's values.
func (b ColumnBatch) Column(j int) []float64 { return b.Values[j*b.N : (j+1)*b.N] }

// ShuffleAPES is the APES relay: it draws an independent uniform
// permutation for every dimension's values and another for the budgets, so
// neither a value's position nor a budget links to a client or to the
// client's other values (APES Algorithm 1, Shuffling Process). Every report
// must have D values and a finite positive budget.
//
// Privacy: this per-dimension shuffling is what the echo-of-neighbors
// amplification (APES Theorem 4) assumes.
func ShuffleAPES(reports []APESReport, d int, src noise.Source) (ColumnBatch, error) {
	b, err := collectAPES(reports, d)
	if err != nil {
		return ColumnBatch{}, err
	}
	for j := 0; j < d; j++ {
		col := b.Column(j)
		noise.Shuffle(src, len(col), func(a, c int) { col[a], col[c] = col[c], col[a] })
	}
	noise.Shuffle(src, len(b.Eps), func(a, c int) { b.Eps[a], b.Eps[c] = b.Eps[c], b.Eps[a] })
	return b, nil
}

// collectAPES is the PLDP path (no shuffler): it transposes the reports
// into columns in arrival order.
func collectAPES(reports []APESReport, d int) (ColumnBatch, error) {
	if d < 1 {
		return ColumnBatch{}, fmt.Errorf("mechanism: apes dimension must be >= 1, got %d", d)
	}
	if len(reports) == 0 {
		return ColumnBatch{}, fmt.Errorf("mechanism: apes: no reports")
	}
	n := len(reports)
	b := ColumnBatch{D: d, N: n, Values: make([]float64, d*n), Eps: make([]float64, n)}
	for i, r := range reports {
		if len(r.Values) != d {
			return ColumnBatch{}, fmt.Errorf("mechanism: apes report %d: %w: %d values, want %d", i, ErrMalformed, len(r.Values), d)
		}
		if err := check.Positive(errInvalid, "apes budget", r.Eps); err != nil {
			return ColumnBatch{}, fmt.Errorf("report %d: %w", i, err)
		}
		b.Eps[i] = r.Eps
		for j, v := range r.Values {
			b.Values[j*n+i] = v
		}
	}
	return b, nil
}

// APESAnalyzer is the APES analyzer (APES Algorithm 1, Analyzing Process).
type APESAnalyzer struct {
	cfg APESConfig
}

// NewAPESAnalyzer validates cfg.
func NewAPESAnalyzer(cfg APESConfig) (*APESAnalyzer, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &APESAnalyzer{cfg: cfg}, nil
}

// Estimate averages every dimension and calibrates the mean per APES
// eq. (1): with the shuffled budgets eps_1..eps_n it solves
// (1/n) sum_i E[CLap_{eps_i}(g)] = observed mean for the normalized g
// (randomizer.ClipLaplaceCalibrator) and returns C(2g - 1) per dimension.
//
// Bias. The calibration plugs the mean input into every client's
// expectation, which is exact when the clients of a dimension share the
// value and an approximation otherwise (E[CLap] is not affine; the APES
// paper observes the approximation empirically). For S-APES it is further
// biased: kept values are selected after perturbation (biased away from the
// centre) and dropped ones are replaced by centre draws (mean 1/2); the
// paper accepts this utility cost for the privacy gain.
func (a *APESAnalyzer) Estimate(b ColumnBatch) ([]float64, error) {
	if b.D != a.cfg.D || b.N < 1 || len(b.Values) != b.D*b.N || len(b.Eps) != b.N {
		return nil, fmt.Errorf("mechanism: apes batch shape D=%d N=%d (%d values, %d budgets), analyzer D=%d", b.D, b.N, len(b.Values), len(b.Eps), a.cfg.D)
	}
	cal, err := randomizer.NewClipLaplaceCalibrator(b.Eps, a.cfg.RangeRatio)
	if err != nil {
		return nil, fmt.Errorf("mechanism: apes calibration: %w", err)
	}
	clip := clipper{c: a.cfg.C}
	out := make([]float64, b.D)
	inv := 1 / float64(b.N)
	for j := range out {
		s := 0.0
		for _, v := range b.Column(j) {
			s += v
		}
		g, err := cal.Invert(s * inv)
		if err != nil {
			return nil, fmt.Errorf("mechanism: apes dimension %d: %w", j, err)
		}
		out[j] = clip.Denormalize(g)
	}
	return out, nil
}
