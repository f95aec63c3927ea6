//go:build js

package browser

import (
	"errors"
	"fmt"
	"syscall/js"

	"github.com/blanket-fl/blanket/shared/task"
)

// decodeTask reads a task definition from its JSON text with the
// browser's JSON.parse and task.New (not task.Parse: encoding/json would
// add about 250 KB gzipped to the module). A field of the wrong type is
// an error naming it; unknown fields are not seen (the relay served the
// definition after task.Parse checked it strictly).
func decodeTask(text string) (t *task.Task, err error) {
	var v js.Value
	if err := try(func() { v = js.Global().Get("JSON").Call("parse", text) }); err != nil {
		return nil, fmt.Errorf("task: not JSON: %w", err)
	}
	if v.Type() != js.TypeObject {
		return nil, errors.New("task: the definition is not a JSON object")
	}
	r := jsReader{}
	def := task.Task{
		Version: r.int(v, "version"), Name: r.str(v, "name"), Title: r.str(v, "title"), Consent: r.str(v, "consent"),
		Source: r.str(v, "source"), Dataset: r.str(v, "dataset"), Preprocess: r.str(v, "preprocess"),
		Holdout: r.str(v, "holdout"), Simulation: r.str(v, "simulation"),
	}
	for i, f := range r.list(v, "features") {
		name := fmt.Sprintf("features[%d].", i)
		r.prefix = name
		def.Features = append(def.Features, task.Feature{Name: r.str(f, "name"), Question: r.str(f, "question"), Type: r.str(f, "type"),
			Min: r.optNum(f, "min"), Max: r.optNum(f, "max"), Scale: r.str(f, "scale"), Categories: r.strs(f, "categories"), Count: r.int(f, "count")})
	}
	r.prefix = "label."
	l := r.obj(v, "label")
	def.Label = task.Label{Name: r.str(l, "name"), Question: r.str(l, "question"), Classes: r.strs(l, "classes")}
	r.prefix = "model."
	def.Model = task.Model{Type: r.str(r.obj(v, "model"), "type")}
	r.prefix = "privacy."
	p := r.obj(v, "privacy")
	def.Privacy = task.Privacy{Protocol: r.str(p, "protocol"), Epsilon: r.num(p, "epsilon"), Delta: r.num(p, "delta"), Rounds: r.int(p, "rounds")}
	r.prefix = "training."
	tr := r.obj(v, "training")
	def.Training = task.Training{Clip: r.num(tr, "clip"), ServerOptimizer: r.str(tr, "server_optimizer"), ServerMomentum: r.num(tr, "server_momentum"),
		ServerLR: r.num(tr, "server_lr"), LocalEpochs: r.int(tr, "local_epochs"), LocalLR: r.num(tr, "local_lr"), FeatureMap: r.str(tr, "feature_map")}
	if r.err != nil {
		return nil, r.err
	}
	return task.New(def)
}

// jsReader reads typed fields of parsed JSON; the first wrong type is
// kept in err. A missing field (undefined or null) is the zero value.
type jsReader struct {
	prefix string
	err    error
}

func (r *jsReader) field(v js.Value, name string, want js.Type) (js.Value, bool) {
	if v.Type() != js.TypeObject {
		return js.Value{}, false
	}
	f := v.Get(name)
	if f.IsUndefined() || f.IsNull() {
		return js.Value{}, false
	}
	if f.Type() != want && r.err == nil {
		r.err = fmt.Errorf("task: field %s%s: got a JSON %s, want %s: %w", r.prefix, name, f.Type(), want, task.ErrInvalid)
	}
	return f, f.Type() == want
}

func (r *jsReader) str(v js.Value, name string) string {
	if f, ok := r.field(v, name, js.TypeString); ok {
		return f.String()
	}
	return ""
}

func (r *jsReader) num(v js.Value, name string) float64 {
	if f, ok := r.field(v, name, js.TypeNumber); ok {
		return f.Float()
	}
	return 0
}

func (r *jsReader) optNum(v js.Value, name string) *float64 {
	if f, ok := r.field(v, name, js.TypeNumber); ok {
		x := f.Float()
		return &x
	}
	return nil
}

func (r *jsReader) int(v js.Value, name string) int {
	x := r.num(v, name)
	if x != float64(int(x)) && r.err == nil {
		r.err = fmt.Errorf("task: field %s%s: %v is not an integer: %w", r.prefix, name, x, task.ErrInvalid)
	}
	return int(x)
}

func (r *jsReader) obj(v js.Value, name string) js.Value {
	f, _ := r.field(v, name, js.TypeObject)
	return f
}

func (r *jsReader) list(v js.Value, name string) []js.Value {
	f, ok := r.field(v, name, js.TypeObject)
	if !ok {
		return nil
	}
	if !js.Global().Get("Array").Call("isArray", f).Bool() {
		if r.err == nil {
			r.err = fmt.Errorf("task: field %s%s: want a JSON array: %w", r.prefix, name, task.ErrInvalid)
		}
		return nil
	}
	out := make([]js.Value, f.Length())
	for i := range out {
		out[i] = f.Index(i)
	}
	return out
}

func (r *jsReader) strs(v js.Value, name string) []string {
	items := r.list(v, name)
	if items == nil {
		return nil
	}
	out := make([]string, len(items))
	for i, it := range items {
		if it.Type() != js.TypeString {
			if r.err == nil {
				r.err = fmt.Errorf("task: field %s%s[%d]: want a JSON string: %w", r.prefix, name, i, task.ErrInvalid)
			}
			continue
		}
		out[i] = it.String()
	}
	return out
}
