package tasks

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/blanket-fl/blanket/shared/task"
)

// TestExamples: every shipped task directory is embedded (none forgotten
// when one is added), each parses, and the files it names (holdout,
// simulation) are embedded with the same bytes as on disk and parse
// without a skipped row.
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
		want := 0
		for _, p := range []string{ex.Task.Holdout, ex.Task.Simulation} {
			if p == "" {
				continue
			}
			want++
			disk, err := os.ReadFile(filepath.Join(ex.Task.Name, p))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ex.Files[p], disk) {
				t.Errorf("%s: embedded %s differs from the file", ex.Task.Name, p)
			}
			parsed, err := ex.Task.ParseCSV(ex.Files[p])
			if err != nil || parsed.Skipped != 0 {
				t.Errorf("%s: %s: %v, %d rows skipped", ex.Task.Name, p, err, parsed.Skipped)
			}
		}
		if len(ex.Files) != want {
			t.Errorf("%s: %d files embedded, the definition names %d", ex.Task.Name, len(ex.Files), want)
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
