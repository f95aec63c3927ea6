// Command runlocal is `make run`: it builds the relay and the aggregator,
// starts both, spawns a simulated cohort of volunteers on the embedded
// digits (native clients over real websockets), and prints the global
// model's accuracy and the privacy spent after every round. The servers
// stay up after training ends, until Ctrl-C. No flags are needed; see -h.
//
// In a classroom, -lan serves on the laptop's network address, so that the
// QR code and the join link work on the students' phones, and -clients 0
// leaves the training to real students alone.
package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/blanket-fl/blanket/scripts/internal/cohort"
	"github.com/blanket-fl/blanket/scripts/internal/localrun"
	"github.com/blanket-fl/blanket/scripts/internal/procmem"
	"github.com/blanket-fl/blanket/shared/dataset/sample"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/task"
	"github.com/blanket-fl/blanket/shared/task/taskdata"
	"github.com/blanket-fl/blanket/shared/wire"
)

// volunteersMemory is the soft memory limit of this process (the
// simulated volunteers) unless GOMEMLIMIT says otherwise: the pool keeps
// about 2 x GOMAXPROCS reports of some 44 MB of transient buffers in
// preparation, and the idle volunteers hold about 0.2 MB each
// (BenchmarkVolunteerMemory); the limit makes the collector return the
// transient buffers before the heap doubles.
const volunteersMemory = 512 << 20

func main() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(volunteersMemory)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "runlocal:", err)
		os.Exit(1)
	}
}

// compressWasm writes the wasm module's brotli copy (a test that never
// serves a browser skips it).
var compressWasm = localrun.BrotliCopy

// options are the parsed flags.
type options struct {
	clients, students, rounds int
	workers                   int
	epsilon                   float64
	delta                     float64 // the task's δ, else 1e-5 (deltaFor): both servers compose at it
	roundTime                 time.Duration
	roundTimeSet              bool          // -round-time given: no sizing from the measured speed
	batchGrace                time.Duration // set by sizeRounds
	protocol, dir, class      string
	host, publicURL           string
	lan, resume, verbose      bool
	paused                    bool
	// taskFile is -task (docs/tasks.md; "" the built-in digits), tk the
	// task and sets its public data.
	taskFile string
	tk       *task.Task
	sets     *taskdata.Sets
	// given is the protocol, epsilon and rounds as the command line gave
	// them (zero: not given), whatever a task suggests (privacyFor).
	given cliPrivacy
}

// cliPrivacy is what the command line said of the privacy parameters.
type cliPrivacy struct {
	protocol string
	epsilon  float64
	rounds   int
}

