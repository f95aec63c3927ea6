package main

import (
	"strings"
	"testing"

	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/task"
)

// TestLoadTask: no -task is the digits (d = 7850, the embedded test part);
// the tabular example evaluates on its public holdout; the survey has
// none; -data is refused for a task that brings its own data.
func TestLoadTask(t *testing.T) {
	for _, c := range []struct {
		path    string
		d, rows int
		src     string
	}{
		{"", logreg.MNISTParams, 2000, "public_holdout"},
		{"../tasks/breast-cancer/task.json", 62, 113, "public_holdout"},
		{"../tasks/class-survey/task.json", (2 + 6 + 4 + 1) * 5, 0, "none"},
	} {
		tk, test, src, err := loadTask(c.path, "mnist-sample", "", false)
		if err != nil {
			t.Fatal(err)
		}
		if tk.D() != c.d || test.Shape().NumParams() != c.d || test.Len() != c.rows || src != c.src {
			t.Errorf("%q: d %d, %d test rows of d %d, source %q", c.path, tk.D(), test.Len(), test.Shape().NumParams(), src)
		}
	}
	if _, _, _, err := loadTask("../tasks/breast-cancer/task.json", "mnist-idx", "", true); err == nil || !strings.Contains(err.Error(), "-data") {
		t.Errorf("-data with a CSV task: %v", err)
	}
	p := task.Privacy{Protocol: "secagg", Epsilon: 4, Delta: 1e-6, Rounds: 5}
	proto, eps, delta, rounds := "ss-topk", 750.0, 1e-5, 0
	suggest(p, map[string]bool{"epsilon": true}, &proto, &eps, &delta, &rounds)
	if proto != "secagg" || eps != 750 || delta != 1e-6 || rounds != 5 {
		t.Errorf("suggested %s %v %v %d: a flag the operator set must win", proto, eps, delta, rounds)
	}
}
