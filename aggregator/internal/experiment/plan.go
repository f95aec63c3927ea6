package experiment

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/blanket-fl/blanket/shared/task"
	"github.com/blanket-fl/blanket/shared/task/taskdata"
)

// Plan is `go run ./aggregator/lab plan`: before recruiting, the accuracy
// a task's study can expect with N volunteers at ε, simulated on the
// task's public proxy rows (its "simulation" file) as secure summation
// runs it (the product's σ for the task's d, its training recipe), over
// several seeds, with the noise-free reference of the same settings. It
// runs the experiment runner (Main with -secagg-fast, bit-identical to the
// real pipeline for honest volunteers) once per seed and prints the range.
// With fewer proxy rows than volunteers the rows are dealt to several
// volunteers (-secagg-replicate), which estimates the accuracy of N
// volunteers' noise but not of N volunteers' data, and it says so.
func Plan(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("task", "", "task definition file with public simulation rows (docs/tasks.md)")
	n := fs.Int("volunteers", 400, "volunteers per round")
	eps := fs.Float64("epsilon", 0, "ε over the study, replace-one (0: the task's suggestion)")
	rounds := fs.Int("rounds", 0, "rounds (0: the task's suggestion)")
	seeds := fs.Int("seeds", 3, "seeds (simulations) to run")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *path == "" || *n < 1 || *seeds < 1 || *eps < 0 || *rounds < 0 {
		fmt.Fprintln(stderr, "plan: need -task FILE, -volunteers ≥ 1, -seeds ≥ 1")
		return 2
	}
	tk, dir, err := task.Load(*path)
	if err != nil {
		fmt.Fprintln(stderr, "plan:", err)
		return 2
	}
	s, err := taskdata.Open(tk, dir, "", "")
	if err != nil || s.Train == nil {
		fmt.Fprintf(stderr, "plan: task %q names no public simulation rows to simulate on (aggregator task plan gives the noise per round instead)\n", tk.Name)
		return 2
	}
	base := []string{"-task", *path, "-protocols", "secagg,secagg-np", "-secagg-pop", strconv.Itoa(*n), "-secagg-fast", "-json"}
	if *eps > 0 {
		base = append(base, "-secagg-eps", strconv.FormatFloat(*eps, 'g', -1, 64))
	}
	if *rounds > 0 {
		base = append(base, "-secagg-rounds", strconv.Itoa(*rounds))
	}
	rows := s.Train.Len()
	if s.Test == nil {
		rows -= max(1, rows/5) // the runner holds out a fifth (loadTaskWorld)
	}
	if *n > rows {
		base = append(base, "-secagg-replicate")
		fmt.Fprintf(stdout, "note: %d volunteers but %d proxy rows to train on: rows are dealt to several volunteers, so this estimates the noise of %d volunteers, not the data of %d\n", *n, rows, *n, *n)
	}
	var private, free []float64
	var epsRun float64
	for seed := 1; seed <= *seeds; seed++ {
		var out, errs bytes.Buffer
		if code := Main(ctx, append(slices.Clone(base), "-seed", strconv.Itoa(seed)), &out, &errs); code != 0 {
			fmt.Fprintf(stderr, "plan: seed %d: %s", seed, errs.String())
			return 1
		}
		var res []struct {
			ID    string  `json:"id"`
			Final float64 `json:"final_accuracy"`
			Claim struct {
				Total float64 `json:"epsilon_run"`
			} `json:"privacy"`
		}
		if err := json.Unmarshal(out.Bytes(), &res); err != nil {
			fmt.Fprintf(stderr, "plan: seed %d: %v\n", seed, err)
			return 1
		}
		for _, r := range res {
			switch r.ID {
			case "secagg":
				private, epsRun = append(private, r.Final), r.Claim.Total
			case secaggNPID:
				free = append(free, r.Final)
			}
		}
	}
	if len(private) != *seeds || len(free) != *seeds {
		fmt.Fprintln(stderr, "plan: the runner returned no secure-summation result")
		return 1
	}
	fmt.Fprintf(stdout, "task %q, %d volunteers per round, ε %.4g over the run (replace-one, as charged), %d seeds of the task's %d public proxy rows:\n", tk.Name, *n, epsRun, *seeds, s.Train.Len())
	fmt.Fprintf(stdout, "  secure summation: %s\n  noise-free (the same recipe without noise): %s\n", spread(private), spread(free))
	fmt.Fprintf(stdout, "  (the spread of %d simulations on proxy rows, not a confidence interval for the study's data)\n", *seeds)
	return 0
}

// spread formats accuracies as "min–max %, mean m %".
func spread(a []float64) string {
	lo, hi, sum := a[0], a[0], 0.0
	for _, v := range a {
		lo, hi, sum = min(lo, v), max(hi, v), sum+v
	}
	return fmt.Sprintf("%.2f–%.2f%% (mean %.2f%%)", 100*lo, 100*hi, 100*sum/float64(len(a)))
}
