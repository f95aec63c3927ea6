// Command soak is `make soak`, the long run outside CI: the relay and the
// aggregator as real processes (built once into a temporary directory), a
// cohort of native volunteers in this process (scripts/internal/cohort),
// and seeded periodic kills (SIGKILL) of the relay or the aggregator, each
// restarted on its state after an outage. Every -sample it prints a row:
// elapsed time, rounds completed, ε, the reports acknowledged since the
// last row with their acknowledgement latency p50/p99 as the volunteers
// measure it, and the resident memory (VmRSS) of the relay, the aggregator
// and the cohort. At the end it prints a summary and checks the chaos
// tier's invariants (scripts/internal/invariant): rounds kept completing
// (no stretch without a completed round longer than two round timeouts +
// batch grace + the relay's warm-up, counted from the start, the previous
// completion or a restart), ε never decreased, no round recorded twice, no
// acknowledged report lost, no batch padded twice. It exits 1 if one
// fails. Run it from the repository root; see docs/soak.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/blanket-fl/blanket/scripts/internal/cohort"
	"github.com/blanket-fl/blanket/scripts/internal/invariant"
	"github.com/blanket-fl/blanket/scripts/internal/localrun"
	"github.com/blanket-fl/blanket/scripts/internal/procmem"
	"github.com/blanket-fl/blanket/scripts/internal/wsclient"
	"github.com/blanket-fl/blanket/shared/dataset/sample"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ok, err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}

// warmup is the relay's default -warmup: after a restart that interrupted
// a round it refuses announcements this long.
const warmup = 5 * time.Second

// options are the parsed flags.
type options struct {
	volunteers       int
	duration         time.Duration
	killEvery        time.Duration
	sample           time.Duration
	roundTime, grace time.Duration
	seed             uint64
	protocol         string
	strict, verbose  bool
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.volunteers, "volunteers", 1000, "native volunteers (goroutines of this process), at most 8000")
	fs.DurationVar(&o.duration, "duration", 15*time.Minute, "how long to run")
	fs.DurationVar(&o.killEvery, "kill-every", 90*time.Second, "mean time between kills (each one ±25%, never before the previous kill's recovery; 0: no kills)")
	fs.DurationVar(&o.sample, "sample", 30*time.Second, "time between the printed rows")
	fs.DurationVar(&o.roundTime, "round-time", 0, "the aggregator's -round-timeout (default 30s for secagg, 20s for ss-double)")
	fs.DurationVar(&o.grace, "grace", 0, "the aggregator's -batch-grace (default 30s for secagg, 15s for ss-double)")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the kill schedule (which server, when, how long down)")
	fs.StringVar(&o.protocol, "protocol", "ss-double", "ss-double (k = 20, n_p = 3, as scripts/chaos) or secagg (the default of make run; about 35 ms of CPU and 16 MB of transient heap per volunteer a round: see docs/soak.md)")
	fs.BoolVar(&o.strict, "strict", true, "fail on rounds the aggregator records as lost (charged, never applied), as scripts/chaos does; -strict=false reports them as known")
	fs.BoolVar(&o.verbose, "v", false, "show the relay's and the aggregator's logs")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	switch o.protocol {
	case "secagg":
		o.roundTime = orDefault(o.roundTime, 30*time.Second)
		o.grace = orDefault(o.grace, 30*time.Second)
	case "ss-double":
		o.roundTime = orDefault(o.roundTime, 20*time.Second)
		o.grace = orDefault(o.grace, 15*time.Second)
	default:
		// SS-Simple and SS-Topk pad every one of the 7,850 dimensions with
		// n or n/3 sealed dummies: millions of HPKE seals a round at 1,000
		// volunteers, more than 2 cores do within a round.
		return o, fmt.Errorf("-protocol %q: secagg or ss-double", o.protocol)
	}
	switch {
	case o.volunteers < 3 || o.volunteers > 8000:
		return o, fmt.Errorf("-volunteers must be in [3, 8000] (the embedded digits hold 8,000 training examples), got %d", o.volunteers)
	case o.duration <= 0:
		return o, fmt.Errorf("-duration must be > 0, got %v", o.duration)
	case o.killEvery < 0:
		return o, fmt.Errorf("-kill-every must be >= 0, got %v", o.killEvery)
	case o.sample <= 0:
		return o, fmt.Errorf("-sample must be > 0, got %v", o.sample)
	case o.roundTime <= 0 || o.grace <= 0:
		return o, errors.New("-round-time and -grace must be > 0")
	}
	return o, nil
}

