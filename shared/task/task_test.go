package task

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/blanket-fl/blanket/shared/logreg"
)

const survey = `{
  "version": 1,
  "name": "class-survey",
  "title": "How do we get to school?",
  "consent": "Your answers stay on your phone.",
  "source": "form",
  "features": [
    {"name": "age", "type": "numeric", "min": 0, "max": 120},
    {"name": "distance", "type": "numeric", "min": 0, "max": 50, "scale": "symmetric"},
    {"name": "weather", "type": "categorical", "categories": ["sun", "rain", "snow"]}
  ],
  "label": {"name": "transport", "classes": ["walk", "bike", "bus", "car"]},
  "model": {"type": "logreg"},
  "privacy": {"protocol": "secagg", "epsilon": 4, "delta": 1e-5, "rounds": 5}
}`

func mustParse(t *testing.T, s string) *Task {
	t.Helper()
	tk, err := Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// TestShape: d follows from the schema, logreg's layout (F + 1)·C with a
// numeric feature one column and a categorical one column per category.
func TestShape(t *testing.T) {
	tk := mustParse(t, survey)
	if got, want := tk.Shape(), (logreg.Shape{Features: 1 + 1 + 3, Classes: 4}); got != want {
		t.Fatalf("shape %+v, want %+v", got, want)
	}
	if tk.D() != (5+1)*4 {
		t.Fatalf("d = %d, want 24", tk.D())
	}
	if got := strings.Join(tk.Columns(), ","); got != "age,distance,weather,transport" {
		t.Fatalf("columns %s", got)
	}
}

// TestDigits: the built-in task is the digits pipeline: 784 pixels in
// [0,1] as pixel_0..pixel_783, 10 classes, mapped by scatter1 to 833
// features (d = 8,340), the embedded data set with its public
// standardization.
func TestDigits(t *testing.T) {
	tk, err := Digits()
	if err != nil {
		t.Fatal(err)
	}
	if want := (logreg.Shape{Features: 833, Classes: 10}); tk.Shape() != want || tk.D() != 8340 || tk.Inputs() != logreg.MNIST.Features {
		t.Fatalf("digits shape %+v (d %d, inputs %d), want %+v (d 8340, inputs 784)", tk.Shape(), tk.D(), tk.Inputs(), want)
	}
	if tk.Source != SourceBuiltin || tk.Dataset != "mnist-sample" || tk.Preprocess != PreprocessPublicStandardize {
		t.Fatalf("digits source %q dataset %q preprocess %q", tk.Source, tk.Dataset, tk.Preprocess)
	}
	cols := tk.Columns()
	if cols[0] != "pixel_0" || cols[783] != "pixel_783" || cols[784] != "digit" {
		t.Fatalf("columns %v ... %v", cols[:2], cols[783:])
	}
	for _, p := range []string{"", DigitsName} {
		l, dir, err := Load(p)
		if err != nil || dir != "" || l.D() != tk.D() {
			t.Fatalf("Load(%q) = %v, %q, %v", p, l, dir, err)
		}
	}
}

// TestEncodeByDeclaredRange: the encoding is the declared min-max map and
// one-hot, and one row's vector does not depend on any other row (the
// privacy guarantee of the package doc: no statistic of the data).
func TestEncodeByDeclaredRange(t *testing.T) {
	tk := mustParse(t, survey)
	csv1 := "transport,age,weather,distance,extra\nbus,30,rain,25,secret\n"
	csv2 := "age,distance,weather,transport\n120,0,snow,car\n30,25,rain,bus\n0,50,sun,walk\n"
	p1, err := tk.ParseCSV([]byte(csv1))
	if err != nil {
		t.Fatal(err)
	}
	p2, err := tk.ParseCSV([]byte(csv2))
	if err != nil {
		t.Fatal(err)
	}
	if p1.Skipped != 0 || p2.Skipped != 0 || p1.Set.Len() != 1 || p2.Set.Len() != 3 {
		t.Fatalf("parsed %d (%v) and %d (%v)", p1.Set.Len(), p1.Errors, p2.Set.Len(), p2.Errors)
	}
	if len(p1.Ignored) != 1 || p1.Ignored[0] != "extra" {
		t.Fatalf("ignored %v", p1.Ignored)
	}
	want := []float32{0.25, 0, 0, 1, 0} // 30/120; 25/50 -> 0 on [-1,1]; rain
	for j, w := range want {
		if p1.Set.Row(0)[j] != w || p2.Set.Row(1)[j] != w {
			t.Fatalf("row %v and %v, want %v", p1.Set.Row(0), p2.Set.Row(1), want)
		}
	}
	if p1.Set.Y[0] != 2 || p2.Set.Y[0] != 3 || p2.Set.Y[2] != 0 {
		t.Fatalf("labels %v %v", p1.Set.Y, p2.Set.Y)
	}
	if r := p2.Set.Row(0); r[0] != 1 || r[1] != -1 || r[4] != 1 {
		t.Fatalf("extremes encode to %v", r)
	}
	if r := p2.Set.Row(2); r[0] != 0 || r[1] != 1 || r[2] != 1 {
		t.Fatalf("extremes encode to %v", r)
	}
	x, y, err := tk.EncodeAnswers(map[string]string{"age": "30", "distance": "25", "weather": "rain", "transport": "bus"})
	if err != nil || y != 2 {
		t.Fatal(y, err)
	}
	for j := range want {
		if x[j] != want[j] {
			t.Fatalf("form %v, want %v", x, want)
		}
	}
}

// TestRowErrors: a bad row is skipped with an error naming its row (as a
// spreadsheet numbers it), its column and the declared range or
// categories; good rows are kept.
func TestRowErrors(t *testing.T) {
	tk := mustParse(t, survey)
	in := "age,distance,weather,transport\n" +
		"30,1,sun,walk\n" + // row 2
		"212,1,sun,walk\n" + // row 3
		"30,1,fog,walk\n" +
		"thirty,1,sun,walk\n" +
		"30,1,sun,plane\n" +
		"30,,sun,walk\n" +
		"30,1,sun\n" +
		"NaN,1,sun,walk\n" +
		"31,2,snow,car\n"
	p, err := tk.ParseCSV([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"row 3, column 'age': 212 is outside the declared range 0–120",
		`row 4, column 'weather': "fog" is not one of the declared categories ("sun", "rain", "snow")`,
		`row 5, column 'age': "thirty" is not a number`,
		`row 6, column 'transport': "plane" is not one of the declared classes ("walk", "bike", "bus", "car")`,
		"row 7, column 'distance': is empty (every column needs a value)",
		"row 8: has 3 values, the header 4",
		`row 9, column 'age': "NaN" is not a number`,
	}
	if p.Skipped != len(want) || len(p.Errors) != len(want) || p.Set.Len() != 2 {
		t.Fatalf("skipped %d, kept %d: %v", p.Skipped, p.Set.Len(), p.Errors)
	}
	for i, w := range want {
		if p.Errors[i].Error() != w {
			t.Errorf("error %d: %q\nwant      %q", i, p.Errors[i].Error(), w)
		}
	}
	if _, _, err := tk.EncodeAnswers(map[string]string{"age": "30", "distance": "1", "weather": "sun"}); err == nil ||
		err.Error() != "row 1, column 'transport': is not answered" {
		t.Errorf("unanswered: %v", err)
	}
	if _, _, err := tk.EncodeAnswers(map[string]string{"age": "30", "distance": "1", "weather": "sun", "transport": "bus", "name": "x"}); err == nil {
		t.Error("an unknown answer was accepted")
	}
}

// TestFileErrors: a file that cannot be used names what is missing.
func TestFileErrors(t *testing.T) {
	tk := mustParse(t, survey)
	for in, want := range map[string]string{
		"":                                     "empty",
		"age,weather,transport\n1,sun,x":       "no column 'distance'",
		"age,age,distance,weather,transport\n": "twice",
		"\"unterminated\n":                     "header row",
	} {
		_, err := tk.ParseCSV([]byte(in))
		if !errors.Is(err, ErrData) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want ErrData mentioning %q", in, err, want)
		}
	}
	big := make([]byte, MaxCSVBytes+1)
	if _, err := tk.ParseCSV(big); !errors.Is(err, ErrData) {
		t.Errorf("oversize: %v", err)
	}
}

// TestDefinitionErrors: every invalid definition is refused with the
// field (and, for JSON errors, the line) named.
func TestDefinitionErrors(t *testing.T) {
	cases := map[string]struct{ old, new, want string }{
		"unknown field":   {`"model": {"type": "logreg"}`, `"model": {"type": "logreg", "layers": 2}`, `line 13: unknown field "layers"`},
		"wrong type":      {`"min": 0, "max": 120`, `"min": "0", "max": 120`, `line 8: field "features.min"`},
		"syntax":          {`"title"`, `title`, "line 4"},
		"no range":        {`"min": 0, "max": 120`, `"max": 120`, `features[0] ("age"): a numeric feature declares its range`},
		"empty range":     {`"min": 0, "max": 120`, `"min": 5, "max": 5`, `features[0] ("age"): min 5 must be below max 5`},
		"bad scale":       {`"scale": "symmetric"`, `"scale": "zscore"`, `features[1] ("distance").scale`},
		"one category":    {`["sun", "rain", "snow"]`, `["sun"]`, `features[2] ("weather").categories`},
		"dup category":    {`["sun", "rain", "snow"]`, `["sun", "rain", "sun"]`, `categories[2]: "sun" is declared twice`},
		"dup name":        {`"name": "distance"`, `"name": "age"`, `name "age" is also features[0]`},
		"label is input":  {`"name": "transport"`, `"name": "age"`, `label: name "age"`},
		"one class":       {`["walk", "bike", "bus", "car"]`, `["walk"]`, `label.classes`},
		"model":           {`"type": "logreg"`, `"type": "mlp"`, `model.type`},
		"source":          {`"source": "form"`, `"source": "sql"`, `field source`},
		"standardize":     {`"source": "form"`, `"source": "form", "preprocess": "public-standardize"`, `field preprocess`},
		"builtin no data": {`"source": "form"`, `"source": "builtin"`, `field dataset`},
		"protocol":        {`"protocol": "secagg"`, `"protocol": "magic"`, `privacy.protocol`},
		"delta":           {`"delta": 1e-5`, `"delta": 2`, `privacy.delta`},
		"version":         {`"version": 1`, `"version": 2`, `field version`},
		"name":            {`"name": "class-survey"`, `"name": "Class Survey"`, `field name`},
		"consent":         {`"consent": "Your answers stay on your phone."`, `"consent": " "`, `field consent`},
		"trailing":        {`"rounds": 5}` + "\n}", `"rounds": 5}` + "\n} {}", `data after the definition`},
		"duplicate":       {`"version": 1,`, `"version": 1, "version": 1,`, `key "version" appears twice`},
		// Issue 23: a budget the operator page would refuse, and texts
		// with invisible direction controls ("Trojan Source").
		"huge epsilon":  {`"epsilon": 4`, `"epsilon": 1e300`, `privacy.epsilon: 1e+300 is above 1000`},
		"rlo consent":   {`"consent": "Your answers stay on your phone."`, `"consent": "Your answers \u202estay on your phone."`, `field consent: contains the invisible direction control U+202E`},
		"isolate title": {`"title": "How do we get to school?"`, `"title": "How do we \u2066get to school?"`, `field title: contains the invisible direction control U+2066`},
		"override cat":  {`["sun", "rain", "snow"]`, `["sun", "ra\u202din", "snow"]`, `U+202D`},
	}
	for name, c := range cases {
		if !strings.Contains(survey, c.old) {
			t.Fatalf("%s: %q not in the survey", name, c.old)
		}
		_, err := Parse([]byte(strings.Replace(survey, c.old, c.new, 1)))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v\nwant ErrInvalid mentioning %q", name, err, c.want)
		}
	}
}

