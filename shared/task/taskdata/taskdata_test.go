package taskdata

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/blanket-fl/blanket/shared/client"
	"github.com/blanket-fl/blanket/shared/dataset"
	"github.com/blanket-fl/blanket/shared/dataset/sample"
	"github.com/blanket-fl/blanket/shared/features"
	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/task"
)

// TestPixelsAreTodaysPipeline: a built-in image task without a feature
// map has, bit for bit, the data the volunteers and the aggregator used
// before feature maps (client.StandardizeSplit of sample.TrainTest).
func TestPixelsAreTodaysPipeline(t *testing.T) {
	tk, err := task.Parse([]byte(strings.Replace(digitsDef(t), `"feature_map": "scatter1"`, `"feature_map": "identity"`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(tk, "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	train, test, err := sample.TrainTest()
	if err != nil {
		t.Fatal(err)
	}
	wantTrain, wantTest, _, err := client.StandardizeSplit(train, test)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.Train.X, wantTrain.X) || !slices.Equal(s.Train.Y, wantTrain.Y) ||
		!slices.Equal(s.Test.X, wantTest.X) || !slices.Equal(s.Test.Y, wantTest.Y) {
		t.Fatal("the pixels task's data differ from the standardized embedded split")
	}
	ds, src, err := Holdout(tk, s)
	if err != nil || src != AccuracyHoldout || ds.Len() != wantTest.Len() || ds.Shape() != logreg.MNIST {
		t.Fatalf("holdout %d rows of %+v from %q: %v", ds.Len(), ds.Shape(), src, err)
	}
}

// digitsDef is the built-in digits task's definition.
func digitsDef(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../digits.json")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDigitsAreMappedThenStandardized: the built-in digits task's data are
// each digit mapped by scatter1 (features.Parse, float64 in, float32 out,
// as the experiment runner maps them), then standardized with the
// statistics of the mapped public training part: recomputed here
// independently of task.Prep and compared bit for bit, so the aggregator's
// holdout and the volunteers' features are the runner's. It maps 10,000
// digits (about 35 s of one core): -short skips it.
func TestDigitsAreMappedThenStandardized(t *testing.T) {
	if testing.Short() {
		t.Skip("maps 10,000 digits")
	}
	tk, dir, err := task.Load("")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(tk, dir, "", "")
	if err != nil {
		t.Fatal(err)
	}
	train, test, err := sample.TrainTest()
	if err != nil {
		t.Fatal(err)
	}
	m, err := features.Parse("scatter1")
	if err != nil {
		t.Fatal(err)
	}
	mapAll := func(in *dataset.Set) *dataset.Set {
		out := &dataset.Set{Features: 833, Classes: in.Classes, Y: in.Y}
		src, dst := make([]float64, 784), make([]float64, 833)
		for i := range in.Len() {
			for j, v := range in.Row(i) {
				src[j] = float64(v)
			}
			if err := m.Apply(dst, src); err != nil {
				t.Fatal(err)
			}
			for _, v := range dst {
				out.X = append(out.X, float32(v))
			}
		}
		return out
	}
	wantTrain, wantTest, _, err := client.StandardizeSplit(mapAll(train), mapAll(test))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.Train.X, wantTrain.X) || !slices.Equal(s.Train.Y, wantTrain.Y) ||
		!slices.Equal(s.Test.X, wantTest.X) || !slices.Equal(s.Test.Y, wantTest.Y) {
		t.Fatal("the digits task's data differ from scatter1 then the mapped public standardization")
	}
	// The aggregator's OpenHoldout: the same holdout and standardization,
	// bit for bit, without the training part.
	h, err := OpenHoldout(tk, dir, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if h.Train != nil || !slices.Equal(h.Test.X, s.Test.X) || !slices.Equal(h.Test.Y, s.Test.Y) ||
		!slices.Equal(h.Standardizer.Mean, s.Standardizer.Mean) || !slices.Equal(h.Standardizer.Std, s.Standardizer.Std) {
		t.Fatal("OpenHoldout differs from Open's holdout and standardization")
	}
	ds, src, err := Holdout(tk, s)
	if err != nil || src != AccuracyHoldout || ds.Len() != 2000 || ds.Shape() != (logreg.Shape{Features: 833, Classes: 10}) || tk.D() != 8340 {
		t.Fatalf("holdout %d rows of %+v from %q (d %d): %v", ds.Len(), ds.Shape(), src, tk.D(), err)
	}
}

// TestBreastCancer: the shipped tabular task loads its simulation rows and
// holdout, encoded into [-1,1] by its declared ranges (scale "symmetric"), and deals the rows
// to volunteers disjointly.
func TestBreastCancer(t *testing.T) {
	tk, dir, err := task.Load("../../../tasks/breast-cancer/task.json")
	if err != nil {
		t.Fatal(err)
	}
	if tk.D() != (30+1)*2 {
		t.Fatalf("d = %d, want 62", tk.D())
	}
	s, err := Open(tk, dir, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if s.Train.Len() != 456 || s.Test.Len() != 113 || s.Standardizer != nil {
		t.Fatalf("%d train and %d holdout rows", s.Train.Len(), s.Test.Len())
	}
	for _, v := range slices.Concat(s.Train.X, s.Test.X) {
		if v < -1 || v > 1 {
			t.Fatalf("encoded value %v outside [-1,1]", v)
		}
	}
	shares, err := Shares(s, 100, 1)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range shares {
		if d.Len() < 4 || d.Len() > 5 {
			t.Fatalf("a share of %d rows (456 over 100)", d.Len())
		}
		n += d.Len()
	}
	if n != 456 {
		t.Fatalf("%d rows dealt, want 456", n)
	}
	if _, err := Shares(s, 457, 1); err == nil {
		t.Fatal("457 volunteers for 456 rows accepted")
	}
}

// TestNoHoldout: a task without public test data evaluates on nothing:
// its holdout carries the shape only and accuracy cannot be computed.
func TestNoHoldout(t *testing.T) {
	tk, dir, err := task.Load("../../../tasks/class-survey/task.json")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(tk, dir, "", "")
	if err != nil {
		t.Fatal(err)
	}
	ds, src, err := Holdout(tk, s)
	if err != nil || src != AccuracyNone || ds.Len() != 0 || ds.Shape() != tk.Shape() {
		t.Fatalf("holdout %d rows of %+v from %q: %v", ds.Len(), ds.Shape(), src, err)
	}
	if _, err := logreg.Accuracy(make([]float64, tk.D()), ds); err == nil {
		t.Fatal("an accuracy was computed on no data")
	}
	if _, err := Shares(s, 10, 1); err != ErrNoTrain {
		t.Fatalf("shares of a survey: %v", err)
	}
}

// TestOpenFiles: a task whose files are given by name (as the aggregator's
// datastore keeps a class's task) opens to the same sets, bit for bit, as
// the files on disk; a named file missing, or one with a row the task
// refuses, is an error naming it.
func TestOpenFiles(t *testing.T) {
	tk, dir, err := task.Load("../../../tasks/breast-cancer/task.json")
	if err != nil {
		t.Fatal(err)
	}
	want, err := Open(tk, dir, "", "")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, name := range []string{tk.Holdout, tk.Simulation} {
		if files[name], err = os.ReadFile(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := OpenFiles(tk, files, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Train.X, want.Train.X) || !slices.Equal(got.Train.Y, want.Train.Y) ||
		!slices.Equal(got.Test.X, want.Test.X) || !slices.Equal(got.Test.Y, want.Test.Y) {
		t.Fatal("the sets opened from bytes differ from those opened from the directory")
	}
	delete(files, tk.Holdout)
	if _, err := OpenFiles(tk, files, "", ""); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), tk.Holdout) {
		t.Errorf("holdout missing: %v", err)
	}
	files[tk.Holdout] = []byte("not,a,row\n")
	if _, err := OpenFiles(tk, files, "", ""); err == nil || !strings.Contains(err.Error(), tk.Holdout) {
		t.Errorf("a holdout the task refuses: %v", err)
	}
	digits, err := task.Digits()
	if err != nil {
		t.Fatal(err)
	}
	if s, err := OpenFiles(digits, nil, "", ""); err != nil || s.Test == nil || s.Test.Len() == 0 {
		t.Errorf("the built-in digits from no files: %v", err)
	}
}

// TestOpenHoldout: OpenHoldout and OpenFilesHoldout give Open's holdout
// and standardization bit for bit and no training part, for a built-in
// image task whose feature map (pool4) fits its standardization on the
// mapped training part, and for a CSV task; a simulation file the task
// refuses is still an error (the rows are checked, only not prepared).
func TestOpenHoldout(t *testing.T) {
	pool, err := task.Parse([]byte(strings.Replace(digitsDef(t), `"feature_map": "scatter1"`, `"feature_map": "pool4"`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	csv, dir, err := task.Load("../../../tasks/breast-cancer/task.json")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, name := range []string{csv.Holdout, csv.Simulation} {
		if files[name], err = os.ReadFile(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	same := func(name string, got, want *Sets) {
		t.Helper()
		if got.Train != nil {
			t.Errorf("%s: the holdout-only sets have a training part", name)
		}
		if !slices.Equal(got.Test.X, want.Test.X) || !slices.Equal(got.Test.Y, want.Test.Y) || got.Test.Features != want.Test.Features {
			t.Errorf("%s: the holdout differs from Open's", name)
		}
		if (got.Standardizer == nil) != (want.Standardizer == nil) ||
			(got.Standardizer != nil && (!slices.Equal(got.Standardizer.Mean, want.Standardizer.Mean) || !slices.Equal(got.Standardizer.Std, want.Standardizer.Std))) {
			t.Errorf("%s: the standardization differs from Open's", name)
		}
	}
	for _, c := range []struct {
		name string
		tk   *task.Task
		dir  string
	}{{"pool4 digits", pool, ""}, {"breast cancer", csv, dir}} {
		want, err := Open(c.tk, c.dir, "", "")
		if err != nil {
			t.Fatal(err)
		}
		got, err := OpenHoldout(c.tk, c.dir, "", "")
		if err != nil {
			t.Fatal(err)
		}
		same(c.name, got, want)
		if c.tk.Source != task.SourceBuiltin {
			fromFiles, err := OpenFilesHoldout(c.tk, files, "", "")
			if err != nil {
				t.Fatal(err)
			}
			same(c.name+" from files", fromFiles, want)
		} else if fromFiles, err := OpenFilesHoldout(c.tk, nil, "", ""); err != nil {
			t.Fatal(err)
		} else {
			same(c.name+" from no files", fromFiles, want)
		}
	}
	files[csv.Simulation] = []byte("not,a,row\n")
	if _, err := OpenFilesHoldout(csv, files, "", ""); err == nil || !strings.Contains(err.Error(), csv.Simulation) {
		t.Errorf("a simulation file the task refuses: %v", err)
	}
}
