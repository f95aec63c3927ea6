package randomizer

import (
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/shared/noise"
)

// Bounded is an affine randomizer whose every output, reports and blanket
// samples alike, lies in a known interval [Lo, Hi]: the aggregator rejects
// any decrypted value outside it, so one report can move an estimate only as
// far as an honest one can.
//
// Privacy: clamping each output to [Lo, Hi] is post-processing of one
// randomizer call, so the LDP guarantee (Epsilon, Delta) is that of the
// wrapped randomizer. It is applied per message before the relay shuffles,
// and clamping every element of a multiset commutes with shuffling, so every
// shuffle bound of the wrapped randomizer holds for the clamped one as well
// (post-processing of the shuffled view). Blanket samples are clamped the
// same way, so dummies keep the law of a real report at x = 1/2.
//
// Utility: the mean moves by at most Bias (the clamped tail mass times its
// reach), which Affine ignores; NewBounded chooses the interval so that the
// tail beyond it has probability at most tail for every input in [0,1].
type Bounded struct {
	r            Affine
	lo, hi, bias float64
}

var _ Affine = (*Bounded)(nil)

// Name, Epsilon, Delta, Expect and Affine are the wrapped randomizer's
// (Expect and Affine ignore the clamping bias, at most Bias).
func (b *Bounded) Name() string { return b.r.Name() }

// Epsilon is the wrapped randomizer's: clamping is post-processing.
func (b *Bounded) Epsilon() float64 { return b.r.Epsilon() }

// Delta is the wrapped randomizer's.
func (b *Bounded) Delta() float64 { return b.r.Delta() }

// Expect is the wrapped randomizer's mean (see Bias).
func (b *Bounded) Expect(x float64) float64 { return b.r.Expect(x) }

// Affine is the wrapped randomizer's affine mean (see Bias).
func (b *Bounded) Affine() (offset, slope float64) { return b.r.Affine() }

// BoundedTail is the per-output probability mass beyond the interval of a
// randomizer with unbounded noise: 1e-6, which keeps the clamping bias
// below 1e-6 noise scales while bounding a report's reach to about 14 noise
// scales (Laplace) or 5 standard deviations (Gaussian) beyond [0,1].
const BoundedTail = 1e-6

// NewBounded wraps r. R_{γ,b} is bounded by construction ([0,1], no bias);
// Laplace x + Lap(s) gets [-B, 1+B] with B = s·ln(1/tail), since
// P(|Lap(s)| > B) = e^{-B/s}; Gaussian x + N(0, σ²) gets B = σ·√2·erfc⁻¹(tail),
// since P(|N| > B) = erfc(B/(σ√2)). For x in [0,1] the clamped mass is at
// most tail, and the mean moves by at most tail·(scale) (the expected excess
// beyond B of a Laplace tail is s, of a Gaussian tail at most σ). tail must
// lie in (0, 1).
func NewBounded(r Affine, tail float64) (*Bounded, error) {
	if r == nil {
		return nil, fmt.Errorf("randomizer: bounded: nil randomizer")
	}
	if !(tail > 0 && tail < 1) {
		return nil, fmt.Errorf("randomizer: bounded: tail %v outside (0, 1)", tail)
	}
	var b, scale float64
	switch rz := r.(type) {
	case *Bounded:
		return rz, nil
	case *RGB:
		return &Bounded{r: r, lo: 0, hi: 1}, nil
	case *Laplace:
		scale = rz.Scale()
		b = scale * math.Log(1/tail)
	case *Gaussian:
		scale = rz.Sigma()
		b = scale * math.Sqrt2 * math.Erfcinv(tail)
	default:
		return nil, fmt.Errorf("randomizer: bounded: no tail bound for %q", r.Name())
	}
	if !(b > 0) || math.IsInf(b, 0) {
		return nil, fmt.Errorf("randomizer: bounded: %s interval half-width %v is not finite and positive", r.Name(), b)
	}
	return &Bounded{r: r, lo: -b, hi: 1 + b, bias: tail * scale}, nil
}

// Support returns the interval every output lies in.
func (b *Bounded) Support() (lo, hi float64) { return b.lo, b.hi }

// Bias returns a bound on |E[clamped output] - E[output]| for inputs in [0,1].
func (b *Bounded) Bias() float64 { return b.bias }

// Unwrap returns the wrapped randomizer.
func (b *Bounded) Unwrap() Affine { return b.r }

// Contains reports whether v is a value the randomizer can output: finite,
// in [Lo, Hi], and for R_{γ,b} a multiple of 1/b.
func (b *Bounded) Contains(v float64) bool {
	if !(v >= b.lo && v <= b.hi) {
		return false
	}
	if rz, ok := b.r.(*RGB); ok {
		k := math.Round(v * float64(rz.Buckets()))
		return k/float64(rz.Buckets()) == v
	}
	return true
}

func (b *Bounded) clamp(v float64) float64 {
	if v < b.lo || math.IsNaN(v) {
		return b.lo
	}
	if v > b.hi {
		return b.hi
	}
	return v
}

// Randomize returns the wrapped randomizer's report clamped to [Lo, Hi].
func (b *Bounded) Randomize(x float64, src noise.Source) float64 {
	return b.clamp(b.r.Randomize(x, src))
}

// Blanket returns a blanket sample clamped to [Lo, Hi].
func (b *Bounded) Blanket(src noise.Source) float64 {
	return b.clamp(b.r.Blanket(src))
}
