//go:build js

package browser

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"syscall/js"
)

// current is the page's model for blanket.predict (one per page: every
// try-model pad on a page shows the same class model).
var current struct {
	mu sync.Mutex
	p  *predictor
}

// installPredict adds setPredictor and predict to obj (docs/web.md).
func (a *app) installPredict(obj js.Value) {
	obj.Set("setPredictor", a.fn(setPredictor))
	obj.Set("predict", a.fn(predictJS))
}

// setPredictor(model) -> {ok} or {ok: false, error}: the relay's GET
// /api/predictor as parsed by the page (web.Predictor: feature_map, inputs,
// features, classes, weights, bias, mean, std; the arrays plain or typed),
// checked by newPredictor; it replaces the previous model.
func setPredictor(args []js.Value) any {
	if len(args) < 1 || args[0].Type() != js.TypeObject {
		return result(map[string]any{"ok": false, "error": "blanket.setPredictor: want the predictor object"})
	}
	v := args[0]
	m := predictorModel{FeatureMap: str(v, "feature_map"), Inputs: integer(v, "inputs"), Features: integer(v, "features"), Classes: integer(v, "classes")}
	var err error
	for _, f := range []struct {
		name string
		dst  *[]float64
	}{{"weights", &m.Weights}, {"bias", &m.Bias}, {"mean", &m.Mean}, {"std", &m.Std}} {
		if *f.dst, err = floats(v.Get(f.name)); err != nil {
			return result(map[string]any{"ok": false, "error": fmt.Sprintf("blanket.setPredictor: %s: %v", f.name, err)})
		}
	}
	p, err := newPredictor(m)
	if err != nil {
		return result(map[string]any{"ok": false, "error": err.Error()})
	}
	current.mu.Lock()
	current.p = p
	current.mu.Unlock()
	return result(map[string]any{"ok": true})
}

// predictJS is blanket.predict(pixels Float32Array(784) in [0,1]) ->
// {class, probabilities: [classes numbers]} or {error}: the drawing's
// guess by the model of setPredictor, computed here in the module.
func predictJS(args []js.Value) any {
	current.mu.Lock()
	p := current.p
	current.mu.Unlock()
	if p == nil {
		return result(map[string]any{"error": "blanket.predict: call setPredictor first"})
	}
	var px []float64
	var err error
	if len(args) > 0 {
		px, err = floats(args[0])
	}
	if len(args) < 1 || err != nil || px == nil {
		return result(map[string]any{"error": fmt.Sprintf("blanket.predict: want the drawing's pixels (%v)", err)})
	}
	pixels := make([]float32, len(px))
	for i, v := range px {
		pixels[i] = float32(v)
	}
	class, probs, err := p.predict(pixels)
	if err != nil {
		return result(map[string]any{"error": err.Error()})
	}
	out := make([]any, len(probs))
	for i, q := range probs {
		out[i] = q
	}
	return result(map[string]any{"class": class, "probabilities": js.ValueOf(out)})
}

// str is v[name] if it is a string, else "".
func str(v js.Value, name string) string {
	if f := v.Get(name); f.Type() == js.TypeString {
		return f.String()
	}
	return ""
}

// integer is v[name] if it is an integer number, else -1.
func integer(v js.Value, name string) int {
	if f := v.Get(name); f.Type() == js.TypeNumber && f.Float() == math.Trunc(f.Float()) && math.Abs(f.Float()) < 1<<31 {
		return f.Int()
	}
	return -1
}

// floats reads a Float32Array or Float64Array (copied as bytes, in one
// call) or a plain array of numbers; undefined or null gives nil.
func floats(v js.Value) ([]float64, error) {
	if v.IsUndefined() || v.IsNull() {
		return nil, nil
	}
	if v.Type() != js.TypeObject || v.Get("length").Type() != js.TypeNumber {
		return nil, fmt.Errorf("not an array")
	}
	n := v.Get("length").Int()
	out := make([]float64, n)
	width := map[string]int{"Float32Array": 4, "Float64Array": 8}[v.Get("constructor").Get("name").String()]
	if width > 0 {
		b := make([]byte, n*width)
		js.CopyBytesToGo(b, js.Global().Get("Uint8Array").New(v.Get("buffer"), v.Get("byteOffset"), n*width))
		for i := range out { // typed arrays are in the platform's order: little-endian wherever wasm runs
			if width == 4 {
				out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
			} else {
				out[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
			}
		}
		return out, nil
	}
	for i := range out {
		x := v.Index(i)
		if x.Type() != js.TypeNumber {
			return nil, fmt.Errorf("element %d is not a number", i)
		}
		out[i] = x.Float()
	}
	return out, nil
}
