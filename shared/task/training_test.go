package task

import (
	"errors"
	"strings"
	"testing"
)

// imageTask is a built-in 28 x 28 image task with the feature map name
// and preprocessing preprocess.
func imageTask(t *testing.T, fmap, preprocess string) *Task {
	t.Helper()
	tr := ""
	if fmap != "" {
		tr = `, "training": {"feature_map": "` + fmap + `"}`
	}
	return mustParse(t, `{"version": 1, "name": "img", "title": "Img", "consent": "Yes.", "source": "builtin", "dataset": "mnist-sample",
 "preprocess": "`+preprocess+`", "features": [{"name": "pixel", "type": "numeric", "min": 0, "max": 1, "count": 784}],
 "label": {"name": "digit", "classes": ["0","1","2","3","4","5","6","7","8","9"]}, "model": {"type": "logreg"}`+tr+`}`)
}

// TestDigitsRecipe: the built-in digits task trains as the runner's
// chosen setting (docs/experiments.md, "Features and server
// optimisation"): scatter1 (833 features, d = 8,340), clip 0.3, server
// momentum 0.9 at lr 2, 10 local epochs at lr 0.1.
func TestDigitsRecipe(t *testing.T) {
	tk, err := Digits()
	if err != nil {
		t.Fatal(err)
	}
	want := Recipe{Clip: 0.3, ServerOptimizer: OptimizerMomentum, ServerMomentum: 0.9, ServerLR: 2, LocalEpochs: 10, LocalLR: 0.1, FeatureMap: "scatter1"}
	if got := tk.Recipe(); got != want {
		t.Fatalf("digits recipe %+v, want %+v", got, want)
	}
	if got := DigitsRecipe(); got != want {
		t.Fatalf("DigitsRecipe %+v, want the definition's %+v", got, want)
	}
	if tk.Inputs() != 784 || tk.ModelFeatures() != 833 || tk.D() != 8340 {
		t.Fatalf("digits inputs %d, model features %d, d %d; want 784, 833, 8340", tk.Inputs(), tk.ModelFeatures(), tk.D())
	}
}

// TestDefaultRecipe: without a training section the recipe follows d
// (docs/tasks.md, "Training recipe"), and each field given overrides only
// itself.
func TestDefaultRecipe(t *testing.T) {
	tk := mustParse(t, survey) // d = 24
	want := Recipe{Clip: 0.3, ServerOptimizer: OptimizerSGD, ServerLR: 8, LocalEpochs: 10, LocalLR: 0.1, FeatureMap: "identity"}
	if got := tk.Recipe(); got != want {
		t.Fatalf("survey recipe %+v, want %+v", got, want)
	}
	img := imageTask(t, "", PreprocessPublicStandardize) // d = 7850
	want = Recipe{Clip: 0.3, ServerOptimizer: OptimizerMomentum, ServerMomentum: 0.9, ServerLR: 2, LocalEpochs: 10, LocalLR: 0.1, FeatureMap: "identity"}
	if got := img.Recipe(); got != want {
		t.Fatalf("image recipe %+v, want %+v", got, want)
	}
	if a, b := DefaultRecipe(ImageScale-1), DefaultRecipe(ImageScale); a.ServerOptimizer != OptimizerSGD || b.ServerOptimizer != OptimizerMomentum {
		t.Fatalf("d %d: %+v; d %d: %+v", ImageScale-1, a, ImageScale, b)
	}
	withMomentum := mustParse(t, strings.Replace(survey, `"model"`, `"training": {"clip": 0.5, "server_optimizer": "momentum"}, "model"`, 1))
	r := withMomentum.Recipe()
	if r.Clip != 0.5 || r.ServerLR != 2 || r.ServerOptimizer != OptimizerMomentum || r.ServerMomentum != 0.9 || r.LocalEpochs != 10 {
		t.Fatalf("clip 0.5, momentum: %+v (want momentum's lr 2 and beta 0.9)", r)
	}
	sgd := imageTask(t, "", PreprocessDeclared)
	sgd.Training.ServerOptimizer = OptimizerSGD
	if r := sgd.Recipe(); r.ServerOptimizer != OptimizerSGD || r.ServerLR != 8 || r.ServerMomentum != 0 {
		t.Fatalf("image task with sgd: %+v (want sgd's lr 8, no momentum)", r)
	}
	all := mustParse(t, strings.Replace(survey, `"model"`, `"training": {"clip": 2, "server_optimizer": "momentum", "server_momentum": 0.5, "server_lr": 3, "local_epochs": 4, "local_lr": 0.05}, "model"`, 1))
	if r, w := all.Recipe(), (Recipe{Clip: 2, ServerOptimizer: OptimizerMomentum, ServerMomentum: 0.5, ServerLR: 3, LocalEpochs: 4, LocalLR: 0.05, FeatureMap: "identity"}); r != w {
		t.Fatalf("every field: %+v, want %+v", r, w)
	}
	if tr := all.Recipe().Train(); tr.Epochs != 4 || tr.LearningRate != 0.05 || tr.BatchSize != 7 {
		t.Fatalf("train config %+v", tr)
	}
}

