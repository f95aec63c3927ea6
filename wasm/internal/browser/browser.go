//go:build js

package browser

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall/js"

	"github.com/blanket-fl/blanket/shared/client"
	"github.com/blanket-fl/blanket/shared/dataset"
	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/task"
	"github.com/blanket-fl/blanket/wasm/internal/jsws"
	"github.com/blanket-fl/blanket/wasm/internal/volunteer"
)

// Paths the relay serves on the page's origin (docs/web.md).
const (
	keyPath    = "/api/key"
	digitsPath = "/digits.idx.gz"
	// standardizerPath is all a volunteer learning from its own drawings
	// needs of the digits (12.5 KB instead of 1.59 MB).
	standardizerPath = "/standardizer.bin"
	labelsPath       = "/labels.idx.gz"
)

// errRunning: start was called while the client runs.
var errRunning = errors.New("blanket: already started (call stop first)")

// app is the state behind globalThis.blanket.
type app struct {
	mu        sync.Mutex
	listeners []js.Value
	drawings  volunteer.Drawings
	digits    *volunteer.Digits // fetched once per page
	session   volunteer.Session
	cancel    context.CancelFunc // non-nil while starting or running
	task      taskState          // a study's definition and rows (task.go)
	consent   [32]byte           // the consent hash agreed to at start (consent.go)
}

// Main installs globalThis.blanket, dispatches "blanket-ready" and keeps the
// Go program alive.
func Main() {
	install()
	select {}
}

// install sets globalThis.blanket and dispatches "blanket-ready".
func install() *app {
	a := &app{}
	obj := js.Global().Get("Object").New()
	obj.Set("start", a.fn(a.start))
	obj.Set("stop", a.fn(a.stop))
	obj.Set("addDrawing", a.fn(a.addDrawing))
	obj.Set("onEvent", a.fn(a.onEvent))
	obj.Set("drawings", a.fn(func([]js.Value) any { return a.countDrawings() }))
	a.installTask(obj)
	a.installPredict(obj) // predict_js.go
	js.Global().Set("blanket", obj)
	ready()
	return a
}

// fn wraps f as a JavaScript function; a Go panic in f (a JavaScript
// exception from a syscall/js call, say on an argument of an unexpected
// type) becomes an "error" event and a null result instead of ending the Go
// program.
func (a *app) fn(f func(args []js.Value) any) js.Func {
	return js.FuncOf(func(_ js.Value, args []js.Value) (out any) {
		defer func() {
			if r := recover(); r != nil {
				a.emitError(fmt.Errorf("blanket: %v", r))
				out = js.Null()
			}
		}()
		return f(args)
	})
}

// ready dispatches a "blanket-ready" event on window (or on globalThis when it
// is an event target).
func ready() {
	_ = try(func() {
		g := js.Global()
		target := g.Get("window")
		if !target.Truthy() {
			target = g
		}
		ctor := g.Get("Event")
		if target.Get("dispatchEvent").Type() == js.TypeFunction && ctor.Type() == js.TypeFunction {
			target.Call("dispatchEvent", ctor.New("blanket-ready"))
		}
	})
}

// try runs f, turning a panic (a JavaScript exception) into an error.
func try(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if je, ok := r.(js.Error); ok {
				err = je
				return
			}
			err = fmt.Errorf("%v", r)
		}
	}()
	f()
	return nil
}

// jsError returns a JavaScript Error with err's message.
func jsError(err error) js.Value { return js.Global().Get("Error").New(err.Error()) }

// rejected returns a promise rejected with err.
func rejected(err error) js.Value {
	return js.Global().Get("Promise").Call("reject", jsError(err))
}

// promise runs f in a new goroutine (a JavaScript callback must not block)
// and returns a Promise settled by its result.
func promise(f func() error) js.Value {
	var executor js.Func
	executor = js.FuncOf(func(_ js.Value, args []js.Value) any {
		resolve, reject := args[0], args[1]
		go func() {
			defer executor.Release()
			if err := f(); err != nil {
				reject.Invoke(jsError(err))
				return
			}
			resolve.Invoke(js.Undefined())
		}()
		return nil
	})
	return js.Global().Get("Promise").New(executor)
}

