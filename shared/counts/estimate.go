package counts

import (
	"errors"
	"fmt"
	"math"
)

// Interval is an estimate with its two-sided confidence interval at the
// level it was asked for, and the standard deviation the interval uses.
type Interval struct {
	Estimate, SD, Lo, Hi float64
	// Dominated: the noise leaves nothing to estimate (for an accuracy:
	// the evaluated count is not significantly above 0 at the level, so
	// the ratio is unbounded, Fieller 1954); Lo and Hi are then the whole
	// range.
	Dominated bool
}

// zOf is the two-sided normal quantile of level: Φ^-1((1 + level)/2).
func zOf(level float64) (float64, error) {
	if !(level > 0 && level < 1) {
		return 0, fmt.Errorf("counts: confidence level %v outside (0, 1)", level)
	}
	return math.Sqrt2 * math.Erfinv(level), nil
}

// Accuracy estimates a model's accuracy from the noisy sums of an
// evaluation block (correct, evaluated: Sums.Counts of the block) whose
// counts each carry noise of standard deviation countSD (Block.CountSD of
// the round's σ; the two counts' noises are independent, Block.CountSD).
//
// Model and method: each evaluated row is correct independently with
// probability p (the model's accuracy on the volunteers' data
// distribution); the released counts are Ĉ = C + Z_c, Ê = E + Z_e with
// C | E ~ Binomial(E, p) and Z_c, Z_e independent noises of variance
// countSD². The estimate is p̂ = Ĉ/Ê (clipped to [0, 1]) and, by the
// delta method for the ratio,
//
//	Var(p̂) ≈ p(1 − p)/E + countSD²·(1 + p²)/E²
//
// (sampling, then noise), evaluated at p̂ and Ê; the interval is p̂ ± z·SD
// clipped to [0, 1]. The sampling term treats rows as independent: rows
// of one volunteer that are alike make it optimistic (the counts alone
// cannot tell). When Ê ≤ z·countSD the denominator is not significantly
// positive and the ratio has no bounded interval (Fieller 1954): the
// interval is [0, 1] and Dominated is set. TestAccuracyCoverage measures
// the coverage.
func Accuracy(correct, evaluated, countSD, level float64) (Interval, error) {
	z, err := zOf(level)
	if err != nil {
		return Interval{}, err
	}
	if math.IsNaN(correct) || math.IsNaN(evaluated) || math.IsInf(correct, 0) || math.IsInf(evaluated, 0) {
		return Interval{}, errors.New("counts: accuracy of non-finite counts")
	}
	if !(countSD >= 0) || math.IsInf(countSD, 0) {
		return Interval{}, fmt.Errorf("counts: noise standard deviation %v", countSD)
	}
	if evaluated <= z*countSD || evaluated <= 0 {
		return Interval{Estimate: math.NaN(), SD: math.Inf(1), Lo: 0, Hi: 1, Dominated: true}, nil
	}
	p := min(1, max(0, correct/evaluated))
	v := p*(1-p)/evaluated + countSD*countSD*(1+p*p)/(evaluated*evaluated)
	sd := math.Sqrt(v)
	return Interval{Estimate: p, SD: sd, Lo: max(0, p-z*sd), Hi: min(1, p+z*sd)}, nil
}

// Count is the interval of one noisy count (a histogram bar): the count
// is the number of volunteers who gave that answer (no sampling: the
// estimand is the respondents' own histogram), the noise is Gaussian-like
// with standard deviation countSD (Block.CountSD), the interval count ±
// z·countSD (not clipped: a negative bar is the noise's, and shows it).
// Unbiased: the discrete Gaussian is symmetric about 0.
func Count(count, countSD, level float64) (Interval, error) {
	z, err := zOf(level)
	if err != nil {
		return Interval{}, err
	}
	if math.IsNaN(count) || math.IsInf(count, 0) || !(countSD >= 0) || math.IsInf(countSD, 0) {
		return Interval{}, fmt.Errorf("counts: count %v with noise standard deviation %v", count, countSD)
	}
	return Interval{Estimate: count, SD: countSD, Lo: count - z*countSD, Hi: count + z*countSD}, nil
}

