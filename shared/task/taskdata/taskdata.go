// Package taskdata loads the public data a task definition names, for the
// programs that simulate volunteers or evaluate on a public holdout (the
// aggregator, make run's cohort, the experiment runner): a built-in data
// set's training and test parts, or a task's "simulation" and "holdout"
// CSV files encoded by the task's declared ranges. It is separate from
// package task so that the browser client, which only encodes its own
// volunteer's rows, does not link the embedded digits.
package taskdata

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/blanket-fl/blanket/shared/dataset"
	"github.com/blanket-fl/blanket/shared/dataset/sample"
	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/task"
)

// Source says where the aggregator's accuracy comes from (the
// accuracy_source of /api/status).
const (
	// AccuracyHoldout: a public holdout (the task's holdout file or the
	// built-in data set's test part).
	AccuracyHoldout = "public_holdout"
	// AccuracyNone: the task has no public test data, so no accuracy is
	// shown (computing one on volunteers' data would be a release).
	AccuracyNone = "none"
)

// Sets are a task's public data, as the parties use them.
type Sets struct {
	// Train is dealt to simulated volunteers (nil if the task has none);
	// Test is the public holdout (nil if none).
	Train, Test *dataset.Set
	// Standardizer is the built-in data set's public standardization
	// (preprocess "public-standardize") of the features the model trains
	// on (after the training section's feature map), already applied to
	// Train and Test; nil otherwise.
	Standardizer *dataset.Standardizer
}

// Open loads t's public data. dir is the task file's directory (task.Load)
// and dataName, dataDir override a built-in task's data set and its
// directory (the -data and -data-dir flags; "" keeps the task's). Both
// parts go through the task's preprocessing, task.Task.FitPrep (the one
// derivation the volunteers use too): the training section's feature map
// per example, then for a built-in task with preprocess
// "public-standardize" dataset.FitStandardizer of the mapped public
// training part (without a map exactly client.StandardizeSplit). Sets
// then have Task.ModelFeatures features. A CSV file with any row the task refuses is an error (the
// operator's public files must be clean); the error names the row.
func Open(t *task.Task, dir, dataName, dataDir string) (*Sets, error) {
	return open(t, dir, dataName, dataDir, true)
}

// OpenHoldout is Open for a program that only evaluates (the aggregator):
// the same checks, the same Standardizer and Test, but Train is nil. The
// training part is still read and checked, and it still fits (or, for the
// built-in digits, only identifies by its hash: task.TrainDigest) the
// public standardization, but it is not mapped: mapping is the cost (the
// scattering of the 8,000 training digits is about 20 s of CPU), hashing
// the raw bytes is not.
func OpenHoldout(t *task.Task, dir, dataName, dataDir string) (*Sets, error) {
	return open(t, dir, dataName, dataDir, false)
}

// open is Open, with the training part prepared only when withTrain.
func open(t *task.Task, dir, dataName, dataDir string, withTrain bool) (*Sets, error) {
	if t.Source == task.SourceBuiltin {
		name := t.Dataset
		if dataName != "" {
			name = dataName
		}
		train, test, err := sample.Open(name, dataDir)
		if err != nil {
			return nil, fmt.Errorf("taskdata: data set %q: %w", name, err)
		}
		if train.Features != t.Inputs() || train.Classes != len(t.Label.Classes) {
			return nil, fmt.Errorf("taskdata: data set %q has %d features and %d classes, task %q declares %d and %d",
				name, train.Features, train.Classes, t.Name, t.Inputs(), len(t.Label.Classes))
		}
		return prepare(t, train, test, withTrain)
	}
	train, err := ReadCSV(t, task.Path(dir, t.Simulation))
	if err != nil {
		return nil, err
	}
	test, err := ReadCSV(t, task.Path(dir, t.Holdout))
	if err != nil {
		return nil, err
	}
	return prepare(t, train, test, withTrain)
}

// prepare applies t's preprocessing (task.Task.FitPrep: the training
// section's feature map, then a built-in data set's public
// standardization, fitted on train) to test and, when withTrain, to train
// (nil stays nil; without withTrain Train is nil).
func prepare(t *task.Task, train, test *dataset.Set, withTrain bool) (*Sets, error) {
	p, err := t.FitPrep(train)
	if err != nil {
		return nil, fmt.Errorf("taskdata: %w", err)
	}
	s := &Sets{Standardizer: p.Z}
	if train != nil && withTrain {
		if s.Train, err = p.Apply(train); err != nil {
			return nil, fmt.Errorf("taskdata: train: %w", err)
		}
	}
	if test != nil {
		if s.Test, err = p.Apply(test); err != nil {
			return nil, fmt.Errorf("taskdata: test: %w", err)
		}
	}
	return s, nil
}