// await waits for a Promise (from a goroutine, never from a callback).
func await(p js.Value) (js.Value, error) {
	type result struct {
		v   js.Value
		err error
	}
	ch := make(chan result, 1)
	onOK := js.FuncOf(func(_ js.Value, args []js.Value) any {
		ch <- result{v: args[0]}
		return nil
	})
	onErr := js.FuncOf(func(_ js.Value, args []js.Value) any {
		msg := "promise rejected"
		if len(args) > 0 {
			_ = try(func() { msg = args[0].Call("toString").String() })
		}
		ch <- result{err: errors.New(msg)}
		return nil
	})
	defer onOK.Release()
	defer onErr.Release()
	if err := try(func() { p.Call("then", onOK, onErr) }); err != nil {
		return js.Value{}, err
	}
	r := <-ch
	return r.v, r.err
}

// fetchResponse GETs path on the page's origin and returns the Response.
func fetchResponse(path string) (js.Value, error) {
	var p js.Value
	if err := try(func() { p = js.Global().Call("fetch", path) }); err != nil {
		return js.Value{}, fmt.Errorf("fetch %s: %w", path, err)
	}
	resp, err := await(p)
	if err != nil {
		return js.Value{}, fmt.Errorf("fetch %s: %w", path, err)
	}
	if !resp.Get("ok").Bool() {
		return js.Value{}, fmt.Errorf("fetch %s: HTTP %d", path, resp.Get("status").Int())
	}
	return resp, nil
}

// fetchBytes GETs path on the page's origin and returns the body.
func fetchBytes(path string) ([]byte, error) {
	resp, err := fetchResponse(path)
	if err != nil {
		return nil, err
	}
	buf, err := await(resp.Call("arrayBuffer"))
	if err != nil {
		return nil, fmt.Errorf("fetch %s: body: %w", path, err)
	}
	u := js.Global().Get("Uint8Array").New(buf)
	b := make([]byte, u.Length())
	js.CopyBytesToGo(b, u)
	return b, nil
}

// fetchKey GETs the aggregator key and returns its fields, parsed by the
// browser's JSON.parse (see volunteer.KeyFields).
func fetchKey() (volunteer.KeyFields, error) {
	var f volunteer.KeyFields
	resp, err := fetchResponse(keyPath)
	if err != nil {
		return f, err
	}
	obj, err := await(resp.Call("json"))
	if err != nil {
		return f, fmt.Errorf("fetch %s: %w", keyPath, err)
	}
	if obj.Type() != js.TypeObject {
		return f, fmt.Errorf("fetch %s: not a JSON object", keyPath)
	}
	str := func(name string) string {
		if v := obj.Get(name); v.Type() == js.TypeString {
			return v.String()
		}
		return ""
	}
	return volunteer.KeyFields{Sign: str("sign"), HPKE: str("hpke"), Fingerprint: str("fingerprint")}, nil
}

// emit hands r to every listener; a listener that throws does not stop the
// client.
func (a *app) emit(r volunteer.Record) { a.emitMap(r.Map()) }

// onEvent(fn) registers a listener.
func (a *app) onEvent(args []js.Value) any {
	if len(args) < 1 || args[0].Type() != js.TypeFunction {
		return rejected(errors.New("blanket.onEvent: want a function"))
	}
	a.mu.Lock()
	a.listeners = append(a.listeners, args[0])
	a.mu.Unlock()
	return js.Undefined()
}

func (a *app) countDrawings() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.drawings.Len()
}

// addDrawing(pixels Float32Array(784) in [0,1], label 0..9) -> count. An
// invalid drawing is not added: the count stays the same and an "error"
// event says why (a Go callback cannot throw into JavaScript).
func (a *app) addDrawing(args []js.Value) any {
	pixels, label, err := drawingArgs(args)
	a.mu.Lock()
	count := a.drawings.Len()
	if err == nil {
		count, err = a.drawings.Add(pixels, label)
	}
	a.mu.Unlock()
	if err != nil {
		a.emitError(fmt.Errorf("blanket.addDrawing: %w", err))
	}
	return count
}

