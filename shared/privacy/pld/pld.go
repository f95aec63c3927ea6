package pld

import (
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/blanket-fl/blanket/shared/internal/check"
)

// Method selects how a privacy loss distribution is discretized onto the
// grid {i*h : i integer}. Both methods are pessimistic: the discretized PLD
// is that of a pair of distributions that dominates the original pair
// (Zhu, Dong, Wang, AISTATS 2022, Definition 7), so every delta(eps) it
// reports, alone or after composition, is an upper bound.
type Method int

const (
	// RoundUp moves the P-mass of every privacy loss L up to the next grid
	// point ceil(L/h)*h (Koskela, Jalko, Honkela, AISTATS 2020;
	// dp_accounting's pessimistic_estimate). Each composed round can shift
	// the loss by up to h, so after k rounds eps may be overestimated by
	// up to about k*h.
	RoundUp Method = iota
	// ConnectDots evaluates the exact hockey-stick curve delta(eps) at the
	// grid points and returns the discrete PLD whose curve is the linear
	// interpolation of those points in e^eps (Doroshenko, Ghazi, Kamath,
	// Kumar, Manurangsi, "Connect the Dots: Tighter Discrete
	// Approximations of Privacy Loss Distributions", PETS 2022). Because
	// delta is convex in e^eps the chords lie above the curve; the
	// resulting pair still dominates, but its loss is not biased upward
	// by h/2 per round, so composition is far tighter than RoundUp for the
	// same h.
	ConnectDots
)

// String returns "round-up" or "connect-dots".
func (m Method) String() string {
	switch m {
	case RoundUp:
		return "round-up"
	case ConnectDots:
		return "connect-dots"
	default:
		return fmt.Sprintf("Method(%d)", int(m))
	}
}

// defaultTailMass is the tail truncation mass used when Options.TailMass is
// zero: at most this much P-mass is moved to infinite loss (added to delta)
// at each truncation.
const defaultTailMass = 1e-15

// maxBuckets bounds the number of grid points of any PLD this package
// builds; an operation that would exceed it returns an error (use a larger
// grid width). 1<<22 buckets need a 1<<23-point complex FFT (128 MiB).
const maxBuckets = 1 << 22

// Options configures the discretization of a PLD.
type Options struct {
	// Width is the grid width h > 0 of the privacy-loss grid, in nats,
	// between 1e-7 and 1. Smaller is tighter and slower.
	Width float64
	// Method is RoundUp (the zero value) or ConnectDots.
	Method Method
	// TailMass is the probability mass that may be truncated from each end
	// of the PLD after construction and after every composition; zero
	// means defaultTailMass. The upper tail is moved to infinite loss
	// (counted in delta), the lower tail onto the lowest kept grid point;
	// both are pessimistic. It must be in [0, 1e-6].
	TailMass float64
	// BothOrdersDominated declares that the pair (P, Q) dominates both
	// orders (D, D') and (D', D) of neighbouring datasets, as the
	// constructors of shared/privacy/amplify do. Then only the direction
	// P||Q is accounted. Otherwise the pair is taken to dominate the remove
	// direction and the add direction is accounted with the swapped pair
	// (Q, P) (see FromLogPair).
	BothOrdersDominated bool
}

func (o Options) validate() (Options, error) {
	if !check.Finite(o.Width) || o.Width < 1e-7 || o.Width > 1 {
		return o, fmt.Errorf("pld: grid width %v must be in [1e-7, 1]", o.Width)
	}
	if o.Method != RoundUp && o.Method != ConnectDots {
		return o, fmt.Errorf("pld: unknown discretization method %d", int(o.Method))
	}
	if math.IsNaN(o.TailMass) || o.TailMass < 0 || o.TailMass > 1e-6 {
		return o, fmt.Errorf("pld: tail mass %v must be in [0, 1e-6]", o.TailMass)
	}
	if o.TailMass == 0 {
		o.TailMass = defaultTailMass
	}
	return o, nil
}

// dist is the privacy loss distribution of one ordered pair (P || Q): P-mass
// probs[i] at privacy loss (offset+i)*h, mass inf at +Inf loss.
type dist struct {
	offset int
	probs  []float64
	inf    float64
	// errL1 bounds the floating-point error of (probs, inf) against the
	// exact pessimistic PLD they represent, in the upper-tail norm
	// ||nu||_T = sup_t |nu({L >= t} and +Inf)| (t over the grid and
	// -Inf), which is at most the L1 norm. It is the right norm for delta:
	// f(L) = (1 - e^{eps-L})_+ is non-decreasing with values in [0, 1], so
	// by Abel summation |sum_i f_i nu_i| <= ||nu||_T. delta is reported
	// with errL1 added. See doc.go for its propagation.
	errL1 float64
	// truncated is the total mass moved to inf by tail truncation (already
	// included in inf), for diagnostics.
	truncated float64
}

