//go:build js

package browser

import (
	"math/rand/v2"
	"strings"
	"syscall/js"
	"testing"
)

// TestJSPredict drives blanket.setPredictor and blanket.predict as
// static/pad.js does: a model (pool4, random weights, seeded) handed over
// with typed arrays and again with plain arrays, then drawings as a
// Float32Array: the guesses and probabilities are the Go predictor's, and
// a call before setPredictor, an invalid model or a drawing of the wrong
// length is an error object, not a guess.
func TestJSPredict(t *testing.T) {
	g := js.Global()
	install()
	b := g.Get("blanket")
	if r := b.Call("predict", g.Get("Float32Array").New(784)); !strings.Contains(r.Get("error").String(), "setPredictor") {
		t.Fatalf("predict before setPredictor: %v", r.Get("error"))
	}
	rng := rand.New(rand.NewChaCha8([32]byte{4}))
	m := predictorModel{FeatureMap: "pool4", Inputs: 784, Features: 49, Classes: 10, Weights: make([]float64, 490), Bias: make([]float64, 10),
		Mean: make([]float64, 49), Std: make([]float64, 49)}
	for _, v := range [][]float64{m.Weights, m.Bias, m.Mean} {
		for i := range v {
			v[i] = rng.NormFloat64()
		}
	}
	for i := range m.Std {
		m.Std[i] = 0.5 + rng.Float64()
	}
	want, err := newPredictor(m)
	if err != nil {
		t.Fatal(err)
	}
	typed := func(name string, v []float64) js.Value {
		a := g.Get(name).New(len(v))
		for i, x := range v {
			a.SetIndex(i, x)
		}
		return a
	}
	plain := func(v []float64) js.Value {
		a := make([]any, len(v))
		for i, x := range v {
			a[i] = x
		}
		return js.ValueOf(a)
	}
	for _, form := range []string{"typed", "plain"} {
		obj := js.ValueOf(map[string]any{"feature_map": m.FeatureMap, "inputs": m.Inputs, "features": m.Features, "classes": m.Classes})
		if form == "typed" {
			obj.Set("weights", typed("Float32Array", m.Weights)) // the page's Float32Array.from(weights)
			obj.Set("bias", typed("Float64Array", m.Bias))
			obj.Set("mean", typed("Float64Array", m.Mean))
			obj.Set("std", typed("Float64Array", m.Std))
		} else {
			obj.Set("weights", plain(m.Weights))
			obj.Set("bias", plain(m.Bias))
			obj.Set("mean", plain(m.Mean))
			obj.Set("std", plain(m.Std))
		}
		if r := b.Call("setPredictor", obj); !r.Get("ok").Bool() {
			t.Fatalf("%s: setPredictor: %v", form, r.Get("error"))
		}
		if form == "typed" { // the weights went through float32
			for i := range m.Weights {
				want.w[i] = float64(float32(m.Weights[i]))
			}
		} else {
			copy(want.w, m.Weights)
		}
		for k := range 20 {
			px := make([]float32, 784)
			arr := g.Get("Float32Array").New(784)
			for i := range px {
				if rng.IntN(4) == 0 {
					px[i] = float32(rng.Float64())
				}
				arr.SetIndex(i, float64(px[i]))
			}
			class, probs, err := want.predict(px)
			if err != nil {
				t.Fatal(err)
			}
			r := b.Call("predict", arr)
			if r.Get("error").Truthy() || r.Get("class").Int() != class || r.Get("probabilities").Length() != 10 {
				t.Fatalf("%s: drawing %d: %v class %v, want %d", form, k, r.Get("error"), r.Get("class"), class)
			}
			for c, q := range probs {
				if got := r.Get("probabilities").Index(c).Float(); got != q {
					t.Fatalf("%s: drawing %d: probability %d is %v, want %v", form, k, c, got, q)
				}
			}
		}
	}
	bad := js.ValueOf(map[string]any{"feature_map": "pool4", "inputs": 784, "features": 49, "classes": 10, "weights": plain(m.Weights[1:]), "bias": plain(m.Bias)})
	if r := b.Call("setPredictor", bad); r.Get("ok").Bool() {
		t.Error("a model with a weight missing was accepted")
	}
	if r := b.Call("predict", g.Get("Float32Array").New(783)); !r.Get("error").Truthy() {
		t.Error("a drawing of 783 pixels was guessed")
	}
}
