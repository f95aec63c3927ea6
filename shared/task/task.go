package task

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/blanket-fl/blanket/shared/features"
	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/wire"
)

// Version is the task definition format this package reads.
const Version = 1

// Where a class keeps its task: in the aggregator's datastore for that
// class (shared/datastore), one bucket per task, whose keys are FileName
// (the definition) and the names of the files it names (its holdout and
// simulation rows), byte for byte. The aggregator stores the operator's
// choice for the next class in NextClassBucket; whoever starts the next
// class (make run's supervisor) copies it, or else the old class's
// ClassBucket, to the new class's ClassBucket; the aggregator loads that
// in place of -task. NextClassDir and ClassDir are the directories of the
// former format, imported once into those buckets. One definition, so
// that the aggregator and the supervisor cannot disagree.
const (
	NextClassBucket = "aggregator/next-task"
	ClassBucket     = "aggregator/class-task"
	NextClassDir    = "next-class-task"
	ClassDir        = "task"
	FileName        = "task.json"
)

// Limits of a task definition: what Decode accepts.
const (
	// MaxFileBytes is the largest task definition accepted.
	MaxFileBytes = 1 << 20
	// maxFeatures is the most encoded feature columns (a model of at most
	// this many inputs; the digits have 784).
	maxFeatures = 1 << 16
	// maxCategories is the most categories of one categorical feature.
	maxCategories = 1024
	// maxText bounds a title, a question or a name; maxConsent the
	// consent text.
	maxText    = 1000
	maxConsent = 20000
)

// Sources: where a volunteer's rows come from in the browser.
const (
	// SourceCSV: the volunteer picks a local CSV file; its rows never
	// leave the device.
	SourceCSV = "csv"
	// SourceForm: one row per volunteer, answered on a form (a survey).
	SourceForm = "form"
	// SourceBuiltin: a data set built into Blanket (the digits); the
	// join page offers a shard of it or the volunteer's own drawings.
	SourceBuiltin = "builtin"
)

// Feature types and scales.
const (
	TypeNumeric     = "numeric"
	TypeCategorical = "categorical"
	// ScaleUnit maps [min, max] to [0, 1] (the default); ScaleSymmetric
	// maps it to [-1, 1].
	ScaleUnit      = "unit"
	ScaleSymmetric = "symmetric"
	// PreprocessDeclared (the default) encodes by the declared ranges and
	// categories only. PreprocessPublicStandardize additionally
	// standardizes every feature with the mean and standard deviation of
	// a built-in public data set's training part (the digits pipeline).
	PreprocessDeclared          = "declared-range"
	PreprocessPublicStandardize = "public-standardize"
	// ModelLogReg is multinomial logistic regression (package logreg).
	ModelLogReg = "logreg"
)

// Task is a study's definition. Decode reads and validates one; a Task
// from Decode (or Digits) is valid and must not be modified.
type Task struct {
	Version int    `json:"version"`
	Name    string `json:"name"`
	Title   string `json:"title"`
	// Consent is the text a volunteer reads and accepts before taking
	// part: what is collected, what leaves the device, who runs the study.
	Consent string `json:"consent"`
	// Source is SourceCSV, SourceForm or SourceBuiltin.
	Source string `json:"source"`
	// Dataset names the built-in data set (SourceBuiltin only).
	Dataset string `json:"dataset,omitempty"`
	// Preprocess is PreprocessDeclared (default) or
	// PreprocessPublicStandardize (SourceBuiltin only).
	Preprocess string    `json:"preprocess,omitempty"`
	Features   []Feature `json:"features"`
	Label      Label     `json:"label"`
	Model      Model     `json:"model"`
	Privacy    Privacy   `json:"privacy"`
	// Holdout is an optional public CSV (path relative to the task file)
	// the aggregator evaluates on; without it accuracy cannot be shown.
	// A built-in data set's holdout is its own test part.
	Holdout string `json:"holdout,omitempty"`
	// Simulation is an optional public CSV (path relative to the task
	// file) dealt to simulated volunteers (make run, the experiment
	// runner); a real study has none.
	Simulation string `json:"simulation,omitempty"`
	// Training is the optional training recipe (every field optional;
	// Recipe resolves it with the defaults).
	Training Training `json:"training,omitzero"`
	// Counts is the optional private counts section (counts.go: private
	// evaluation without a holdout, a form's answers as counts).
	Counts Counts `json:"counts,omitzero"`

	cols []column // encoded layout, filled by validate
	// fmap is the training section's feature map (nil: identity) and
	// mapDim its output length, filled by validate.
	fmap   features.FeatureMap
	mapDim int
}

