// Command aggregator is Blanket's analyzer: it announces signed rounds to
// the relay, receives each round's shuffled batch (or secure summation's
// shares), charges the privacy ledger before anything is opened, decrypts,
// debiases, updates and evaluates the model, and serves the JSON API, the
// dashboard and the operator controls (package server).
//
//	aggregator [flags]            run the aggregator service with a relay
//	aggregator serve [flags]      the same
//	aggregator audit [flags]      attack the shuffle protocols and compare the
//	                              empirical lower bound on epsilon with the charge
//	aggregator task check FILE    list every problem of a task definition and
//	                              of the public CSV files it names
//	aggregator task plan FILE     the noise over the signal per round at each
//	                              crowd size, before recruiting
//	aggregator export-ledger      the ledger in a state directory, in its file
//	                              format, for an auditor
//
// Run `aggregator -h` or `aggregator audit -h` for the flags. The research
// tools (the in-process experiments and the accountant's tables) are not
// part of this binary: `go run ./aggregator/lab simulate|privacy`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/audit"
	"github.com/blanket-fl/blanket/aggregator/internal/classtask"
	"github.com/blanket-fl/blanket/aggregator/internal/opsview"
	"github.com/blanket-fl/blanket/aggregator/internal/params"
	"github.com/blanket-fl/blanket/aggregator/internal/prepjob"
	"github.com/blanket-fl/blanket/aggregator/internal/server"
	"github.com/blanket-fl/blanket/shared/dataset/sample"
	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/datastore/pgstore"
	"github.com/blanket-fl/blanket/shared/datastore/pgstore/jobops"
	"github.com/blanket-fl/blanket/shared/datastore/serverstore"
	"github.com/blanket-fl/blanket/shared/flagfile"
	"github.com/blanket-fl/blanket/shared/ledger"
	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/task"
	"github.com/blanket-fl/blanket/shared/task/taskdata"
	"github.com/blanket-fl/blanket/shared/wire"
	"github.com/blanket-fl/blanket/web"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches: `audit`, `serve`, or flags (serve).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		return serve(ctx, args, stdout, stderr)
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stdout, stderr)
	case "audit":
		return audit.Main(ctx, args[1:], stdout, stderr)
	case "task":
		return taskMain(args[1:], stdout, stderr)
	case "export-ledger":
		return exportLedger(args[1:], stdout, stderr)
	case "prep-worker":
		return prepWorker(ctx, args[1:], stderr)
	case "help":
		usage(stdout)
		return 0
	case "simulate", "privacy":
		fmt.Fprintf(stderr, "aggregator: %s is a research tool, not part of the aggregator: go run ./aggregator/lab %s\n", args[0], args[0])
		return 2
	}
	if strings.HasPrefix(args[0], "-") {
		return serve(ctx, args, stdout, stderr)
	}
	fmt.Fprintf(stderr, "aggregator: unknown subcommand %q\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, `usage: aggregator [serve] [flags]
       aggregator audit [flags]
       aggregator task check FILE [FILE...]
       aggregator task plan [-volunteers N] [-epsilon E] [-rounds R] FILE
       aggregator export-ledger -state DIR | -store postgres://... > ledger.jsonl
       aggregator prep-worker -store postgres://... [-store-schema S] [-workers N]

  [serve]    run the aggregator service: announce rounds to the relay, receive,
             account, decrypt and aggregate batches, serve the JSON API
  audit      attack every announceable shuffle protocol on neighbouring inputs and
             print the empirical lower bound on epsilon next to the charged epsilon
  task check list every problem of each task definition and of the public CSV
             files it names (holdout, simulation); exit status 1 if any
  task plan  before recruiting: the noise over the largest signal of a round at
             each crowd size, from the task's d and the privacy budget alone
  export-ledger  write the privacy ledger held in a state directory's datastore, or in
             a PostgreSQL store (-store, -store-schema), in its file format (one hash-chained JSON line per round: shared/ledger), for
             an auditor; read-only, safe while the aggregator runs
  prep-worker  a replica that only prepares secure summation's chunks, leased from
             the PostgreSQL schema of an aggregator run with -prep-jobs

research tools (not in this binary): go run ./aggregator/lab simulate|privacy`)
}

// prepWorker is `aggregator prep-worker`: prepjob.Serve until a signal.
func prepWorker(ctx context.Context, args []string, stderr io.Writer) int {
	return jobops.Main(ctx, args, stderr, jobops.Worker{Name: "aggregator prep-worker", Party: "aggregator",
		Schema: serverstore.AggregatorSchema, Unit: "chunk", Prefix: opsview.Prefix, Lease: prepjob.DefaultLease,
		New: func(workers int, lease time.Duration, log *slog.Logger) *pgstore.JobWorker {
			return prepjob.NewWorker(nil, nil, workers, lease, log)
		},
		Serve: prepjob.Serve})
}

// exportLedger is `aggregator export-ledger -state DIR`: the ledger in
// DIR's datastore, in the file format, on stdout (ledger.ExportDir).
func exportLedger(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("export-ledger", flag.ContinueOnError)
	fs.SetOutput(stderr)
	state := fs.String("state", "", "the aggregator's state directory (its embedded store)")
	var store serverstore.Config
	fs.StringVar(&store.URL, "store", "", "the aggregator's PostgreSQL store, postgres://... (instead of -state)")
	fs.StringVar(&store.Schema, "store-schema", serverstore.AggregatorSchema, "its schema (with -store)")
	if err := fs.Parse(args); err != nil || (*state == "") == (store.URL == "") || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "usage: aggregator export-ledger -state DIR > ledger.jsonl\n       aggregator export-ledger -store postgres://... [-store-schema S] > ledger.jsonl")
		return 2
	}
	var err error
	if store.URL != "" {
		// A read-only snapshot, beside the running aggregator (no lock).
		store.Dir = "-"
		if err = store.Validate(); err == nil {
			var st map[string]map[string][]byte
			if st, err = pgstore.ReadBuckets(context.Background(), store.URL, store.Schema, ledger.ExportBuckets); err == nil {
				_, err = ledger.ExportState(st, stdout)
			}
		}
	} else if loc, rerr := os.ReadFile(filepath.Join(*state, datastore.LocationFile)); rerr == nil {
		err = fmt.Errorf("%s keeps its state in PostgreSQL (%s): give -store and -store-schema", *state, strings.TrimSpace(string(loc)))
	} else {
		_, err = ledger.ExportDir(*state, stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "aggregator: export-ledger:", err)
		return 1
	}
	return 0
}

// serve runs the aggregator service (`aggregator [serve] [flags]`) and
// returns the exit code: 0 after a clean
// shutdown (ctx cancelled), 2 for invalid flags, 1 for any other failure.
func serve(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("aggregator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		usage(stderr)
		fmt.Fprintf(stderr, "\n"+
			"serve runs the aggregator (analyzer): announces signed rounds to the relay, receives each\n"+
			"round's shuffled batch, charges the privacy ledger, decrypts, debiases, updates and\n"+
			"evaluates the model, and serves the JSON API (/api/status, /api/rounds, /api/key,\n"+
			"/api/model). Defaults: SS-Topk, Laplace, k = d/50, n_p = ceil(n/10), l by FLAME\n"+
			"Theorem 5, eps_l = 78.5, C = 0.01, for about -expected-n clients per round.\n\nflags:\n")
		fs.PrintDefaults()
	}
	listen := fs.String("listen", "127.0.0.1:8080", "HTTP listen address")
	relay := fs.String("relay", "http://127.0.0.1:8081", "relay base URL")
	anchor := fs.Bool("anchor", true, "check the privacy ledger at start against the head the relay holds and exchange ledger heads with it (docs/threat-model.md); off only for a relay that predates it")
	token := fs.String("token", "", "relay-aggregator bearer token (prefer -token-file)")
	tokenFile := fs.String("token-file", "", "file holding the bearer token")
	stateDir := fs.String("state", "aggregator-state", "state directory (key, ledger, checkpoint)")
	var store serverstore.Config
	serverstore.AddFlags(fs, &store, serverstore.AggregatorSchema)
	rounds := fs.Int("rounds", 0, "stop after this many completed rounds (0: until the privacy budget)")
	roundTimeout := fs.Duration("round-timeout", 60*time.Second, "time from announcement to deadline")
	grace := fs.Duration("batch-grace", 60*time.Second, "wait after the deadline for the batch before abandoning the round")
	epsilon := fs.Float64("epsilon", params.DefaultTargetEpsilon, "target central epsilon of the privacy ledger")
	delta := fs.Float64("delta", params.DefaultTargetDelta, "target central delta")
	expected := fs.Int("expected-n", params.DefaultExpectedClients, "expected reporting clients per round (sets n_p, l and the budget check)")
	protocol := fs.String("protocol", "ss-topk", "ss-simple, ss-double, ss-topk, secagg (secure summation, docs/secagg.md), apes or s-apes (personal budgets, docs/privacy.md)")
	rz := fs.String("randomizer", "laplace", "laplace, rgb or gaussian (apes, s-apes: clip-laplace, the default for them)")
	k := fs.Int("k", 0, "coordinates perturbed per client (default d/50; d for ss-simple and apes; s-apes: b, the coordinates kept, default d/50)")
	l := fs.Int("l", 0, "ss-topk groups (default: FLAME Theorem 5 from n and n_p)")
	width := fs.Int("width", 0, "entries per message (default k; d for ss-simple)")
	np := fs.Int("np", 0, "padding per dimension (default ceil(n/3); n for ss-simple, apes and s-apes)")
	buckets := fs.Int("buckets", 0, "rgb buckets b")
	minBatch := fs.Int("min-batch", 0, fmt.Sprintf("fewest reports for a round (default %d)", params.DefaultMinBatch))
	quota := fs.Int("quota", 0, "close a round early at this many reports (0: none; ss-simple: n_p; secagg: 2 x -expected-n)")
	epsL := fs.Float64("epsl", 0, fmt.Sprintf("local budget eps_l of one report (apes, s-apes: the largest a volunteer may choose; default %g per coordinate of the default k = d/50: %g at d = 7850)", roundspec.DefaultCoordinateEpsilon, params.DefaultEpsL))
	deltaL := fs.Float64("deltal", 0, "local delta of one report (gaussian)")
	clip := fs.Float64("clip", params.DefaultClip, fmt.Sprintf("clipping bound C (secagg: the update's L2 clip, default %g)", roundspec.DefaultSecAggClip))
	checkIn := fs.Float64("checkin-p", 1, "check-in probability p")
	fs.Float64Var(checkIn, "check-in", 1, "check-in rate q (the same as -checkin-p)")
	sigma := fs.Float64("sigma", 0, "secagg: each server's discrete Gaussian sigma in grid units (0: the smallest with which -rounds rounds at the check-in rate fit -epsilon/-delta)")
	bits := fs.Int("bits", 0, "secagg: must be 0 (secure summation is PINE, which has no bits per entry)")
	serverLR := fs.Float64("server-lr", 0, "server learning rate (default d/k for ss-topk as FLAME's code, 1 otherwise)")
	taskFile := fs.String("task", "", "task definition file (docs/tasks.md; default: the built-in digits task); its suggested privacy parameters are the defaults of -protocol, -epsilon, -delta and -rounds")
	data := fs.String("data", sample.Name, "the digits task's data set: "+strings.Join(sample.Names(), ", "))
	dataDir := fs.String("data-dir", "", "data directory for on-disk data sets")
	workers := fs.Int("workers", 0, "decryption goroutines (0: GOMAXPROCS)")
	prepJobs := fs.Bool("prep-jobs", false, "with -store: spread secure summation's chunk preparation over the aggregator's replicas as jobs leased through PostgreSQL (this aggregator, a -standby while it waits, and any aggregator prep-worker; docs/deploy.md)")
	prepLease := fs.Duration("prep-lease", prepjob.DefaultLease, "with -prep-jobs: how long a replica holds a chunk's job before another may take it over")
	prepHelpAfter := fs.Duration("prep-help-after", 0, "with -prep-jobs: how long this aggregator leaves its chunks to the other replicas before preparing them itself (0: it prepares beside them at once)")
	auditTrials := fs.Int("audit-trials", 0, "audit each announced configuration in the background with this many trials per hypothesis (>= 10; about 50-100 is useful for the shuffle protocols, one core for minutes at d = 7850; secure summation always runs 200,000 cheap trials) and show the audited lower bound on epsilon next to the charge (0: off)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	joinURL := fs.String("join-url", server.DefaultJoinURL, "the relay's public URL for volunteers (dashboard and operator QR code)")
	opToken := fs.String("operator-token", "", "the operator password for the controls (prefer -operator-token-file; default: a random one, printed at start)")
	opTokenFile := fs.String("operator-token-file", "", "file holding the operator token")
	paused := fs.Bool("paused", false, "start paused: announce the first round after POST /operator/start")
	simulated := fs.Int("simulated", 0, "how many of the volunteers are simulated (make run's native cohort), for the dashboard's count of real and simulated volunteers")
	newClass := fs.Bool("new-class", false, "offer New class on the operator page: pause and report new_class_requested in /api/status for a supervisor (make run) to restart with a fresh state directory")
	wasmFile := fs.String("wasm", "", "wasm client module to serve at /blanket.wasm (the relay's, so both show one SHA-256)")
	fs.String("config", "", "configuration file: one `name = value` per line, the names being these flags' (docs/deploy.md); flags on the command line win")
	if err := flagfile.Parse(fs, args, "config"); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		if fe := (*flagfile.FileError)(nil); errors.As(err, &fe) {
			fmt.Fprintf(stderr, "aggregator: %v\n", err)
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "aggregator: unexpected arguments %q\n", fs.Args())
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(stderr, "aggregator: -log-level: %v\n", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "aggregator: "+format+"\n", a...)
		return code
	}

	tok := *token
	if *tokenFile != "" {
		if tok != "" {
			return fail(2, "give -token or -token-file, not both")
		}
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			return fail(2, "reading token: %v", err)
		}
		tok = strings.TrimSpace(string(b))
	}
	optok := *opToken
	if *opTokenFile != "" {
		if optok != "" {
			return fail(2, "give -operator-token or -operator-token-file, not both")
		}
		b, err := os.ReadFile(*opTokenFile)
		if err != nil {
			return fail(2, "reading operator token: %v", err)
		}
		optok = strings.TrimSpace(string(b))
	}
	var wasm *web.WasmModule
	if *wasmFile != "" {
		m, err := web.LoadWasm(*wasmFile)
		if err != nil {
			return fail(1, "%v", err)
		}
		wasm = m
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	store.Dir = *stateDir
	if err := store.Validate(); err != nil {
		return fail(2, "%v", err)
	}
	if *prepJobs && store.URL == "" {
		return fail(2, "-prep-jobs needs the PostgreSQL store (-store): the replicas share the jobs through it")
	}
	// A hot standby (-standby) waits here, not listening, until the
	// aggregator that owns the schema is gone; a store lost for good
	// (another aggregator took the schema, or a commit of unknown outcome)
	// stops this one, for its supervisor to start it again
	// (docs/deploy.md).
	// A standby loads -task's task and maps its holdout while it waits, so
	// that a takeover does not wait for them (a class's own task, in the
	// store, is read after the takeover and replaces it).
	var pre chan preloaded
	if store.Standby {
		pre = make(chan preloaded, 1)
		go func() {
			var p preloaded
			p.tk, p.test, p.src, p.err = loadTask(nil, *taskFile, *data, *dataDir, set["data"])
			pre <- p
		}()
	}
	// A standby with -prep-jobs prepares the owner's chunks while it
	// waits; the job under way is completed before it takes over.
	var prepping sync.WaitGroup
	pctx, stopPrep := context.WithCancel(ctx)
	if store.Standby && *prepJobs {
		prepping.Go(func() {
			pw := prepjob.NewWorker(nil, nil, *workers, *prepLease, log)
			err := prepjob.Serve(pctx, store.URL, store.Schema, pw)
			log.Info("the standby stopped preparing chunks", "jobs", pw.Done(), "failed", pw.Failed(), "err", err)
		})
	}
	turn, err := serverstore.AwaitTurn(ctx, store, log)
	stopPrep()
	prepping.Wait()
	if err != nil {
		return fail(1, "%v", err)
	}
	defer turn.Release()
	lost := make(chan error, 1)
	store.OnLost = func(err error) {
		select {
		case lost <- err:
		default:
		}
	}
	tk, test, accSource, own, err := startTaskPre(store, *taskFile, *data, *dataDir, set["data"], pre, log)
	if err != nil {
		return fail(1, "%v", err)
	}
	if own || *taskFile != "" {
		suggest(tk.Privacy, set, protocol, epsilon, delta, rounds)
	}
	d := tk.D()
	log.Info("task", "name", tk.Name, "d", d, "features", tk.Inputs(), "classes", len(tk.Label.Classes), "accuracy_source", accSource)
	pf := params.Choice{
		Protocol: *protocol, Randomizer: *rz, K: *k, L: *l, Width: *width, NP: *np, Buckets: *buckets,
		MinBatch: *minBatch, Quota: *quota, EpsL: *epsL, DeltaL: *deltaL, Clip: *clip, CheckIn: *checkIn,
		ServerLR: *serverLR,
	}
	if p, err := wire.ParseProtocol(*protocol); err == nil && p.IsAPES() && !set["randomizer"] {
		pf.Randomizer = wire.RandomizerClipLaplace.String()
	}
	if *protocol == wire.ProtocolSecAgg.String() {
		params.SecAggRecipe(&pf, tk.Recipe(), set["clip"], set["server-lr"]) // the task's clip and server lr
		pf.Bits, pf.Sigma = *bits, *sigma
		// With count blocks the update gets (1 − share)·ε (params.WithCounts).
		if pf.Sigma, err = params.SecAggSigma(d, *expected, pf, *rounds, params.UpdateEpsilon(*protocol, tk.CountsPlan(), *epsilon), *delta); err != nil {
			return fail(2, "%v", err)
		}
	}
	rp, lr, err := params.Build(d, *expected, pf)
	if err != nil {
		return fail(2, "%v", err)
	}
	if rp, err = params.WithCounts(rp, tk.CountsPlan(), *rounds, *epsilon, *delta); err != nil {
		return fail(2, "%v", err)
	}
	srv, err := server.New(server.Config{
		PrepJobs: *prepJobs, PrepLease: *prepLease, PrepHelpAfter: *prepHelpAfter,
		Params: rp, RelayURL: *relay, Anchor: *anchor, Token: tok, StateDir: *stateDir, Store: store, Rounds: *rounds,
		RoundTimeout: *roundTimeout, BatchGrace: *grace, TargetEpsilon: *epsilon, TargetDelta: *delta,
		ExpectedN: *expected, ServerLR: lr, Test: test, Task: tk, Workers: *workers, AuditTrials: *auditTrials, Logger: log,
		Web: server.WebOptions{JoinURL: *joinURL, OperatorToken: optok, StartPaused: *paused, Wasm: wasm, NewClass: *newClass, Simulated: *simulated},
	})
	if err != nil {
		return fail(1, "%v", err)
	}
	defer srv.Close()
	fmt.Fprintf(stdout, "aggregator key fingerprint: %s\n", srv.Fingerprint())
	if optok == "" {
		fmt.Fprintf(stdout, "operator password (made up for this run; -operator-token-file to choose one): %s\n", srv.OperatorToken())
	}

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fail(1, "listen: %v", err)
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	hs.RegisterOnShutdown(srv.CloseEvents) // end the /events streams so Shutdown does not wait for them
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()
	log.Info("listening", "addr", ln.Addr().String(), "relay", *relay)

	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	runErr := make(chan error, 1)
	go func() { runErr <- srv.Run(runCtx) }()

	turn.Release() // the store is open: the next standby may line up
	code := 0
	select {
	case <-ctx.Done():
	case err := <-lost:
		log.Error("the store is lost; stopping (a supervisor starts the aggregator again on the durable state, or a standby takes over)", "err", err)
		code = 1
	case err := <-serveErr:
		log.Error("http server stopped", "err", err)
		code = 1
	case err := <-runErr:
		if err != nil {
			log.Error("round loop failed", "err", err)
			code = 1
		} else {
			log.Info("no further rounds; serving the API until interrupted")
			select {
			case <-ctx.Done():
			case err := <-lost:
				log.Error("the store is lost; stopping", "err", err)
				code = 1
			case err := <-serveErr:
				log.Error("http server stopped", "err", err)
				code = 1
			}
		}
		runErr <- nil
	}
	cancelRun()
	shutCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := hs.Shutdown(shutCtx); err != nil {
		log.Warn("http shutdown", "err", err)
	}
	<-runErr
	log.Info("aggregator stopped")
	return code
}

// startTask returns the task the aggregator starts with and its holdout
// (loadTask): the class's own task if its datastore in stateDir holds one
// (chosen on the operator page for it, and stored there by the supervisor
// that started the class; a former task directory is imported once:
// classtask.AtStart), in place of -task (own is true); else -task's.
func startTask(stateDir, taskPath, data, dataDir string, dataSet bool, log *slog.Logger) (tk *task.Task, test logreg.Dataset, src string, own bool, err error) {
	return startTaskIn(serverstore.Config{Dir: stateDir}, taskPath, data, dataDir, dataSet, log)
}

// preloaded is -task's task and holdout, loaded by a standby while it
// waits (loadTask).
type preloaded struct {
	tk   *task.Task
	test logreg.Dataset
	src  string
	err  error
}

// startTaskIn is startTask on the store the -store flags say.
func startTaskIn(store serverstore.Config, taskPath, data, dataDir string, dataSet bool, log *slog.Logger) (tk *task.Task, test logreg.Dataset, src string, own bool, err error) {
	return startTaskPre(store, taskPath, data, dataDir, dataSet, nil, log)
}

// startTaskPre is startTaskIn with -task's task perhaps loaded already
// (pre, nil: not), used unless the class has its own.
func startTaskPre(store serverstore.Config, taskPath, data, dataDir string, dataSet bool, pre <-chan preloaded, log *slog.Logger) (tk *task.Task, test logreg.Dataset, src string, own bool, err error) {
	st, err := classtask.AtStartIn(context.Background(), store, log)
	if err != nil {
		return nil, logreg.Dataset{}, "", false, err
	}
	if st != nil {
		if taskPath != "" {
			log.Info("this class's task (chosen on the operator page, in its datastore) replaces -task", "task", st.Task.Name, "flag", taskPath)
		}
		tk, test, src, err = loadTask(st, "", data, dataDir, dataSet)
		return tk, test, src, true, err
	}
	if pre != nil {
		p := <-pre
		return p.tk, p.test, p.src, false, p.err
	}
	tk, test, src, err = loadTask(nil, taskPath, data, dataDir, dataSet)
	return tk, test, src, false, err
}

// loadTask loads the task definition (st, the class's own task, or else
// task.Load of path: "" is the built-in digits task) and its public
// holdout (taskdata.Holdout): for the digits, the named data set's test
// part standardized with statistics of its public train part, exactly as
// the volunteers standardize their share; for a task without public test
// data, the model's shape only, and accuracy source "none". dataSet says
// -data was given: it chooses the built-in task's data set and is refused
// for any other task.
func loadTask(st *classtask.Stored, path, data, dataDir string, dataSet bool) (*task.Task, logreg.Dataset, string, error) {
	var tk *task.Task
	var dir string
	if st != nil {
		tk = st.Task
	} else {
		var err error
		if tk, dir, err = task.Load(path); err != nil {
			return nil, logreg.Dataset{}, "", err
		}
	}
	name := ""
	if dataSet {
		if tk.Source != task.SourceBuiltin {
			return nil, logreg.Dataset{}, "", fmt.Errorf("-data chooses a built-in task's data set; task %q brings its own (its holdout)", tk.Name)
		}
		name = data
	}
	var sets *taskdata.Sets
	var err error
	if st != nil { // the holdout only: the training part is not mapped (taskdata.OpenHoldout)
		sets, err = taskdata.OpenFilesHoldout(st.Task, st.Files, name, dataDir)
	} else {
		sets, err = taskdata.OpenHoldout(tk, dir, name, dataDir)
	}
	if err != nil {
		return nil, logreg.Dataset{}, "", err
	}
	test, src, err := taskdata.Holdout(tk, sets)
	if err != nil {
		return nil, logreg.Dataset{}, "", err
	}
	return tk, test, src, nil
}

// suggest applies a task's suggested privacy parameters to the flags the
// operator did not set.
func suggest(p task.Privacy, set map[string]bool, protocol *string, epsilon, delta *float64, rounds *int) {
	if p.Protocol != "" && !set["protocol"] {
		*protocol = p.Protocol
	}
	if p.Epsilon > 0 && !set["epsilon"] {
		*epsilon = p.Epsilon
	}
	if p.Delta > 0 && !set["delta"] {
		*delta = p.Delta
	}
	if p.Rounds > 0 && !set["rounds"] {
		*rounds = p.Rounds
	}
}
