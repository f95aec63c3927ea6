package audit

import (
	"math"
	"testing"

	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/wire"
)

// TestLLRMatchesDirectLikelihood: lrModel.llr equals the log likelihood
// ratio computed directly from its definition — the probability of the
// multiset, target absent (1-p) or any one of the n_p values (p/n_p each),
// the others i.i.d. from the cover g = π R(xo) + (1-π) ω — on random views
// of three dimensions with n_p = 4 for every randomizer (50 views each,
// fixed seed; exact arithmetic identity up to 1e-9).
func TestLLRMatchesDirectLikelihood(t *testing.T) {
	for _, rz := range []wire.Randomizer{wire.RandomizerLaplace, wire.RandomizerRGB, wire.RandomizerGaussian} {
		spec := small(t, wire.ProtocolSSDouble, rz, 4)
		logf, logw, err := logDensity(spec.Randomizer())
		if err != nil {
			t.Fatal(err)
		}
		const d, np = 3, 4
		m := &lrModel{logf: logf, logw: logw, xo: []float64{0, 0.3, 1}, other: 1.5, use: []bool{true, true, true}, one: 1}
		m.p = [2][]float64{{0.2, 1, 0}, {0.2, 0.5, 1}}
		m.x = [2][]float64{{1, 1, 0}, {0, 0.25, 1}}
		pi := m.other / (np - 1)
		src := noise.NewSeeded(42)
		for range 50 {
			v := view{np: np}
			for j := range d {
				for range np {
					v.index = append(v.index, uint32(j))
					v.value = append(v.value, spec.Randomizer().Randomize(noise.Uniform(src), src))
				}
			}
			one, all := m.llr(v)
			want := 0.0
			for j := range d {
				vals := v.value[j*np : (j+1)*np]
				g := func(y float64) float64 { return pi*math.Exp(logf(m.xo[j], y)) + (1-pi)*math.Exp(logw(y)) }
				var lik [2]float64
				for h := range 2 {
					all := 1.0
					for _, y := range vals {
						all *= g(y)
					}
					sum := 0.0
					for i, y := range vals {
						term := math.Exp(logf(m.x[h][j], y))
						for i2, y2 := range vals {
							if i2 != i {
								term *= g(y2)
							}
						}
						sum += term
					}
					lik[h] = (1-m.p[h][j])*all + m.p[h][j]*sum/np
				}
				l := math.Log(lik[0]) - math.Log(lik[1])
				if j == m.one && math.Abs(one-l) > 1e-9*max(1, math.Abs(l)) {
					t.Fatalf("%v: one dimension %v, direct %v", rz, one, l)
				}
				want += l
			}
			if math.Abs(all-want) > 1e-9*max(1, math.Abs(want)) {
				t.Fatalf("%v: combined %v, direct %v", rz, all, want)
			}
		}
	}
}
