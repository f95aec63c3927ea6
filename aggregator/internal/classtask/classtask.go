// Package classtask is a class's task on disk (docs/web.md, "New
// class"). A class is one state directory (its key, ledger, checkpoint);
// the task it learns is part of it when the operator chose one on the
// operator page:
//
//   - NextDir, inside the current class's state directory, holds the task
//     the operator chose for the next class (Choose): task.FileName and,
//     for a shipped example, the files it names (its public holdout and
//     its simulation rows), under the names it gives them.
//   - ClassDir, inside a class's state directory, holds the task that
//     class learns, in the same form. The supervisor that starts a new
//     class (make run: scripts/internal/localrun Cluster.NewClass) copies
//     the old class's NextDir there, or else the old class's own
//     ClassDir, so that a class keeps its task unless another was chosen;
//     the aggregator (main.go) then loads ClassDir/task.FileName in place
//     of -task.
//
// The names are shared/task's (one definition for the aggregator and the
// supervisor in scripts/internal/localrun).
package classtask

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/blanket-fl/blanket/aggregator/internal/study"
	"github.com/blanket-fl/blanket/shared/durable"
	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/task"
	"github.com/blanket-fl/blanket/shared/task/taskdata"
	"github.com/blanket-fl/blanket/tasks"
)

// Directory and file names inside a state directory.
const (
	NextDir  = task.NextClassDir
	ClassDir = task.ClassDir
	File     = task.FileName
)

// ErrUploadFiles is returned for an uploaded task that names a holdout or
// simulation file: an upload is the definition alone and cannot bring
// them.
var ErrUploadFiles = errors.New("an uploaded task definition cannot bring the files it names")

// Option is a task the operator page offers for the next class.
type Option struct {
	Task *task.Task
	// Files are the files Task names (holdout, simulation), by name.
	Files map[string][]byte
}

// Options returns the built-in digits and the shipped examples
// (package tasks), in the order the operator page lists them.
func Options() ([]Option, error) {
	digits, err := task.Digits()
	if err != nil {
		return nil, err
	}
	exs, err := tasks.Examples()
	if err != nil {
		return nil, err
	}
	out := []Option{{Task: digits}}
	for _, ex := range exs {
		out = append(out, Option{Task: ex.Task, Files: ex.Files})
	}
	return out, nil
}

// ParseUpload validates an uploaded task definition exactly as
// -task does (task.Parse: the same errors, naming the line and the field)
// and refuses one that names a holdout or simulation file
// (ErrUploadFiles), which the upload cannot bring.
func ParseUpload(b []byte) (*task.Task, error) {
	t, err := task.Parse(b)
	if err != nil {
		return nil, err
	}
	for field, p := range map[string]string{"holdout": t.Holdout, "simulation": t.Simulation} {
		if p != "" {
			return nil, fmt.Errorf("task: field %s: names the file %q: %w; remove the field (without a holdout the class shows no accuracy) or start the aggregator with -task FILE next to the file",
				field, p, ErrUploadFiles)
		}
	}
	return t, nil
}

// Choose makes t the task of the next class: it checks that an
// aggregator can start with it (its public data open, taskdata.Open and
// Holdout, as main.go does at start) and writes it, with the files it
// names (its holdout and simulation rows, by the names t gives them, each
// a plain file name), to NextDir in stateDir, replacing an
// earlier choice. The current class is unchanged: its task, model and
// ledger stay as they are, and the choice applies when the supervisor
// starts the next class (server.RequestNewClass), whose ledger and model are
// fresh.
func Choose(stateDir string, t *task.Task, files map[string][]byte) error {
	want := 0
	for _, name := range []string{t.Holdout, t.Simulation} {
		if name == "" {
			continue
		}
		want++
		if _, ok := files[name]; !ok || name != filepath.Base(name) || name == File || name == "." || name == ".." {
			return fmt.Errorf("classtask: task %q names the file %q, which is not a plain file name given with it", t.Name, name)
		}
	}
	if len(files) != want {
		return fmt.Errorf("classtask: task %q: %d files given, it names %d", t.Name, len(files), want)
	}
	final := filepath.Join(stateDir, NextDir)
	tmp, err := os.MkdirTemp(stateDir, NextDir+".tmp-")
	if err != nil {
		return fmt.Errorf("classtask: next task: %w", err)
	}
	defer os.RemoveAll(tmp) // after the rename: nothing, or what was replaced
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return fmt.Errorf("classtask: next task: %w", err)
	}
	if err := durable.WriteFile(filepath.Join(tmp, File), b, 0o600); err != nil {
		return fmt.Errorf("classtask: next task: %w", err)
	}
	for name, b := range files {
		if err := durable.WriteFile(filepath.Join(tmp, name), b, 0o600); err != nil {
			return fmt.Errorf("classtask: next task: %w", err)
		}
	}
	// The next aggregator loads exactly these files: check now that it
	// can, so that New class does not fail on them.
	if _, err := Load(tmp); err != nil {
		return err
	}
	old := filepath.Join(tmp, "replaced")
	if err := os.Rename(final, old); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("classtask: next task: %w", err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("classtask: next task: %w", err)
	}
	return nil
}