// PLD is a pessimistic discretized privacy loss distribution of a mechanism
// under the add-or-remove-one neighbouring relation, kept for both
// directions: "remove" is the PLD of (P || Q) with P = M(D), Q = M(D') and
// D' = D minus one user; "add" is that of the reversed order. Delta and
// Epsilon report the maximum over both directions, which is the guarantee
// for add-or-remove neighbours; a symmetric mechanism keeps one direction.
//
// A PLD is immutable; Compose and SelfCompose return new values. It is safe
// for concurrent use.
type PLD struct {
	h      float64
	tail   float64
	remove *dist
	add    *dist // nil when the remove direction covers both orders
}

// Width returns the grid width h.
func (p *PLD) Width() float64 { return p.h }

func (p *PLD) dirs() []*dist {
	if p.add == nil {
		return []*dist{p.remove}
	}
	return []*dist{p.remove, p.add}
}

// Stats describes the worst direction of a PLD for diagnostics.
type Stats struct {
	// Buckets is the largest number of grid points held by a direction.
	Buckets int
	// MinLoss and MaxLoss are the smallest and largest finite grid losses.
	MinLoss, MaxLoss float64
	// InfinityMass is the largest mass at +Inf loss (a floor on delta),
	// including truncated tails.
	InfinityMass float64
	// TruncatedMass is the largest total mass moved to +Inf by tail
	// truncation (part of InfinityMass).
	TruncatedMass float64
	// ErrorBound is the largest bound on floating-point error added to
	// every delta.
	ErrorBound float64
}

// Stats returns diagnostics of p.
func (p *PLD) Stats() Stats {
	var s Stats
	s.MinLoss = math.Inf(1)
	s.MaxLoss = math.Inf(-1)
	for _, d := range p.dirs() {
		s.Buckets = max(s.Buckets, len(d.probs))
		if len(d.probs) > 0 {
			s.MinLoss = min(s.MinLoss, float64(d.offset)*p.h)
			s.MaxLoss = max(s.MaxLoss, float64(d.offset+len(d.probs)-1)*p.h)
		}
		s.InfinityMass = max(s.InfinityMass, d.inf)
		s.TruncatedMass = max(s.TruncatedMass, d.truncated)
		s.ErrorBound = max(s.ErrorBound, d.errL1)
	}
	return s
}

// Delta returns the smallest delta such that the mechanism is
// (eps, delta)-DP under add-or-remove-one neighbours according to the PLD:
//
//	delta(eps) = max over directions of
//	             inf + sum_i probs_i * max(0, 1 - exp(eps - L_i)) + errL1,
//
// the hockey-stick divergence H_{e^eps}(P || Q) = E_P[(1 - e^{eps - L})_+]
// of the discretized dominating pair (Koskela et al. AISTATS 2020, eq. 5;
// Zhu et al. 2022, Lemma 5), which upper-bounds the true delta. The sum is
// exact for the discretized PLD up to rounding (compensated summation,
// covered by a relative margin of 16u). eps may be any finite number.
func (p *PLD) Delta(eps float64) (float64, error) {
	if !check.Finite(eps) {
		return 0, fmt.Errorf("pld: eps %v must be finite", eps)
	}
	best := 0.0
	for _, d := range p.dirs() {
		best = max(best, d.delta(eps, p.h))
	}
	return min(best, 1), nil
}

// sumMargin is the relative margin covering the rounding of the
// compensated sum in delta: each term (Expm1 and one product, a few ulps)
// and the Neumaier sum (2u plus O(n u^2)).
const sumMargin = 16 * unitRoundoff

func (d *dist) delta(eps, h float64) float64 {
	v := d.inf + d.sumAbove(eps, h)
	return v*(1+sumMargin) + d.errL1
}

// Epsilon returns the smallest eps >= 0 with Delta(eps) <= delta, solved
// exactly on the piecewise form delta(eps) = A_j - e^{eps-L_j} B_j between
// grid points, where A_j is the suffix sum of P-mass above the segment and
// B_j = sum_{i>=j} probs_i e^{L_j-L_i} <= A_j is the Q-mass rescaled to the
// segment's upper end, so no exponential of a loss is ever formed and the
// inversion is correct at any magnitude of eps (the losses of a long
// composition exceed the ~709 nats where e^L overflows a float64). It
// returns +Inf (and no error) when delta is below the infinity mass plus
// error bound of some direction, i.e. no finite eps achieves it. Every
// returned eps is certified: Delta(eps) <= delta is re-checked with the
// same compensated sum Delta uses; when rounding prevents that check from
// passing the result is an error, never a smaller number.
func (p *PLD) Epsilon(delta float64) (float64, error) {
	if math.IsNaN(delta) || delta < 0 || delta > 1 {
		return 0, fmt.Errorf("pld: delta %v must be in [0, 1]", delta)
	}
	best := 0.0
	for _, d := range p.dirs() {
		e, err := d.epsilon(delta, p.h)
		if err != nil {
			return 0, err
		}
		best = max(best, e)
	}
	return best, nil
}