// orDefault returns v, or def when v is zero.
func orDefault(v, def time.Duration) time.Duration {
	if v == 0 {
		return def
	}
	return v
}

// bound is the longest a stretch without a completed round may last, as
// the chaos tier allows after a restart: a round killed half way is lost,
// the next one takes its full timeout, its batch may take the grace, and
// the relay refuses announcements for its warm-up after a restart.
func (o options) bound() time.Duration { return 2*o.roundTime + o.grace + warmup }

// firstBound is the bound from the start: one round timeout more, because
// the aggregator announces its first round as soon as it is up, before
// the volunteers (who need its key) have connected, and the relay invites
// only the volunteers connected when a round opens, so the first round is
// aborted below the minimum batch.
func (o options) firstBound() time.Duration { return o.bound() + o.roundTime }

// aggregatorArgs sizes the rounds for o.volunteers. Secure summation as
// make run serves it (every connected volunteer takes part; the noise
// calibrated so that 1,000 rounds fit ε = 4, so the budget never ends the
// soak and every round is charged); SS-Double as the chaos tier, with a
// budget the soak cannot exhaust.
func (o options) aggregatorArgs() []string {
	n := strconv.Itoa(o.volunteers)
	args := []string{"-protocol", o.protocol, "-expected-n", n,
		"-round-timeout", o.roundTime.String(), "-batch-grace", o.grace.String(), "-simulated", n}
	switch o.protocol {
	case "secagg":
		args = append(args, "-check-in", "1", "-rounds", "1000", "-epsilon", "4")
	case "ss-double":
		args = append(args, "-k", "20", "-np", "3", "-quota", n, "-epsilon", "1e9")
	}
	if o.volunteers < 40 {
		args = append(args, "-min-batch", strconv.Itoa(max(3, o.volunteers/2)))
	}
	return args
}

// printer serializes the output of the sampler and the killer.
type printer struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
}

func (p *printer) linef(format string, a ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format+"\n", a...)
}

// event prints a line stamped with the elapsed time.
func (p *printer) event(format string, a ...any) {
	p.linef("%6s  "+format, append([]any{fmtElapsed(time.Since(p.start))}, a...)...)
}

// progress follows the aggregator's rounds (polled every second): how many
// are ok, and when each was first seen ok.
type progress struct {
	mu          sync.Mutex
	ok, all     int
	completions []time.Duration
}

