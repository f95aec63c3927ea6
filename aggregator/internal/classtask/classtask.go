// Package classtask is a class's task, kept in the aggregator's datastore
// (docs/web.md, "New class"). A class is one state directory and its
// datastore (its key, ledger, checkpoint); the task it learns is part of
// it when the operator chose one on the operator page. A task is stored
// as a bucket whose keys are File (the definition) and the names of the
// files it names (its public holdout and its simulation rows), byte for
// byte:
//
//   - BucketNext holds the task the operator chose for the next class
//     (Choose), replaced whole, in one transaction, by a later choice.
//   - BucketClass holds the task this class learns. The supervisor that
//     starts a new class (make run: scripts/internal/localrun
//     Cluster.NewClass) copies the old class's BucketNext into the new
//     class's datastore, or else the old class's own BucketClass, so that
//     a class keeps its task unless another was chosen; the aggregator
//     (main.go: AtStart) then loads it in place of -task.
//
// A state directory of the former format kept them as the directories
// NextDir and ClassDir: Import copies each into its bucket once and keeps
// it read-only as NAME.imported. Apart from that one-time import nothing
// here writes or renames a file. The names are shared/task's (one
// definition for the aggregator and the supervisor).
package classtask

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/blanket-fl/blanket/aggregator/internal/study"
	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/datastore/serverstore"
	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/task"
	"github.com/blanket-fl/blanket/shared/task/taskdata"
	"github.com/blanket-fl/blanket/tasks"
)