// Feature is one input column of a volunteer's row.
type Feature struct {
	Name string `json:"name"`
	// Question is the form's wording (SourceForm; default Name).
	Question string `json:"question,omitempty"`
	Type     string `json:"type"`
	// Numeric: the declared range [Min, Max] (required, Min < Max) and
	// the scale it maps to.
	Min   *float64 `json:"min,omitempty"`
	Max   *float64 `json:"max,omitempty"`
	Scale string   `json:"scale,omitempty"`
	// Categorical: the declared categories (at least 2, distinct).
	Categories []string `json:"categories,omitempty"`
	// Count > 1 declares Count numeric features name_0 ... name_{Count-1}
	// with the same range (an image's pixels).
	Count int `json:"count,omitempty"`
}

// Label is the column the model predicts.
type Label struct {
	Name     string   `json:"name"`
	Question string   `json:"question,omitempty"`
	Classes  []string `json:"classes"`
}

// Model is the model trained.
type Model struct {
	// Type is ModelLogReg.
	Type string `json:"type"`
}

// Privacy holds the suggested privacy parameters the operator starts
// from (the operator's flags override them).
type Privacy struct {
	Protocol string  `json:"protocol,omitempty"`
	Epsilon  float64 `json:"epsilon,omitempty"`
	Delta    float64 `json:"delta,omitempty"`
	Rounds   int     `json:"rounds,omitempty"`
}

// column is one input column of the encoded layout.
type column struct {
	name     string // the CSV header / form key
	feature  int    // index into Features
	offset   int    // first encoded column
	lo, span float64
	sym      bool
	cats     map[string]int // categorical: category -> index
}

// ErrInvalid is wrapped by every error about the task definition itself.
var ErrInvalid = errors.New("invalid task definition")

// validName reports whether s matches ^[a-z0-9][a-z0-9-]{0,63}$ (written
// out rather than a regexp, which would add its package and the Unicode
// tables to the browser client).
func validName(s string) bool {
	if len(s) < 1 || len(s) > 64 || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// keyOffset returns the offset of the object key f (a quoted JSON string)
// followed by optional white space and a colon in b, or -1.
func keyOffset(b []byte, f string) int {
	for off := 0; off < len(b); {
		i := bytes.Index(b[off:], []byte(f))
		if i < 0 {
			return -1
		}
		j := off + i + len(f)
		for j < len(b) && (b[j] == ' ' || b[j] == '\t' || b[j] == '\n' || b[j] == '\r') {
			j++
		}
		if j < len(b) && b[j] == ':' {
			return off + i
		}
		off += i + 1
	}
	return -1
}

// Decode reads a task definition (JSON, at most MaxFileBytes) strictly:
// unknown fields, trailing data and wrong types are errors naming the line
// and the field, and the result is validated (validate). Errors wrap
// ErrInvalid.
func Decode(r io.Reader) (*Task, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("task: reading: %w", err)
	}
	return Parse(b)
}

// MaxEpsilon bounds a task's suggested privacy budget, as the operator
// page bounds the budgets it accepts (aggregator/internal/operator): the
// shuffle protocols' default run budget is 750.
const MaxEpsilon = 1000

// Parse is Decode of bytes. A UTF-8 byte-order mark at the start (as some
// editors write) is skipped, for a file given to -task and an upload alike.
func Parse(b []byte) (*Task, error) {
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("task: definition larger than %d bytes: %w", MaxFileBytes, ErrInvalid)
	}
	b = bytes.TrimPrefix(b, []byte("\ufeff"))
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var t Task
	if err := dec.Decode(&t); err != nil {
		return nil, jsonError(b, dec, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("task: %s: data after the definition: %w", lineOf(b, dec.InputOffset()), ErrInvalid)
	}
	if err := duplicateKeys(b); err != nil {
		return nil, err
	}
	if err := t.validate(); err != nil {
		return nil, err
	}
	return &t, nil
}

