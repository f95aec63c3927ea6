//go:build js

package browser

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"syscall/js"

	"github.com/blanket-fl/blanket/shared/client"
	"github.com/blanket-fl/blanket/shared/dataset"
	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/task"
	"github.com/blanket-fl/blanket/wasm/internal/volunteer"
)

// sourceTask is the start option source for a study's own rows (a CSV file
// the volunteer picked, or its answers to the survey form), prepared with
// setTask and parseCSV or setAnswers; they never leave this module except
// as the client's clipped, randomized update.
const sourceTask = "task"

// taskState is the study and the volunteer's rows for sourceTask.
type taskState struct {
	mu   sync.Mutex
	def  *task.Task
	rows *dataset.Set // encoded by def; nil until parseCSV or setAnswers succeeds
	// survey is the form's answers to the task's counted questions
	// (task.SurveyAnswers, client.Config.Answers), nil for a CSV.
	survey []int
}

// surveyAnswers is the volunteer's answers to the counted questions
// (nil without a form).
func (a *app) surveyAnswers() []int {
	a.task.mu.Lock()
	defer a.task.mu.Unlock()
	return a.task.survey
}

// errNoTaskRows: start with source "task" before any usable row.
var errNoTaskRows = errors.New("blanket: no local data: load a CSV file or answer the questions first")

// installTask adds setTask, parseCSV and setAnswers to obj (docs/web.md).
func (a *app) installTask(obj js.Value) {
	obj.Set("setTask", a.fn(a.setTask))
	obj.Set("parseCSV", a.fn(a.parseCSV))
	obj.Set("setAnswers", a.fn(a.setAnswers))
}

// result returns a plain object with the given fields.
func result(fields map[string]any) js.Value {
	o := js.Global().Get("Object").New()
	for k, v := range fields {
		o.Set(k, v)
	}
	return o
}

// setTask(json string) -> {ok, name, source, inputs, classes,
// consentHash, consentVersion} or {ok: false, error}: the study's
// definition (the relay's GET /api/task; the page gives it for every task,
// the built-in digits included), read by decodeTask and checked by
// task.New; consentHash is what start's consent option must repeat
// (consent.go). A new definition forgets the rows of the previous one.
func (a *app) setTask(args []js.Value) any {
	if len(args) < 1 || args[0].Type() != js.TypeString {
		return result(map[string]any{"ok": false, "error": "blanket.setTask: want the definition as a JSON string"})
	}
	t, err := decodeTask(args[0].String())
	if err != nil {
		return result(map[string]any{"ok": false, "error": err.Error()})
	}
	a.task.mu.Lock()
	a.task.def, a.task.rows = t, nil
	a.task.mu.Unlock()
	out := map[string]any{"ok": true, "name": t.Name, "source": t.Source, "inputs": t.Inputs(), "classes": len(t.Label.Classes)}
	consentInfo(t, out)
	return result(out)
}

// parseCSV(bytes Uint8Array) -> {ok, rows, skipped, errors: [{row,
// column, message, text}], ignored: [names], error}: the volunteer's file,
// parsed and encoded by task.ParseCSV here in the module (the bytes are
// never sent anywhere). ok is true when at least one row is usable; those
// rows are what start({source: "task"}) trains on. A file unusable as a
// whole (no header, a column missing) has ok false and error set.
func (a *app) parseCSV(args []js.Value) any {
	a.task.mu.Lock()
	defer a.task.mu.Unlock()
	if a.task.def == nil {
		return result(map[string]any{"ok": false, "error": "blanket.parseCSV: call setTask first"})
	}
	if len(args) < 1 || args[0].Type() != js.TypeObject || args[0].Get("length").Type() != js.TypeNumber {
		return result(map[string]any{"ok": false, "error": "blanket.parseCSV: want the file's bytes as a Uint8Array"})
	}
	n := args[0].Get("length").Int()
	if n > task.MaxCSVBytes {
		return result(map[string]any{"ok": false, "error": fmt.Sprintf("the file has %d bytes, more than the %d accepted", n, task.MaxCSVBytes)})
	}
	b := make([]byte, n)
	js.CopyBytesToGo(b, args[0])
	a.task.rows = nil
	p, err := a.task.def.ParseCSV(b)
	clear(b)
	if err != nil {
		return result(map[string]any{"ok": false, "error": err.Error(), "rows": 0, "skipped": 0})
	}
	errs := make([]any, len(p.Errors))
	for i, e := range p.Errors {
		errs[i] = result(map[string]any{"row": e.Row, "column": e.Column, "message": e.Msg, "text": e.Error()})
	}
	ignored := make([]any, len(p.Ignored))
	for i, c := range p.Ignored {
		ignored[i] = c
	}
	rows := 0
	if p.Set != nil {
		rows = p.Set.Len()
		a.task.rows = p.Set
	}
	out := map[string]any{"ok": rows > 0, "rows": rows, "skipped": p.Skipped, "errors": js.ValueOf(errs), "ignored": js.ValueOf(ignored)}
	if rows == 0 {
		out["error"] = "no row of the file could be used"
	}
	return result(out)
}

