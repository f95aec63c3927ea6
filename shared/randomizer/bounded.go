package randomizer

import (
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/shared/noise"
)

// Bounded is an affine randomizer whose every output, reports and blanket
// samples alike, lies in a known interval [Lo, Hi]: the aggregator rejects
// any decrypted value outside it, so one report can move an estimate only as
// far as an honest one can, and the interval is tight enough that this is
// little more than an honest report's noise (docs/threat-model.md, "Bounded
// influence").
//
// Privacy: clamping each output to [Lo, Hi] is post-processing of one
// randomizer call, so the LDP guarantee (Epsilon, Delta) is that of the
// wrapped randomizer, whatever the interval. It is applied per message
// before the relay shuffles, and clamping every element of a multiset
// commutes with shuffling, so every shuffle bound of the wrapped randomizer
// holds for the clamped one as well (post-processing of the shuffled view).
// Blanket samples are clamped the same way, so dummies keep the law of a
// real report at x = 1/2. The charged ε is therefore the wrapped
// randomizer's, unchanged by the choice of interval.
//
// Utility: for Laplace and Gaussian noise the clamped mean E[clamp(R(x))] is
// not exactly affine in x. Affine returns its tangent at x = 1/2 (which the
// analyzer inverts), Expect the exact clamped mean, and Bias the largest
// distance between the two over x in [0,1] (see NewBounded).
type Bounded struct {
	r            Affine
	lo, hi, bias float64
	// Clamped Laplace (lapS > 0) or Gaussian (gaussS > 0) noise scale; both
	// zero for R_{γ,b}, which is bounded by construction.
	lapS, gaussS float64
	// Tangent of the clamped mean at x = 1/2, and the clamped output's
	// standard deviation at x = 1/2.
	offset, slope, std float64
}

var _ Affine = (*Bounded)(nil)

// Name is the wrapped randomizer's.
func (b *Bounded) Name() string { return b.r.Name() }

// Epsilon is the wrapped randomizer's: clamping is post-processing.
func (b *Bounded) Epsilon() float64 { return b.r.Epsilon() }

// Delta is the wrapped randomizer's.
func (b *Bounded) Delta() float64 { return b.r.Delta() }

// Expect returns the exact mean of the clamped output for an input x
// (clamped to [0,1] as Randomize does), for continuous noise at the
// nominal scale:
//
//	Laplace:  x + (s/2)(e^{-(B+x)/s} - e^{-(1+B-x)/s}),
//	Gaussian: x + σ(ψ((B+x)/σ) - ψ((1+B-x)/σ)), ψ(z) = φ(z) - z·Q(z),
//
// since clamping at -B adds E[(-B-x-N)^+] (for Laplace P(N < -(B+x))·s,
// for the Gaussian σψ((B+x)/σ), the standard normal's expected excess) and
// clamping at 1+B removes E[(x+N-1-B)^+].
func (b *Bounded) Expect(x float64) float64 {
	x = clamp01(x)
	switch {
	case b.lapS > 0:
		s, B := b.lapS, -b.lo
		return x + s/2*(math.Exp(-(B+x)/s)-math.Exp(-(1+B-x)/s))
	case b.gaussS > 0:
		s, B := b.gaussS, -b.lo
		return x + s*(gaussExcess((B+x)/s)-gaussExcess((1+B-x)/s))
	}
	return b.r.Expect(x)
}

// Affine returns the tangent of Expect at x = 1/2: slope 1 - e^{-(B+1/2)/s}
// (Laplace) or 1 - 2Q((B+1/2)/σ) (Gaussian), and the offset 1/2 - slope/2,
// so the centre Offset + Slope/2 = 1/2 = E[clamped blanket] exactly (the
// noise and the interval are symmetric about 1/2). R_{γ,b}'s is its own.
func (b *Bounded) Affine() (offset, slope float64) { return b.offset, b.slope }

// gaussExcess is ψ(z) = E[(Z - z)^+] for a standard normal Z: φ(z) - z·Q(z).
func gaussExcess(z float64) float64 {
	return math.Exp(-z*z/2)/math.Sqrt(2*math.Pi) - z*math.Erfc(z/math.Sqrt2)/2
}

// Support reaches, in noise standard deviations beyond [0,1]: Laplace
// LaplaceReach = 1, Gaussian GaussianReach = 2. One report, honest or not,
// then moves a coordinate's debiased sum by at most (B + 1/2)/Slope from
// the centre, B = reach·sd. Each is about the tightest reach at which
// clamping does not raise the debiased noise Std/Slope above the unclamped
// sd. For Laplace's heavy tails clamping lowers it (by 1% to 15% at reach
// 1: 13% at ε0 = 0.5, 1% at ε0 = 8), and a smaller reach would lower it
// further at a growing curvature Bias (at reach 1 below 3% of the
// half-range Slope/2 for ε0 up to 8). For the Gaussian it rises by at most
// 0.53% at reach 2 and by more than 4% at reach 1 for ε0 <= 0.5
// (TestBoundedReach). The clamped mass per value is e^{-√2} ≈ 0.243
// (Laplace) and erfc(√2) ≈ 0.046 (Gaussian); the analyzer's debiasing
// follows the clamped mean (Affine). Measured trade-off:
// docs/threat-model.md, "Bounded influence".
const (
	LaplaceReach  = 1
	GaussianReach = 2
)