// Load loads a task directory (File and its holdout) as the
// aggregator does at start and returns the task.
func Load(dir string) (*task.Task, error) {
	t, d, err := task.Load(filepath.Join(dir, File))
	if err != nil {
		return nil, err
	}
	sets, err := taskdata.Open(t, d, "", "")
	if err != nil {
		return nil, err
	}
	if _, _, err := taskdata.Holdout(t, sets); err != nil {
		return nil, err
	}
	return t, nil
}

// Next returns the task chosen for the next class in stateDir, nil if
// none was.
func Next(stateDir string) (*task.Task, error) {
	t, _, err := task.Load(filepath.Join(stateDir, NextDir, File))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return t, err
}

// Export is the JSON of the aggregator's GET /api/export: the trained model with the task
// definition it was trained for, enough to use the model elsewhere: encode
// a row by the task's declared ranges and categories (shared/task's
// encoding, one input per entry of Inputs), then the logits are
// Σ_j Weights[c·len(Inputs)+j]·x_j + Bias[c] and the prediction is the
// class of the largest (Task.Label.Classes[c]).
type Export struct {
	Task *task.Task `json:"task"`
	// Round is the last finished round, RoundsOK how many updated the
	// model; Accuracy is on public test data (AccuracySource
	// "public_holdout"), nil with "none".
	Round          int      `json:"round"`
	RoundsOK       int      `json:"rounds_ok"`
	AccuracySource string   `json:"accuracy_source"`
	Accuracy       *float64 `json:"accuracy"`
	// Inputs names the encoded inputs in order: a numeric feature's name
	// (name_j for a feature of count > 1), "name=category" for each
	// category of a categorical one.
	Inputs  []string  `json:"inputs"`
	Weights []float64 `json:"weights"`
	Bias    []float64 `json:"bias"`
	// Study is the record to publish with the model: the task's and the
	// client's hashes, the software, the privacy spent and by which
	// accountant row, the protocol's parameters (aggregator/internal/study).
	Study *study.Record `json:"study"`
}

// NewExport is the export of model params (the last finished round's)
// for task t, with t's public definition (no operator file paths) and
// the hash of that definition in a Study record, whose other fields the
// caller fills. It refuses a model whose size is not t's d.
func NewExport(t *task.Task, round int, params []float64) (*Export, error) {
	pub := *t
	pub.Holdout, pub.Simulation = "", ""
	sh := pub.Shape()
	if len(params) != sh.NumParams() {
		return nil, fmt.Errorf("export: the model has %d parameters, the task's d is %d", len(params), sh.NumParams())
	}
	_, sum, err := study.PublicTask(t)
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	return &Export{Task: &pub, Round: round, Inputs: EncodedInputs(&pub), Weights: params[:sh.Classes*sh.Features],
		Bias: params[sh.Classes*sh.Features:], Study: &study.Record{TaskSHA256: sum}}, nil
}

// EncodedInputs names the encoded input columns of t in the layout of
// shared/task (Export.Inputs).
func EncodedInputs(t *task.Task) []string {
	var out []string
	for _, f := range t.Features {
		switch {
		case f.Type == task.TypeCategorical:
			for _, c := range f.Categories {
				out = append(out, f.Name+"="+c)
			}
		case f.Count > 1:
			for j := range f.Count {
				out = append(out, fmt.Sprintf("%s_%d", f.Name, j))
			}
		default:
			out = append(out, f.Name)
		}
	}
	return out
}

// MajorityRate returns the fraction of test's examples in its most common
// class and that class's name (classes[label]); 0 and "" for a test set
// of no examples.
func MajorityRate(test logreg.Dataset, classes []string) (float64, string) {
	n := test.Len()
	if n == 0 {
		return 0, ""
	}
	counts := make([]int, test.Shape().Classes)
	for i := range n {
		counts[test.Label(i)]++
	}
	best := 0
	for c := range counts {
		if counts[c] > counts[best] {
			best = c
		}
	}
	name := strconv.Itoa(best)
	if best < len(classes) {
		name = classes[best]
	}
	return float64(counts[best]) / float64(n), name
}
