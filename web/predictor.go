package web

import (
	"fmt"

	"github.com/blanket-fl/blanket/shared/dataset"
)

// Pixels is the length of a drawing as static/pad.js reads it: 28 x 28
// values in [0, 1], row-major, like an MNIST digit.
const Pixels = 28 * 28

// Predictor is the JSON of the relay's GET /api/predictor, which
// static/pad.js reads for "draw a digit, see the class model's guess"
// (TryModel). The model is public after every round; the drawing never
// leaves the page.
//
// Folded (FeatureMap "identity"): Weights (Classes x Features, Features =
// Inputs) and Bias are over the raw pixels x in [0, 1], the standardizer
// folded in, and the page guesses argmax_c Σ_j Weights[c·Features+j]·x_j +
// Bias[c] in JavaScript.
//
// Not folded (a feature map such as "scatter1"): the map is nonlinear, so
// no weights over pixels exist. Weights and Bias are the model's own, over
// the map's Features outputs standardized with Mean and Std (the public
// standardization the aggregator evaluates with), and the page computes
// map, then standardization, then logits in the wasm module
// (blanket.setPredictor and blanket.predict, wasm/internal/browser).
type Predictor struct {
	Round    int      `json:"round"`
	RoundsOK int      `json:"rounds_ok"`
	Accuracy *float64 `json:"accuracy"`
	// FeatureMap is the task's feature map (shared/features.Parse name).
	FeatureMap string `json:"feature_map"`
	// Folded says Weights and Bias are over the raw pixels.
	Folded   bool      `json:"folded"`
	Inputs   int       `json:"inputs"`
	Features int       `json:"features"`
	Classes  int       `json:"classes"`
	Weights  []float32 `json:"weights"`
	Bias     []float64 `json:"bias"`
	// Mean and Std standardize the mapped features (unfolded only).
	Mean []float64 `json:"mean,omitempty"`
	Std  []float64 `json:"std,omitempty"`
}

// NewPredictor builds the Predictor of model parameters (logreg layout:
// Classes x features weights, then Classes biases) over features
// standardized by z: folded into raw-pixel weights (FoldPredictor) when
// mapName is "identity" or "", else the parameters as they are with z's
// statistics. Round, RoundsOK and Accuracy are left for the caller.
func NewPredictor(params []float64, features, classes int, mapName string, z *dataset.Standardizer) (Predictor, error) {
	if z == nil || len(z.Mean) != features || z.Validate() != nil {
		return Predictor{}, fmt.Errorf("predictor: a standardization of the model's %d features is needed", features)
	}
	if mapName == "" || mapName == "identity" {
		w, b, err := FoldPredictor(params, features, classes, z)
		if err != nil {
			return Predictor{}, err
		}
		return Predictor{FeatureMap: "identity", Folded: true, Inputs: features, Features: features, Classes: classes, Weights: w, Bias: b}, nil
	}
	if features < 1 || classes < 1 || len(params) != classes*features+classes {
		return Predictor{}, fmt.Errorf("predictor: model of %d parameters for %d features, %d classes", len(params), features, classes)
	}
	w := make([]float32, classes*features)
	for i := range w {
		w[i] = float32(params[i])
	}
	return Predictor{FeatureMap: mapName, Inputs: Pixels, Features: features, Classes: classes, Weights: w,
		Bias: append([]float64(nil), params[classes*features:]...), Mean: append([]float64(nil), z.Mean...), Std: append([]float64(nil), z.Std...)}, nil
}

// FoldPredictor turns model parameters (logreg layout: C×F weights, then
// C biases) over standardized inputs z_j = (x_j − Mean_j)/Std_j into
// weights and biases over the raw inputs x: w'_cj = w_cj/Std_j and
// b'_c = b_c − Σ_j w_cj·Mean_j/Std_j, the same logits. It is only for a
// linear preprocessing (no feature map).
func FoldPredictor(params []float64, features, classes int, z *dataset.Standardizer) ([]float32, []float64, error) {
	if features < 1 || classes < 1 || len(params) != classes*features+classes || len(z.Mean) != features {
		return nil, nil, fmt.Errorf("predictor: model of %d parameters for %d features, %d classes; standardizer of %d", len(params), features, classes, len(z.Mean))
	}
	w := make([]float32, classes*features)
	b := make([]float64, classes)
	for c := range classes {
		bias := params[classes*features+c]
		for j := range features {
			v := params[c*features+j] / z.Std[j]
			w[c*features+j] = float32(v)
			bias -= v * z.Mean[j]
		}
		b[c] = bias
	}
	return w, b, nil
}
