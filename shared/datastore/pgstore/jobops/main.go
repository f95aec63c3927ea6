package jobops

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/blanket-fl/blanket/shared/datastore/pgstore"
	"github.com/blanket-fl/blanket/shared/datastore/serverstore"
)

// Worker is what a party's prep-worker command is made of.
type Worker struct {
	Name   string // the command, e.g. "relay prep-worker"
	Party  string // "relay" or "aggregator": whose store
	Schema string // the default -store-schema
	Unit   string // what a job holds, for the flags' help: "chunk", "batch"
	Prefix string // the party's metrics prefix
	Lease  time.Duration
	// New returns the party's worker (its Kind, the flags' goroutines,
	// lease and logger); Serve runs it on the schema until ctx ends
	// (prepjob.Serve).
	New   func(workers int, lease time.Duration, log *slog.Logger) *pgstore.JobWorker
	Serve func(ctx context.Context, dsn, schema string, w *pgstore.JobWorker) error
}

// Main is `aggregator prep-worker` and `relay prep-worker`: the flags,
// the operator's endpoint (-listen: Register), then Serve until ctx ends.
// It returns the exit status: 2 for a usage error, 1 for a failure.
func Main(ctx context.Context, args []string, stderr io.Writer, c Worker) int {
	fs := flag.NewFlagSet(c.Name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var store serverstore.Config
	fs.StringVar(&store.URL, "store", "", "the "+c.Party+"'s PostgreSQL store, postgres://...")
	fs.StringVar(&store.Schema, "store-schema", c.Schema, "its schema")
	workers := fs.Int("workers", 0, "goroutines per "+c.Unit+" (0: GOMAXPROCS)")
	lease := fs.Duration("prep-lease", c.Lease, "how long a "+c.Unit+"'s job is held before another replica may take it over")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	listen := fs.String("listen", "", "serve GET /metrics (Prometheus) and /healthz at this address (empty: none)")
	if err := fs.Parse(args); err != nil || store.URL == "" || fs.NArg() != 0 {
		fmt.Fprintf(stderr, "usage: %s -store postgres://... [-store-schema S] [-workers N] [-prep-lease D] [-listen ADDR]\n", c.Name)
		return 2
	}
	store.Dir = "-"
	if err := store.Validate(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", c.Name, err)
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(stderr, "%s: -log-level: %v\n", c.Name, err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	w := c.New(*workers, *lease, log)
	if *listen != "" {
		mux := http.NewServeMux()
		Register(mux, c.Prefix, w)
		ln, err := net.Listen("tcp", *listen)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", c.Name, err)
			return 1
		}
		hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go hs.Serve(ln)
		defer hs.Close()
	}
	err := c.Serve(ctx, store.URL, store.Schema, w)
	log.Info("stopped", "jobs", w.Done(), "failed", w.Failed(), "lost", w.Lost())
	if err != nil && ctx.Err() == nil {
		fmt.Fprintf(stderr, "%s: %v\n", c.Name, err)
		return 1
	}
	return 0
}
