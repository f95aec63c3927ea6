package audit

import (
	"math"
	"slices"
	"testing"

	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/wire"
)

// TestAPESMarginalMatchesEncoder: apesModel.marginal is the law of one
// value column of the shipped encoder (roundspec.Spec.Encoder) for the flip
// neighbours' constant update, for APES and S-APES (d = 8, b = 2) at
// ε_l = 16 (ε* = 2, where S-APES's selection visibly reshapes the
// marginal), levels 1 and 0.5, inputs +C and −C: the density integrates to
// 1 (midpoint rule, 1e-3) and the Kolmogorov-Smirnov distance between its
// CDF and 20,000 encoded values of column 3 (independent reports) is below
// 1.95/√20,000 ≈ 0.0138, the 1e-3 critical value (16 cases: false failure
// at most 1.6e-2; fixed seed).
func TestAPESMarginalMatchesEncoder(t *testing.T) {
	const samples, grid = 20000, 20000
	for _, proto := range []wire.Protocol{wire.ProtocolAPES, wire.ProtocolSAPES} {
		spec := smallAPES(t, proto, 16)
		cfg, epsMax, _ := spec.APES()
		am := &apesModel{d: cfg.D, b: cfg.B, r: cfg.RangeRatio, epsMax: epsMax, dens: map[float64]func(x, y float64) float64{}}
		if !cfg.Sparse() {
			am.b = cfg.D
		}
		for _, level := range []float64{1, 0.5} {
			enc, err := spec.Encoder(level)
			if err != nil {
				t.Fatal(err)
			}
			f, err := am.marginal(level * epsMax)
			if err != nil {
				t.Fatal(err)
			}
			for _, sign := range []float64{1, -1} {
				x, in := make([]float64, cfg.D), (1+sign)/2
				for j := range x {
					x[j] = sign * cfg.C
				}
				src := noise.NewSeeded(uint64(proto)<<16 ^ uint64(level*8)<<8 ^ uint64(sign+2))
				ys := make([]float64, samples)
				for i := range ys {
					msgs, err := enc.Encode(x, src)
					if err != nil {
						t.Fatal(err)
					}
					ys[i] = msgs[3].Values[0]
				}
				slices.Sort(ys)
				cdf, ks, k := 0.0, 0.0, 0
				for g := range grid {
					hi := float64(g+1) / grid
					cdf += f(in, (float64(g)+0.5)/grid) / grid
					for k < samples && ys[k] <= hi {
						k++
					}
					ks = max(ks, math.Abs(cdf-float64(k)/samples))
				}
				if math.Abs(cdf-1) > 1e-3 || ks > 1.95/math.Sqrt(samples) {
					t.Errorf("%v level %v input %v: total mass %.5f, KS distance %.4f", proto, level, in, cdf, ks)
				}
			}
		}
	}
}
