// Package tasks embeds the example task definitions shipped in this
// directory (docs/tasks.md), so that the aggregator's operator page can
// offer them to a teacher at run time next to the built-in digits, without
// the files next to the binary. The files an example names are embedded
// with it: its public holdout (the aggregator evaluates on it) and its
// simulation rows (make run's runner deals them to simulated volunteers
// when a new class switches to the example).
package tasks

import (
	"embed"
	"fmt"
	"path"

	"github.com/blanket-fl/blanket/shared/task"
)

//go:embed breast-cancer/task.json breast-cancer/holdout.csv breast-cancer/train.csv class-survey/task.json
var files embed.FS

// dirs are the embedded examples' directories, in the order the operator
// page lists them (after the digits).
var dirs = []string{"class-survey", "breast-cancer"}

// Example is a shipped example task.
type Example struct {
	// Task is the parsed definition.
	Task *task.Task
	// Files are the files the definition names (its Holdout and
	// Simulation, names relative to its directory), by name.
	Files map[string][]byte
}

// Examples returns the shipped examples, each parsed and validated by
// task.Parse (a fresh copy per call). The built-in digits are not among
// them (task.Digits). An error is a build defect, which TestExamples
// rules out.
func Examples() ([]Example, error) {
	out := make([]Example, 0, len(dirs))
	for _, d := range dirs {
		b, err := files.ReadFile(path.Join(d, "task.json"))
		if err != nil {
			return nil, fmt.Errorf("tasks: %w", err)
		}
		t, err := task.Parse(b)
		if err != nil {
			return nil, fmt.Errorf("tasks: %s: %w", d, err)
		}
		ex := Example{Task: t, Files: map[string][]byte{}}
		for _, name := range []string{t.Holdout, t.Simulation} {
			if name == "" {
				continue
			}
			if ex.Files[name], err = files.ReadFile(path.Join(d, name)); err != nil {
				return nil, fmt.Errorf("tasks: %s: %w", d, err)
			}
		}
		out = append(out, ex)
	}
	return out, nil
}
