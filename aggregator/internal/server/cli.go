package server

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
	"strings"
	"time"

	"github.com/blanket-fl/blanket/shared/dataset"
	"github.com/blanket-fl/blanket/shared/dataset/sample"
	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/wire"
	"github.com/blanket-fl/blanket/web"
)

// Main runs `aggregator serve` and returns the exit code: 0 after a clean
// shutdown (ctx cancelled), 2 for invalid flags, 1 for any other failure.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: aggregator serve [flags]\n\n"+
			"Runs the aggregator (analyzer): announces signed rounds to the relay, receives each\n"+
			"round's shuffled batch, charges the privacy ledger, decrypts, debiases, updates and\n"+
			"evaluates the model, and serves the JSON API (/api/status, /api/rounds, /api/key,\n"+
			"/api/model). Defaults: SS-Topk, Laplace, k = d/50, n_p = ceil(n/3), l by FLAME\n"+
			"Theorem 5, eps_l = 78.5, C = 0.01, for about -expected-n clients per round.\n\nflags:\n")
		fs.PrintDefaults()
	}
	listen := fs.String("listen", "127.0.0.1:8080", "HTTP listen address")
	relay := fs.String("relay", "http://127.0.0.1:8081", "relay base URL")
	token := fs.String("token", "", "relay-aggregator bearer token (prefer -token-file)")
	tokenFile := fs.String("token-file", "", "file holding the bearer token")
	stateDir := fs.String("state", "aggregator-state", "state directory (key, ledger, checkpoint)")
	rounds := fs.Int("rounds", 0, "stop after this many completed rounds (0: until the privacy budget)")
	roundTimeout := fs.Duration("round-timeout", 60*time.Second, "time from announcement to deadline")
	grace := fs.Duration("batch-grace", 60*time.Second, "wait after the deadline for the batch before abandoning the round")
	epsilon := fs.Float64("epsilon", DefaultTargetEpsilon, "target central epsilon of the privacy ledger")
	delta := fs.Float64("delta", DefaultTargetDelta, "target central delta")
	expected := fs.Int("expected-n", DefaultExpectedClients, "expected reporting clients per round (sets n_p, l and the budget check)")
	protocol := fs.String("protocol", "ss-topk", "ss-simple, ss-double, ss-topk, secagg (secure summation, docs/secagg.md), apes or s-apes (personal budgets, docs/privacy.md)")
	rz := fs.String("randomizer", "laplace", "laplace, rgb or gaussian (apes, s-apes: clip-laplace, the default for them)")
	k := fs.Int("k", 0, "coordinates perturbed per client (default d/50; d for ss-simple and apes; s-apes: b, the coordinates kept, default d/50)")
	l := fs.Int("l", 0, "ss-topk groups (default: FLAME Theorem 5 from n and n_p)")
	width := fs.Int("width", 0, "entries per message (default k; d for ss-simple)")
	np := fs.Int("np", 0, "padding per dimension (default ceil(n/3); n for ss-simple, apes and s-apes)")
	buckets := fs.Int("buckets", 0, "rgb buckets b")
	minBatch := fs.Int("min-batch", 0, fmt.Sprintf("fewest reports for a round (default %d)", DefaultMinBatch))
	quota := fs.Int("quota", 0, "close a round early at this many reports (0: none; ss-simple: n_p; secagg: 2 x -expected-n)")
	epsL := fs.Float64("epsl", DefaultEpsL, "local budget eps_l of one report (apes, s-apes: the largest a volunteer may choose)")
	deltaL := fs.Float64("deltal", 0, "local delta of one report (gaussian)")
	clip := fs.Float64("clip", DefaultClip, fmt.Sprintf("clipping bound C (secagg: the update's L2 clip, default %g)", roundspec.DefaultSecAggClip))
	checkIn := fs.Float64("checkin-p", 1, "check-in probability p")
	fs.Float64Var(checkIn, "check-in", 1, "check-in rate q (the same as -checkin-p)")
	sigma := fs.Float64("sigma", 0, "secagg: each server's discrete Gaussian sigma in grid units (0: the smallest with which -rounds rounds at the check-in rate fit -epsilon/-delta)")
	bits := fs.Int("bits", roundspec.DefaultBits, "secagg: bits per quantized entry")
	serverLR := fs.Float64("server-lr", 0, "server learning rate (default d/k for ss-topk as FLAME's code, 1 otherwise)")
	data := fs.String("data", sample.Name, "test data set: "+strings.Join(sample.Names(), ", "))
	dataDir := fs.String("data-dir", "", "data directory for on-disk data sets")
	workers := fs.Int("workers", 0, "decryption goroutines (0: GOMAXPROCS)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	joinURL := fs.String("join-url", DefaultJoinURL, "the relay's public URL for volunteers (dashboard and operator QR code)")
	opToken := fs.String("operator-token", "", "the operator password for the controls (prefer -operator-token-file; default: a random one, printed at start)")
	opTokenFile := fs.String("operator-token-file", "", "file holding the operator token")
	paused := fs.Bool("paused", false, "start paused: announce the first round after POST /operator/start")
	simulated := fs.Int("simulated", 0, "how many of the volunteers are simulated (make run's native cohort), for the dashboard's count of real and simulated volunteers")
	newClass := fs.Bool("new-class", false, "offer New class on the operator page: pause and report new_class_requested in /api/status for a supervisor (make run) to restart with a fresh state directory")
	wasmFile := fs.String("wasm", "", "wasm client module to serve at /blanket.wasm (the relay's, so both show one SHA-256)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "aggregator serve: unexpected arguments %q\n", fs.Args())
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(stderr, "aggregator serve: -log-level: %v\n", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "aggregator serve: "+format+"\n", a...)
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
	test, err := loadTest(*data, *dataDir)
	if err != nil {
		return fail(1, "%v", err)
	}
	d := test.Shape().NumParams()
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	pf := paramFlags{
		protocol: *protocol, randomizer: *rz, k: *k, l: *l, width: *width, np: *np, buckets: *buckets,
		minBatch: *minBatch, quota: *quota, epsL: *epsL, deltaL: *deltaL, clip: *clip, checkIn: *checkIn,
		serverLR: *serverLR,
	}
	if p, err := wire.ParseProtocol(*protocol); err == nil && p.IsAPES() && !set["randomizer"] {
		pf.randomizer = wire.RandomizerClipLaplace.String()
	}
	if *protocol == wire.ProtocolSecAgg.String() {
		if !set["clip"] {
			pf.clip = 0 // roundspec.DefaultSecAggClip
		}
		pf.bits, pf.sigma = *bits, *sigma
		if pf.sigma, err = secaggSigma(d, *expected, pf, *rounds, *epsilon, *delta); err != nil {
			return fail(2, "%v", err)
		}
	}
	params, lr, err := buildParams(d, *expected, pf)
	if err != nil {
		return fail(2, "%v", err)
	}
	srv, err := New(Config{
		Params: params, RelayURL: *relay, Token: tok, StateDir: *stateDir, Rounds: *rounds,
		RoundTimeout: *roundTimeout, BatchGrace: *grace, TargetEpsilon: *epsilon, TargetDelta: *delta,
		ExpectedN: *expected, ServerLR: lr, Test: test, Workers: *workers, Logger: log,
		Web: WebOptions{JoinURL: *joinURL, OperatorToken: optok, StartPaused: *paused, Wasm: wasm, NewClass: *newClass, Simulated: *simulated},
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

	code := 0
	select {
	case <-ctx.Done():
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

// loadTest loads the named data set and returns its test part
// standardized with statistics of its train part (exactly as the clients
// standardize their share of the train part).
func loadTest(name, dir string) (logreg.Dataset, error) {
	train, test, err := sample.Open(name, dir)
	if err != nil {
		return logreg.Dataset{}, fmt.Errorf("open data set %q: %w", name, err)
	}
	z, err := dataset.FitStandardizer(train)
	if err != nil {
		return logreg.Dataset{}, fmt.Errorf("standardize: %w", err)
	}
	if test, err = z.Apply(test); err != nil {
		return logreg.Dataset{}, fmt.Errorf("standardize test set: %w", err)
	}
	shape := logreg.Shape{Features: test.Features, Classes: test.Classes}
	ds, err := logreg.NewDataset(shape, test.X, test.Y)
	if err != nil {
		return logreg.Dataset{}, fmt.Errorf("test set: %w", err)
	}
	return ds, nil
}

type paramFlags struct {
	protocol, randomizer                  string
	k, l, width, np, buckets, minBatch    int
	quota                                 int
	epsL, deltaL, clip, checkIn, serverLR float64
	// Secure summation: bits per entry and each server's sigma.
	bits  int
	sigma float64
}

// buildParams turns the flags into round parameters for a model of d
// parameters and about n clients per round, and the server learning rate:
// roundspec.Build, the one place protocol defaults are chosen (so only
// layouts with a privacy proof come out; -width other than 1 is refused).
func buildParams(d, n int, f paramFlags) (wire.Params, float64, error) {
	proto, err := wire.ParseProtocol(f.protocol)
	if err != nil {
		return wire.Params{}, 0, err
	}
	rz, err := wire.ParseRandomizer(f.randomizer)
	if err != nil {
		return wire.Params{}, 0, err
	}
	if n < 1 {
		return wire.Params{}, 0, fmt.Errorf("expected n must be >= 1, got %d", n)
	}
	if f.width != 0 && f.width != 1 {
		return wire.Params{}, 0, fmt.Errorf("-width %d: %w (only width 1 is announceable)", f.width, roundspec.ErrLayout)
	}
	o := roundspec.Options{
		Protocol: proto, Randomizer: rz, K: f.k, L: f.l, NP: f.np, Buckets: f.buckets,
		MinBatch: f.minBatch, Quota: f.quota, EpsL: f.epsL, DeltaL: f.deltaL, Clip: f.clip, CheckInP: f.checkIn,
		ServerLR: f.serverLR, NPRatio: DefaultNPRatio, Bits: f.bits, Sigma: f.sigma,
	}
	if proto == wire.ProtocolSSSimple && f.quota == 0 {
		// Every client reports every coordinate: a quota of n_p keeps
		// dimensions from overflowing.
		o.Quota = max(f.np, n)
	}
	return roundspec.Build(d, n, o)
}
