package mechanism

import (
	"errors"
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/shared/internal/check"
)

// clipper clips update coordinates to [-C, C] and maps them affinely onto
// [0, 1], the input domain of every randomizer (FLAME Algorithm 2, lines
// 8-9): x~ = (clip(x, -C, C) + C) / 2C. Its inverse, used by the analyzer
// (FLAME Algorithm 2, line 19), is z = C * (2 x~ - 1).
//
// Clipping bounds the sensitivity of one coordinate: after normalization any
// two inputs differ by at most 1, which is what the randomizers' epsilon is
// calibrated to.
type clipper struct {
	c float64
}

// newClipper returns a clipper with clipping bound c. c must be positive and
// finite.
func newClipper(c float64) (clipper, error) {
	if err := check.Positive(errInvalid, "clipping bound C", c); err != nil {
		return clipper{}, err
	}
	return clipper{c: c}, nil
}

// C returns the clipping bound.
func (cl clipper) C() float64 { return cl.c }

// Normalize returns (clip(x, -C, C) + C) / 2C, a value in [0, 1]. Infinite
// inputs clip to the nearest bound; NaN maps to NaN (encoders reject NaN
// before calling this).
func (cl clipper) Normalize(x float64) float64 {
	switch {
	case x >= cl.c:
		return 1
	case x <= -cl.c:
		return 0
	}
	return (x + cl.c) / (2 * cl.c)
}

// NormalizeVec writes Normalize(x[j]) into dst[j] and returns dst. dst is
// allocated when nil or too short.
func (cl clipper) NormalizeVec(dst, x []float64) []float64 {
	if cap(dst) < len(x) {
		dst = make([]float64, len(x))
	}
	dst = dst[:len(x)]
	for j, v := range x {
		dst[j] = cl.Normalize(v)
	}
	return dst
}

// Denormalize maps a normalized value back to update units: C * (2z - 1).
// It is the inverse of Normalize on [0, 1] and is defined (affinely) for any
// z, since estimates of a normalized mean may fall outside [0, 1].
func (cl clipper) Denormalize(z float64) float64 {
	return cl.c * (2*z - 1)
}

// Clip returns clip(x, -C, C), the value the protocols estimate the mean of.
func (cl clipper) Clip(x float64) float64 {
	return math.Max(-cl.c, math.Min(cl.c, x))
}

// ClippedMean returns the coordinate-wise mean of clip(x_i, -C, C) over the
// given updates: the quantity SS-Simple and SS-Double estimate without bias.
// All updates must have length d.
func (cl clipper) ClippedMean(updates [][]float64, d int) ([]float64, error) {
	if len(updates) == 0 {
		return nil, errors.New("mechanism: no updates")
	}
	out := make([]float64, d)
	for i, x := range updates {
		if len(x) != d {
			return nil, fmt.Errorf("mechanism: update %d has length %d, want %d", i, len(x), d)
		}
		for j, v := range x {
			out[j] += cl.Clip(v)
		}
	}
	inv := 1 / float64(len(updates))
	for j := range out {
		out[j] *= inv
	}
	return out, nil
}

// errInvalid is what a stage's parameter check wraps.
var errInvalid = errors.New("mechanism: invalid parameter")

func checkVector(x []float64, d int) error {
	if len(x) != d {
		return fmt.Errorf("mechanism: update has length %d, want %d", len(x), d)
	}
	for j, v := range x {
		if math.IsNaN(v) {
			return fmt.Errorf("mechanism: update coordinate %d is NaN", j)
		}
	}
	return nil
}
