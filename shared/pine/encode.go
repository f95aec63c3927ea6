package pine

import (
	"fmt"
	"math"
)

// Encode maps a gradient to fixed point: entry x becomes
// round(x * 2^NumFracBits), rounding half to even (Python's round() in
// the reference's encode_float). NaN, infinities and subnormal floats are
// refused (as the reference does), as is an entry whose fixed-point value
// does not fit in 63 bits, and a gradient whose encoded squared norm
// exceeds L2NormBound^2 (computed exactly in 128-bit integers).
func (p *Pine) Encode(x []float64) ([]int64, error) {
	if len(x) != p.cfg.Dimension {
		return nil, fmt.Errorf("pine: gradient of length %d, want %d", len(x), p.cfg.Dimension)
	}
	out := make([]int64, len(x))
	scale := math.Ldexp(1, p.cfg.NumFracBits)
	var hi, lo uint64 // 128-bit squared norm
	for i, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) || (v != 0 && math.Abs(v) < 0x1p-1022) {
			return nil, fmt.Errorf("pine: entry %d is NaN, infinite or subnormal", i)
		}
		r := math.RoundToEven(v * scale)
		if math.Abs(r) >= 1<<62 {
			return nil, fmt.Errorf("pine: entry %d too large for fixed point", i)
		}
		e := int64(r)
		out[i] = e
		a := uint64(e)
		if e < 0 {
			a = uint64(-e)
		}
		h, l := mul64(a, a)
		var c uint64
		lo, c = add64(lo, l)
		hi += h + c
		if hi != 0 {
			return nil, fmt.Errorf("pine: encoded squared norm exceeds the bound %d", p.sqNormBound)
		}
	}
	if hi != 0 || lo > p.sqNormBound {
		return nil, fmt.Errorf("pine: encoded squared norm exceeds the bound %d", p.sqNormBound)
	}
	return out, nil
}

func (p *Pine) encodeField(x []float64) ([]fp, error) {
	e, err := p.Encode(x)
	if err != nil {
		return nil, err
	}
	g := make([]fp, len(e))
	for i, v := range e {
		g[i] = fpI(v)
	}
	return g, nil
}
