package noise

import (
	"errors"
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/shared/internal/check"
)

// minLambda is the smallest decay rate accepted by the geometric samplers.
// The Laplace and Gaussian samplers work at lambda of about 2^-40 (grid
// units). At lambda >= 2^-50 the block length T is below 2^48, so H*T + L
// overflows int64 only if H > 2^15 blocks, which has probability below
// 2^-8000.
const minLambda = 0x1p-50

// geomBlock is lambda*T, the decay over one block of the decomposition
// below: rho = exp(-geomBlock) ≈ 0.84 makes the low part L accepted ~92%
// of the time while the high part H still takes a single word.
const geomBlock = math.Ln2 / 4

// geomMinThreshold: H is read off one uniform word for thresholds
// rho^h >= 2^-40 (at least 2^24 in word units, so consecutive thresholds
// are millions of words apart and a tie decides H exactly).
const geomMinThreshold = 0x1p-40

// geom samples G >= 0 with Pr[G = k] = (1-q) q^k, q = exp(-lambda).
//
// It decomposes G = H*T + L with T = max(1, floor(geomBlock/lambda)),
// where H and L are independent:
//
//	H: Pr[H >= h] = rho^h, rho = q^T  (a geometric law on blocks)
//	L: Pr[L = l] = q^l (1-q)/(1-q^T) on {0, ..., T-1}
//
// Then Pr[G = hT+l] = (1-rho) rho^h q^l (1-q)/(1-rho) = (1-q) q^(hT+l),
// the exact geometric law, with no truncation.
//
// H is drawn from ONE uniform word: with U the (lazily extended) uniform
// real whose first 64 bits are w, H >= h iff U < rho^h; w is compared
// with the precomputed thresholds floor(rho^h 2^64) and the rare exact tie
// is resolved by an exact Bernoulli of the fractional part. Past the
// table (probability < 2^-40) H continues with fresh exact Bernoulli(rho)
// trials, which is exact by memorylessness. L is drawn by rejection: a
// uniform l in [0,T) (Lemire, exact) accepted with probability q^l >= rho
// (acceptExp, exact up to exp() rounding, and exp() is skipped ~99% of the
// time by the squeeze 1-y <= e^-y).
//
// The only inexactness is the rounding of exp() (<1 ulp): every
// probability of the implemented law is within a relative ~2^-50 of the
// ideal one. No floating-point value of the input reaches the output.
type geom struct {
	lambda float64
	t      uint64    // block length T
	rho    float64   // exp(-lambda*T)
	th     []uint64  // th[i] = floor(rho^(i+1) 2^64) while rho^(i+1) >= 2^-40
	fr     []float64 // fr[i] = rho^(i+1) 2^64 - th[i], in [0, 1)
}

// newGeom validates lambda and precomputes the block decomposition. With
// table false the threshold table is skipped (cheaper to build, H then
// costs ~6 Bernoulli words instead of one): for one-off draws.
func newGeom(lambda float64, table bool) (geom, error) {
	if !check.Finite(lambda) || lambda < minLambda {
		return geom{}, fmt.Errorf("noise: geometric decay rate lambda=%v must be finite and >= %v", lambda, minLambda)
	}
	t := math.Max(1, math.Floor(geomBlock/lambda))
	g := geom{lambda: lambda, t: uint64(t), rho: math.Exp(-lambda * t)}
	for h := 1.0; table; h++ {
		p := math.Exp(-lambda * t * h)
		if p < geomMinThreshold {
			break
		}
		x := p * 0x1p64 // < 2^64: p <= rho < 1
		th := uint64(x)
		g.th = append(g.th, th)
		g.fr = append(g.fr, x-float64(th))
	}
	return g, nil
}

// sampleH draws the block count H.
func (g *geom) sampleH(s Source) uint64 {
	w := s.Uint64()
	for i, th := range g.th {
		if w < th {
			continue // U < rho^(i+1) for sure: H >= i+1
		}
		if w > th {
			return uint64(i) // U >= rho^(i+1) for sure: H = i
		}
		// w == th: U < rho^(i+1) iff the remaining bits are below fr[i].
		// If so, U is still far above rho^(i+2), so H = i+1.
		if Bernoulli(s, g.fr[i]) {
			return uint64(i) + 1
		}
		return uint64(i)
	}
	h := uint64(len(g.th))
	for Bernoulli(s, g.rho) {
		h++
	}
	return h
}

// sampleL draws the within-block offset L.
func (g *geom) sampleL(s Source) uint64 {
	if g.t == 1 {
		return 0
	}
	for {
		l := uint64n(s, g.t)
		if l == 0 || acceptExp(s, g.lambda*float64(l)) {
			return l
		}
	}
}