// privacyFor returns the protocol, epsilon and rounds of a class that
// learns tk (nil: the digits): the command line's where it gave them,
// else tk's suggestions (task.Privacy), else the defaults of the live demo
// (docs/experiments.md, "Secure summation": with secure summation, 5
// rounds of 400 volunteers reach about 78% on the digits at epsilon 4,
// replace one volunteer, delta 1e-5; more rounds at the same budget need
// more noise per round; the shuffle protocols 30 rounds at 750).
func (o options) privacyFor(tk *task.Task) (protocol string, epsilon float64, rounds int) {
	var p task.Privacy
	if tk != nil {
		p = tk.Privacy
	}
	protocol, epsilon, rounds = o.given.protocol, o.given.epsilon, o.given.rounds
	if protocol == "" {
		protocol = cmp.Or(p.Protocol, "secagg")
	}
	if epsilon == 0 {
		epsilon = p.Epsilon
	}
	if rounds == 0 {
		rounds = p.Rounds
	}
	if rounds == 0 {
		rounds = 30
		if protocol == "secagg" {
			rounds = 5
		}
	}
	if epsilon == 0 {
		epsilon = 750
		if protocol == "secagg" {
			epsilon = 4
		}
	}
	return protocol, epsilon, rounds
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("runlocal", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.clients, "clients", 400, "simulated volunteers (0: real students only)")
	fs.IntVar(&o.students, "students", 20, "students expected to join from their phones (sets the padding and the minimum batch with -clients 0)")
	fs.IntVar(&o.rounds, "rounds", 0, "rounds to train (default 5 for secagg, 30 for the shuffle protocols; the privacy budget may stop it earlier); the pages stay up afterwards")
	fs.Float64Var(&o.epsilon, "epsilon", 0, "the privacy budget of the whole run at delta 1e-5 (default 4 for secagg, 750 for the shuffle protocols); secagg's noise is calibrated so that -rounds rounds fit it")
	fs.DurationVar(&o.roundTime, "round-time", 0, "the most a round waits for the volunteers who checked in (it closes as soon as their reports are in); default 30s, or more as measured for the simulated volunteers on this computer")
	fs.IntVar(&o.workers, "workers", 0, "simulated volunteers preparing a report at once (default 2 x the cores)")
	fs.StringVar(&o.protocol, "protocol", "", "secagg (secure summation through the relay, docs/secagg.md; the default, or the task's suggestion), ss-simple, ss-double or ss-topk (the FLAME shuffle protocols), apes or s-apes (each volunteer chooses its own budget, docs/privacy.md)")
	fs.StringVar(&o.dir, "dir", "out/run", "state directory; every class keeps its ledger under DIR/classes/")
	fs.StringVar(&o.class, "class", "", "the class (session) to use: a name under DIR/classes/ (default: a new class named by the date and time, or the latest with -resume)")
	fs.BoolVar(&o.resume, "resume", false, "continue the latest class (model, ledger) instead of starting a new one")
	fs.BoolVar(&o.lan, "lan", false, "serve on this computer's network address (detected) so that phones on the same Wi-Fi can join")
	fs.StringVar(&o.host, "host", "", "address to serve on (default 127.0.0.1; with -lan the detected network address)")
	fs.StringVar(&o.publicURL, "public-url", "", "join link for the QR code and the dashboard, if students reach the relay by another name or port")
	fs.BoolVar(&o.paused, "paused", false, "wait for Start on the operator page before the first round (the default with -clients 0)")
	fs.BoolVar(&o.verbose, "v", false, "show the relay's and the aggregator's logs")
	fs.StringVar(&o.taskFile, "task", "", "task definition file (docs/tasks.md; default: the built-in digits); the simulated volunteers share its simulation rows, and its suggested privacy parameters are the defaults of -protocol, -epsilon and -rounds")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.given = cliPrivacy{protocol: o.protocol, epsilon: o.epsilon, rounds: o.rounds}
	if err := o.loadTask(fs); err != nil {
		return o, err
	}
	o.protocol, o.epsilon, o.rounds = o.privacyFor(o.tk)
	o.delta = deltaFor(o.tk)
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case o.clients < 0:
		return o, fmt.Errorf("-clients must be >= 0, got %d", o.clients)
	case o.taskFile == "" && o.clients > 8000:
		return o, fmt.Errorf("-clients must be at most 8000 (the embedded digits hold 8,000 training examples), got %d", o.clients)
	case o.students < 1 && o.clients == 0:
		return o, errors.New("-clients 0 needs -students >= 1: with no simulated volunteers, the rounds are sized for the students")
	case o.students < 0:
		return o, fmt.Errorf("-students must be >= 0, got %d", o.students)
	case o.rounds < 0:
		return o, fmt.Errorf("-rounds must be >= 1, got %d", o.rounds)
	case o.epsilon < 0:
		return o, fmt.Errorf("-epsilon must be > 0, got %v", o.epsilon)
	case o.roundTime < 0:
		return o, fmt.Errorf("-round-time must be > 0, got %v", o.roundTime)
	case o.lan && o.host != "":
		return o, errors.New("give -lan or -host, not both")
	case o.class != "" && o.resume:
		return o, errors.New("give -class or -resume, not both")
	case o.class != "" && (strings.ContainsAny(o.class, `/\`) || o.class == "." || o.class == ".."):
		return o, fmt.Errorf("-class %q must be a plain name", o.class)
	}
	if o.publicURL != "" {
		u, err := url.Parse(o.publicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return o, fmt.Errorf("-public-url %q must be an http(s) URL", o.publicURL)
		}
	}
	if o.host != "" && net.ParseIP(o.host) == nil {
		return o, fmt.Errorf("-host %q must be an IP address", o.host)
	}
	o.roundTimeSet = set["round-time"]
	if o.roundTime == 0 {
		// The least a round waits: a browser volunteer's time to train
		// and report. sizeRounds raises it for the simulated volunteers
		// from their measured speed.
		o.roundTime = 30 * time.Second
	}
	o.batchGrace = 30 * time.Second
	if o.clients == 0 && !set["paused"] {
		o.paused = true
	}
	return o, nil
}

// loadTask reads -task and applies its suggestions to the flags not set:
// its protocol, epsilon and rounds; a task without simulation rows runs
// with real volunteers only (-clients 0) unless -clients says otherwise,
// which is then an error.
func (o *options) loadTask(fs *flag.FlagSet) error {
	if o.taskFile == "" {
		return nil
	}
	tk, dir, err := task.Load(o.taskFile)
	if err != nil {
		return err
	}
	if tk.Source == task.SourceBuiltin {
		// The simulated volunteers deal and map their own digits
		// (cohort.LoadShares), the aggregator maps its holdout: no sets
		// here (mapping the 10,000 digits is about 20 s of CPU).
		o.tk = tk
		return nil
	}
	sets, err := taskdata.Open(tk, dir, "", "")
	if err != nil {
		return err
	}
	o.tk, o.sets = tk, sets
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	rows := 0
	if sets.Train != nil {
		rows = sets.Train.Len()
	}
	switch {
	case rows == 0 && !set["clients"]:
		o.clients = 0 // real volunteers only: the task ships no data
	case o.clients > rows:
		return fmt.Errorf("-clients %d: task %q has %d simulation rows, at most one simulated volunteer per row", o.clients, tk.Name, rows)
	}
	return nil
}

// dataName says what the simulated volunteers train on.
func (o options) dataName() string {
	if o.tk == nil || o.tk.Source == task.SourceBuiltin {
		return "the embedded digits"
	}
	return fmt.Sprintf("task %q's simulation rows", o.tk.Name)
}

// deltaFor returns the δ of a class that learns tk (nil: the digits): the
// task's suggestion, else the aggregator's default 1e-5. runlocal passes it
// to both servers, so that the relay's noise ledger and the aggregator's
// ledger compose at one δ (the relay refuses an announcement with
// another).
func deltaFor(tk *task.Task) float64 {
	if tk != nil && tk.Privacy.Delta > 0 {
		return tk.Privacy.Delta
	}
	return roundspec.DefaultTargetDelta
}

// expected is the number of volunteers a round is sized for: the
// simulated volunteers, or the students expected when there are none.
func (o options) expected() int {
	if o.clients == 0 {
		return o.students
	}
	return o.clients
}

// minBatch is the rounds' minimum batch, passed to both servers (the
// relay's own floor is the same number): at most half of the expected
// volunteers when they are fewer than 40 (at least 3, so no round ever
// averages one or two volunteers' reports), else roundspec's default
// min(20, n).
func (o options) minBatch() int {
	n := o.expected()
	if n < 40 {
		return max(3, n/2)
	}
	return min(roundspec.DefaultMinBatch, n)
}

// aggregatorArgs sizes the rounds (expected, minBatch).
func (o options) aggregatorArgs() []string {
	n := o.expected()
	args := []string{"-protocol", o.protocol, "-rounds", strconv.Itoa(o.rounds), "-expected-n", strconv.Itoa(n),
		"-round-timeout", o.roundTime.String(), "-batch-grace", o.batchGrace.String(), "-simulated", strconv.Itoa(o.clients),
		"-epsilon", strconv.FormatFloat(o.epsilon, 'g', -1, 64), "-delta", strconv.FormatFloat(o.delta, 'g', -1, 64),
		"-min-batch", strconv.Itoa(o.minBatch())}
	if o.taskFile != "" {
		args = append(args, "-task", o.taskFile)
	}
	if o.protocol == "secagg" {
		// Every connected volunteer takes part (no amplification by
		// check-in claimed: the relay sees who sends shares).
		args = append(args, "-check-in", "1")
	}
	// The dashboard shows the privacy audit's lower bound next to the
	// charge (one core in the background; 50 trials for the shuffle
	// protocols, audit.SecAggTrials for secure summation, whose trials
	// are cheap).
	args = append(args, "-audit-trials", "50")
	if o.paused || o.clients > 0 {
		// With simulated volunteers, runlocal itself presses Start once
		// they are connected (startWhenConnected), so the first round is
		// not spent waiting for them.
		args = append(args, "-paused")
	}
	return args
}

// relayArgs: the relay enforces the same budget on the noise it adds (its
// own noise ledger, at the same δ) and the same minimum batch (its own
// floor): it agreed to this run's target and batch size, not the
// aggregator's word for them.
func (o options) relayArgs() []string {
	return []string{"-target-epsilon", strconv.FormatFloat(o.epsilon, 'g', -1, 64),
		"-target-delta", strconv.FormatFloat(o.delta, 'g', -1, 64), "-min-batch", strconv.Itoa(o.minBatch())}
}

// nextClass applies to o the privacy parameters of the task the operator
// chose for the next class (in the current class's datastore, read
// without changing it: localrun.ReadTask), where the command line did not
// give them (privacyFor), and says so; it reports whether they changed.
func (o *options) nextClass(classDir string, stdout io.Writer) bool {
	st, err := localrun.ReadTask(classDir, task.NextClassBucket)
	if err != nil {
		fmt.Fprintf(stdout, "the next class's task: %v\n", err)
		return false
	}
	if st == nil {
		return false // the new class keeps the current class's task
	}
	tk := st.Task
	protocol, epsilon, rounds := o.privacyFor(tk)
	delta := deltaFor(tk)
	if protocol == o.protocol && epsilon == o.epsilon && rounds == o.rounds && delta == o.delta {
		return false
	}
	o.protocol, o.epsilon, o.rounds, o.delta = protocol, epsilon, rounds, delta
	fmt.Fprintf(stdout, "task %q: %s, %d rounds, privacy budget epsilon %g (its suggestions where the command line gave none)\n",
		tk.Name, protocol, rounds, epsilon)
	return true
}

// roundTiming sizes the rounds of n simulated volunteers from the
// cohort's measured time per report on this machine, with its workers in
// parallel and the current competing load (cohort.ReportCost): the n
// reports take work = n·per. The round's cap (its announced deadline) is
// 3·work + 10 s, at least least (-round-time, default 30 s): the relay
// and the aggregator share the cores, and the load may grow after the
// measurement; a round closes as soon as every volunteer who checked in
// has reported (docs/protocol.md, "Closing a round"), so a generous cap
// costs nothing on a fast machine, and the aggregator stretches the next
// round's timeout after a round that ran out of time (driver.go). The
// aggregator's grace for the batch after the deadline is 2·work + 10 s, at
// least 30 s: the servers open and check n reports after the close.
func roundTiming(per time.Duration, n int, least time.Duration) (timeout, grace time.Duration) {
	work := per * time.Duration(n)
	timeout = max(least, (3*work + 10*time.Second).Round(time.Second))
	grace = max(30*time.Second, (2*work + 10*time.Second).Round(time.Second))
	return timeout, grace
}

// sizeRounds measures a simulated volunteer's report on this machine and
// sizes the rounds with roundTiming (unless -round-time was given), and
// says so.
func sizeRounds(ctx context.Context, o *options, stdout io.Writer) error {
	if o.clients == 0 {
		return nil
	}
	proto, err := wire.ParseProtocol(o.protocol)
	if err != nil {
		return err
	}
	opt := roundspec.Options{Protocol: proto, NPRatio: 10}
	if proto == wire.ProtocolSecAgg {
		opt.Sigma = 1 // the noise is the servers': it does not change a volunteer's cost
	}
	digits, err := task.Digits() // the rehearsal trains on the digits (cohort.LoadShares): their d
	if err != nil {
		return err
	}
	p, _, err := roundspec.Build(digits.D(), o.clients, opt)
	if err != nil {
		return fmt.Errorf("sizing the rounds: %w", err)
	}
	per, err := cohort.ReportCost(ctx, cohort.Config{PerUser: 8000 / o.clients, Seed: 1, Workers: o.workers}, p)
	if err != nil {
		return fmt.Errorf("sizing the rounds: %w", err)
	}
	timeout, grace := roundTiming(per, o.clients, o.roundTime)
	o.batchGrace = grace
	work := (per * time.Duration(o.clients)).Round(time.Second)
	if o.roundTimeSet {
		fmt.Fprintf(stdout, "the simulated volunteers prepare a report every %v here (%d at a time): %d need about %v a round; -round-time %v\n",
			per.Round(time.Millisecond), o.workersOrDefault(), o.clients, work, o.roundTime)
		return nil
	}
	o.roundTime = timeout
	fmt.Fprintf(stdout, "the simulated volunteers prepare a report every %v here (%d at a time): %d need about %v; a round closes when every report is in, at most %v after it starts\n",
		per.Round(time.Millisecond), o.workersOrDefault(), o.clients, work, timeout)
	return nil
}

func (o options) workersOrDefault() int {
	if o.workers > 0 {
		return o.workers
	}
	return cohort.DefaultWorkers()
}

// startWhenConnected waits until the relay counts want volunteers
// connected (or a minute passes), then presses Start with the operator
// password, as the teacher would.
func startWhenConnected(ctx context.Context, cl *localrun.Cluster, want int, password string) error {
	// After a minute the class starts with whoever is connected.
	if err := cl.WaitVolunteers(ctx, want, time.Minute); err != nil && ctx.Err() != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cl.AggregatorURL()+"/operator/start", nil)
	if err != nil {
		return err
	}
	req.Header.Set("X-Operator-Token", password)
	req.Header.Set("Origin", cl.AggregatorURL())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 400 {
		return fmt.Errorf("start: %s", resp.Status)
	}
	return nil
}

// classDir returns the aggregator state directory of the class to use:
// -class NAME, the latest class with -resume, else a new one named by the
// time. Earlier classes are never touched.
func classDir(root string, o options, now time.Time) (string, error) {
	classes := filepath.Join(root, "classes")
	switch {
	case o.class != "":
		return filepath.Join(classes, o.class), nil
	case o.resume:
		ents, err := os.ReadDir(classes)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("listing classes: %w", err)
		}
		var names []string
		for _, e := range ents {
			if e.IsDir() {
				names = append(names, e.Name())
			}
		}
		if len(names) == 0 {
			return "", fmt.Errorf("-resume: no class under %s yet", classes)
		}
		slices.Sort(names)
		return filepath.Join(classes, names[len(names)-1]), nil
	}
	return newClassDir(classes, now), nil
}

// newClassDir names a new class by the time, adding a suffix if the name
// is taken.
func newClassDir(classes string, now time.Time) string {
	base := filepath.Join(classes, now.Format("2006-01-02_150405"))
	dir := base
	for i := 2; ; i++ {
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			return dir
		}
		dir = base + "-" + strconv.Itoa(i)
	}
}

// password makes the operator password: 16 letters and digits without
// look-alikes (0/o, 1/l/i), in four groups so it can be read out and typed
// on a laptop; about 80 bits.
func password() string {
	const alphabet = "abcdefghjkmnpqrstuvwxyz23456789"
	var b strings.Builder
	var c [1]byte
	for n := 0; n < 16; {
		rand.Read(c[:]) // never fails (crypto/rand)
		if int(c[0]) >= 256/len(alphabet)*len(alphabet) {
			continue // rejection keeps every letter equally likely
		}
		if n > 0 && n%4 == 0 {
			b.WriteByte('-')
		}
		b.WriteByte(alphabet[int(c[0])%len(alphabet)])
		n++
	}
	return b.String()
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	began := time.Now()
	o, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	host := o.host
	if o.lan {
		if host, err = localrun.LANAddress(); err != nil {
			return err
		}
	}
	aggDir, err := classDir(o.dir, o, time.Now())
	if err != nil {
		return err
	}
	if !o.resume && o.class == "" {
		// A new class: batches the relay kept for an earlier class's
		// rounds must not reach this one's aggregator.
		if err := os.RemoveAll(filepath.Join(o.dir, "relay")); err != nil {
			return err
		}
	}
	if err := sizeRounds(ctx, &o, stdout); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "building the relay and the aggregator...")
	bins, err := localrun.Build(ctx, ".", filepath.Join("out", "bin"))
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "compressing the wasm client with brotli (about 30 s, once per build of it)...")
	if err := compressWasm(bins.Wasm); err != nil {
		return err
	}
	logs := io.Discard
	if o.verbose {
		logs = stderr
	}
	pw := password()
	cl, err := localrun.Start(ctx, bins, localrun.Options{
		Dir: o.dir, AggregatorDir: aggDir, Host: host, PublicURL: o.publicURL, OperatorToken: pw, NewClass: true,
		Stdout: logs, Stderr: logs,
		// No quota: a round stays open for -round-time so that a volunteer
		// who joins from a browser has time to train and report.
		AggregatorArgs: o.aggregatorArgs(),
		RelayArgs:      o.relayArgs(),
	})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(stdout, "stopping the aggregator and the relay...")
		cl.Stop()
	}()
	key, err := cohort.FetchKey(ctx, nil, cl.AggregatorURL(), "")
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\n  dashboard (project it):  %s\n  join page (students):    %s\n  operator controls:       %s\n  operator password:       %s\n  aggregator key fingerprint %s\n  class (ledger and model): %s\n\n",
		cl.DashboardURL(), cl.JoinURL(), cl.OperatorURL(), pw, key.Fingerprint(), aggDir)
	fmt.Fprintf(stdout, "the pages are up %.0f s after start (building included)\n", time.Since(began).Seconds())
	if host == "" || net.ParseIP(host).IsLoopback() {
		fmt.Fprintln(stdout, "only this computer can open these pages; for students' phones on the same Wi-Fi, run with -lan.")
	} else {
		fmt.Fprintln(stdout, "students on the same network join by scanning the QR code on the dashboard or opening the join page.")
	}
	if o.paused {
		fmt.Fprintln(stdout, "paused: press Start on the operator page when the students have joined.")
	}
	if o.clients > 0 {
		fmt.Fprintf(stdout, "%d simulated volunteers on %s, protocol %s, %d rounds; Ctrl-C to stop\n\n", o.clients, o.dataName(), o.protocol, o.rounds)
	} else {
		fmt.Fprintf(stdout, "no simulated volunteers: real students only (rounds sized for %d), protocol %s, %d rounds; Ctrl-C to stop\n\n", o.students, o.protocol, o.rounds)
	}

	cohortDone := make(chan error, 1)
	// startCohort runs the simulated volunteers on tk's simulation rows
	// (nil: the digits) until stopCohort; a new class of another task
	// (chosen on the operator page) gets new ones.
	stopCohort := func() {}
	startCohort := func(tk *task.Task, sets *taskdata.Sets) {
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			cc := cohort.Config{
				Relay: cl.WebSocketURL(), Key: key, Clients: o.clients, PerUser: 8000 / o.clients,
				Dataset: sample.Name, Seed: 1, Logger: slog.New(slog.DiscardHandler), Workers: o.workers,
			}
			var err error
			if tk != nil {
				cc.Train = tk.Recipe().Train() // the task's local epochs and lr
			}
			if tk != nil && tk.Source != task.SourceBuiltin {
				cc.Shares, err = taskdata.Shares(sets, o.clients, cc.Seed)
				cc.PerUser = 1
			}
			if err == nil {
				_, err = cohort.Run(cctx, cc)
			}
			if cctx.Err() == nil {
				select {
				case cohortDone <- err:
				default:
				}
			}
		}()
		stopCohort = func() { cancel(); <-done }
	}
	defer func() { stopCohort() }()
	if tk, sets, ok := o.cohortTask(cl, stdout); ok && o.clients > 0 {
		startCohort(tk, sets)
		if !o.paused {
			if err := startWhenConnected(ctx, cl, o.clients, pw); err != nil {
				return fmt.Errorf("starting the first round: %w", err)
			}
		}
	}

	printed, stoppedShown, advised := 0, false, ""
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-cohortDone:
			if err != nil && !errors.Is(err, context.Canceled) {
				fmt.Fprintf(stdout, "the simulated volunteers stopped: %v\n", err)
			}
		case <-tick.C:
		}
		var st status
		if err := cl.GetJSON(ctx, "/api/status", &st); err != nil {
			continue
		}
		if st.NewClass {
			dir := newClassDir(filepath.Join(o.dir, "classes"), time.Now())
			fmt.Fprintf(stdout, "\nnew class requested on the operator page: the previous class's ledger stays in %s\n", cl.AggregatorDir())
			if o.nextClass(cl.AggregatorDir(), stdout) {
				cl.SetArgs(o.aggregatorArgs(), o.relayArgs())
			}
			if err := cl.NewClass(ctx, dir); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "new class %s: fresh model and privacy ledger, same key and links; press Start on the operator page\n\n", dir)
			if st, err := cl.ClassTask(); (st != nil || err != nil) && o.clients > 0 {
				stopCohort()
				stopCohort = func() {}
				if tk, sets, ok := o.cohortTask(cl, stdout); ok {
					fmt.Fprintf(stdout, "the %d simulated volunteers now learn task %q\n", o.clients, tk.Name)
					startCohort(tk, sets)
				}
			}
			printed, stoppedShown = 0, false
			continue
		}
		rs, err := cl.Rounds(ctx)
		if err != nil {
			continue
		}
		for _, r := range rs {
			if r.Round <= printed || r.Status == "open" {
				continue
			}
			printed = r.Round
			fmt.Fprintln(stdout, formatRound(r))
			if (r.Status == "aborted" || r.Status == "abandoned") && (st.LastAbort == nil || st.LastAbort.Round < r.Round) {
				_ = cl.GetJSON(ctx, "/api/status", &st) // the status read before this round ended
			}
			var lines []string
			lines, advised = abortLines(st.LastAbort, r.Round, advised)
			for _, l := range lines {
				fmt.Fprintln(stdout, l)
			}
		}
		if !st.Running && st.Stopped != "" && !stoppedShown {
			stoppedShown = true
			fmt.Fprintf(stdout, "\ntraining stopped: %s\nprivacy spent: epsilon %.4g at delta %.0e (%s); target %.4g\n",
				st.Stopped, st.Epsilon, st.Delta, st.Method, st.TargetEpsilon)
			fmt.Fprintln(stdout, memoryLine(cl, o.clients, time.Since(began)))
			fmt.Fprintln(stdout, "the dashboard and the pages stay up; Ctrl-C to stop (or New class on the operator page).")
		}
	}
}

// cohortTask returns the task the simulated volunteers of cl's current
// class learn and its public data: the class's own (chosen on the operator
// page for it: localrun.Cluster.ClassTask, which its aggregator loads in
// place of -task), or else -task's (nil: the digits). ok is false, and
// stdout says why, when there are none to run: no -clients, or the task
// has fewer simulation rows than volunteers (the survey has none).
func (o options) cohortTask(cl *localrun.Cluster, stdout io.Writer) (tk *task.Task, sets *taskdata.Sets, ok bool) {
	if o.clients == 0 {
		return nil, nil, false
	}
	tk, sets = o.tk, o.sets
	st, err := cl.ClassTask()
	if err == nil && st != nil {
		tk, sets = st.Task, nil
		if tk.Source != task.SourceBuiltin { // the digits: cohort.LoadShares
			sets, err = st.Open()
		}
	}
	if err != nil {
		fmt.Fprintf(stdout, "the class's task: %v; no simulated volunteers\n", err)
		return nil, nil, false
	}
	if tk != nil && tk.Source != task.SourceBuiltin && (sets.Train == nil || sets.Train.Len() < o.clients) {
		fmt.Fprintf(stdout, "task %q has too few simulation rows for %d simulated volunteers: real volunteers only\n", tk.Name, o.clients)
		return nil, nil, false
	}
	return tk, sets, true
}

// status is the part of /api/status the runner reads.
type status struct {
	localrun.Status
	NewClass bool `json:"new_class_requested"`
	// LastAbort says why the latest round was cancelled, in words.
	LastAbort *abortNote `json:"last_abort"`
}

// abortNote is the part of /api/status last_abort the terminal prints.
type abortNote struct {
	Round           int
	Message, Advice string
}

// abortLines are the lines that say why round was cancelled, when a is
// about it, and what to do, unless that advice is the last one printed
// (advised): a streak of rounds cancelled for the same cause repeats the
// numbers, not the advice. It also returns the advice now printed.
func abortLines(a *abortNote, round int, advised string) ([]string, string) {
	if a == nil || a.Round != round {
		return nil, advised
	}
	lines := []string{"           " + a.Message}
	if a.Advice != "" && a.Advice != advised {
		lines = append(lines, "           what to do: "+a.Advice)
	}
	return lines, a.Advice
}

func formatRound(r localrun.Round) string {
	s := fmt.Sprintf("round %3d  %-9s", r.Round, r.Status)
	if r.Accuracy != nil {
		s += fmt.Sprintf("  accuracy %6.2f%%", 100**r.Accuracy)
	}
	if got := max(r.Reports, r.N); got > 0 {
		s += fmt.Sprintf("  reports %4d", got)
		if r.CheckedIn > 0 {
			s += fmt.Sprintf(" of %d checked in (%.0f%%)", r.CheckedIn, 100*float64(got)/float64(r.CheckedIn))
		}
		if r.NP > 0 {
			s += fmt.Sprintf("  n_p %4d", r.NP)
		}
		if r.CheckedIn > 0 && float64(got) < roundspec.CloseWaitFor*float64(r.CheckedIn) {
			s += fmt.Sprintf("  (closed short: %d checked-in volunteers did not report before arrivals stopped or the round's cap)", r.CheckedIn-got)
		}
	}
	if r.EpsilonTightest != nil {
		s += fmt.Sprintf("  epsilon %.4g (%s)", *r.EpsilonTightest, r.Method)
	}
	if r.Detail != "" {
		s += "  " + r.Detail
	}
	return s
}

// memoryLine says what this run cost: each process's peak resident memory
// (Linux's VmHWM; "?" elsewhere), their sum (an upper bound on what the
// run held at once), and the time since start. The README's footprint
// figure is this line.
func memoryLine(cl *localrun.Cluster, clients int, took time.Duration) string {
	relay, agg := cl.PeakMemory()
	self := procmem.Read("self", procmem.Peak)
	total := "?"
	if relay >= 0 && agg >= 0 && self >= 0 {
		total = procmem.MB(relay + agg + self)
	}
	return fmt.Sprintf("peak memory (resident): relay %s, aggregator %s, this process with its %d simulated volunteers %s; %s in all; %.0f s since start",
		procmem.MB(relay), procmem.MB(agg), clients, procmem.MB(self), total, took.Seconds())
}
