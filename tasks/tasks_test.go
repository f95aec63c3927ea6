package tasks

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/blanket-fl/blanket/shared/task"
)

// TestExamples: every shipped task directory is embedded (none forgotten
// when one is added), each parses, and an example with a holdout carries
// the same bytes as its file, which parse without a skipped row.
func TestExamples(t *testing.T) {
	exs, err := Examples()
	if err != nil {
		t.Fatal(err)
	}
	onDisk, err := filepath.Glob("*/task.json")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ex := range exs {
		names = append(names, ex.Task.Name)
		if ex.Task.Simulation != "" {
			t.Errorf("%s: simulation %q kept", ex.Task.Name, ex.Task.Simulation)
		}
		if ex.Task.Holdout == "" {
			if ex.Holdout != nil {
				t.Errorf("%s: holdout bytes without a holdout file", ex.Task.Name)
			}
			continue
		}
		want, err := os.ReadFile(filepath.Join(ex.Task.Name, ex.Task.Holdout))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ex.Holdout, want) {
			t.Errorf("%s: embedded holdout differs from the file", ex.Task.Name)
		}
		p, err := ex.Task.ParseCSV(ex.Holdout)
		if err != nil || p.Skipped != 0 {
			t.Errorf("%s: holdout: %v, %d rows skipped", ex.Task.Name, err, p.Skipped)
		}
	}
	if len(onDisk) != len(exs) {
		t.Errorf("%d task directories (%v), %d embedded (%v)", len(onDisk), onDisk, len(exs), names)
	}
	for _, f := range onDisk {
		tk, _, err := task.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Dir(f) != tk.Name || !slices.Contains(names, tk.Name) {
			t.Errorf("%s: task %q is not embedded under its directory's name", f, tk.Name)
		}
	}
}
