// Command lab holds Blanket's research tools, kept out of the production
// aggregator binary:
//
//	go run ./aggregator/lab simulate [flags]   train in-process with simulated users and
//	                                           print the papers' comparison tables
//	go run ./aggregator/lab privacy [flags]    print every applicable accountant's central
//	                                           (epsilon, delta) for a configuration or preset
//
// Run `go run ./aggregator/lab <subcommand> -h` for the flags of each.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/blanket-fl/blanket/aggregator/internal/experiment"
	"github.com/blanket-fl/blanket/aggregator/internal/privacycli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "simulate":
		return experiment.Main(ctx, args[1:], stdout, stderr)
	case "privacy":
		return privacycli.Main(ctx, args[1:], stdout, stderr)
	case "plan":
		return experiment.Plan(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "lab: unknown subcommand %q\n", args[0])
		usage(stderr)
		return 2
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, `usage: go run ./aggregator/lab <subcommand> [flags]

subcommands:
  simulate   train in-process with simulated users; print accuracy and the central
             epsilon of each protocol (FLAME, APES, shuffled check-in, secure summation
             with SumVec and PINE, equal-epsilon and poisoning tables)
  plan       before recruiting: the accuracy a task's study can expect with N
             volunteers at epsilon, simulated on its public proxy rows (3 seeds)
  privacy    print every applicable accountant's central (epsilon, delta) for a
             configuration or a paper preset, marking the tightest valid one`)
}
