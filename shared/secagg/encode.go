package secagg

import (
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/shared/internal/check"
	"github.com/blanket-fl/blanket/shared/pine"
)

// clipL2 returns x * min(1, clip/||x||_2), each entry clamped to
// [-clip, clip] (which only absorbs float rounding: after clipping |y_i|
// <= ||y|| <= clip up to an ulp), with subnormal entries flushed to zero
// (pine.Pine.Encode refuses them; their fixed-point encoding is 0 anyway).
// The result has L2 norm at most clip up to float rounding, which
// pine.ForBlanket's NormBound absorbs.
func clipL2(x []float64, clip float64) ([]float64, error) {
	// Norm with scaling by the largest magnitude, so no finite input
	// overflows or underflows the sum of squares.
	var m float64
	for i, v := range x {
		if !check.Finite(v) {
			return nil, fmt.Errorf("secagg: update entry %d is %v", i, v)
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
	f := 1.0
	if norm > clip {
		f = clip / norm
	}
	for i, v := range x {
		y[i] = math.Max(-clip, math.Min(clip, v*f))
		if y[i] != 0 && math.Abs(y[i]) < 0x1p-1022 {
			y[i] = 0
		}
	}
	return y, nil
}

// Encode returns the integer vector a volunteer's update x contributes to
// the round's sum: the clipped update on PINE's fixed-point grid (clipL2,
// then pine.Pine.Encode: round half to even, deterministic; ||q||_2 <=
// NormBound = Sensitivity()). Audits and simulations use it to reproduce
// what Shard puts in the sum.
func Encode(p Params, x []float64) ([]int64, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if len(x) != p.Dim {
		return nil, fmt.Errorf("secagg: update has length %d, want %d", len(x), p.Dim)
	}
	pn, err := pine.ForBlanket(p.Dim, p.Clip)
	if err != nil {
		return nil, fmt.Errorf("secagg: %w", err)
	}
	c, err := clipL2(x, p.Clip)
	if err != nil {
		return nil, err
	}
	q, err := pn.Encode(c)
	if err != nil {
		return nil, fmt.Errorf("secagg: %w", err)
	}
	return q, nil
}

// Resize returns p's parameters for another dimension and per-server
// sigma (same clip and report bound), re-derived as NewPineParams does.
func (p Params) Resize(dim int, sigma float64) (Params, error) {
	return NewPineParams(dim, p.Clip, sigma, p.MaxReports)
}