// TestShippedTasks: every task file under tasks/ decodes, and the files
// it names exist.
func TestShippedTasks(t *testing.T) {
	files, err := filepath.Glob("../../tasks/*/task.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 2 {
		t.Fatalf("found %d task files under tasks/, want the tabular example and the survey", len(files))
	}
	for _, f := range files {
		tk, dir, err := Load(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{tk.Holdout, tk.Simulation} {
			if p == "" {
				continue
			}
			b, err := os.ReadFile(Path(dir, p))
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			parsed, err := tk.ParseCSV(b)
			if err != nil || parsed.Skipped != 0 || parsed.Set == nil {
				t.Fatalf("%s: %s: %v (%d rows skipped: %v)", f, p, err, parsed.Skipped, parsed.Errors)
			}
		}
	}
}

// TestSymmetricExtremes: min maps to -1 and max to +1 exactly, and the
// midpoint to 0, for a range far from the origin.
func TestSymmetricExtremes(t *testing.T) {
	tk := mustParse(t, strings.Replace(survey, `"min": 0, "max": 50`, `"min": 1000, "max": 1002`, 1))
	for v, want := range map[string]float32{"1000": -1, "1001": 0, "1002": 1} {
		x, _, err := tk.EncodeAnswers(map[string]string{"age": "1", "distance": v, "weather": "sun", "transport": "car"})
		if err != nil || x[1] != want || math.IsNaN(float64(x[1])) {
			t.Errorf("distance %s -> %v (%v), want %v", v, x, err, want)
		}
	}
}

// TestNew: a task built field by field validates as Parse validates it.
func TestNew(t *testing.T) {
	b, err := os.ReadFile("../../tasks/class-survey/task.json")
	if err != nil {
		t.Fatal(err)
	}
	want, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	got, err := New(*want)
	if err != nil || got.D() != want.D() || !slices.Equal(got.Columns(), want.Columns()) {
		t.Fatalf("New: %v, d %d, columns %v", err, got.D(), got.Columns())
	}
	bad := *want
	bad.Label.Classes = []string{"only"}
	if _, err := New(bad); !errors.Is(err, ErrInvalid) {
		t.Errorf("one class: %v, want ErrInvalid", err)
	}
}

// TestValidName: validName is ^[a-z0-9][a-z0-9-]{0,63}$.
func TestValidName(t *testing.T) {
	for s, want := range map[string]bool{"a": true, "digits": true, "class-survey": true, "9-x": true, strings.Repeat("a", 64): true,
		"": false, "-a": false, "A": false, "a_b": false, "a b": false, strings.Repeat("a", 65): false, "é": false} {
		if validName(s) != want {
			t.Errorf("validName(%q) = %v", s, !want)
		}
	}
}

// TestDuplicateKeys: a key given twice in one object is refused with its
// line and where it is (encoding/json alone keeps the last value
// silently); keys differing only in case name the same field and count as
// the same key; the same key in different objects is fine.
func TestDuplicateKeys(t *testing.T) {
	for _, c := range []struct{ name, old, new, want string }{
		{"top level", `"version": 1,`, `"version": 1, "version": 1,`, `line 2: key "version" appears twice in the top-level object`},
		{"nested", `"epsilon": 4,`, "\"epsilon\": 4,\n \"epsilon\": 40,", `line 15: key "epsilon" appears twice in privacy`},
		{"case", `"epsilon": 4,`, `"epsilon": 4, "Epsilon": 40,`, `key "Epsilon" (the same field as "epsilon"`},
		{"long s", `"source": "form",`, "\"source\": \"form\", \"\u017fource\": \"csv\",", "key \"\u017fource\" (the same field as \"source\""},
		{"in an array element", `{"name": "age", `, `{"name": "age", "name": "age2", `, `appears twice in features[0]`},
	} {
		src := strings.Replace(survey, c.old, c.new, 1)
		if src == survey {
			t.Fatalf("%s: the edit did not apply", c.name)
		}
		_, err := Parse([]byte(src))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an ErrInvalid containing %q", c.name, err, c.want)
		}
	}
	// The same key in sibling objects, and a key equal to a value, are not
	// duplicates.
	mustParse(t, survey)
	mustParse(t, strings.Replace(survey, `"title": "How do we get to school?"`, `"title": "name"`, 1))
}

