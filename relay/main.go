// Command relay is Blanket's shuffler: clients connect over websocket
// (GET /ws), the aggregator opens rounds (POST /v1/rounds), and at each
// round's deadline or quota the relay pads every dimension to n_p with
// sealed dummies, shuffles, persists and forwards the batch
// (docs/protocol.md). It never holds the aggregator's private key.
//
// It also serves what volunteers' browsers load (docs/web.md): the join
// page at /, its assets, the wasm client (-wasm), the sample digits, and
// the aggregator's public key as fetched every -key-refresh.
//
// For secure summation (docs/secagg.md) it is the Prio3 helper: its helper
// key (helper.key in the -state directory, generated at the first start,
// 0600) opens the helper shares of the volunteers' reports and nothing
// else; GET /v1/helper-key serves its public half to the aggregator.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/blanket-fl/blanket/relay/internal/edge"
	"github.com/blanket-fl/blanket/relay/internal/metrics"
	"github.com/blanket-fl/blanket/relay/internal/prepjob"
	"github.com/blanket-fl/blanket/relay/internal/relaystore"
	"github.com/blanket-fl/blanket/relay/internal/server"
	"github.com/blanket-fl/blanket/relay/internal/sumrelay"
	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/datastore/pgstore"
	"github.com/blanket-fl/blanket/shared/datastore/pgstore/jobops"
	"github.com/blanket-fl/blanket/shared/datastore/serverstore"
	"github.com/blanket-fl/blanket/shared/flagfile"
	"github.com/blanket-fl/blanket/shared/ledger"
	"github.com/blanket-fl/blanket/shared/readiness"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/secagg"
	"github.com/blanket-fl/blanket/web"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "prep-worker" {
		os.Exit(prepWorker(os.Args[2:]))
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "relay:", err)
		os.Exit(1)
	}
}

// defaultWasm is where `make` puts the wasm client.
const defaultWasm = "out/web/blanket.wasm"

// loadWasm loads the -wasm module. The default path is optional (a relay
// without a module serves the join page saying so); a path given on the
// command line must load.
func loadWasm(fs *flag.FlagSet, path string, log *slog.Logger) (*web.WasmModule, error) {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "wasm" })
	if path == "" {
		log.Info("no wasm client configured: the join page cannot start")
		return nil, nil
	}
	if !given {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			log.Info("no wasm client at the default path: the join page cannot start", "path", path)
			return nil, nil
		}
	}
	m, err := web.LoadWasm(path)
	if err != nil {
		return nil, err
	}
	log.Info("serving the wasm client", "path", path, "sha256", m.SHA256(), "bytes", m.Size(), "gzip_bytes", m.GzipSize())
	return m, nil
}

