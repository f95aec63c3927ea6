package main

import (
	"errors"
	"flag"
	"fmt"
	"github.com/blanket-fl/blanket/shared/counts"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/blanket-fl/blanket/aggregator/internal/params"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/secagg"
	"github.com/blanket-fl/blanket/shared/task"
	"github.com/blanket-fl/blanket/shared/wire"
)

// taskMain is `aggregator task check FILE...`: each task definition is
// checked as the aggregator's -task and the operator's upload check it,
// and the public CSV files it names (holdout, simulation) row by row;
// every problem is printed, one per line, naming the file, and the exit
// status is 1 if there is any. A valid task's summary says what the
// volunteers' data must look like (its columns) and the model's d.
func taskMain(args []string, stdout, stderr io.Writer) int {
	if len(args) >= 1 && args[0] == "plan" {
		return taskPlan(args[1:], stdout, stderr)
	}
	if len(args) < 2 || args[0] != "check" {
		fmt.Fprintln(stderr, "usage: aggregator task check FILE [FILE...]\n       aggregator task plan [flags] FILE")
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

// sigmaOverSensitivity is each server's σ over the sensitivity Δ for a
// task of d parameters, as the aggregator calibrates it
// (params.SecAggSigma, the ledger's own accountant; PINE's norm bound for
// d and the default clip is Δ): it depends on ε, δ, the rounds and the
// check-in rate, not on the crowd (n only sizes the quota).
func sigmaOverSensitivity(d, n int, q float64, rounds int, eps, delta float64) (float64, error) {
	n = max(n, 400)
	c := params.Choice{Protocol: wire.ProtocolSecAgg.String(), Randomizer: wire.RandomizerLaplace.String(), CheckIn: q, Quota: 2 * n}
	sigma, err := params.SecAggSigma(d, n, c, rounds, eps, delta)
	if err != nil {
		return 0, err
	}
	sp, err := secagg.NewPineParams(d, roundspec.DefaultSecAggClip, 0, 2*n)
	if err != nil {
		return 0, err
	}
	return sigma / sp.Sensitivity(), nil
}

// taskPlan is `aggregator task plan [flags] FILE`: before recruiting, how
// noisy a secure-summation round of the task is at a number of
// volunteers, from public parameters only (the task's d; ε, δ, rounds and
// the check-in rate, the task's suggestions unless given), and how many
// volunteers keep the noise below the signal. The accuracy a given crowd
// reaches is the experiment runner's to simulate on public proxy rows: the
// command prints that command when the task names simulation rows.
func taskPlan(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("task plan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	volunteers := fs.Int("volunteers", 0, "volunteers reporting in each round (0: a table of crowd sizes)")
	epsilon := fs.Float64("epsilon", 0, "the study's epsilon over all its rounds (0: the task's suggestion, else "+fmt.Sprint(params.DefaultTargetEpsilon)+")")
	delta := fs.Float64("delta", 0, "the study's delta (0: the task's suggestion, else "+fmt.Sprint(params.DefaultTargetDelta)+")")
	rounds := fs.Int("rounds", 0, "rounds the budget is spent over (0: the task's suggestion, else 5)")
	checkIn := fs.Float64("check-in", 1, "the check-in rate q")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: aggregator task plan [-volunteers N] [-epsilon E] [-delta D] [-rounds R] FILE")
		return 2
	}
	tk, dir, err := task.Load(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, "aggregator:", err)
		return 1
	}
	pick := func(flagV, taskV, def float64) float64 {
		switch {
		case flagV > 0:
			return flagV
		case taskV > 0:
			return taskV
		}
		return def
	}
	eps := pick(*epsilon, tk.Privacy.Epsilon, params.DefaultTargetEpsilon)
	dlt := pick(*delta, tk.Privacy.Delta, params.DefaultTargetDelta)
	r := int(pick(float64(*rounds), float64(tk.Privacy.Rounds), 5))
	if *volunteers < 0 || !(*checkIn > 0 && *checkIn <= 1) {
		fmt.Fprintln(stderr, "aggregator: -volunteers must be >= 0 and -check-in in (0, 1]")
		return 2
	}
	d := tk.D()
	// With count blocks the update's σ is calibrated to its share of ε
	// (params.UpdateEpsilon, as the aggregator announces it).
	ueps := params.UpdateEpsilon(wire.ProtocolSecAgg.String(), tk.CountsPlan(), eps)
	if ueps != eps {
		fmt.Fprintf(stdout, "the task's private counts (docs/tasks.md, \"Private counts\") cost %.3g of epsilon %g; the update's noise is calibrated to the other %.3g\n", eps-ueps, eps, ueps)
	}
	ratio, err := sigmaOverSensitivity(d, *volunteers, *checkIn, r, ueps, dlt)
	if err != nil {
		fmt.Fprintln(stderr, "aggregator: calibrating the noise:", err)
		return 1
	}
	fmt.Fprintf(stdout, "task %q: d = %d; secure summation at epsilon %g over %d rounds (delta %g, check-in %g): each server adds noise of %.3g times the sensitivity per coordinate\n",
		tk.Name, d, eps, r, dlt, *checkIn, ratio)
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "volunteers per round\tnoise / largest signal\t")
	crowd := []int{5, 10, 20, 50, 100, 200, 400, 1000, 3000, 10000}
	if *volunteers > 0 {
		crowd = []int{*volunteers}
	}
	for _, n := range crowd {
		// The dashboard's warning, from the same public parameters
		// (counts.UpdateNoiseRatio: √(2d)·σ/(n·Δ), flagged from
		// counts.UpdateDominates, a heuristic from the digits' runs).
		x, err := counts.UpdateNoiseRatio(d, n, ratio, 1)
		if err != nil {
			fmt.Fprintln(stderr, "task plan:", err)
			return 1
		}
		note := ""
		if x >= counts.UpdateDominates {
			note = "noise dominates: the model will be mostly noise"
		}
		fmt.Fprintf(tw, "%d\t%.2f\t%s\n", n, x, note)
	}
	tw.Flush()
	for _, lim := range []float64{counts.UpdateDominates, 1} {
		fmt.Fprintf(stdout, "noise below %g x the largest signal from %d volunteers per round\n", lim,
			int(math.Ceil(math.Sqrt(2*float64(d))*ratio/lim)))
	}
	if tk.Simulation != "" {
		fmt.Fprintf(stdout, "the accuracy to expect, simulated on the task's public proxy rows: go run ./aggregator/lab plan -task %s -volunteers N -epsilon %g -rounds %d\n",
			filepath.Join(dir, filepath.Base(fs.Arg(0))), eps, r)
	}
	return 0
}