// drawingArgs reads the arguments of addDrawing (any array-like of numbers
// and a number).
func drawingArgs(args []js.Value) (pixels []float32, label int, err error) {
	if len(args) < 2 || args[1].Type() != js.TypeNumber {
		return nil, 0, fmt.Errorf("%w: want (pixels, label)", volunteer.ErrOption)
	}
	lf := args[1].Float()
	if lf < 0 || lf >= volunteer.Classes || lf != float64(int(lf)) {
		return nil, 0, fmt.Errorf("%w: label %v (want an integer 0..9)", volunteer.ErrOption, lf)
	}
	err = try(func() {
		px := args[0]
		n := px.Get("length").Int()
		if n != volunteer.Pixels {
			pixels = make([]float32, n) // Add reports the wrong length
			return
		}
		pixels = make([]float32, n)
		for i := range pixels {
			pixels[i] = float32(px.Index(i).Float())
		}
	})
	if err != nil {
		return nil, 0, fmt.Errorf("%w: pixels: %v", volunteer.ErrOption, err)
	}
	return pixels, int(lf), nil
}

// stop() cancels a start in progress or the running client.
func (a *app) stop([]js.Value) any {
	a.mu.Lock()
	cancel := a.cancel
	a.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	return js.Undefined()
}

// options reads the argument of start.
func options(v js.Value) (volunteer.Options, error) {
	var o volunteer.Options
	if v.Type() != js.TypeObject {
		return o, fmt.Errorf("%w: start wants an options object", volunteer.ErrOption)
	}
	str := func(name string) string {
		if f := v.Get(name); f.Type() == js.TypeString {
			return f.String()
		}
		return ""
	}
	num := func(name string) float64 {
		if f := v.Get(name); f.Type() == js.TypeNumber {
			return f.Float()
		}
		return 0
	}
	o.Relay = str("relay")
	o.Fingerprint = str("fingerprint")
	o.Source = str("source")
	if o.Source == "" {
		o.Source = volunteer.SourceShard
	}
	seed, err := volunteer.SeedFromNumber(num("shardSeed"))
	if err != nil {
		return o, err
	}
	o.ShardSeed = seed
	o.EpsLevel = num("epsLevel")
	return o, validateOptions(&o)
}