// TestByteOrderMark (issue 23): a definition that starts with a UTF-8
// byte-order mark (as some editors write) parses as the same task, through
// Parse (the upload) and Load (the -task flag) alike; a mark elsewhere is
// still an error.
func TestByteOrderMark(t *testing.T) {
	bom := "\ufeff" + survey
	a := mustParse(t, survey)
	b := mustParse(t, bom)
	if a.Name != b.Name || a.D() != b.D() {
		t.Fatalf("with a BOM: %s d %d, without %s d %d", b.Name, b.D(), a.Name, a.D())
	}
	p := filepath.Join(t.TempDir(), "survey.json")
	if err := os.WriteFile(p, []byte(bom), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, _, err := Load(p); err != nil || c.Name != a.Name {
		t.Fatalf("Load with a BOM: %v", err)
	}
	if _, err := Parse([]byte(survey + "\ufeff")); err == nil {
		t.Fatal("a mark after the definition parsed")
	}
	// The direction marks U+200E/U+200F are not controls that reorder text.
	if _, err := Parse([]byte(strings.Replace(survey, "How do we", "How do we\u200f", 1))); err != nil {
		t.Fatalf("a right-to-left mark refused: %v", err)
	}
}

// TestSpreadsheetLocales: a file saved by a spreadsheet in a locale whose
// decimal mark is a comma (';' between columns, "12,5") and a
// tab-separated one encode exactly as the comma-separated file with
// decimal points; a comma file with a quoted decimal comma gets an error
// that says what to do.
func TestSpreadsheetLocales(t *testing.T) {
	tk := mustParse(t, survey)
	want, err := tk.ParseCSV([]byte("age,distance,weather,transport\n30,12.5,rain,bus\n0,50,sun,walk\n"))
	if err != nil || want.Separator != ',' || want.Set.Len() != 2 {
		t.Fatalf("comma file: %v, %+v", err, want)
	}
	for _, in := range []string{
		"age;distance;weather;transport\r\n30;12,5;rain;bus\r\n0;50;sun;walk\r\n",
		"age\tdistance\tweather\ttransport\n30\t12.5\train\tbus\n0\t50\tsun\twalk\n",
	} {
		p, err := tk.ParseCSV([]byte(in))
		if err != nil || p.Skipped != 0 || p.Set.Len() != 2 {
			t.Fatalf("%q: %v, %+v", in, err, p)
		}
		if !slices.Equal(p.Set.X, want.Set.X) || !slices.Equal(p.Set.Y, want.Set.Y) {
			t.Fatalf("%q encodes to %v %v, want %v %v", in, p.Set.X, p.Set.Y, want.Set.X, want.Set.Y)
		}
	}
	p, err := tk.ParseCSV([]byte("age,distance,weather,transport\n\"30\",\"12,5\",rain,bus\n"))
	if err != nil || p.Skipped != 1 {
		t.Fatalf("%v, %+v", err, p)
	}
	if w := `row 2, column 'distance': "12,5" is not a number (a decimal comma? write it with a point: 12.5, or save the file with ';' between columns)`; p.Errors[0].Error() != w {
		t.Fatalf("error %q, want %q", p.Errors[0].Error(), w)
	}
}

// TestEveryProblemNamed: a definition with several independent problems
// names each of them, one per line (the operator's upload and `aggregator
// task check` show them all), still wrapping ErrInvalid.
func TestEveryProblemNamed(t *testing.T) {
	bad := strings.NewReplacer(
		`"min": 0, "max": 120`, `"min": 5, "max": 5`,
		`"categories": ["sun", "rain", "snow"]`, `"categories": ["sun", "sun"]`,
		`"classes": ["walk", "bike", "bus", "car"]`, `"classes": ["walk"]`,
		`"epsilon": 4`, `"epsilon": 5000`,
	).Replace(survey)
	_, err := Parse([]byte(bad))
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("error %v does not wrap ErrInvalid", err)
	}
	want := []string{
		`features[0] ("age"): min 5 must be below max 5`,
		`features[2] ("weather").categories[1]: "sun" is declared twice`,
		"label.classes: declare 2 to 256 classes, got 1",
		"privacy.epsilon: 5000 is above 1000",
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d problems named, want %d:\n%v", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("problem %d: %q, want it to say %q", i+1, lines[i], w)
		}
	}
}