// sample draws G >= 0.
func (g *geom) sample(s Source) int64 {
	h := g.sampleH(s)
	l := g.sampleL(s)
	// H*T + L saturates at MaxInt64, which needs H > 2^15 blocks at the
	// smallest lambda (T < 2^48): probability below rho^(2^15) < 2^-8000.
	if h > (math.MaxInt64-l)/g.t {
		return math.MaxInt64
	}
	return int64(h*g.t + l)
}

// acceptExp returns true with probability exp(-y) for y >= 0, exact up to
// the <1 ulp rounding of math.Exp. It reads one uniform word w and first
// tries the squeeze U < (1-y)(1-2^-50) <= e^-y, which avoids exp() with
// probability ~1 - y^2/2; otherwise it compares the same U with e^-y,
// resolving a tie on w with an exact Bernoulli of the fractional part.
func acceptExp(s Source, y float64) bool {
	if !(y > 0) {
		return true
	}
	w := s.Uint64()
	if y < 1 {
		// (1-y) is rounded by at most 2^-53; the factor (1-2^-50) keeps
		// the squeeze threshold below e^-y >= 1-y.
		if w < uint64((1-y)*(1-0x1p-50)*0x1p64) {
			return true
		}
	}
	x := math.Exp(-y) * 0x1p64 // < 2^64 for y > 0
	th := uint64(x)
	if w != th {
		return w < th
	}
	return Bernoulli(s, x-float64(th))
}

// twoSided draws K in Z with Pr[K = k] = (1-q)/(1+q) q^|k| (the discrete
// Laplace distribution): a geometric magnitude with a random sign, where a
// zero drawn with the negative sign is rejected so that 0 is not counted
// twice.
func (g *geom) twoSided(s Source) int64 {
	for {
		neg := s.Uint64()>>63 == 1
		k := g.sample(s)
		if !neg {
			return k
		}
		if k != 0 {
			return -k
		}
	}
}

// geometricSampler draws from the geometric law of newGeometricSampler.
// It is immutable and safe for concurrent use (one Source per goroutine).
type geometricSampler struct{ g geom }

// newGeometricSampler returns a sampler of the number of failures before
// the first success in independent Bernoulli(p) trials,
// Pr[G = k] = p (1-p)^k for k >= 0. It is exact up to the <1 ulp rounding
// of exp() (see geom), with no truncation other than saturation at
// MaxInt64 (probability below 2^-8000). p must be in
// [1-exp(-minLambda), 1).
func newGeometricSampler(p float64) (*geometricSampler, error) {
	if math.IsNaN(p) || p <= 0 || p >= 1 {
		return nil, fmt.Errorf("noise: geometric success probability p=%v must be in (0, 1)", p)
	}
	g, err := newGeom(-math.Log1p(-p), true)
	if err != nil {
		return nil, fmt.Errorf("noise: geometric p=%v too small: %w", p, err)
	}
	return &geometricSampler{g: g}, nil
}

// Sample draws G >= 0.
func (g *geometricSampler) Sample(s Source) int64 { return g.g.sample(s) }

// DiscreteLaplace draws K in Z with Pr[K = k] = (1-q)/(1+q) q^|k|,
// q = exp(-lambda): the two-sided geometric law, which is lambda-DP for
// integer inputs at sensitivity 1 (Ghosh, Roughgarden and Sundararajan
// 2009). Exact up to the rounding of exp() (see geom). Immutable and safe
// for concurrent use (one Source per goroutine).
type DiscreteLaplace struct{ g geom }

// NewDiscreteLaplace returns the sampler for decay rate lambda (finite,
// >= minLambda).
func NewDiscreteLaplace(lambda float64) (*DiscreteLaplace, error) {
	g, err := newGeom(lambda, true)
	if err != nil {
		return nil, err
	}
	return &DiscreteLaplace{g: g}, nil
}

// Sample draws K.
func (d *DiscreteLaplace) Sample(s Source) int64 { return d.g.twoSided(s) }

// geometric draws one value of the law of newGeometricSampler(p) (p = 1
// returns 0). It skips the sampler's lookup table, so it is cheap for a
// single draw; use newGeometricSampler for many draws.
func geometric(s Source, p float64) (int64, error) {
	if math.IsNaN(p) || p <= 0 || p > 1 {
		return 0, fmt.Errorf("noise: geometric success probability p=%v must be in (0, 1]", p)
	}
	if p == 1 {
		return 0, nil
	}
	g, err := newGeom(-math.Log1p(-p), false)
	if err != nil {
		return 0, fmt.Errorf("noise: geometric p=%v too small: %w", p, err)
	}
	return g.sample(s), nil
}

// twoSidedGeometric draws one value of the law of NewDiscreteLaplace
// (lambda), cheaply for a single draw; use NewDiscreteLaplace for many.
func twoSidedGeometric(s Source, lambda float64) (int64, error) {
	g, err := newGeom(lambda, false)
	if err != nil {
		return 0, err
	}
	return g.twoSided(s), nil
}

// errInvalid is what a sampler's parameter check wraps.
var errInvalid = errors.New("noise: invalid parameter")