// start(opts) -> Promise: resolves once the client runs (key checked,
// examples ready), rejects if that fails or if opts.consent is not the
// consent hash of the definition given with setTask (consent.go).
func (a *app) start(args []js.Value) any {
	var arg js.Value
	if len(args) > 0 {
		arg = args[0]
	}
	o, err := options(arg)
	if err != nil {
		a.emitError(err)
		return rejected(err)
	}
	consent, err := a.agreedConsent(arg) // consent.go
	if err != nil {
		a.emitError(err)
		return rejected(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.mu.Lock()
	if a.cancel != nil {
		a.mu.Unlock()
		cancel()
		return rejected(errRunning)
	}
	a.cancel = cancel
	a.consent = consent
	a.mu.Unlock()
	return promise(func() error {
		c, err := a.setup(ctx, o)
		if err != nil {
			a.finish(cancel)
			a.emitError(err)
			return err
		}
		go a.run(ctx, cancel, c, o.Relay)
		return nil
	})
}

func (a *app) emitError(err error) {
	r := a.session.Note(volunteer.KindError)
	r.Error = err.Error()
	a.emit(r)
}

// setup fetches and checks the key, prepares the local examples and builds
// the client.
func (a *app) setup(ctx context.Context, o volunteer.Options) (*client.Client, error) {
	fields, err := fetchKey()
	if err != nil {
		return nil, fmt.Errorf("blanket: aggregator key: %w", err)
	}
	key, err := volunteer.CheckKey(fields, o.Fingerprint)
	if err != nil {
		return nil, err
	}
	r := a.session.Note(volunteer.KindKey)
	r.Fingerprint = key.Fingerprint()
	r.Pinned = o.Fingerprint != ""
	a.emit(r)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if o.Source == sourceTask {
		return a.taskClient(key, o)
	}
	d, err := a.loadData(o.Source)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return a.newClient(key, d, o)
}

// digitsRecipe is the digits' training recipe: the definition the page
// gave with setTask if it is a built-in task, else the built-in digits
// task's (task.DigitsRecipe).
func (a *app) digitsRecipe() task.Recipe {
	a.task.mu.Lock()
	defer a.task.mu.Unlock()
	if t := a.task.def; t != nil && t.Source == task.SourceBuiltin {
		return t.Recipe()
	}
	return task.DigitsRecipe()
}

// loadData returns what the volunteer's data source needs: for its own
// drawings without a feature map only the standardizer (the relay's
// /standardizer.bin, fitted on the same digits the shard mode downloads, so
// drawings are scaled as the aggregator scales its test set), unless the
// digits are already loaded; for a shard, or drawings with a feature map
// (whose statistics are checked against the digits: task.Prep), the
// digits.
func (a *app) loadData(source string) (*volunteer.Digits, error) {
	r := a.digitsRecipe()
	if source != volunteer.SourceDrawings || (r.FeatureMap != "" && r.FeatureMap != "identity") {
		return a.loadDigits(r)
	}
	a.mu.Lock()
	d := a.digits
	a.mu.Unlock()
	if d != nil {
		return d, nil
	}
	b, err := fetchBytes(standardizerPath)
	if err != nil {
		return nil, fmt.Errorf("blanket: standardizer: %w", err)
	}
	z, err := dataset.UnmarshalStandardizer(b, volunteer.Pixels)
	if err != nil {
		return nil, fmt.Errorf("blanket: standardizer: %w", err)
	}
	tk, err := task.ImageTask(r)
	if err != nil {
		return nil, fmt.Errorf("blanket: %w", err)
	}
	p, err := tk.PrepWith(z)
	if err != nil {
		return nil, fmt.Errorf("blanket: standardizer: %w", err)
	}
	return &volunteer.Digits{Prep: p}, nil
}

func (a *app) loadDigits(r task.Recipe) (*volunteer.Digits, error) {
	a.mu.Lock()
	d := a.digits
	a.mu.Unlock()
	if d != nil {
		return d, nil
	}
	images, err := fetchBytes(digitsPath)
	if err != nil {
		return nil, fmt.Errorf("blanket: digits: %w", err)
	}
	labels, err := fetchBytes(labelsPath)
	if err != nil {
		return nil, fmt.Errorf("blanket: digits: %w", err)
	}
	if d, err = volunteer.PrepareDigits(bytes.NewReader(images), bytes.NewReader(labels), r); err != nil {
		return nil, err
	}
	a.mu.Lock()
	a.digits = d
	a.mu.Unlock()
	return d, nil
}

func (a *app) newClient(key envelope.PublicKey, d *volunteer.Digits, o volunteer.Options) (*client.Client, error) {
	src := noise.Secure() // crypto.getRandomValues under js/wasm
	seed := volunteer.ResolveSeed(o.ShardSeed, src)
	a.mu.Lock()
	data, err := volunteer.LocalData(d, &a.drawings, o.Source, seed)
	a.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return a.clientOn(key, data, a.digitsRecipe().Train(), o)
}

// clientOn builds the client on the volunteer's local examples.
func (a *app) clientOn(key envelope.PublicKey, data logreg.Dataset, train logreg.TrainConfig, o volunteer.Options) (*client.Client, error) {
	src := noise.Secure()
	r := a.session.Note(volunteer.KindData)
	r.Examples = data.Len()
	a.emit(r)
	a.mu.Lock()
	consent := a.consent
	a.mu.Unlock()
	return client.New(client.Config{
		Consent:          consent,
		Pinned:           key,
		Data:             data,
		Train:            train,
		Source:           src,
		PersonalFraction: o.EpsLevel,
		OnEvent:          a.clientEvent,
		Answers:          a.surveyAnswers(), // a form's answers to the counted questions (task.go)
	})
}

// run drives the client until stop, reconnecting with backoff.
func (a *app) run(ctx context.Context, cancel context.CancelFunc, c *client.Client, relay string) {
	floor := a.session.Floor()
	dial := func(ctx context.Context) (client.Transport, error) {
		t, err := jsws.Dial(ctx, relay)
		if err != nil {
			return nil, err
		}
		return &receiptTransport{Transport: volunteer.SkipDecided(t, floor), a: a}, nil
	}
	err := c.RunWithReconnect(ctx, dial, client.DefaultBackoff())
	a.session.Finish(c)
	a.finish(cancel)
	a.emit(a.session.Stopped(err))
}

// finish forgets the cancel function of the start that ended.
func (a *app) finish(cancel context.CancelFunc) {
	cancel()
	a.mu.Lock()
	a.cancel = nil
	a.mu.Unlock()
}