func run(args []string) error {
	fs := flag.NewFlagSet("relay", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:8081", "listen address")
	edgeOf := fs.String("edge-of", "", "run as an edge of the relay at this URL (its internal address, or the relays' load balancer): hold volunteers' websockets and hand their secure-summation reports to it; no state, no keys (docs/deploy.md, \"Relay edges\")")
	edgeName := fs.String("edge-name", "", "this edge's name in the owning relay's logs (default: the listen address)")
	agg := fs.String("aggregator", "http://127.0.0.1:8080", "aggregator base URL")
	token := fs.String("token", "", "bearer token shared with the aggregator")
	tokenFile := fs.String("token-file", "", "file holding the bearer token (instead of -token)")
	state := fs.String("state", "relay-state", "state directory (persisted batches)")
	var store serverstore.Config
	serverstore.AddFlags(fs, &store, serverstore.RelaySchema)
	origins := fs.String("origins", "", "comma-separated extra allowed websocket origins (scheme://host[:port]); same-host and native clients (no Origin) are always allowed")
	wasmPath := fs.String("wasm", defaultWasm, "the wasm client served at /blanket.wasm (\"\": none; the default is used only if the file exists)")
	warmup := fs.Duration("warmup", 5*time.Second, "after a restart that interrupted a round or left frames undelivered, refuse announcements this long so volunteers reconnect first (the aggregator retries)")
	keyRefresh := fs.Duration("key-refresh", time.Minute, "how often to refetch the aggregator's public key for GET /api/key and the join page")
	targetEps := fs.Float64("target-epsilon", 750, "secure summation: the relay's own budget for the noise it adds (its noise ledger, noise-ledger.jsonl in -state, refuses to prepare or noise a round past it); set it to the target the aggregator announces (the aggregator's -epsilon; 750 is its default)")
	targetDelta := fs.Float64("target-delta", 1e-5, "secure summation: the delta at which the relay's noise ledger composes (the aggregator's -delta); an announcement with another target is refused")
	minBatch := fs.Int("min-batch", 3, "the relay's own minimum batch: a round with fewer complete (shuffle) or accepted (secure summation) reports is aborted whatever the aggregator announces (set it to the task's; no announcement lowers it)")
	maxRejected := fs.Float64("max-rejected-share", roundspec.DefaultMaxRejectedShare, "secure summation: the relay releases nothing for a round in which more than this share of the reports failed the aggregator's verification (honest reports fail with probability about 2^-101)")
	opsListen := fs.String("ops-listen", "", "operator-only listen address (e.g. 127.0.0.1:9101) serving GET /metrics with the Go runtime and process series besides the relay's own; keep it off the public network: memory and CPU follow the relay's work, dummies included (docs/deploy.md). Empty: none")
	prepJobs := fs.Bool("prep-jobs", false, "with -store: spread the helper's preparation of secure summation's reports over the relay's replicas as jobs leased through PostgreSQL (this relay, a -standby while it waits, and any relay prep-worker; docs/deploy.md)")
	prepLease := fs.Duration("prep-lease", prepjob.DefaultLease, "with -prep-jobs: how long a replica holds a batch's job before another may take it over")
	prepHelpAfter := fs.Duration("prep-help-after", 0, "with -prep-jobs: how long this relay leaves its batches to the other replicas before preparing them itself (0: it prepares beside them at once)")
	fs.String("config", "", "configuration file: one `name = value` per line, the names being these flags' (docs/deploy.md); flags on the command line win")
	if err := flagfile.Parse(fs, args, "config"); err != nil {
		return err
	}
	tok := *token
	if *tokenFile != "" {
		if tok != "" {
			return errors.New("give -token or -token-file, not both")
		}
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			return err
		}
		tok = strings.TrimSpace(string(b))
	}
	if tok == "" {
		return errors.New("a token is required (-token or -token-file)")
	}
	var allowed []string
	for o := range strings.SplitSeq(*origins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			allowed = append(allowed, o)
		}
	}
	if *warmup < 0 {
		return errors.New("-warmup must not be negative")
	}
	if *keyRefresh <= 0 {
		return errors.New("-key-refresh must be positive")
	}
	floor := roundspec.Floor{MinBatch: *minBatch, MaxRejectedShare: *maxRejected}
	if err := floor.Validate(); err != nil {
		return fmt.Errorf("-min-batch %d, -max-rejected-share %v: %w", *minBatch, *maxRejected, err)
	}
	if !(*targetEps > 0) || !(*targetDelta > 0 && *targetDelta < 1) {
		return fmt.Errorf("-target-epsilon %v must be positive and -target-delta %v in (0, 1)", *targetEps, *targetDelta)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if *edgeOf != "" && *prepJobs {
		return errors.New("-prep-jobs with -edge-of: an edge holds no key; give -prep-jobs to the owning relay and run `relay prep-worker -store ...` on the relay's own machines (docs/deploy.md)")
	}
	if *edgeOf != "" {
		name := *edgeName
		if name == "" {
			name = *listen
		}
		return runEdge(edge.Config{Owner: *edgeOf, Token: tok, Name: name, Logger: log, Origins: allowed}, *listen)
	}
	wasm, err := loadWasm(fs, *wasmPath, log)
	if err != nil {
		return err
	}
	// One transactional store for the relay's state (the outbox, the
	// helper key, the shuffle rounds' acknowledged frames, the noise
	// ledger and the aggregator's head); a state
	// directory of the former format is imported on the first start.
	store.Dir = *state
	if *prepJobs && store.URL == "" {
		return errors.New("-prep-jobs needs the PostgreSQL store (-store): the replicas share the jobs through it")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A standby with -prep-jobs prepares the owner's reports while it
	// waits; the job under way is completed before it takes over.
	var prepping sync.WaitGroup
	pctx, stopPrep := context.WithCancel(ctx)
	if store.Standby && *prepJobs {
		prepping.Go(func() {
			pw := prepjob.NewWorker(nil, nil, 0, *prepLease, log)
			err := prepjob.Serve(pctx, store.URL, store.Schema, pw)
			log.Info("the standby stopped preparing reports", "jobs", pw.Done(), "failed", pw.Failed(), "err", err)
		})
	}
	// A hot standby (-standby) waits here, not listening, until the
	// relay that owns the schema is gone; a store lost for good (another
	// relay took the schema, or a commit of unknown outcome) stops this
	// one, for its supervisor to start it again (docs/deploy.md).
	turn, err := serverstore.AwaitTurn(ctx, store, log)
	stopPrep()
	prepping.Wait()
	if err != nil {
		return err
	}
	defer turn.Release()
	lost := make(chan error, 1)
	store.OnLost = func(err error) {
		select {
		case lost <- err:
		default:
		}
	}
	st, err := relaystore.OpenIn(ctx, store, &datastore.Options{Logger: log})
	if err != nil {
		return err
	}
	defer st.Close()
	hk, created, err := st.HelperKey()
	if err != nil {
		return err
	}
	if created {
		log.Info("generated the secure-summation helper key", "store", store.String())
	}
	// The noise ledger and the aggregator's head are in the store too
	// (the former noise-ledger.jsonl and peer-anchor imported once).
	nl, err := ledger.OpenNoiseStore(st.DB(), *state, ledger.Options{TargetEpsilon: *targetEps, TargetDelta: *targetDelta, Logger: log})
	if err != nil {
		return err
	}
	defer nl.Close()
	var prepareApart func(context.Context, sumrelay.Apart, [][]byte) ([]*secagg.Prep, error)
	var prepJobsDone func() int64
	if *prepJobs {
		jobs, err := pgstore.OpenJobs(ctx, store.URL, store.Schema, log)
		if err != nil {
			return err
		}
		defer jobs.Close()
		// A former owner's jobs (their results hold helper output
		// shares) are of no use to anyone now: its rounds' streams died
		// with it.
		if err := jobs.RemoveEarlierRounds(ctx, prepjob.Kind, math.MaxInt64); err != nil {
			log.Warn("removing a former owner's jobs", "err", err)
		}
		prep := prepjob.NewPreparer(hk)
		off := &prepjob.Offload{JobOffload: pgstore.JobOffload{W: prepjob.NewWorker(jobs, prep, 0, *prepLease, log), HelpAfter: *prepHelpAfter}, Prep: prep}
		prepJobsDone = off.W.Done
		prepareApart = func(ctx context.Context, r sumrelay.Apart, sealed [][]byte) ([]*secagg.Prep, error) {
			return off.Prepare(ctx, prepjob.Round{Round: r.Num, Params: r.Params, VerifyKey: r.VerifyKey}, r.Round, sealed)
		}
		log.Info("the helper's preparation is spread over the relay's replicas (-prep-jobs)", "helper_key", prepjob.Fingerprint(hk))
	}
	srv, err := server.New(server.Config{
		PrepareApart: prepareApart,
		PrepJobsDone: prepJobsDone,
		NoiseLedger:  nl,
		HelperKey:    hk,
		Aggregator:   *agg,
		Token:        tok,
		Outbox:       st,
		StoreStats:   st.DB().Stats,
		Ready:        []readiness.Check{readiness.Store(st.DB()), readiness.Ledger("noise ledger", nl)},
		Reports:      st,
		Origins:      allowed,
		Logger:       log,
		Wasm:         wasm,
		KeyRefresh:   *keyRefresh,
		Warmup:       *warmup,
		Floor:        floor,
		// The target the relay agreed to: an announcement with another is
		// refused (both ledgers compose at one δ).
		TargetEpsilon: *targetEps,
		TargetDelta:   *targetDelta,
	})
	if err != nil {
		return err
	}
	// Ledgers that anchor each other (docs/threat-model.md): a noise
	// ledger behind the head the aggregator holds is refused here; an
	// aggregator that cannot be asked leaves the ledger suspended until
	// Run's check passes.
	if err := srv.CheckAnchor(ctx); errors.Is(err, ledger.ErrRollback) {
		return fmt.Errorf("refusing to start: %w", err)
	} else if err != nil {
		log.Warn("cannot check the noise ledger against the aggregator yet; refusing to noise until it can", "err", err)
	}
	hs := &http.Server{
		Addr:              *listen,
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
	}
	if *opsListen != "" {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", metrics.Handler(srv.Snapshot, true))
		ops := &http.Server{Addr: *opsListen, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			log.Info("operator metrics listening", "addr", *opsListen)
			if err := ops.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("operator metrics listener stopped", "err", err)
			}
		}()
		defer ops.Close()
	}
	runDone := make(chan error, 1)
	go func() { runDone <- srv.Run(ctx) }()
	serveErr := make(chan error, 1)
	go func() {
		log.Info("relay listening", "addr", *listen, "aggregator", *agg, "state", *state)
		serveErr <- hs.ListenAndServe()
	}()
	turn.Release() // the store is open: the next standby may line up
	var lostErr error
	select {
	case err := <-serveErr:
		stop()
		<-runDone
		return err
	case <-ctx.Done():
	case lostErr = <-lost:
		log.Error("the store is lost; stopping (a supervisor starts the relay again on the durable state, or a standby takes over)", "err", lostErr)
		stop()
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = hs.Shutdown(sctx) // stops accepting; websocket connections are closed by Run
	<-runDone
	if lostErr != nil {
		return fmt.Errorf("store lost: %w", lostErr)
	}
	if err != nil {
		return err
	}
	return nil
}

// runEdge serves an edge relay (relay/internal/edge) on listen until
// SIGINT or SIGTERM.
func runEdge(cfg edge.Config, listen string) error {
	e, err := edge.New(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hs := &http.Server{Addr: listen, Handler: e.Handler(), ReadHeaderTimeout: 10 * time.Second}
	runDone := make(chan error, 1)
	go func() { runDone <- e.Run(ctx) }()
	serveErr := make(chan error, 1)
	go func() {
		cfg.Logger.Info("edge relay listening", "addr", listen, "owner", cfg.Owner)
		serveErr <- hs.ListenAndServe()
	}()
	select {
	case err := <-serveErr:
		stop()
		<-runDone
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = hs.Shutdown(sctx)
	<-runDone
	return err
}

// prepWorker is `relay prep-worker`: prepjob.Serve until a signal.
func prepWorker(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return jobops.Main(ctx, args, os.Stderr, jobops.Worker{Name: "relay prep-worker", Party: "relay",
		Schema: serverstore.RelaySchema, Unit: "batch", Prefix: metrics.Prefix, Lease: prepjob.DefaultLease,
		New: func(workers int, lease time.Duration, log *slog.Logger) *pgstore.JobWorker {
			return prepjob.NewWorker(nil, nil, workers, lease, log)
		},
		Serve: prepjob.Serve})
}
