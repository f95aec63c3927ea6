//go:build !js

package browser

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/blanket-fl/blanket/shared/dataset/sample"
	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/task"
	"github.com/blanket-fl/blanket/shared/task/taskdata"
	"github.com/blanket-fl/blanket/web"
)

// modelOf converts the relay's predictor JSON into what setPredictor reads
// of it (the page hands the parsed object over unchanged).
func modelOf(t *testing.T, body []byte) predictorModel {
	t.Helper()
	var p web.Predictor
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	m := predictorModel{FeatureMap: p.FeatureMap, Inputs: p.Inputs, Features: p.Features, Classes: p.Classes, Bias: p.Bias, Mean: p.Mean, Std: p.Std}
	for _, w := range p.Weights {
		m.Weights = append(m.Weights, float64(w))
	}
	return m
}

// TestPredictAgreesWithTheAggregator: the page's guess for a raw digit
// (the relay's predictor JSON for the built-in digits task, scatter1, as
// web.NewPredictor builds it and the page receives it, then newPredictor:
// map, standardize, logits) is the aggregator's guess for the same test
// digit (logreg.Predict on the holdout taskdata.OpenHoldout prepares), on
// the first 200 test digits, for a model trained (seeded) on the other
// 1,800 so that its guesses mean something (at least 80% right on the
// 200: a model that guesses one class everywhere would agree trivially).
func TestPredictAgreesWithTheAggregator(t *testing.T) {
	const n = 200
	tk, err := task.Digits()
	if err != nil {
		t.Fatal(err)
	}
	sets, err := taskdata.OpenHoldout(tk, "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	_, raw, err := sample.TrainTest()
	if err != nil {
		t.Fatal(err)
	}
	test := sets.Test
	f := test.Features
	sh := logreg.Shape{Features: f, Classes: 10}
	rest, err := logreg.NewDataset(sh, test.X[n*f:], test.Y[n:])
	if err != nil {
		t.Fatal(err)
	}
	tr, err := logreg.NewTrainer(sh, logreg.FLAMEConfig(3, 0.05))
	if err != nil {
		t.Fatal(err)
	}
	params, err := tr.Train(nil, make([]float64, sh.NumParams()), rest, noise.NewSeeded(1))
	if err != nil {
		t.Fatal(err)
	}
	want, err := logreg.Predict(nil, sh, params, test.X[:n*f])
	if err != nil {
		t.Fatal(err)
	}
	wp, err := web.NewPredictor(params, f, 10, tk.Recipe().FeatureMap, sets.Standardizer)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(wp)
	if err != nil {
		t.Fatal(err)
	}
	p, err := newPredictor(modelOf(t, body))
	if err != nil {
		t.Fatal(err)
	}
	right := 0
	for i := range n {
		class, probs, err := p.predict(raw.Row(i))
		if err != nil {
			t.Fatal(err)
		}
		if class != int(want[i]) {
			t.Errorf("test digit %d: the page guesses %d (%.3f), the aggregator %d (%.3f)", i, class, probs[class], want[i], probs[want[i]])
		}
		sum := 0.0
		for _, q := range probs {
			sum += q
		}
		if sum < 0.999999 || sum > 1.000001 || probs[class] < 0.1 {
			t.Errorf("test digit %d: probabilities %v", i, probs)
		}
		if class == int(raw.Y[i]) {
			right++
		}
	}
	if right < n*8/10 {
		t.Errorf("the model is right on %d of %d test digits: too weak for the agreement to mean anything", right, n)
	}
	t.Logf("page and aggregator agree on %d digits; the model is right on %d", n, right)
}

// TestPredictorRefuses: models the page cannot use and drawings that are
// not drawings are errors, never a guess.
func TestPredictorRefuses(t *testing.T) {
	good := predictorModel{FeatureMap: "pool4", Inputs: 784, Features: 49, Classes: 10,
		Weights: make([]float64, 490), Bias: make([]float64, 10)}
	if _, err := newPredictor(good); err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]func(m *predictorModel){
		"unknown map":       func(m *predictorModel) { m.FeatureMap = "blur" },
		"wrong features":    func(m *predictorModel) { m.Features = 48 },
		"wrong inputs":      func(m *predictorModel) { m.Inputs = 100 },
		"short weights":     func(m *predictorModel) { m.Weights = m.Weights[1:] },
		"short bias":        func(m *predictorModel) { m.Bias = m.Bias[1:] },
		"mean without std":  func(m *predictorModel) { m.Mean = make([]float64, 49) },
		"zero deviation":    func(m *predictorModel) { m.Mean, m.Std = make([]float64, 49), make([]float64, 49) },
		"infinite bias":     func(m *predictorModel) { m.Bias = append([]float64{1 / zero()}, m.Bias[1:]...) },
		"standardize short": func(m *predictorModel) { m.Mean, m.Std = make([]float64, 3), []float64{1, 1, 1} },
	} {
		bad := good
		m(&bad)
		if _, err := newPredictor(bad); !errors.Is(err, errPredictor) {
			t.Errorf("%s: %v", name, err)
		}
	}
	p, _ := newPredictor(good)
	for name, px := range map[string][]float32{"short": make([]float32, 783), "negative": append([]float32{-0.5}, make([]float32, 783)...),
		"above one": append([]float32{2}, make([]float32, 783)...)} {
		if _, _, err := p.predict(px); !errors.Is(err, errPredictor) {
			t.Errorf("a %s drawing: %v", name, err)
		}
	}
}

func zero() float64 { return 0 }