// duplicateKeys refuses an object with the same key twice, which
// encoding/json would accept, keeping the last value: a definition with
// "epsilon" twice is ambiguous to its reader. Keys are compared as
// encoding/json matches them to fields, case-insensitively (Unicode
// simple folding, as strings.EqualFold), so "name" and "Name" are the same
// key. b is a syntactically valid JSON value (Parse decoded it).
func duplicateKeys(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	// One frame per open object or array: where it is (for the message),
	// the keys seen (nil for an array) and the pending key or index of the
	// next value.
	type frame struct {
		path    string
		keys    map[string]string
		key     string // the key of the value being read, if haveKey
		haveKey bool
		index   int // an array's next element
	}
	var stack []*frame
	// valuePath names the value about to be read in the innermost frame.
	valuePath := func() string {
		if len(stack) == 0 {
			return ""
		}
		f := stack[len(stack)-1]
		if f.keys == nil {
			return fmt.Sprintf("%s[%d]", f.path, f.index)
		}
		if f.path == "" {
			return f.key
		}
		return f.path + "." + f.key
	}
	// consumed records that the innermost frame's value was read.
	consumed := func() {
		if len(stack) == 0 {
			return
		}
		f := stack[len(stack)-1]
		if f.keys == nil {
			f.index++
		} else {
			f.haveKey = false
		}
	}
	for {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return jsonError(b, dec, err)
		}
		if n := len(stack); n > 0 && stack[n-1].keys != nil && !stack[n-1].haveKey && tok != json.Delim('}') {
			f := stack[n-1]
			k, _ := tok.(string) // in key position the token is the key
			fk := foldKey(k)
			if prev, dup := f.keys[fk]; dup {
				where := "the top-level object"
				if f.path != "" {
					where = f.path
				}
				what := fmt.Sprintf("%q", k)
				if prev != k {
					what = fmt.Sprintf("%q (the same field as %q: keys match regardless of case)", k, prev)
				}
				at := start + int64(max(0, bytes.IndexByte(b[start:], '"')))
				return fmt.Errorf("task: %s: key %s appears twice in %s; keep one: %w", lineOf(b, at), what, where, ErrInvalid)
			}
			f.keys[fk] = k
			f.key, f.haveKey = k, true
			continue
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			f := &frame{path: valuePath()}
			if tok == json.Delim('{') {
				f.keys = map[string]string{}
			}
			stack = append(stack, f)
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			consumed()
		default:
			consumed()
		}
	}
}

// keyStart is the offset of the key's opening quote in b, which starts
// just after the previous token (a comma or a brace and spaces).
func keyStart(b []byte) int {
	if i := bytes.IndexByte(b, '"'); i >= 0 {
		return i
	}
	return 0
}

// foldKey maps s to one representative of its case-folding class
// (strings.EqualFold(a, b) iff foldKey(a) == foldKey(b)): every rune
// becomes the smallest rune of its unicode.SimpleFold orbit.
func foldKey(s string) string {
	var sb strings.Builder
	for _, r := range s {
		m := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			m = min(m, f)
		}
		sb.WriteRune(m)
	}
	return sb.String()
}

// New validates a task definition built field by field, exactly as Parse
// validates a decoded one, and returns it ready to use (t's slices are
// shared, not copied). It exists for the browser client, which decodes the
// definition with the browser's JSON.parse to keep encoding/json out of
// the wasm module (about 250 KB gzipped); it does not see unknown fields,
// so the relay checks the definition it serves with Parse.
func New(t Task) (*Task, error) {
	t.cols, t.fmap, t.mapDim = nil, nil, 0
	if err := t.validate(); err != nil {
		return nil, err
	}
	return &t, nil
}

