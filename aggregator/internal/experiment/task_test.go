package experiment

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTaskWorld: -task builds the world from the task's simulation rows
// (one user per row here) and holdout, with the task's d; a task without
// public rows is refused with the reason.
func TestTaskWorld(t *testing.T) {
	w, tk, err := loadTaskWorld("../../../tasks/breast-cancer/task.json", 1, false, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.users) != 456 || w.test.Len() != 113 || w.shape.NumParams() != tk.D() || tk.D() != 62 {
		t.Fatalf("%d users, %d test rows, d %d", len(w.users), w.test.Len(), w.shape.NumParams())
	}
	if _, _, err := loadTaskWorld("../../../tasks/class-survey/task.json", 1, false, 1, 1); err == nil || !strings.Contains(err.Error(), "simulation") {
		t.Fatalf("survey: %v", err)
	}
}

// TestSimulateTask: secure summation learns the tabular task beyond its
// majority class (62.83% of the holdout is benign) at the runner's
// defaults for the task (make run's: 400 volunteers of one row, q = 1, the
// task's 10 rounds at epsilon 4), seed 1, through Main as docs/tasks.md
// runs it (the run is deterministic: docs/tasks.md reports 91.15%).
func TestSimulateTask(t *testing.T) {
	if testing.Short() {
		t.Skip("trains 10 rounds")
	}
	var out, errs strings.Builder
	if code := Main(context.Background(), []string{"-task", "../../../tasks/breast-cancer/task.json", "-protocols", "secagg", "-json"}, &out, &errs); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	var res []struct {
		Final  float64 `json:"final_accuracy"`
		Pop    int     `json:"population"`
		Rounds []any   `json:"rounds"`
		Claim  struct {
			Total float64 `json:"epsilon_run"`
		} `json:"privacy"`
	}
	if err := json.Unmarshal([]byte(out.String()), &res); err != nil || len(res) != 1 {
		t.Fatalf("output %q: %v", out.String(), err)
	}
	r := res[0]
	if r.Pop != 400 || len(r.Rounds) != 10 || !(r.Claim.Total <= 4*(1+1e-9)) {
		t.Errorf("population %d, %d rounds, eps %v: want 400, the task's 10, at most its 4", r.Pop, len(r.Rounds), r.Claim.Total)
	}
	if r.Final < 0.9 {
		t.Fatalf("final accuracy %.4f, docs/tasks.md reports 0.9115", r.Final)
	}
}

// smallTask writes a task of d = 6 (two features, two classes) with rows
// public simulation rows and no holdout: the label is whether x + y > 1.
func smallTask(t *testing.T, rows int) string {
	t.Helper()
	dir := t.TempDir()
	def := `{"version": 1, "name": "tiny", "title": "Tiny", "consent": "A test.", "source": "csv",
 "features": [{"name": "x", "type": "numeric", "min": 0, "max": 1}, {"name": "y", "type": "numeric", "min": 0, "max": 1}],
 "label": {"name": "sum", "classes": ["small", "large"]}, "model": {"type": "logreg"},
 "privacy": {"protocol": "secagg", "epsilon": 4, "delta": 1e-5, "rounds": 3}, "simulation": "rows.csv"}`
	var b strings.Builder
	b.WriteString("x,y,sum\n")
	src := rand.New(rand.NewChaCha8([32]byte{7}))
	for range rows {
		x, y := src.Float64(), src.Float64()
		label := "small"
		if x+y > 1 {
			label = "large"
		}
		fmt.Fprintf(&b, "%.4f,%.4f,%s\n", x, y, label)
	}
	for name, text := range map[string]string{"task.json": def, "rows.csv": b.String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "task.json")
}

// TestRunnerAnyTask: the runner trains secure summation on a task of
// d = 6 (FLAME's beta = 1/50 would give k = 0 there, which must not refuse
// a run that does not ask for FLAME), holds out a fifth of the simulation
// rows when the task has no holdout and says so, and refuses to deal the
// rows to more volunteers than there are shards unless -secagg-replicate
// asks for it.
func TestRunnerAnyTask(t *testing.T) {
	path := smallTask(t, 100)
	run := func(args ...string) (string, string, int) {
		var out, errs strings.Builder
		code := Main(context.Background(), append([]string{"-task", path, "-protocols", "secagg", "-secagg-rounds", "2"}, args...), &out, &errs)
		return out.String(), errs.String(), code
	}
	out, errs, code := run("-secagg-pop", "40")
	if code != 0 {
		t.Fatalf("40 volunteers of 80 rows: exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "no public holdout: accuracy is on 20 of its 100 simulation rows") || !strings.Contains(out, "d = 6") {
		t.Errorf("output does not say where accuracy comes from, or d:\n%s", out)
	}
	_, errs, code = run("-secagg-pop", "100")
	if code == 0 || !strings.Contains(errs, "-secagg-pop to 80") || !strings.Contains(errs, "-secagg-replicate") {
		t.Errorf("100 volunteers of 80 rows: exit %d, %q; want a refusal naming -secagg-pop and -secagg-replicate", code, errs)
	}
	if _, errs, code = run("-secagg-pop", "100", "-secagg-replicate"); code != 0 {
		t.Errorf("100 volunteers with -secagg-replicate: exit %d: %s", code, errs)
	}
}

// TestPlan: `lab plan` simulates a task's study on its proxy rows over
// several seeds and prints the range of secure summation's accuracy and
// the noise-free reference; with more volunteers than proxy rows it deals
// rows to several volunteers and says so; a task without proxy rows is
// refused with the reason.
func TestPlan(t *testing.T) {
	path := smallTask(t, 100)
	var out, errs strings.Builder
	if code := Plan(context.Background(), []string{"-task", path, "-volunteers", "40", "-seeds", "2", "-rounds", "2"}, &out, &errs); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	for _, want := range []string{`task "tiny", 40 volunteers per round`, "2 seeds of the task's 100 public proxy rows", "secure summation: ", "noise-free (the same recipe without noise): "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("plan output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "note:") {
		t.Errorf("40 volunteers of 80 rows need no dealing:\n%s", out.String())
	}
	out.Reset()
	errs.Reset()
	if code := Plan(context.Background(), []string{"-task", path, "-volunteers", "200", "-seeds", "1", "-rounds", "2"}, &out, &errs); code != 0 {
		t.Fatalf("200 volunteers: exit %d: %s", code, errs.String())
	}
	if !strings.Contains(out.String(), "200 volunteers but 80 proxy rows") {
		t.Errorf("200 volunteers of 80 rows: no note:\n%s", out.String())
	}
	out.Reset()
	errs.Reset()
	if code := Plan(context.Background(), []string{"-task", "../../../tasks/class-survey/task.json"}, &out, &errs); code != 2 || !strings.Contains(errs.String(), "no public simulation rows") {
		t.Errorf("survey: exit %d, %q", code, errs.String())
	}
}
