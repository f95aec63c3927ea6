// Command cohort is Blanket's native load generator: it runs many
// volunteers (shared/client) in one process against a relay, each on its
// own websocket with its own share of the embedded digits, and prints one
// summary line per round. Ctrl-C stops it cleanly.
//
//	go run ./scripts/cohort -relay ws://127.0.0.1:8081/ws -aggregator http://127.0.0.1:8080 -clients 200
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/blanket-fl/blanket/scripts/internal/cohort"
	"github.com/blanket-fl/blanket/shared/dataset/sample"
	"github.com/blanket-fl/blanket/shared/logreg"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "cohort:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		relay       = flag.String("relay", "ws://127.0.0.1:8081/ws", "relay websocket URL")
		origin      = flag.String("origin", "", "Origin header to send (empty: none)")
		aggregator  = flag.String("aggregator", "http://127.0.0.1:8080", "aggregator base URL (for GET /api/key)")
		fingerprint = flag.String("fingerprint", "", "expected aggregator key fingerprint (pin); empty: trust the fetched key and print it")
		clients     = flag.Int("clients", 200, "number of volunteers")
		perUser     = flag.Int("per-user", 10, "training examples per volunteer")
		name        = flag.String("dataset", sample.Name, "dataset name")
		dataDir     = flag.String("data-dir", "", "data directory for datasets other than the embedded sample")
		seed        = flag.Uint64("seed", 1, "seed of the partition of examples among volunteers")
		epochs      = flag.Int("epochs", 10, "local training epochs")
		lr          = flag.Float64("lr", 0.1, "local learning rate")
		workers     = flag.Int("workers", 0, "volunteers preparing a report at once (0: 2 x the cores; -1: all at once)")
		verbose     = flag.Bool("v", false, "log every volunteer's diagnostics to stderr")
	)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	kctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	key, err := cohort.FetchKey(kctx, nil, *aggregator, *fingerprint)
	cancel()
	if err != nil {
		return err
	}
	fmt.Printf("aggregator key fingerprint %s (pinned)\n", key.Fingerprint())

	level := slog.LevelError
	if *verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	fmt.Printf("starting %d volunteers on %s with %d examples each; Ctrl-C stops\n", *clients, *relay, *perUser)
	sums, err := cohort.Run(ctx, cohort.Config{
		Relay:   *relay,
		Origin:  *origin,
		Key:     key,
		Clients: *clients,
		PerUser: *perUser,
		Dataset: *name,
		DataDir: *dataDir,
		Seed:    *seed,
		Train:   logreg.FLAMEConfig(*epochs, *lr),
		Logger:  logger,
		Out:     os.Stdout,
		Workers: *workers,
	})
	if err != nil {
		return err
	}
	joined, msgs := 0, 0
	for _, s := range sums {
		joined += s.Reports
		msgs += s.Messages
	}
	fmt.Printf("stopped after %d rounds: %d reports, %d messages\n", len(sums), joined, msgs)
	return nil
}