// Reach returns the support's reach NewBounded is given for r in a round
// (roundspec.New): LaplaceReach, GaussianReach, or 1 for R_{γ,b}, whose
// support [0,1] does not depend on it.
func Reach(r Affine) float64 {
	if b, ok := r.(*Bounded); ok {
		r = b.r
	}
	switch r.(type) {
	case *Laplace:
		return LaplaceReach
	case *Gaussian:
		return GaussianReach
	}
	return 1
}

// NewBounded wraps r. R_{γ,b} is bounded by construction ([0,1], affine,
// no bias); Laplace x + Lap(s) (sd = √2·s) and Gaussian x + N(0, σ²)
// (sd = σ) get [-B, 1+B] with B = reach·sd.
//
// The clamped mean (Expect) is odd about x = 1/2 around its tangent
// (Affine), and the remainder r(u) = Expect(1/2+u) - 1/2 - Slope·u has
// r(0) = r'(0) = 0 and r”(u) = f(B+1/2+u) - f(B+1/2-u) (differentiate
// Expect twice), which is negative for u in (0, 1/2] because the noise
// density f is symmetric and decreasing away from 0; so |r| grows with |u|
// and is largest at u = ±1/2: Bias = |Expect(1) - Offset - Slope| bounds
// the estimator's per-value bias over all inputs in [0,1]. reach must be
// finite and positive.
func NewBounded(r Affine, reach float64) (*Bounded, error) {
	if r == nil {
		return nil, fmt.Errorf("randomizer: bounded: nil randomizer")
	}
	if !(reach > 0) || math.IsInf(reach, 0) {
		return nil, fmt.Errorf("randomizer: bounded: reach %v is not finite and positive", reach)
	}
	var out *Bounded
	switch rz := r.(type) {
	case *Bounded:
		return rz, nil
	case *RGB:
		off, sl := rz.Affine()
		return &Bounded{r: r, lo: 0, hi: 1, offset: off, slope: sl, std: rz.centerStd()}, nil
	case *Laplace:
		s := rz.Scale()
		B := reach * math.Sqrt2 * s
		out = &Bounded{r: r, lo: -B, hi: 1 + B, lapS: s}
		out.slope = 1 - math.Exp(-(B+0.5)/s)
		// Var[clamp(1/2 + L)] = E[min(|L|, c)²] = 2s²(1 - e^{-c/s}(1 + c/s)),
		// c = B + 1/2.
		c := (B + 0.5) / s
		out.std = s * math.Sqrt(2*(1-math.Exp(-c)*(1+c)))
	case *Gaussian:
		s := rz.Sigma()
		B := reach * s
		out = &Bounded{r: r, lo: -B, hi: 1 + B, gaussS: s}
		a := (B + 0.5) / s
		q := math.Erfc(a/math.Sqrt2) / 2
		out.slope = 1 - 2*q
		// E[min(Z², a²)] = (1 - 2Q(a)) - 2aφ(a) + 2a²Q(a).
		phi := math.Exp(-a*a/2) / math.Sqrt(2*math.Pi)
		out.std = s * math.Sqrt(1-2*q-2*a*phi+2*a*a*q)
	default:
		return nil, fmt.Errorf("randomizer: bounded: no bounded support for %q", r.Name())
	}
	if !(out.hi > 1) || math.IsInf(out.hi, 0) || !(out.slope > 0) || !(out.std > 0) || math.IsInf(out.std, 0) {
		return nil, fmt.Errorf("randomizer: bounded: %s interval [%v, %v], slope %v, std %v not finite and positive", r.Name(), out.lo, out.hi, out.slope, out.std)
	}
	out.offset = 0.5 - out.slope/2
	out.bias = math.Abs(out.Expect(1) - out.offset - out.slope)
	return out, nil
}

// Support returns the interval every output lies in.
func (b *Bounded) Support() (lo, hi float64) { return b.lo, b.hi }

// Bias returns a bound on |Expect(x) - (Offset + Slope·x)| for x in [0,1]:
// how far the affine mean the analyzer inverts is from the clamped one (in
// value units; the estimate's bias per real value is 2C·Bias/Slope in
// update units, times d/k for SS-Double).
func (b *Bounded) Bias() float64 { return b.bias }

// Std returns the standard deviation of one clamped output at x = 1/2 (a
// blanket sample's, for Laplace and Gaussian), in value units.
func (b *Bounded) Std() float64 { return b.std }

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