// ErrUncertified is wrapped by an Epsilon error when no eps could be
// certified against the delta it was asked for (rounding), so the caller
// must refuse rather than use a number.
var ErrUncertified = errors.New("pld: epsilon could not be certified")

func (d *dist) epsilon(delta, h float64) (float64, error) {
	// Need (inf + S(eps))*(1+sumMargin) + errL1 <= delta.
	target := (delta-d.errL1)/(1+sumMargin) - d.inf
	if target < 0 {
		return math.Inf(1), nil
	}
	// S(0): if it already meets the target, eps = 0.
	if d.sumAbove(0, h) <= target {
		return 0, nil
	}
	// Scan downwards from the top: on [L_{j-1}, L_j] with L_j the lowest
	// grid loss above eps, S(eps) = A - e^{eps-L_j} B with A = sum_{i>=j}
	// probs_i and B = sum_{i>=j} probs_i e^{L_j-L_i}. S is continuous and
	// non-increasing, so the answer lies in the first (highest) segment
	// whose left end exceeds the target. Moving one grid point down,
	// B <- probs_j + e^{-h} B: every term stays in [0, 1].
	var ka kahan
	b := 0.0
	decay := math.Exp(-h)
	for i := len(d.probs) - 1; i >= 0; i-- {
		lj := float64(d.offset+i) * h
		if lj <= 0 {
			break
		}
		ka.add(d.probs[i])
		b = d.probs[i] + b*decay
		a := ka.value()
		left := max(float64(d.offset+i-1)*h, 0)
		if a-math.Exp(left-lj)*b <= target {
			continue
		}
		// Solve A - e^{eps-L_j} B = target on [left, lj]; B > 0 here
		// because the left value exceeds the target >= 0 only if some
		// mass lies above, and (A - target)/B <= 1 up to rounding.
		e := lj
		if b > 0 && a > target {
			e = lj + math.Log((a-target)/b)
		}
		if math.IsNaN(e) {
			e = lj
		}
		e = math.Min(math.Max(e, left), lj)
		return d.certify(e, lj, target, h)
	}
	// No segment above 0 exceeds the target, yet S(0) does: rounding
	// between the two computations. Certify from 0.
	return d.certify(0, max(float64(d.offset+len(d.probs)-1)*h, 0), target, h)
}