// OpenFiles is Open for a task whose files are given by name rather than
// read from a directory: t's holdout and simulation name keys of files
// (the aggregator keeps a class's task so, in its datastore:
// aggregator/internal/classtask). The same checks as Open, the same
// sets; a file t names that files lacks is an error (fs.ErrNotExist).
func OpenFiles(t *task.Task, files map[string][]byte, dataName, dataDir string) (*Sets, error) {
	return openFiles(t, files, dataName, dataDir, true)
}

// OpenFilesHoldout is OpenFiles without preparing the simulation rows
// (Train is nil), as OpenHoldout is Open: they are still parsed and
// checked.
func OpenFilesHoldout(t *task.Task, files map[string][]byte, dataName, dataDir string) (*Sets, error) {
	return openFiles(t, files, dataName, dataDir, false)
}

// openFiles is OpenFiles, with the simulation rows prepared only when
// withTrain.
func openFiles(t *task.Task, files map[string][]byte, dataName, dataDir string, withTrain bool) (*Sets, error) {
	if t.Source == task.SourceBuiltin {
		return open(t, "", dataName, dataDir, withTrain)
	}
	named := func(name string) (*dataset.Set, error) {
		if name == "" {
			return nil, nil
		}
		b, ok := files[name]
		if !ok {
			return nil, fmt.Errorf("taskdata: %s: %w", name, fs.ErrNotExist)
		}
		return parseCSV(t, name, b)
	}
	train, err := named(t.Simulation)
	if err != nil {
		return nil, err
	}
	test, err := named(t.Holdout)
	if err != nil {
		return nil, err
	}
	return prepare(t, train, test, withTrain)
}

// ReadCSV reads and encodes a public CSV file of t ("" gives nil): every
// row must be valid.
func ReadCSV(t *task.Task, path string) (*dataset.Set, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("taskdata: %w", err)
	}
	return parseCSV(t, path, b)
}

// parseCSV encodes the public CSV file of t named path, b: every row must
// be valid.
func parseCSV(t *task.Task, path string, b []byte) (*dataset.Set, error) {
	p, err := t.ParseCSV(b)
	if err != nil {
		return nil, fmt.Errorf("taskdata: %s: %w", path, err)
	}
	if p.Skipped > 0 {
		return nil, fmt.Errorf("taskdata: %s: %d rows refused, the first: %w", path, p.Skipped, p.Errors[0])
	}
	if p.Set == nil {
		return nil, fmt.Errorf("taskdata: %s has no rows", path)
	}
	return p.Set, nil
}

// Holdout returns the aggregator's evaluation set and where its accuracy
// comes from: the public test part as a logreg.Dataset
// (AccuracyHoldout), or, without one, a Dataset of no examples that only
// carries the model's shape (AccuracyNone; logreg.Accuracy refuses it, so
// no accuracy is ever computed).
func Holdout(t *task.Task, s *Sets) (logreg.Dataset, string, error) {
	if s.Test == nil {
		ds, err := logreg.ShapeOnly(t.Shape())
		return ds, AccuracyNone, err
	}
	ds, err := logreg.NewDataset(t.Shape(), s.Test.X, s.Test.Y)
	if err != nil {
		return logreg.Dataset{}, "", fmt.Errorf("taskdata: holdout: %w", err)
	}
	return ds, AccuracyHoldout, nil
}

// ErrNoTrain is returned by Shares for a task without simulation data.
var ErrNoTrain = errors.New("taskdata: the task has no simulation data for simulated volunteers")

// Shares deals the simulation rows to clients simulated volunteers, IID
// and deterministically from seed (dataset.PartitionIID: every row to
// exactly one volunteer, share sizes differing by at most one). It fails
// if there are fewer rows than volunteers.
func Shares(s *Sets, clients int, seed uint64) ([]logreg.Dataset, error) {
	if s.Train == nil {
		return nil, ErrNoTrain
	}
	if clients < 1 || clients > s.Train.Len() {
		return nil, fmt.Errorf("taskdata: %d simulated volunteers for %d rows of simulation data (at most one volunteer per row)", clients, s.Train.Len())
	}
	parts, err := dataset.PartitionIID(s.Train.Len(), clients, noise.NewSeeded(seed))
	if err != nil {
		return nil, fmt.Errorf("taskdata: %w", err)
	}
	sh := logreg.Shape{Features: s.Train.Features, Classes: s.Train.Classes}
	out := make([]logreg.Dataset, clients)
	for i, idx := range parts {
		sub, err := s.Train.Subset(idx)
		if err != nil {
			return nil, fmt.Errorf("taskdata: volunteer %d: %w", i, err)
		}
		if out[i], err = logreg.NewDataset(sh, sub.X, sub.Y); err != nil {
			return nil, fmt.Errorf("taskdata: volunteer %d: %w", i, err)
		}
	}
	return out, nil
}
