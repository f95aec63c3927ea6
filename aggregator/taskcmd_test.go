package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestTaskCheck: `aggregator task check` passes the shipped tasks, and for
// a broken one prints every problem of the definition, or every refused
// row of a public CSV file it names, with exit status 1.
func TestTaskCheck(t *testing.T) {
	var out, errOut bytes.Buffer
	if st := run(t.Context(), []string{"task", "check", "../tasks/breast-cancer/task.json", "../tasks/class-survey/task.json"}, &out, &errOut); st != 0 {
		t.Fatalf("shipped tasks: exit %d\n%s%s", st, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "breast-cancer/task.json: ok: \"breast-cancer\" (csv), d = 62") {
		t.Fatalf("summary:\n%s", out.String())
	}

	dir := t.TempDir()
	def := `{"version": 1, "name": "Bad Name", "title": "t", "consent": "c", "source": "csv",
  "features": [{"name": "age", "type": "numeric", "min": 5, "max": 5},
               {"name": "x", "type": "numeric", "min": 0, "max": 10}],
  "label": {"name": "y", "classes": ["a"]}, "model": {"type": "logreg"}}`
	if err := os.WriteFile(filepath.Join(dir, "bad.json"), []byte(def), 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if st := run(t.Context(), []string{"task", "check", filepath.Join(dir, "bad.json")}, &out, &errOut); st != 1 {
		t.Fatalf("broken task: exit %d\n%s", st, out.String())
	}
	for _, w := range []string{"field name:", "min 5 must be below max 5", "declare 2 to 256 classes", ": 3 problem(s)"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, out.String())
		}
	}

	good := strings.NewReplacer(`"Bad Name"`, `"ok"`, `"min": 5, "max": 5`, `"min": 0, "max": 120`, `["a"]`, `["a", "b"]`).Replace(def)
	good = strings.Replace(good, `"model"`, `"holdout": "h.csv", "model"`, 1)
	csv := "age,x,y\n30,1,a\n200,1,b\n30,x,b\n30,2,c\n31,3,b\n"
	for name, body := range map[string]string{"good.json": good, "h.csv": csv} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out.Reset()
	if st := run(t.Context(), []string{"task", "check", filepath.Join(dir, "good.json")}, &out, &errOut); st != 1 {
		t.Fatalf("a holdout with bad rows: exit %d\n%s", st, out.String())
	}
	for _, w := range []string{"row 3, column 'age': 200 is outside", "row 4, column 'x': \"x\" is not a number", "row 5, column 'y'", ": 3 problem(s)"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, out.String())
		}
	}
}

// TestTaskPlan: the noise-to-signal ratio follows √(2d)·(σ/Δ)/n with σ/Δ
// the aggregator's calibration for the study's ε, δ and rounds (the digits
// at 400 volunteers, ε = 4 over 5 rounds: 1.51, docs/experiments.md), small
// crowds are flagged, and the crowd that keeps the noise below the signal
// is printed. The survey's private counts (10% of ε by default) leave the
// update 3.6 of its 4: its noise is calibrated to that (61 volunteers for
// a ratio below 1, against 56 at the whole ε).
func TestTaskPlan(t *testing.T) {
	var out, errOut bytes.Buffer
	if st := run(t.Context(), []string{"task", "plan", "-volunteers", "400", "-epsilon", "4", "-rounds", "5", "-delta", "1e-5", "digits"}, &out, &errOut); st != 0 {
		t.Fatalf("exit %d: %s", st, errOut.String())
	}
	if !strings.Contains(out.String(), "d = 8340") || !regexpMatch(t, `\n400\s+1\.5[0-9]\s`, out.String()) {
		t.Fatalf("digits at 400:\n%s", out.String())
	}
	out.Reset()
	if st := run(t.Context(), []string{"task", "plan", "../tasks/class-survey/task.json"}, &out, &errOut); st != 0 {
		t.Fatalf("exit %d: %s", st, errOut.String())
	}
	if !regexpMatch(t, `\n5\s+[0-9.]+\s+noise dominates`, out.String()) || !regexpMatch(t, `\n400\s+0\.[0-9]+\s*\n`, out.String()) ||
		!strings.Contains(out.String(), "cost 0.4 of epsilon 4; the update's noise is calibrated to the other 3.6") ||
		!strings.Contains(out.String(), "noise below 1 x the largest signal from 61 volunteers") {
		t.Fatalf("survey:\n%s", out.String())
	}
}

func regexpMatch(t *testing.T, re, s string) bool {
	t.Helper()
	return regexp.MustCompile(re).MatchString(s)
}