// jsonError turns a decoding error into one naming the line and field.
func jsonError(b []byte, dec *json.Decoder, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("task: %s: %v: %w", lineOf(b, se.Offset), se, ErrInvalid)
	case errors.As(err, &te):
		return fmt.Errorf("task: %s: field %q: got a JSON %s, want %s: %w", lineOf(b, te.Offset), te.Field, te.Value, te.Type, ErrInvalid)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("task: %s: the definition ends early: %w", lineOf(b, int64(len(b))), ErrInvalid)
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		// The decoder has read the whole value: find the key itself.
		off := dec.InputOffset()
		if i := keyOffset(b, f); i >= 0 {
			off = int64(i)
		}
		return fmt.Errorf("task: %s: unknown field %s (see docs/tasks.md for the fields): %w", lineOf(b, off), f, ErrInvalid)
	}
	return fmt.Errorf("task: %s: %s: %w", lineOf(b, dec.InputOffset()), strings.TrimPrefix(msg, "json: "), ErrInvalid)
}

// lineOf names the line of byte offset off in b ("line 3").
func lineOf(b []byte, off int64) string {
	off = max(0, min(off, int64(len(b))))
	return fmt.Sprintf("line %d", bytes.Count(b[:off], []byte("\n"))+1)
}

// invalid formats a validation error about field.
func invalid(field, format string, a ...any) error {
	return fmt.Errorf("task: field %s: %s: %w", field, fmt.Sprintf(format, a...), ErrInvalid)
}

func checkText(field, s string, limit int, required bool) error {
	switch {
	case required && strings.TrimSpace(s) == "":
		return invalid(field, "is required")
	case len(s) > limit:
		return invalid(field, "longer than %d bytes", limit)
	case strings.ContainsRune(s, 0):
		return invalid(field, "contains a NUL byte")
	}
	if i := strings.IndexFunc(s, isBidiControl); i >= 0 {
		r, _ := utf8.DecodeRuneInString(s[i:])
		return invalid(field, "contains the invisible direction control U+%04X at byte %d, which can make the text read differently from what it says: remove it", r, i)
	}
	return nil
}

// isBidiControl reports whether r is a bidirectional embedding, override
// or isolate control (U+202A-U+202E, U+2066-U+2069): in a consent text or
// a question they can reorder what a volunteer reads ("Trojan Source",
// CVE-2021-42574). The marks U+200E and U+200F, which only set the
// direction of neutral characters, are allowed.
func isBidiControl(r rune) bool {
	return (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069)
}

// validate checks every field and builds the encoded layout. It names
// every problem it finds, not only the first (errors.Join, one per line):
// a field whose check depends on another that failed (the model's shape on
// the features) is checked only once that one passes.
func (t *Task) validate() error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	if t.Version != Version {
		add(invalid("version", "got %d, want %d", t.Version, Version))
	}
	if !validName(t.Name) {
		add(invalid("name", "%q must be 1-64 lowercase letters, digits or '-'", t.Name))
	}
	add(checkText("title", t.Title, maxText, true))
	add(checkText("consent", t.Consent, maxConsent, true))
	switch t.Source {
	case SourceCSV, SourceForm:
		if t.Dataset != "" {
			add(invalid("dataset", "only a source %q task names a built-in data set", SourceBuiltin))
		}
	case SourceBuiltin:
		if t.Dataset == "" {
			add(invalid("dataset", "a source %q task names its built-in data set", SourceBuiltin))
		}
		if t.Holdout != "" || t.Simulation != "" {
			add(invalid("holdout", "a built-in data set brings its own test and training parts"))
		}
	default:
		add(invalid("source", "%q: want %q (a local file), %q (a survey, one row per volunteer) or %q", t.Source, SourceCSV, SourceForm, SourceBuiltin))
	}
	switch t.Preprocess {
	case "", PreprocessDeclared:
	case PreprocessPublicStandardize:
		if t.Source != SourceBuiltin {
			add(invalid("preprocess", "%q is fitted on a built-in public data set; a %q task encodes by its declared ranges only", t.Preprocess, t.Source))
		}
	default:
		add(invalid("preprocess", "%q: want %q or %q", t.Preprocess, PreprocessDeclared, PreprocessPublicStandardize))
	}
	layoutErr := t.layout()
	add(layoutErr)
	add(t.Training.validate(t, layoutErr == nil))
	add(t.Counts.validate(t))
	add(t.Label.validate(t))
	if t.Model.Type != ModelLogReg {
		add(invalid("model.type", "%q: want %q (multinomial logistic regression)", t.Model.Type, ModelLogReg))
	}
	if layoutErr == nil {
		if err := t.Shape().Validate(); err != nil {
			add(invalid("features", "%v", err))
		}
	}
	add(t.Privacy.validate())
	add(checkText("holdout", t.Holdout, maxText, false))
	add(checkText("simulation", t.Simulation, maxText, false))
	if len(errs) > 0 {
		t.cols, t.fmap, t.mapDim = nil, nil, 0
	}
	return errors.Join(errs...)
}

