package sumvec

import (
	"errors"
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/shared/noise"
)

// maxRoundingAttempts caps the resampling of Quantize. Each attempt fails
// with probability at most Beta <= 1/2, so an honest call errs with
// probability at most 2^-64 (2^-1280 at defaultBeta).
const maxRoundingAttempts = 64

// ErrRounding reports that conditional randomized rounding did not meet
// the norm bound in maxRoundingAttempts attempts (probability at most
// Beta^64 for valid Params).
var ErrRounding = errors.New("conditional rounding did not meet the norm bound")

// Quantize clips x to L2 norm p.Clip, scales it by p.Scale and rounds it
// to integers by conditional randomized rounding (Kairouz, Liu and
// Steinke, ICML 2021, arXiv:2102.06387, §3): each y_i is rounded to floor(y_i)+1 with
// probability y_i - floor(y_i) (an exact noise.Bernoulli), else to
// floor(y_i), and the whole vector is drawn again until
// ||q||_2^2 <= p.NormBoundSq().
//
// Guarantee: every returned q has ||q||_2 <= p.Sensitivity() (checked in
// exact integer arithmetic, whatever the float input) and |q_i| <=
// ceil(Scale*Clip) <= p.EntryBound().
//
// Bias: unconditional randomized rounding is exactly unbiased, E[q] = y.
// Conditioning on the event A = {||q||^2 <= bound}, which has probability
// at least 1 - Beta (see Params.NormBoundSq), moves the mean by
// E[q | A] - y = E[(y - q) 1_{not A}] / Pr[A], whose L2 norm is at most
// sqrt(d) Beta / (1 - Beta) since ||q - y||_2 < sqrt(d): at d = 7850 and
// Beta = 2^-20 below 8.5e-5 integer units in L2 over the whole vector,
// against a rounding standard deviation of up to 1/2 per coordinate.
// TestQuantizeUnbiased checks it statistically.
//
// x must have length p.Dim and finite entries. Randomness comes from src
// (noise.Secure() in production).
func Quantize(p Params, x []float64, src noise.Source) ([]int64, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	y, err := clipScale(p, x)
	if err != nil {
		return nil, err
	}
	q := make([]int64, len(y))
	bound := p.NormBoundSq()
	for range maxRoundingAttempts {
		if roundOnce(y, q, src) <= bound {
			return q, nil
		}
	}
	return nil, fmt.Errorf("sumvec: quantize: %w", ErrRounding)
}

// roundOnce writes one unconditional randomized rounding of y into q and
// returns ||q||_2^2. |y_i| <= 2^19 (Validate), so no step overflows.
func roundOnce(y []float64, q []int64, src noise.Source) int64 {
	var sq int64
	for i, v := range y {
		f := math.Floor(v)
		// v - f is exact: |v| < 2^52, so v and floor(v) share the
		// binade or Sterbenz's lemma applies.
		r := int64(f)
		if noise.Bernoulli(src, v-f) {
			r++
		}
		q[i] = r
		sq += r * r
	}
	return sq
}

// clipScale returns y = Scale * x * min(1, Clip/||x||_2), each entry
// clamped to [-Scale*Clip, Scale*Clip] (which only absorbs float
// rounding: after clipping |y_i| <= ||y|| <= Scale*Clip up to an ulp).
func clipScale(p Params, x []float64) ([]float64, error) {
	if len(x) != p.Dim {
		return nil, fmt.Errorf("sumvec: update has length %d, want %d", len(x), p.Dim)
	}
	// Norm with scaling by the largest magnitude, so no finite input
	// overflows or underflows the sum of squares.
	var m float64
	for i, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("sumvec: update entry %d is %v", i, v)
		}
		m = math.Max(m, math.Abs(v))
	}
	y := make([]float64, len(x))
	if m == 0 {
		return y, nil
	}
	var ss float64
	for _, v := range x {
		ss += (v / m) * (v / m)
	}
	norm := m * math.Sqrt(ss)
	f := p.Scale
	if norm > p.Clip {
		f = p.Scale * (p.Clip / norm)
	}
	c := p.ClipUnits()
	for i, v := range x {
		y[i] = math.Max(-c, math.Min(c, v*f))
	}
	return y, nil
}
