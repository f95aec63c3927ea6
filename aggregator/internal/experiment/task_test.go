package experiment

import (
	"context"
	"encoding/json"
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
	if _, _, err := loadTaskWorld("../../../tasks/class-survey/task.json", 1, false, 1, 1); err == nil || !strings.Contains(err.Error(), "holdout") {
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
