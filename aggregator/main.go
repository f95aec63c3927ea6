// Command aggregator is Blanket's analyzer. Its subcommands:
//
//	aggregator simulate [flags]   train in-process with simulated users and print
//	                              the papers' comparison tables (the experiment runner)
//	aggregator serve [flags]      run the aggregator service with a relay
//	aggregator audit [flags]      attack the shuffle protocols and compare the
//	                              empirical lower bound on epsilon with the charge
//
// Run `aggregator <subcommand> -h` for the flags of each.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/blanket-fl/blanket/aggregator/internal/audit"
	"github.com/blanket-fl/blanket/aggregator/internal/experiment"
	"github.com/blanket-fl/blanket/aggregator/internal/privacycli"
	"github.com/blanket-fl/blanket/aggregator/internal/server"
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
	case "serve":
		return server.Main(ctx, args[1:], stdout, stderr)
	case "audit":
		return audit.Main(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "aggregator: unknown subcommand %q\n", args[0])
		usage(stderr)
		return 2
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, `usage: aggregator <subcommand> [flags]

subcommands:
  simulate   train in-process with simulated users; print accuracy and the central
             epsilon of each protocol (FLAME, APES and shuffled check-in tables)
  privacy    print every applicable accountant's central (epsilon, delta) for a
             configuration or a paper preset, marking the tightest valid one
  serve      run the aggregator service: announce rounds to the relay, receive,
             account, decrypt and aggregate batches, serve the JSON API
  audit      attack every announceable shuffle protocol on neighbouring inputs and
             print the empirical lower bound on epsilon next to the charged epsilon`)
}
