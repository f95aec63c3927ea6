package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/blanket-fl/blanket/shared/task"
)

// taskMain is `aggregator task check FILE...`: each task definition is
// checked as the aggregator's -task and the operator's upload check it,
// and the public CSV files it names (holdout, simulation) row by row;
// every problem is printed, one per line, naming the file, and the exit
// status is 1 if there is any. A valid task's summary says what the
// volunteers' data must look like (its columns) and the model's d.
func taskMain(args []string, stdout, stderr io.Writer) int {
	if len(args) < 2 || args[0] != "check" {
		fmt.Fprintln(stderr, "usage: aggregator task check FILE [FILE...]")
		return 2
	}
	status := 0
	for _, path := range args[1:] {
		problems, summary := checkTask(path)
		for _, p := range problems {
			fmt.Fprintf(stdout, "%s: %s\n", path, p)
		}
		if len(problems) > 0 {
			status = 1
			fmt.Fprintf(stdout, "%s: %d problem(s)\n", path, len(problems))
			continue
		}
		fmt.Fprintf(stdout, "%s: ok: %s\n", path, summary)
	}
	return status
}

// checkTask lists every problem of the task file at path and of the
// public CSV files it names (every refused row, up to task.MaxRowErrors
// per file, and how many more); summary describes a valid task.
func checkTask(path string) (problems []string, summary string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return []string{err.Error()}, ""
	}
	tk, err := task.Parse(b)
	if err != nil {
		return splitJoined(err), ""
	}
	dir := filepath.Dir(path)
	rows := map[string]int{}
	for _, f := range []struct{ field, name string }{{"holdout", tk.Holdout}, {"simulation", tk.Simulation}} {
		if f.name == "" {
			continue
		}
		p := task.Path(dir, f.name)
		data, err := os.ReadFile(p)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", f.field, err))
			continue
		}
		parsed, err := tk.ParseCSV(data)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s (%s): %v", f.field, f.name, err))
			continue
		}
		for _, e := range parsed.Errors {
			problems = append(problems, fmt.Sprintf("%s (%s): %v", f.field, f.name, e))
		}
		if more := parsed.Skipped - len(parsed.Errors); more > 0 {
			problems = append(problems, fmt.Sprintf("%s (%s): and %d more rows refused", f.field, f.name, more))
		}
		if parsed.Set == nil && parsed.Skipped == 0 {
			problems = append(problems, fmt.Sprintf("%s (%s): no rows", f.field, f.name))
		}
		if parsed.Set != nil {
			rows[f.field] = parsed.Set.Len()
		}
	}
	var parts []string
	parts = append(parts, fmt.Sprintf("%q (%s), d = %d, %d classes", tk.Name, tk.Source, tk.D(), len(tk.Label.Classes)))
	if tk.Source != task.SourceBuiltin {
		parts = append(parts, "columns "+strings.Join(tk.Columns(), ", "))
	}
	for _, f := range []string{"holdout", "simulation"} {
		if n, ok := rows[f]; ok {
			parts = append(parts, fmt.Sprintf("%s %d rows", f, n))
		}
	}
	return problems, strings.Join(parts, "; ")
}

// splitJoined lists the errors an errors.Join holds (one per line), or
// the error alone.
func splitJoined(err error) []string {
	var out []string
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			out = append(out, splitJoined(e)...)
		}
		return out
	}
	if errors.Is(err, task.ErrInvalid) {
		return strings.Split(err.Error(), "\n")
	}
	return []string{err.Error()}
}
