package browser

import (
	"errors"
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/shared/dataset"
	"github.com/blanket-fl/blanket/shared/features"
	"github.com/blanket-fl/blanket/wasm/internal/volunteer"
)

// predictorModel is what "draw a digit, see the class model's guess" needs
// of the relay's GET /api/predictor (web.Predictor): the task's feature map
// by name, the model's weights (Classes x Features) and biases over the
// map's outputs, and the public standardization of those outputs (Mean and
// Std; both nil when the weights are already over the raw pixels, folded).
type predictorModel struct {
	FeatureMap                string
	Inputs, Features, Classes int
	Weights, Bias, Mean, Std  []float64
}

// predictor guesses the digit of a drawing in the page, as the aggregator
// evaluates its model on a test digit: the feature map (float64 in, float32
// out, as task.Prep.Map), the standardization (dataset.Standardizer, in
// float32, as task.Prep.Apply), then the logits in float64, the most
// probable class winning ties by the lower index (as logreg.Predict). The
// drawing is never sent anywhere: only this function reads it.
type predictor struct {
	fmap features.FeatureMap
	in   int
	f, c int
	z    *dataset.Standardizer // nil: weights over the raw inputs
	w, b []float64
}

// errPredictor is the error of a model the page cannot use.
var errPredictor = errors.New("blanket: predictor")

// newPredictor checks m and builds its predictor.
func newPredictor(m predictorModel) (*predictor, error) {
	fm, err := features.Parse(m.FeatureMap)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errPredictor, err)
	}
	if m.Inputs != volunteer.Pixels {
		return nil, fmt.Errorf("%w: drawings of %d values, want %d", errPredictor, m.Inputs, volunteer.Pixels)
	}
	out, err := fm.Dim(m.Inputs)
	if err != nil || out != m.Features || m.Classes < 2 {
		return nil, fmt.Errorf("%w: %d features and %d classes for the map %q of %d inputs (it gives %d)", errPredictor, m.Features, m.Classes, m.FeatureMap, m.Inputs, out)
	}
	if len(m.Weights) != m.Classes*m.Features || len(m.Bias) != m.Classes {
		return nil, fmt.Errorf("%w: %d weights and %d biases for %d x %d", errPredictor, len(m.Weights), len(m.Bias), m.Classes, m.Features)
	}
	for _, v := range [][]float64{m.Weights, m.Bias} {
		for _, x := range v {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, fmt.Errorf("%w: a parameter is not finite", errPredictor)
			}
		}
	}
	p := &predictor{fmap: fm, in: m.Inputs, f: m.Features, c: m.Classes, w: m.Weights, b: m.Bias}
	if m.Mean != nil || m.Std != nil {
		p.z = &dataset.Standardizer{Mean: m.Mean, Std: m.Std}
		if len(m.Mean) != m.Features || p.z.Validate() != nil {
			return nil, fmt.Errorf("%w: a standardization of %d features (want %d, finite, positive deviations)", errPredictor, len(m.Mean), m.Features)
		}
	}
	return p, nil
}

// predict returns the most probable class of the drawing pixels (Inputs
// values in [0, 1]) and every class's probability (softmax of the logits).
func (p *predictor) predict(pixels []float32) (int, []float64, error) {
	if len(pixels) != p.in {
		return 0, nil, fmt.Errorf("%w: a drawing of %d values, want %d", errPredictor, len(pixels), p.in)
	}
	src := make([]float64, p.in)
	for i, v := range pixels {
		if !(v >= 0 && v <= 1) {
			return 0, nil, fmt.Errorf("%w: pixel %d is %v, want a value in [0, 1]", errPredictor, i, v)
		}
		src[i] = float64(v)
	}
	dst := make([]float64, p.f)
	if err := p.fmap.Apply(dst, src); err != nil {
		return 0, nil, fmt.Errorf("%w: %w", errPredictor, err)
	}
	row := make([]float32, p.f)
	for j, v := range dst {
		row[j] = float32(v)
	}
	if p.z != nil {
		if err := p.z.Transform(row); err != nil {
			return 0, nil, fmt.Errorf("%w: %w", errPredictor, err)
		}
	}
	z := make([]float64, p.c)
	best := 0
	for c := range p.c {
		s := 0.0
		for j, x := range row {
			s += p.w[c*p.f+j] * float64(x)
		}
		z[c] = s + p.b[c]
		if z[c] > z[best] {
			best = c
		}
	}
	top, sum := z[best], 0.0
	for c := range z {
		z[c] = math.Exp(z[c] - top)
		sum += z[c]
	}
	for c := range z {
		z[c] /= sum
	}
	return best, z, nil
}