// certify returns the smallest eps it can find in [e, hi] with
// sumAbove(eps) <= target, stepping up by ulps from e and then bisecting
// towards hi (sumAbove is non-increasing up to rounding, and exactly 0 at
// the top grid loss), or ErrUncertified when not even hi passes.
func (d *dist) certify(e, hi, target, h float64) (float64, error) {
	for range 64 {
		if d.sumAbove(e, h) <= target {
			return e, nil
		}
		e = math.Nextafter(e, math.Inf(1)) + 1e-15*math.Abs(e)
	}
	if !(d.sumAbove(hi, h) <= target) {
		return 0, fmt.Errorf("%w: delta(%v) exceeds the target at the segment's upper end", ErrUncertified, hi)
	}
	lo := e
	for range 200 {
		if hi-lo <= 1e-12*math.Max(1, math.Abs(hi)) {
			break
		}
		mid := lo + (hi-lo)/2
		if d.sumAbove(mid, h) <= target {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, nil
}

// sumAbove returns S(eps) = sum over L_i > eps of probs_i (1 - e^{eps-L_i}).
// It is a compensated sum, so its rounding error is a few ulps of the
// result regardless of the number of grid points.
func (d *dist) sumAbove(eps, h float64) float64 {
	var s kahan
	for i := len(d.probs) - 1; i >= 0; i-- {
		l := float64(d.offset+i) * h
		if l <= eps {
			break
		}
		s.add(d.probs[i] * -math.Expm1(eps-l))
	}
	return s.value()
}

// Compose returns the PLD of the composition of the mechanisms of p and
// other (adaptive composition of dominating pairs, Zhu et al. 2022
// Theorem 10): the losses add, so each direction's PLD is the convolution
// of the two, computed by zero-padded FFT (see convolve) and truncated at
// both tails (see truncate). Both must have the same grid width; the
// result uses the larger tail mass.
func (p *PLD) Compose(other *PLD) (*PLD, error) {
	if other == nil {
		return nil, errors.New("pld: compose with nil PLD")
	}
	if p.h != other.h {
		return nil, fmt.Errorf("pld: grid widths differ (%v and %v)", p.h, other.h)
	}
	tail := max(p.tail, other.tail)
	out := &PLD{h: p.h, tail: tail}
	if p.add == nil && other.add == nil {
		d, err := composeDist(p.remove, other.remove, tail)
		if err != nil {
			return nil, err
		}
		out.remove = d
		return out, nil
	}
	pa, oa := p.add, other.add
	if pa == nil {
		pa = p.remove
	}
	if oa == nil {
		oa = other.remove
	}
	var (
		wg      sync.WaitGroup
		errA    error
		addDist *dist
		errR    error
		remDist *dist
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		addDist, errA = composeDist(pa, oa, tail)
	}()
	remDist, errR = composeDist(p.remove, other.remove, tail)
	wg.Wait()
	if err := errors.Join(errR, errA); err != nil {
		return nil, err
	}
	out.remove, out.add = remDist, addDist
	return out, nil
}

// SelfCompose returns the PLD of the k-fold composition of p with itself
// (k >= 1), by exponentiation by squaring: about 2*log2(k) convolutions,
// each followed by tail truncation.
func (p *PLD) SelfCompose(k int) (*PLD, error) {
	if k < 1 {
		return nil, fmt.Errorf("pld: self-composition count %d must be >= 1", k)
	}
	var result *PLD
	base := p
	for {
		if k&1 == 1 {
			if result == nil {
				result = base
			} else {
				r, err := result.Compose(base)
				if err != nil {
					return nil, err
				}
				result = r
			}
		}
		k >>= 1
		if k == 0 {
			return result, nil
		}
		b, err := base.Compose(base)
		if err != nil {
			return nil, err
		}
		base = b
	}
}

func composeDist(a, b *dist, tail float64) (*dist, error) {
	if len(a.probs)+len(b.probs)-1 > 2*maxBuckets {
		return nil, fmt.Errorf("pld: composed grid of %d points exceeds %d; use a larger grid width",
			len(a.probs)+len(b.probs)-1, maxBuckets)
	}
	c, convErr := convolve(a.probs, b.probs)
	ma, mb := sum(a.probs), sum(b.probs)
	d := &dist{
		offset: a.offset + b.offset,
		probs:  c,
		// +Inf absorbs: mass at inf in either factor times all mass of
		// the other, counted once.
		inf: a.inf*(mb+b.inf) + b.inf*ma,
		// ||x~ (x) y~ - x (x) y||_1 <= e_x*|y~| + |x|*e_y with |x| <= 1:
		// the measures' total masses are 1 up to their own error.
		errL1:     a.errL1*(mb+b.inf) + b.errL1*(1+a.errL1) + convErr,
		truncated: a.truncated + b.truncated,
	}
	if d.inf > 1 {
		d.inf = 1
	}
	// Truncate at the larger of the tail mass and a fraction of the FFT
	// error bound: below that level the entries are round-off noise and
	// keeping them would only grow the grid (the noise is already in
	// errL1).
	d.truncate(max(tail, convErr*truncFrac))
	if len(d.probs) > maxBuckets {
		return nil, fmt.Errorf("pld: composed grid of %d points exceeds %d; use a larger grid width or tail mass",
			len(d.probs), maxBuckets)
	}
	return d, nil
}

// truncate drops the longest prefix and suffix of probs whose masses are at
// most tau each. The prefix mass is added to the lowest kept grid point
// (losses only increase: pessimistic, the PLD stays that of a dominating
// pair); the suffix mass is added to inf (infinite loss: pessimistic, and
// it raises every delta by at most tau). Leading and trailing zeros are
// always removed.
func (d *dist) truncate(tau float64) {
	n := len(d.probs)
	lo, low := 0, 0.0
	for lo < n && low+d.probs[lo] <= tau {
		low += d.probs[lo]
		lo++
	}
	hi, high := n, 0.0
	for hi > lo && high+d.probs[hi-1] <= tau {
		high += d.probs[hi-1]
		hi--
	}
	if lo == hi {
		// Everything is tail (total finite mass <= 2*tau): move it all
		// to inf, pessimistically.
		d.inf += low + high
		d.truncated += low + high
		d.probs = nil
		return
	}
	if hi-lo < n/2 {
		// Release the large backing array.
		d.probs = append([]float64(nil), d.probs[lo:hi]...)
	} else {
		d.probs = d.probs[lo:hi:hi]
	}
	d.offset += lo
	d.probs[0] += low
	d.inf += high
	d.truncated += high
	if d.inf > 1 {
		d.inf = 1
	}
}

// truncFrac scales the FFT error bound into the truncation threshold. The
// bound is worst-case (measured FFT errors are ~100x smaller, see
// TestConvolveErrorBound), and cutting at 1% of it already removes the
// round-off floor at the tails, so the grid stays bounded (measured:
// 1000-fold Gaussian, grid within 10% of the cut at the full bound) while
// adding only 1% of the bound to delta.
const truncFrac = 1e-2
