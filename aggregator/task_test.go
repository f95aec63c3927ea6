package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blanket-fl/blanket/aggregator/internal/classtask"
	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/task"
)

// TestLoadTask: no -task is the digits (d = 8340 with scatter1, the
// embedded test part);
// the tabular example evaluates on its public holdout; the survey has
// none; -data is refused for a task that brings its own data.
func TestLoadTask(t *testing.T) {
	for _, c := range []struct {
		path    string
		d, rows int
		src     string
	}{
		{"", (833 + 1) * 10, 2000, "public_holdout"},
		{"../tasks/breast-cancer/task.json", 62, 113, "public_holdout"},
		{"../tasks/class-survey/task.json", (2 + 6 + 4 + 1) * 5, 0, "none"},
	} {
		tk, test, src, err := loadTask(nil, c.path, "mnist-sample", "", false)
		if err != nil {
			t.Fatal(err)
		}
		if tk.D() != c.d || test.Shape().NumParams() != c.d || test.Len() != c.rows || src != c.src {
			t.Errorf("%q: d %d, %d test rows of d %d, source %q", c.path, tk.D(), test.Len(), test.Shape().NumParams(), src)
		}
	}
	if _, _, _, err := loadTask(nil, "../tasks/breast-cancer/task.json", "mnist-idx", "", true); err == nil || !strings.Contains(err.Error(), "-data") {
		t.Errorf("-data with a CSV task: %v", err)
	}
	p := task.Privacy{Protocol: "secagg", Epsilon: 4, Delta: 1e-6, Rounds: 5}
	proto, eps, delta, rounds := "ss-topk", 750.0, 1e-5, 0
	suggest(p, map[string]bool{"epsilon": true}, &proto, &eps, &delta, &rounds)
	if proto != "secagg" || eps != 750 || delta != 1e-6 || rounds != 5 {
		t.Errorf("suggested %s %v %v %d: a flag the operator set must win", proto, eps, delta, rounds)
	}
}

// TestStartTask: an aggregator whose state directory is of the former
// format (the class's task in task/, the next class's choice in
// next-class-task/) starts with the class's task in place of -task,
// imported once into its datastore (the directories kept, read-only, as
// NAME.imported), and starts with it again from the datastore alone; the
// choice for the next class is in the datastore too. Without a class
// task, -task is the task.
func TestStartTask(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	dir := t.TempDir()
	if tk, _, _, own, err := startTask(dir, "../tasks/class-survey/task.json", "", "", false, log); err != nil || own || tk.Name != "class-survey" {
		t.Fatalf("no class task: %v, own %v, %+v", err, own, tk)
	}
	copyDir := func(src, dst string) {
		t.Helper()
		ents, err := os.ReadDir(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(dst, 0o700); err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join(src, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	copyDir("../tasks/breast-cancer", filepath.Join(dir, task.ClassDir))
	copyDir("../tasks/class-survey", filepath.Join(dir, task.NextClassDir))
	for i := range 2 {
		tk, test, src, own, err := startTask(dir, "../tasks/class-survey/task.json", "", "", false, log)
		if err != nil || !own || tk.Name != "breast-cancer" || tk.D() != 62 || test.Len() != 113 || src != "public_holdout" {
			t.Fatalf("start %d: %v, own %v, %+v, %d holdout rows (%s)", i, err, own, tk, test.Len(), src)
		}
		for _, d := range []string{task.ClassDir, task.NextClassDir} {
			if _, err := os.Stat(filepath.Join(dir, d)); !os.IsNotExist(err) {
				t.Errorf("start %d: the former %s is still there: %v", i, d, err)
			}
			fi, err := os.Stat(filepath.Join(dir, d+classtask.ImportedSuffix, task.FileName))
			if err != nil || fi.Mode().Perm() != 0o400 {
				t.Errorf("start %d: the imported %s is not kept read-only: %v", i, d, err)
			}
		}
	}
	db, err := datastore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	next, err := classtask.Next(db)
	if err != nil || next == nil || next.Name != "class-survey" {
		t.Errorf("the imported next class's task: %v, %+v", err, next)
	}
}