// Histogram is Count for each real option of a question block's sums
// (the first b.Options() entries of its Sums.Counts), at the round's σ.
func (b *Block) Histogram(counts []float64, sigma, level float64) ([]Interval, error) {
	if b.kind != KindQuestion {
		return nil, errors.New("counts: histogram of a block that is not a question")
	}
	if len(counts) < b.options {
		return nil, fmt.Errorf("counts: %d counts for %d options", len(counts), b.options)
	}
	sd := b.CountSD(sigma)
	out := make([]Interval, b.options)
	for j := range out {
		var err error
		if out[j], err = Count(counts[j], sd, level); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// The dashboard's warning thresholds (heuristics, not theorems).
const (
	// UpdateDominates: the two servers' noise on the mean update has an
	// L2 norm at least 4 times the largest mean update (aggregator task
	// plan and the dashboard warn from it). On the digits at ε = 4 over 5
	// rounds (the secure-summation runs of docs/experiments.md) the ratio
	// is 1.51 with 400 volunteers (80.20%), 2.63 with 230 (73.05%) and 30.3
	// with 20 (19.50%, barely above chance): a heuristic from those runs.
	UpdateDominates = 4
	// CountDominates: the 95% interval of the noise alone (±1.96 SD)
	// spans at least half the signal (±half the average bar, or an
	// accuracy ± 0.25).
	CountDominates = 0.5
)

// UpdateNoiseRatio is aggregator task plan's ratio: √(2d)·σ/(n·Δ), the
// L2 norm of the two servers' noise on the mean of n updates against the
// largest mean update (the sensitivity Δ), from public parameters only.
func UpdateNoiseRatio(d, n int, sigma, sensitivity float64) (float64, error) {
	if d < 1 || n < 1 || !(sigma > 0) || !(sensitivity > 0) || math.IsInf(sigma, 0) || math.IsInf(sensitivity, 0) {
		return 0, fmt.Errorf("counts: update noise ratio of d %d, n %d, sigma %v, sensitivity %v", d, n, sigma, sensitivity)
	}
	return math.Sqrt(2*float64(d)) * sigma / (float64(n) * sensitivity), nil
}

// NoiseRatio is the block's noise-to-signal ratio at n volunteers and the
// round's σ (fixed-point units), from public parameters only: 1.96·SD
// over the signal, where SD is the noise's on the displayed quantity and
// the signal:
//
//   - KindQuestion: a bar's noise SD (CountSD) over the average bar n/k;
//   - KindEval: the noise's SD on the accuracy at p = 1/2 with rows rows
//     evaluated per volunteer (the public row bound when nothing better is
//     known, which makes the ratio optimistic), CountSD·√1.25/(n·rows),
//     over 1/2 (ratio 1: the noise alone spans all of [0, 1]).
//
// Compare with CountDominates.
func (b *Block) NoiseRatio(n int, rows, sigma float64) (float64, error) {
	if n < 1 || !(sigma > 0) || math.IsInf(sigma, 0) {
		return 0, fmt.Errorf("counts: noise ratio of n %d, sigma %v", n, sigma)
	}
	const z95 = 1.959963984540054
	sd := b.CountSD(sigma)
	switch b.kind {
	case KindQuestion:
		return z95 * sd / (float64(n) / float64(b.options)), nil
	case KindEval:
		if !(rows > 0) || rows > float64(b.rows) {
			return 0, fmt.Errorf("counts: %v rows per volunteer outside (0, %d]", rows, b.rows)
		}
		return z95 * sd * math.Sqrt(1.25) / (float64(n) * rows) / 0.5, nil
	}
	return 0, fmt.Errorf("counts: unknown block kind %v", b.kind)
}

// Warning is one part of a round whose noise may dominate its signal.
type Warning struct {
	// Block is the count block's index, -1 for the update.
	Block            int
	Ratio, Threshold float64
	Dominates        bool
}

// NoiseDominates returns, for the update (d parameters, per-server σ
// updateSigma, sensitivity updateSens, both in PINE units) and every
// block of s (per-server σ sigmas[i]), the noise ratio at n volunteers
// and whether the dashboard must warn (ratio ≥ its threshold). rows is
// the expected number of rows a volunteer evaluates (KindEval only).
// Public parameters only: it can run before any volunteer reports
// (aggregator task plan) and on the dashboard.
func NoiseDominates(d int, updateSigma, updateSens float64, s *Spec, sigmas []float64, n int, rows float64) ([]Warning, error) {
	u, err := UpdateNoiseRatio(d, n, updateSigma, updateSens)
	if err != nil {
		return nil, err
	}
	out := []Warning{{Block: -1, Ratio: u, Threshold: UpdateDominates, Dominates: u >= UpdateDominates}}
	if s == nil {
		return out, nil
	}
	if len(sigmas) != len(s.blocks) {
		return nil, fmt.Errorf("counts: %d sigmas for %d blocks", len(sigmas), len(s.blocks))
	}
	for i, b := range s.blocks {
		r, err := b.NoiseRatio(n, rows, sigmas[i])
		if err != nil {
			return nil, fmt.Errorf("counts: block %d: %w", i, err)
		}
		out = append(out, Warning{Block: i, Ratio: r, Threshold: CountDominates, Dominates: r >= CountDominates})
	}
	return out, nil
}