func (p *progress) run(ctx context.Context, cl *localrun.Cluster, start time.Time) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		if n, rs := invariant.OKRounds(ctx, cl); n >= 0 {
			p.mu.Lock()
			for ; p.ok < n; p.ok++ {
				p.completions = append(p.completions, time.Since(start))
			}
			p.all = len(rs)
			p.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (p *progress) get() (ok, all int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ok, p.all
}

// kill is one kill of the schedule.
type kill struct {
	at        time.Duration // elapsed at the kill
	relay     bool
	outage    time.Duration
	restarted time.Duration // elapsed at the restart (0: not restarted)
	recovered time.Duration // first completed round after the restart, from the restart
	recoverOK bool          // a round completed within the bound after the restart
	err       error
}

func (k kill) name() string {
	if k.relay {
		return "relay"
	}
	return "aggregator"
}

// killer kills and restarts the servers on a seeded schedule until the
// last stretch of the run (a kill there could not be seen to recover).
type killer struct {
	o     options
	cl    *localrun.Cluster
	prog  *progress
	out   *printer
	start time.Time
	end   time.Time

	mu    sync.Mutex
	kills []kill
}

func (k *killer) run(ctx context.Context) {
	if k.o.killEvery == 0 {
		return
	}
	rng := rand.New(rand.NewPCG(k.o.seed, 0x9e3779b97f4a7c15))
	jitter := func() time.Duration {
		return time.Duration(float64(k.o.killEvery) * (0.75 + 0.5*rng.Float64()))
	}
	// Not before the first round completed: a kill is only meaningful on
	// a deployment that works.
	for {
		if ok, _ := k.prog.get(); ok > 0 {
			break
		}
		if !sleepCtx(ctx, time.Second) {
			return
		}
	}
	next := k.start.Add(jitter())
	for i := 1; ; i++ {
		if next.After(k.end.Add(-k.o.bound())) || !sleepCtx(ctx, time.Until(next)) {
			return
		}
		kl := kill{at: time.Since(k.start), relay: rng.IntN(2) == 0,
			outage: 500*time.Millisecond + time.Duration(rng.Int64N(int64(2500*time.Millisecond)))}
		if rng.IntN(4) == 0 {
			// The wedge the chaos tester found: down past round timeout +
			// batch grace.
			kl.outage = k.o.roundTime + k.o.grace + 2*time.Second
		}
		k.out.event("kill %d: %s (SIGKILL), down %v", i, kl.name(), kl.outage.Round(100*time.Millisecond))
		if kl.relay {
			kl.err = k.cl.KillRelay()
		} else {
			kl.err = k.cl.KillAggregator()
		}
		if kl.err == nil {
			// The outage runs out even when the soak is interrupted: the
			// summary needs both servers up.
			time.Sleep(kl.outage)
			if kl.relay {
				kl.err = k.cl.StartRelay(context.Background())
			} else {
				kl.err = k.cl.StartAggregator(context.Background())
			}
		}
		if kl.err != nil {
			k.out.event("kill %d: %v", i, kl.err)
			k.add(kl)
			return
		}
		kl.restarted = time.Since(k.start)
		k.out.event("%s restarted", kl.name())
		// Recovery is a round completed after the restart (one that
		// completed while the relay was down does not count).
		before, _ := k.prog.get()
		deadline := time.Now().Add(k.o.bound())
		for time.Now().Before(deadline) {
			if ok, _ := k.prog.get(); ok > before {
				kl.recovered, kl.recoverOK = time.Since(k.start)-kl.restarted, true
				break
			}
			if !sleepCtx(ctx, 250*time.Millisecond) {
				break
			}
		}
		if kl.recoverOK {
			k.out.event("a round completed %v after the %s restarted", kl.recovered.Round(time.Second), kl.name())
		} else if ctx.Err() == nil {
			k.out.event("no round completed within %v of the %s's restart", k.o.bound(), kl.name())
		}
		k.add(kl)
		next = next.Add(jitter())
		// Never before the recovery, and at a random point of a round.
		if earliest := time.Now().Add(time.Duration(rng.Int64N(int64(k.o.roundTime)))); next.Before(earliest) {
			next = earliest
		}
	}
}

func (k *killer) add(kl kill) {
	k.mu.Lock()
	k.kills = append(k.kills, kl)
	k.mu.Unlock()
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// mem is the memory series of the run.
type mem struct {
	relay, agg, cohort []memSample
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) (bool, error) {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return false, err
	}
	tmp, err := os.MkdirTemp("", "blanket-soak")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(tmp)
	fmt.Fprintln(stdout, "building the relay and the aggregator...")
	bins, err := localrun.Build(ctx, ".", filepath.Join(tmp, "bin"))
	if err != nil {
		return false, err
	}
	logs := &invariant.Logs{}
	var logOut io.Writer = logs
	if o.verbose {
		logs.Echo = stderr
	}
	cl, err := localrun.Start(ctx, bins, localrun.Options{Dir: filepath.Join(tmp, "state"),
		AggregatorArgs: o.aggregatorArgs(), Stdout: logOut, Stderr: logOut})
	if err != nil {
		return false, err
	}
	defer cl.Stop()
	key, err := cohort.FetchKey(ctx, nil, cl.AggregatorURL(), "")
	if err != nil {
		return false, err
	}

	start := time.Now()
	end := start.Add(o.duration)
	out := &printer{w: stdout, start: start}
	out.linef("%d volunteers, protocol %s, round timeout %v, batch grace %v, kills every %v (seed %d), %v; a round must complete within %v of the previous round or a restart (%v of the start)",
		o.volunteers, o.protocol, o.roundTime, o.grace, o.killEvery, o.seed, o.duration, o.bound(), o.firstBound())
	out.linef("ack latency: from a volunteer's first frame of a report to its read of the last frame's accepted ack, in ms")
	out.linef("\n%6s  %9s  %10s  %6s  %7s  %7s  %9s  %9s  %10s", "time", "rounds ok", "epsilon", "acked", "ack p50", "ack p99", "relay MiB", "aggr MiB", "cohort MiB")

	// The cohort, the watchers and the killer end with runCtx; the servers
	// stay up until the final checks are done.
	runCtx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	acks := newAcks()
	var wg sync.WaitGroup
	cohortErr := make(chan error, 1)
	cohortCtx, stopCohort := context.WithCancel(context.Background())
	defer stopCohort()
	wg.Go(func() {
		_, err := cohort.Run(cohortCtx, cohort.Config{Relay: cl.WebSocketURL(), Key: key, Clients: o.volunteers, PerUser: 8000 / o.volunteers,
			Dataset: sample.Name, Seed: o.seed, Dial: acks.dial(wsclient.Dial), Logger: slog.New(slog.DiscardHandler)})
		cohortErr <- err
	})
	watch := &invariant.EpsilonWatch{}
	prog := &progress{}
	kl := &killer{o: o, cl: cl, prog: prog, out: out, start: start, end: end}
	var bg sync.WaitGroup
	bg.Go(func() { watch.Run(runCtx, cl) })
	bg.Go(func() { prog.run(runCtx, cl, start) })
	bg.Go(func() { kl.run(runCtx) })

	var series mem
	tick := time.NewTicker(o.sample)
	defer tick.Stop()
loop:
	for {
		select {
		case <-runCtx.Done():
			break loop
		case err := <-cohortErr:
			if err != nil {
				out.event("the volunteers stopped: %v", err)
			}
		case <-tick.C:
			at := time.Since(start)
			ok, all := prog.get()
			eps, _ := watch.Last()
			w := acks.takeWindow()
			r, a, c := procmem.OfPID(procmem.PIDOf(bins.Relay), procmem.Resident), procmem.OfPID(procmem.PIDOf(bins.Aggregator), procmem.Resident), procmem.Read("self", procmem.Resident)
			for _, s := range []struct {
				v   int64
				dst *[]memSample
			}{{r, &series.relay}, {a, &series.agg}, {c, &series.cohort}} {
				if s.v >= 0 {
					*s.dst = append(*s.dst, memSample{at, s.v})
				}
			}
			out.linef("%6s  %9s  %10.4g  %6d  %7s  %7s  %9s  %9s  %10s", fmtElapsed(at), fmt.Sprintf("%d/%d", ok, all), eps, len(w),
				fmtMs(percentile(w, 50), len(w)), fmtMs(percentile(w, 99), len(w)), mib(r), mib(a), mib(c))
		}
	}
	interrupted := ctx.Err() != nil
	bg.Wait()
	elapsed := time.Since(start)
	stopCohort()
	wg.Wait()

	// The final checks, with both servers up (the killer restarted any it
	// had killed before returning).
	_, rs := invariant.OKRounds(context.Background(), cl)
	if rs == nil {
		return false, errors.New("the aggregator does not answer /api/rounds at the end")
	}
	reports, padded := logs.RelayRounds()
	res := invariant.CheckRounds(rs, reports, padded)
	all, acked, refused := acks.snapshot()
	lostAcked, dropped := ackedLost(rs, acked)
	res.Violations = append(res.Violations, lostAcked...)
	for _, d := range watch.Decreases() {
		res.Violations = append(res.Violations, "epsilon decreased on /api/status: "+d)
	}
	kl.mu.Lock()
	kills := kl.kills
	kl.mu.Unlock()
	var restarts []time.Duration
	maxRecovery := time.Duration(0)
	for i, k := range kills {
		if k.err != nil {
			res.Violations = append(res.Violations, fmt.Sprintf("kill %d (%s): %v", i+1, k.name(), k.err))
			continue
		}
		restarts = append(restarts, k.restarted)
		maxRecovery = max(maxRecovery, k.recovered)
	}
	prog.mu.Lock()
	completions := prog.completions
	prog.mu.Unlock()
	res.Violations = append(res.Violations, stalls(completions, restarts, elapsed, o.firstBound(), o.bound())...)
	if o.strict {
		res.Violations = append(res.Violations, res.Lost...)
	}

	okN := 0
	for _, r := range rs {
		if r.Status == "ok" {
			okN++
		}
	}
	recovery := ""
	if len(kills) > 0 {
		recovery = fmt.Sprintf(", slowest recovery %v after a restart (bound %v)", maxRecovery.Round(time.Second), o.bound())
	}
	fmt.Fprintf(stdout, "\nsummary after %v%s: %d rounds, %d ok, %d kills (seed %d)%s\n",
		elapsed.Round(time.Second), map[bool]string{true: " (interrupted)", false: ""}[interrupted], len(rs), okN, len(kills), o.seed, recovery)
	fmt.Fprintf(stdout, "acknowledged reports: %d, latency p50 %v, p99 %v, max %v; %d refused; %d acknowledged in rounds that did not complete (aborted, or open at the end)\n",
		len(all), percentile(all, 50).Round(time.Millisecond), percentile(all, 99).Round(time.Millisecond), percentile(all, 100).Round(time.Millisecond), refused, dropped)
	for _, r := range rs {
		if r.Status != "ok" {
			fmt.Fprintf(stdout, "round %d %s: %d reports, %d acknowledged to volunteers (%s)\n", r.Round, r.Status, r.N, acked[r.Round], r.Detail)
		}
	}
	eps, _ := watch.Last()
	fmt.Fprintf(stdout, "epsilon at the end: %.4g\n", eps)
	for _, m := range []struct {
		name string
		ss   []memSample
	}{{"relay", series.relay}, {"aggregator", series.agg}, {"cohort", series.cohort}} {
		fmt.Fprintln(stdout, memLine(m.name, m.ss))
	}
	for _, l := range res.Lost {
		if !o.strict {
			fmt.Fprintln(stdout, "KNOWN: "+l)
		}
	}
	if len(res.Violations) == 0 {
		fmt.Fprintln(stdout, "invariants: rounds kept completing, epsilon never decreased, no acknowledged report lost, no round recorded twice, no batch padded twice: OK")
		return true, nil
	}
	for _, v := range res.Violations {
		fmt.Fprintln(stdout, "FAIL: "+v)
	}
	return false, nil
}

// memLine summarizes a memory series: first and last reading, peak, and
// the least-squares slope over the run. Restarts of a killed server start
// a new process, so its series restarts too.
func memLine(name string, ss []memSample) string {
	if len(ss) == 0 {
		return fmt.Sprintf("memory %-10s no readings", name)
	}
	peak := int64(0)
	for _, s := range ss {
		peak = max(peak, s.rss)
	}
	return fmt.Sprintf("memory %-10s first %s MiB (%s), last %s MiB (%s), peak %s MiB, slope %+.2f MiB/min over %d readings",
		name, mib(ss[0].rss), fmtElapsed(ss[0].at), mib(ss[len(ss)-1].rss), fmtElapsed(ss[len(ss)-1].at), mib(peak), slope(ss)/(1<<20), len(ss))
}