// The buckets of the aggregator's datastore, the key of a task's
// definition in them, and the former directories.
const (
	BucketNext  = task.NextClassBucket
	BucketClass = task.ClassBucket
	// BucketImported records each former directory imported (key: its
	// name; value: the names of its files), so that it is imported once.
	BucketImported = "aggregator/task-imported"
	File           = task.FileName
	NextDir        = task.NextClassDir
	ClassDir       = task.ClassDir
	// ImportedSuffix is appended to a former directory's name once
	// imported.
	ImportedSuffix = ".imported"
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

// Stored is a task as a class keeps it: the definition and the files it
// names, by name.
type Stored struct {
	Task  *task.Task
	Files map[string][]byte
}

// Open loads the task's public data as the aggregator does at start
// (taskdata.OpenFiles: dataName and dataDir as there).
func (st *Stored) Open(dataName, dataDir string) (*taskdata.Sets, error) {
	return taskdata.OpenFiles(st.Task, st.Files, dataName, dataDir)
}

// Choose makes t the task of the next class: it checks that an
// aggregator can start with it (the definition as stored parses, its
// public data open: taskdata.OpenFiles and Holdout, as main.go does at
// start, from the bytes given, nothing written to disk) and stores it in
// db's BucketNext with the files it names (its holdout and simulation
// rows, by the names t gives them, each a plain file name), in one
// transaction that replaces an earlier choice whole: a failed Update
// leaves the earlier choice as it was. The current class is unchanged:
// its task, model and ledger stay as they are, and the choice applies
// when the supervisor starts the next class (server.RequestNewClass),
// whose ledger and model are fresh.
func Choose(db *datastore.Store, t *task.Task, files map[string][]byte) error {
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
	def, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return fmt.Errorf("classtask: next task: %w", err)
	}
	// The next aggregator loads exactly these bytes: check now that it
	// can, so that New class does not fail on them.
	st, err := parse(def, files)
	if err != nil {
		return err
	}
	sets, err := taskdata.OpenFilesHoldout(st.Task, st.Files, "", "") // as main.go loads it
	if err != nil {
		return err
	}
	if _, _, err := taskdata.Holdout(st.Task, sets); err != nil {
		return err
	}
	err = db.Update(func(tx *datastore.Tx) error {
		tx.DeleteBucket(BucketNext)
		tx.Put(BucketNext, File, def)
		for name, b := range files {
			tx.Put(BucketNext, name, b)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("classtask: next task: %w", err)
	}
	return nil
}

// parse returns the task of definition def with files.
func parse(def []byte, files map[string][]byte) (*Stored, error) {
	t, err := task.Parse(def)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", File, err)
	}
	return &Stored{Task: t, Files: files}, nil
}

// Get returns the task stored in bucket (BucketNext or BucketClass), nil
// if there is none.
func Get(r datastore.Reader, bucket string) (*Stored, error) {
	def, ok := r.Get(bucket, File)
	if !ok {
		return nil, nil
	}
	files := map[string][]byte{}
	for _, k := range r.Keys(bucket) {
		if k != File {
			v, _ := r.Get(bucket, k)
			files[k] = slices.Clone(v)
		}
	}
	st, err := parse(def, files)
	if err != nil {
		return nil, fmt.Errorf("classtask: %s: %w", bucket, err)
	}
	return st, nil
}

// Next returns the task chosen for the next class in db, nil if none was.
func Next(db *datastore.Store) (*task.Task, error) {
	var st *Stored
	err := db.View(func(tx *datastore.ReadTx) (err error) {
		st, err = Get(tx, BucketNext)
		return err
	})
	if err != nil || st == nil {
		return nil, err
	}
	return st.Task, nil
}

// AtStart returns the task of the class whose state directory is
// stateDir (its datastore's BucketClass), nil if it has none (the
// aggregator then runs -task), after importing the former directories
// once (Import). It opens the datastore and closes it before it returns.
func AtStart(stateDir string, log *slog.Logger) (*Stored, error) {
	return AtStartIn(context.Background(), serverstore.Config{Dir: stateDir}, log)
}

// AtStartIn is AtStart on the store c says (the embedded store in c.Dir,
// or PostgreSQL: serverstore.Open); the former directories are c.Dir's.
func AtStartIn(ctx context.Context, c serverstore.Config, log *slog.Logger) (*Stored, error) {
	stateDir := c.Dir
	db, err := serverstore.Open(ctx, c, &datastore.Options{Logger: log})
	if err != nil {
		return nil, fmt.Errorf("classtask: %w", err)
	}
	var st *Stored
	err = Import(db, stateDir, log)
	if err == nil {
		err = db.View(func(tx *datastore.ReadTx) (err error) {
			st, err = Get(tx, BucketClass)
			return err
		})
	}
	if err := errors.Join(err, db.Close()); err != nil {
		return nil, err
	}
	return st, nil
}

// Import copies the former directories of stateDir (ClassDir, NextDir)
// into their buckets (BucketClass, BucketNext) once, each in one
// transaction with its record in BucketImported, and then keeps each
// directory, its files read-only (0400), as NAME.imported. A directory
// already recorded is not imported again (a crash between the import and
// the rename leaves the directory: it is renamed at the next start), nor
// one whose bucket already holds a task (the datastore's is kept), nor a
// directory without a definition (File), which the former aggregator did
// not load either.
func Import(db *datastore.Store, stateDir string, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	for _, f := range []struct{ dir, bucket string }{{ClassDir, BucketClass}, {NextDir, BucketNext}} {
		dir := filepath.Join(stateDir, f.dir)
		ents, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("classtask: importing %s: %w", dir, err)
		}
		files := map[string][]byte{}
		for _, e := range ents {
			if !e.Type().IsRegular() {
				continue
			}
			if files[e.Name()], err = os.ReadFile(filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("classtask: importing %s: %w", dir, err)
			}
		}
		if _, ok := files[File]; !ok {
			continue
		}
		names := slices.Sorted(maps.Keys(files))
		imported := false
		err = db.Update(func(tx *datastore.Tx) error {
			if _, done := tx.Get(BucketImported, f.dir); done {
				return nil
			}
			rec, err := json.Marshal(map[string][]string{"files": names})
			if err != nil {
				return err
			}
			tx.Put(BucketImported, f.dir, rec)
			if _, has := tx.Get(f.bucket, File); has {
				return nil
			}
			for name, b := range files {
				tx.Put(f.bucket, name, b)
			}
			imported = true
			return nil
		})
		if err != nil {
			return fmt.Errorf("classtask: importing %s: %w", dir, err)
		}
		for _, name := range names {
			if err := os.Chmod(filepath.Join(dir, name), 0o400); err != nil {
				return fmt.Errorf("classtask: keeping the imported %s: %w", dir, err)
			}
		}
		if err := os.Rename(dir, dir+ImportedSuffix); err != nil {
			return fmt.Errorf("classtask: keeping the imported %s: %w", dir, err)
		}
		log.Info("classtask: imported the former task directory into the datastore", "dir", dir, "bucket", f.bucket,
			"files", names, "imported", imported)
	}
	return nil
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