// TestFeatureMapShape: a map changes the model's features and d, not the
// columns a volunteer's rows are encoded in.
func TestFeatureMapShape(t *testing.T) {
	for _, c := range []struct {
		name     string
		features int
	}{{"", 784}, {"identity", 784}, {"pool2", 196}, {"pool4", 49}, {"scatter1", 833}, {"scatter1-pool", 272}} {
		tk := imageTask(t, c.name, PreprocessDeclared)
		if tk.Inputs() != 784 || tk.ModelFeatures() != c.features || tk.D() != (c.features+1)*10 {
			t.Errorf("%q: inputs %d, features %d, d %d; want 784, %d, %d", c.name, tk.Inputs(), tk.ModelFeatures(), tk.D(), c.features, (c.features+1)*10)
		}
		if len(tk.Columns()) != 785 {
			t.Errorf("%q: %d columns", c.name, len(tk.Columns()))
		}
	}
}

// TestTrainingErrors: every bad field is named, all of them at once.
func TestTrainingErrors(t *testing.T) {
	bad := strings.Replace(survey, `"model"`, `"training": {"clip": -1, "server_optimizer": "adam", "server_lr": 1e9, "local_epochs": -2, "local_lr": -0.1, "feature_map": "scatter1"}, "model"`, 1)
	_, err := Parse([]byte(bad))
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("err %v", err)
	}
	for _, want := range []string{"training.clip", "training.server_optimizer", "training.server_lr", "training.local_epochs", "training.local_lr",
		`training.feature_map: "scatter1" maps one 28 x 28 image`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %s:\n%v", want, err)
		}
	}
	for _, c := range []struct{ training, want string }{
		{`{"feature_map": "wavelets"}`, `training.feature_map: "wavelets": want one of identity, pool2`},
		{`{"server_optimizer": "sgd", "server_momentum": 0.9}`, "training.server_momentum: 0.9: plain \"sgd\" has no momentum"},
		{`{"server_momentum": 1}`, "training.server_momentum: 1: want a momentum in (0, 1)"},
		{`{"clip": "0.3"}`, `field "training.clip": got a JSON string`},
		{`{"momentum": 0.9}`, `unknown field "momentum"`},
	} {
		_, err := Parse([]byte(strings.Replace(survey, `"model"`, `"training": `+c.training+`, "model"`, 1)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("training %s: err %v, want %q", c.training, err, c.want)
		}
	}
}

// TestImageTask: the browser's digits task built from the digits' recipe
// is the built-in definition's layout and recipe.
func TestImageTask(t *testing.T) {
	tk, err := ImageTask(DigitsRecipe())
	if err != nil {
		t.Fatal(err)
	}
	d, err := Digits()
	if err != nil {
		t.Fatal(err)
	}
	if tk.Shape() != d.Shape() || tk.Inputs() != d.Inputs() || tk.Recipe() != d.Recipe() || tk.Preprocess != d.Preprocess || tk.Dataset != d.Dataset {
		t.Fatalf("image task %+v / %+v, the digits %+v / %+v", tk.Shape(), tk.Recipe(), d.Shape(), d.Recipe())
	}
	if _, err := tk.PrepWith(nil); err == nil {
		t.Fatal("PrepWith accepted a mapped task")
	}
}