// layout validates the features and fills t.cols.
func (t *Task) layout() error {
	if len(t.Features) == 0 {
		return invalid("features", "at least one feature is required")
	}
	seen := map[string]string{}
	claim := func(field, name string) error {
		if prev, dup := seen[name]; dup {
			return invalid(field, "name %q is also %s", name, prev)
		}
		seen[name] = field
		return nil
	}
	width := 0
	t.cols = nil
	var errs []error
	for i := range t.Features {
		if err := t.layoutFeature(i, &width, claim); err != nil {
			errs = append(errs, err)
		}
	}
	if t.Label.Name != "" {
		if err := claim("label", t.Label.Name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// layoutFeature validates feature i and appends its columns at *width.
func (t *Task) layoutFeature(i int, pw *int, claim func(field, name string) error) error {
	width := *pw
	defer func() { *pw = width }()
	f := &t.Features[i]
	field := fmt.Sprintf("features[%d]", i)
	if f.Name != "" {
		field = fmt.Sprintf("features[%d] (%q)", i, f.Name)
	}
	if strings.TrimSpace(f.Name) != f.Name || f.Name == "" {
		return invalid(field+".name", "must be non-empty without leading or trailing spaces")
	}
	if err := checkText(field+".name", f.Name, maxText, true); err != nil {
		return err
	}
	if err := checkText(field+".question", f.Question, maxText, false); err != nil {
		return err
	}
	switch f.Type {
	case TypeNumeric:
		if f.Min == nil || f.Max == nil {
			return invalid(field, "a numeric feature declares its range: \"min\" and \"max\"")
		}
		lo, hi := *f.Min, *f.Max
		if !(lo < hi) || math.IsInf(hi-lo, 0) {
			return invalid(field, "min %v must be below max %v (and their difference finite)", lo, hi)
		}
		if f.Categories != nil {
			return invalid(field+".categories", "a numeric feature has no categories")
		}
		var sym bool
		switch f.Scale {
		case "", ScaleUnit:
		case ScaleSymmetric:
			sym = true
		default:
			return invalid(field+".scale", "%q: want %q ([0, 1]) or %q ([-1, 1])", f.Scale, ScaleUnit, ScaleSymmetric)
		}
		n := max(f.Count, 1)
		if f.Count < 0 || width+n > maxFeatures {
			return invalid(field+".count", "%d: the features must fit %d columns", f.Count, maxFeatures)
		}
		for j := range n {
			name := f.Name
			if f.Count > 1 {
				name = fmt.Sprintf("%s_%d", f.Name, j)
			}
			if err := claim(field, name); err != nil {
				return err
			}
			t.cols = append(t.cols, column{name: name, feature: i, offset: width, lo: lo, span: hi - lo, sym: sym})
			width++
		}
	case TypeCategorical:
		if f.Min != nil || f.Max != nil || f.Scale != "" || f.Count != 0 {
			return invalid(field, "a categorical feature has categories, not min, max, scale or count")
		}
		if len(f.Categories) < 2 || len(f.Categories) > maxCategories {
			return invalid(field+".categories", "declare 2 to %d categories, got %d", maxCategories, len(f.Categories))
		}
		if width+len(f.Categories) > maxFeatures {
			return invalid(field+".categories", "the features must fit %d columns", maxFeatures)
		}
		cats := make(map[string]int, len(f.Categories))
		for j, c := range f.Categories {
			if err := checkText(fmt.Sprintf("%s.categories[%d]", field, j), c, maxText, true); err != nil {
				return err
			}
			if strings.TrimSpace(c) != c {
				return invalid(fmt.Sprintf("%s.categories[%d]", field, j), "%q has leading or trailing spaces", c)
			}
			if _, dup := cats[c]; dup {
				return invalid(fmt.Sprintf("%s.categories[%d]", field, j), "%q is declared twice", c)
			}
			cats[c] = j
		}
		if err := claim(field, f.Name); err != nil {
			return err
		}
		t.cols = append(t.cols, column{name: f.Name, feature: i, offset: width, cats: cats})
		width += len(f.Categories)
	default:
		return invalid(field+".type", "%q: want %q (with min and max) or %q (with categories)", f.Type, TypeNumeric, TypeCategorical)
	}
	return nil
}

func (l *Label) validate(t *Task) error {
	var errs []error
	if strings.TrimSpace(l.Name) != l.Name || l.Name == "" {
		errs = append(errs, invalid("label.name", "must be non-empty without leading or trailing spaces"))
	} else if err := checkText("label.name", l.Name, maxText, true); err != nil {
		errs = append(errs, err)
	}
	if err := checkText("label.question", l.Question, maxText, false); err != nil {
		errs = append(errs, err)
	}
	if len(l.Classes) < 2 || len(l.Classes) > 256 {
		errs = append(errs, invalid("label.classes", "declare 2 to 256 classes, got %d", len(l.Classes)))
	}
	seen := map[string]bool{}
	for j, c := range l.Classes {
		field := fmt.Sprintf("label.classes[%d]", j)
		if err := checkText(field, c, maxText, true); err != nil {
			errs = append(errs, err)
		}
		if strings.TrimSpace(c) != c {
			errs = append(errs, invalid(field, "%q has leading or trailing spaces", c))
		}
		if seen[c] {
			errs = append(errs, invalid(field, "%q is declared twice", c))
		}
		seen[c] = true
	}
	return errors.Join(errs...)
}

func (p *Privacy) validate() error {
	var errs []error
	if p.Protocol != "" {
		if _, err := wire.ParseProtocol(p.Protocol); err != nil {
			errs = append(errs, invalid("privacy.protocol", "%v", err))
		}
	}
	if p.Epsilon < 0 || math.IsInf(p.Epsilon, 0) || math.IsNaN(p.Epsilon) {
		errs = append(errs, invalid("privacy.epsilon", "%v must be positive", p.Epsilon))
	}
	if p.Epsilon > MaxEpsilon {
		errs = append(errs, invalid("privacy.epsilon", "%v is above %v: a budget that large protects nobody (the operator page refuses it too)", p.Epsilon, MaxEpsilon))
	}
	if p.Delta < 0 || p.Delta >= 1 {
		errs = append(errs, invalid("privacy.delta", "%v must be in (0, 1)", p.Delta))
	}
	if p.Rounds < 0 || p.Rounds > 100000 {
		errs = append(errs, invalid("privacy.rounds", "%d must be in [1, 100000]", p.Rounds))
	}
	return errors.Join(errs...)
}

// Inputs returns the number of encoded feature columns F.
func (t *Task) Inputs() int {
	if len(t.cols) == 0 {
		return 0
	}
	last := t.cols[len(t.cols)-1]
	if last.cats != nil {
		return last.offset + len(last.cats)
	}
	return last.offset + 1
}

// ModelFeatures returns the number of features the model trains on: the
// training section's feature map's output length for the Inputs encoded
// columns (833 for "scatter1" on 784 pixels), or Inputs without a map.
func (t *Task) ModelFeatures() int {
	if t.fmap != nil {
		return t.mapDim
	}
	return t.Inputs()
}

// Shape returns the model's shape: ModelFeatures features, one class per
// declared class.
func (t *Task) Shape() logreg.Shape {
	return logreg.Shape{Features: t.ModelFeatures(), Classes: len(t.Label.Classes)}
}

// D returns the model's parameter count, logreg's layout
// (ModelFeatures + 1) · Classes: the d every protocol derives from.
func (t *Task) D() int { return t.Shape().NumParams() }

// Columns returns the input column names a CSV header or a form carries,
// in order (a feature of Count n gives n columns), then the label's.
func (t *Task) Columns() []string {
	out := make([]string, 0, len(t.cols)+1)
	for _, c := range t.cols {
		out = append(out, c.name)
	}
	return append(out, t.Label.Name)
}
