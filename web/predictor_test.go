package web

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/blanket-fl/blanket/shared/dataset"
)

// TestFoldPredictor: the folded weights over raw pixels give the logits
// the model gives the standardized pixels (random model, random images;
// seeded).
func TestFoldPredictor(t *testing.T) {
	const f, c = 6, 3
	rng := rand.New(rand.NewChaCha8([32]byte{9}))
	z := &dataset.Standardizer{Mean: make([]float64, f), Std: make([]float64, f)}
	for j := range f {
		z.Mean[j], z.Std[j] = rng.Float64(), 0.1+rng.Float64()
	}
	params := make([]float64, c*f+c)
	for i := range params {
		params[i] = rng.NormFloat64()
	}
	p, err := NewPredictor(params, f, c, "identity", z)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Folded || p.Inputs != f || p.Mean != nil {
		t.Fatalf("identity: folded %v, %d inputs, %d means", p.Folded, p.Inputs, len(p.Mean))
	}
	w, b := p.Weights, p.Bias
	for range 20 {
		x := make([]float64, f)
		for j := range x {
			x[j] = rng.Float64()
		}
		for k := range c {
			want, got := params[c*f+k], b[k]
			for j := range f {
				want += params[k*f+j] * (x[j] - z.Mean[j]) / z.Std[j]
				got += float64(w[k*f+j]) * x[j]
			}
			if math.Abs(got-want) > 1e-5*(1+math.Abs(want)) {
				t.Fatalf("class %d: folded logit %v, model %v", k, got, want)
			}
		}
	}
	if _, _, err := FoldPredictor(params[1:], f, c, z); err == nil {
		t.Error("a model of the wrong size was folded")
	}
}

// TestMappedPredictor: with a feature map nothing is folded: the weights
// are the model's (as float32), the biases and the statistics are the
// model's and the standardization's, and the map's name and the drawing's
// length (784) say what the page computes; a standardization of another
// length, or a model of the wrong size, is refused.
func TestMappedPredictor(t *testing.T) {
	const f, c = 5, 2
	z := &dataset.Standardizer{Mean: []float64{1, 2, 3, 4, 5}, Std: []float64{1, 1, 2, 2, 3}}
	params := []float64{.1, .2, .3, .4, .5, .6, .7, .8, .9, 1, -1, 2}
	p, err := NewPredictor(params, f, c, "scatter1", z)
	if err != nil {
		t.Fatal(err)
	}
	w := make([]float32, c*f)
	for i := range w {
		w[i] = float32(params[i])
	}
	if p.Folded || p.FeatureMap != "scatter1" || p.Inputs != Pixels || p.Features != f || p.Classes != c ||
		!slices.Equal(p.Weights, w) || !slices.Equal(p.Bias, []float64{-1, 2}) || !slices.Equal(p.Mean, z.Mean) || !slices.Equal(p.Std, z.Std) {
		t.Fatalf("predictor %+v", p)
	}
	if _, err := NewPredictor(params[1:], f, c, "scatter1", z); err == nil {
		t.Error("a model of the wrong size was accepted")
	}
	if _, err := NewPredictor(params, f, c, "scatter1", &dataset.Standardizer{Mean: z.Mean[1:], Std: z.Std[1:]}); err == nil {
		t.Error("a standardization of 4 features was accepted for 5")
	}
}