// setAnswers({column: value, ...}) -> {ok} or {ok: false, column, error}:
// the volunteer's answers to the survey form (every feature and the
// label, as strings), encoded by task.EncodeAnswers into the one row
// start({source: "task"}) trains on.
func (a *app) setAnswers(args []js.Value) any {
	a.task.mu.Lock()
	defer a.task.mu.Unlock()
	if a.task.def == nil {
		return result(map[string]any{"ok": false, "error": "blanket.setAnswers: call setTask first"})
	}
	if len(args) < 1 || args[0].Type() != js.TypeObject {
		return result(map[string]any{"ok": false, "error": "blanket.setAnswers: want an object of answers"})
	}
	answers := map[string]string{}
	keys := js.Global().Get("Object").Call("keys", args[0])
	for i := range keys.Length() {
		k := keys.Index(i).String()
		v := args[0].Get(k)
		switch v.Type() {
		case js.TypeString:
			answers[k] = v.String()
		case js.TypeNumber:
			answers[k] = strconv.FormatFloat(v.Float(), 'g', -1, 64)
		}
	}
	a.task.rows, a.task.survey = nil, nil
	x, y, err := a.task.def.EncodeAnswers(answers)
	if err != nil {
		out := map[string]any{"ok": false, "error": err.Error()}
		var re task.RowError
		if errors.As(err, &re) {
			out["column"], out["message"] = re.Column, re.Msg
		}
		return result(out)
	}
	if a.task.survey, err = a.task.def.SurveyAnswers(answers); err != nil {
		return result(map[string]any{"ok": false, "error": err.Error()})
	}
	a.task.rows = &dataset.Set{Features: a.task.def.Inputs(), Classes: len(a.task.def.Label.Classes), X: x, Y: []uint8{y}}
	return result(map[string]any{"ok": true})
}

// taskRows returns the rows for sourceTask, preprocessed as the task says
// (task.Prep: its feature map; a CSV or form task has no standardization),
// and the task's local training.
func (a *app) taskRows() (*dataset.Set, logreg.TrainConfig, error) {
	a.task.mu.Lock()
	defer a.task.mu.Unlock()
	if a.task.rows == nil || a.task.rows.Len() == 0 {
		return nil, logreg.TrainConfig{}, errNoTaskRows
	}
	p, err := a.task.def.FitPrep(nil)
	if err != nil {
		return nil, logreg.TrainConfig{}, err
	}
	rows, err := p.Apply(a.task.rows)
	if err != nil {
		return nil, logreg.TrainConfig{}, err
	}
	return rows, a.task.def.Recipe().Train(), nil
}

// validateOptions is o.Validate, accepting sourceTask besides the digits'
// sources.
func validateOptions(o *volunteer.Options) error {
	if o.Source != sourceTask {
		return o.Validate()
	}
	o.Source = volunteer.SourceShard
	err := o.Validate()
	o.Source = sourceTask
	return err
}

// taskClient builds the client on the study's rows.
func (a *app) taskClient(key envelope.PublicKey, o volunteer.Options) (*client.Client, error) {
	rows, train, err := a.taskRows()
	if err != nil {
		return nil, err
	}
	data, err := client.LocalDataset(rows)
	if err != nil {
		return nil, err
	}
	return a.clientOn(key, data, train, o)
}
