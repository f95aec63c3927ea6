// Package tasks embeds the example task definitions shipped in this
// directory (docs/tasks.md), so that the aggregator's operator page can
// offer them to a teacher at run time next to the built-in digits, without
// the files next to the binary. Each example's public holdout, if it has
// one, is embedded with it (the aggregator evaluates on it); the
// simulation rows (make run's simulated volunteers) are not, as only the
// runner deals them.
package tasks

import (
	"embed"
	"fmt"
	"path"

	"github.com/blanket-fl/blanket/shared/task"
)

//go:embed breast-cancer/task.json breast-cancer/holdout.csv class-survey/task.json
var files embed.FS

// dirs are the embedded examples' directories, in the order the operator
// page lists them (after the digits).
var dirs = []string{"class-survey", "breast-cancer"}

// Example is a shipped example task.
type Example struct {
	// Task is the parsed definition; its Holdout is the embedded file's
	// name ("holdout.csv") or "", and its Simulation is "".
	Task *task.Task
	// Holdout is the content of the public holdout file, nil if none.
	Holdout []byte
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
		ex := Example{Task: t}
		t.Simulation = ""
		if t.Holdout != "" {
			if ex.Holdout, err = files.ReadFile(path.Join(d, t.Holdout)); err != nil {
				return nil, fmt.Errorf("tasks: %s: holdout: %w", d, err)
			}
		}
		out = append(out, ex)
	}
	return out, nil
}
