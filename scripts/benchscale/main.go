// Command benchscale measures secure summation at crowd sizes on this
// machine (make bench-scale): for each n it starts the real relay and
// aggregator binaries on loopback, connects n simulated volunteers (real
// PINE reports, client.Pool-bounded like make run), waits for two full
// rounds and prints one row: reports against check-ins, the reports the
// relay dropped, the round's time from announcement and from the relay's
// close to the model, each server's CPU per report (and the simulated
// volunteers' own, apart), both servers' peak memory, what each server's datastore wrote per report
// (bytes and fsyncs), and how long each server takes to come back after
// a SIGKILL. The load average is printed beside the table: figures from
// a busy machine are not comparable with a quiet one.
//
//	go run ./scripts/benchscale -n 1000,10000
//
// With -store postgres both servers keep their state in PostgreSQL (a
// schema each, -store and -store-schema): a throwaway cluster of Debian's
// postgresql package (shared/datastore/pgtest) or the server of -pg-dsn.
// The table then adds PostgreSQL's own CPU per report (its processes'
// utime + stime from /proc; a throwaway cluster only) and the WAL it
// wrote and flushed per report (pg_stat_wal: wal_bytes, wal_sync; for
// both servers together, they share the cluster).
//
//	go run ./scripts/benchscale -n 1000 -store postgres
//
// With -edges K the volunteers connect to K edge relays (relay -edge-of,
// relay/internal/edge) instead, n/K each, which hand their reports to the
// relay; the table adds the edges' CPU per report (all of them) and the
// largest one's peak memory.
//
//	go run ./scripts/benchscale -n 10000 -edges 2 -store postgres
//
// With -prep-workers K (and -store postgres) the aggregator runs
// -prep-jobs: its chunks are prepared as jobs leased by K `aggregator
// prep-worker` processes, and by itself while it waits
// (aggregator/internal/prepjob); the table adds the workers' CPU per
// report (all of them) and the share of chunks prepared apart.
//
//	go run ./scripts/benchscale -n 1000 -store postgres -prep-workers 1
//
// With -relay-prep-workers K (and -store postgres) the relay runs
// -prep-jobs: the helper's preparation of its reports is done as jobs
// leased by K `relay prep-worker` processes, and by itself while it waits
// (relay/internal/prepjob); the table adds their CPU per report and the
// share of reports prepared apart.
//
//	go run ./scripts/benchscale -n 1000 -store postgres -relay-prep-workers 1
//
// It asserts nothing (speed is measured, never tested); it exits non-zero
// only when a round does not complete.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/blanket-fl/blanket/scripts/internal/cohort"
	"github.com/blanket-fl/blanket/scripts/internal/localrun"
	"github.com/blanket-fl/blanket/scripts/internal/procmem"
	"github.com/blanket-fl/blanket/shared/dataset/sample"
	"github.com/blanket-fl/blanket/shared/datastore/pgtest"
	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/jackc/pgx/v5"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchscale:", err)
		os.Exit(1)
	}
}

// row is one crowd size's measurements.
type row struct {
	n                  int
	reports, checkedIn []int
	// From the announcement, the relay's first report and the relay's
	// close to the model (the aggregator's finished_at; both servers on
	// this machine's clock).
	roundWall, fromFirst, closeLeft []time.Duration
	relayHWM, aggHWM                int64
	store                           map[string]storeCost // by party
	restart                         map[string]time.Duration
	cpu                             map[string]time.Duration // over the two rounds: relay, aggregator, volunteers (this process), postgres
	wal                             *walStats                // PostgreSQL's over the two rounds (nil: the log)
	dropped                         float64                  // the relay's secagg.dropped, summed
	load                            string
	edges                           int   // edge relays (-edges): their CPU is cpu["edges"]
	edgeHWM                         int64 // the largest edge's peak memory
	prepWorkers                     int   // -prep-workers: their CPU is cpu["prep"]
	apart, here                     float64
	relayPrep                       int // -relay-prep-workers: their CPU is cpu["relayprep"]
	relayApart, relayHere           float64
}

// storeCost is what a party's datastore wrote over the measured rounds.
type storeCost struct {
	bytes, fsyncs int64
	ok            bool
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("benchscale", flag.ContinueOnError)
	ns := fs.String("n", "1000,3000,10000", "crowd sizes, comma-separated")
	workers := fs.Int("workers", 0, "volunteers preparing a report at once (default cohort.DefaultWorkers: 2 x cores)")
	fs.BoolVar(verbose, "v", false, "print the rounds as they are polled")
	dir := fs.String("dir", "", "where to build and keep state (default: a temporary directory, removed)")
	store := fs.String("store", "log", "the servers' store: log (the datastore in their state directories) or postgres")
	dsn := fs.String("pg-dsn", "", "with -store postgres: the server to use (default: a throwaway cluster, started and removed)")
	edges := fs.Int("edges", 0, "edge relays (relay -edge-of) holding the volunteers' websockets, the volunteers dealt among them; 0: every volunteer on the relay itself")
	prepWorkers := fs.Int("prep-workers", 0, "with -store postgres: the aggregator runs -prep-jobs with this many aggregator prep-worker processes beside it")
	helpAfter := fs.Duration("prep-help-after", 0, "with -prep-workers: the aggregator's -prep-help-after")
	var rp relayPrep
	fs.IntVar(&rp.workers, "relay-prep-workers", 0, "with -store postgres: the relay runs -prep-jobs with this many relay prep-worker processes beside it")
	fs.DurationVar(&rp.helpAfter, "relay-prep-help-after", 0, "with -relay-prep-workers: the relay's -prep-help-after")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if (*prepWorkers > 0 || rp.workers > 0) && *store != "postgres" {
		return errors.New("-prep-workers and -relay-prep-workers need -store postgres")
	}
	var pg *pgBench
	switch *store {
	case "log":
	case "postgres":
		var err error
		if pg, err = startPG(*dsn); err != nil {
			return err
		}
		defer pg.close()
		fmt.Fprintln(out, "PostgreSQL:", pg.how)
	default:
		return fmt.Errorf("-store %q: want log or postgres", *store)
	}
	var sizes []int
	for _, f := range strings.Split(*ns, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 20 {
			return fmt.Errorf("-n: %q is not a crowd size of at least 20", f)
		}
		sizes = append(sizes, n)
	}
	root := *dir
	if root == "" {
		var err error
		if root, err = os.MkdirTemp("", "benchscale-"); err != nil {
			return err
		}
		defer os.RemoveAll(root)
	}
	fmt.Fprintln(out, "building the relay and the aggregator...")
	bins, err := localrun.Build(ctx, ".", filepath.Join(root, "bin"))
	if err != nil {
		return err
	}
	var rows []row
	for _, n := range sizes {
		fmt.Fprintf(out, "n = %d: running two full rounds (load average %s)...\n", n, loadAvg())
		r, err := measure(ctx, bins, filepath.Join(root, fmt.Sprint(n)), n, *workers, *edges, *prepWorkers, *helpAfter, rp, pg)
		if err != nil {
			return fmt.Errorf("n = %d: %w", n, err)
		}
		rows = append(rows, r)
		printTable(out, rows)
	}
	return nil
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// shares deals the embedded digits to n volunteers, one example each,
// cycling when n exceeds the training set (a load test: the accuracy is
// not the point).
func shares(n int) ([]logreg.Dataset, error) {
	train, _, err := sample.Open(sample.Name, "")
	if err != nil {
		return nil, err
	}
	base, err := cohort.LoadShares(sample.Name, "", min(n, train.Len()), 1, 3)
	if err != nil {
		return nil, err
	}
	out := make([]logreg.Dataset, n)
	for i := range out {
		out[i] = base[i%len(base)]
	}
	return out, nil
}

type roundRec struct {
	Round       int       `json:"round"`
	Status      string    `json:"status"`
	N           int       `json:"n"`
	Reports     int       `json:"reports"`
	CheckedIn   int       `json:"checked_in"`
	AnnouncedAt time.Time `json:"announced_at"`
	FinishedAt  time.Time `json:"finished_at"`
}

var verbose = new(bool)

// relayPrep is -relay-prep-workers and -relay-prep-help-after.
type relayPrep struct {
	workers   int
	helpAfter time.Duration
}

func measure(ctx context.Context, bins localrun.Binaries, dir string, n, workers, edges, prepWorkers int, helpAfter time.Duration, rp relayPrep, pg *pgBench) (row, error) {
	r := row{n: n, store: map[string]storeCost{}, restart: map[string]time.Duration{}, cpu: map[string]time.Duration{}, edges: edges, prepWorkers: prepWorkers, relayPrep: rp.workers}
	sh, err := shares(n)
	if err != nil {
		return r, err
	}
	// As scripts/chaos's load test: the quota is above n, so a round
	// closes when the volunteers who checked in have reported (or at its
	// generous deadline).
	aggArgs := []string{
		"-protocol", "secagg", "-expected-n", strconv.Itoa(n), "-quota", strconv.Itoa(2 * n), "-min-batch", "20",
		"-rounds", "4", "-epsilon", "50", "-check-in", "1", "-round-timeout", strconv.Itoa(60+n/10) + "s"}
	var relayArgs []string
	if pg != nil {
		// A schema per party and crowd size: each row starts afresh.
		aggArgs = append(aggArgs, "-store", pg.dsn, "-store-schema", fmt.Sprintf("bench_aggregator_%d", n))
		if prepWorkers > 0 {
			aggArgs = append(aggArgs, "-prep-jobs", "-prep-help-after", helpAfter.String())
		}
		relayArgs = []string{"-store", pg.dsn, "-store-schema", fmt.Sprintf("bench_relay_%d", n)}
		if rp.workers > 0 {
			relayArgs = append(relayArgs, "-prep-jobs", "-prep-help-after", rp.helpAfter.String())
		}
	}
	cl, err := localrun.Start(ctx, bins, localrun.Options{Dir: dir, AggregatorArgs: aggArgs, RelayArgs: relayArgs})
	if err != nil {
		return r, err
	}
	defer cl.Stop()
	cctx, cancel := context.WithCancel(ctx)
	key, err := cohort.FetchKey(cctx, nil, cl.AggregatorURL(), "")
	if err != nil {
		cancel()
		return r, err
	}
	// The volunteers' relays: the relay itself, or edges dealt an equal
	// part of the crowd each.
	urls := []string{cl.WebSocketURL()}
	var edgeProcs []*localrun.Edge
	if edges > 0 {
		if edgeProcs, err = startEdges(ctx, bins, cl, edges); err != nil {
			cancel()
			return r, err
		}
		defer func() {
			for _, e := range edgeProcs {
				e.Kill()
			}
		}()
		urls = urls[:0]
		for _, e := range edgeProcs {
			urls = append(urls, e.WebSocketURL())
		}
	}
	var preps []*exec.Cmd
	if prepWorkers > 0 {
		if preps, err = startPrepWorkers(ctx, bins.Aggregator, pg.dsn, fmt.Sprintf("bench_aggregator_%d", n), prepWorkers); err != nil {
			cancel()
			return r, err
		}
		defer func() {
			for _, p := range preps {
				p.Process.Kill()
				p.Wait()
			}
		}()
	}
	var relayPreps []*exec.Cmd
	if rp.workers > 0 {
		if relayPreps, err = startPrepWorkers(ctx, bins.Relay, pg.dsn, fmt.Sprintf("bench_relay_%d", n), rp.workers); err != nil {
			cancel()
			return r, err
		}
		defer func() {
			for _, p := range relayPreps {
				p.Process.Kill()
				p.Wait()
			}
		}()
	}
	if workers <= 0 {
		workers = cohort.DefaultWorkers()
	}
	var wg sync.WaitGroup
	cohortErr := make(chan error, len(urls))
	for i, u := range urls {
		lo, hi := i*n/len(urls), (i+1)*n/len(urls)
		wg.Go(func() {
			_, err := cohort.Run(cctx, cohort.Config{Clients: hi - lo, Shares: sh[lo:hi], Relay: u, Key: key, SeededNoise: true,
				Seed: 3 + uint64(i), PerUser: 1, Workers: max(1, workers/len(urls)), Logger: slog.New(slog.DiscardHandler)})
			if err == nil {
				err = errors.New("ended")
			}
			cohortErr <- err
		})
	}
	defer func() { cancel(); wg.Wait() }()
	edgeCPU := func() time.Duration {
		var d time.Duration
		for _, e := range edgeProcs {
			d += procCPU(strconv.Itoa(e.PID()))
		}
		return d
	}
	cmdsCPU := func(cmds []*exec.Cmd) time.Duration {
		var d time.Duration
		for _, p := range cmds {
			d += procCPU(strconv.Itoa(p.Process.Pid))
		}
		return d
	}
	prepCPU := func() time.Duration { return cmdsCPU(preps) }
	relayPrepCPU := func() time.Duration { return cmdsCPU(relayPreps) }
	edgeBefore, prepBefore, relayPrepBefore := edgeCPU(), prepCPU(), relayPrepCPU()
	apartBefore, hereBefore := chunkCounts(ctx, cl)
	relayApartBefore, relayHereBefore := relayPrepared(ctx, cl)

	// The store's counters before the first full round, to subtract
	// what connecting and announcing wrote.
	before, cpuBefore, walBefore := storeStats(ctx, cl), pg.cpuTimes(bins), pg.wal(ctx)
	deadline := time.Now().Add(time.Duration(10+n/500) * time.Minute)
	var full []roundRec
	for len(full) < 2 {
		if time.Now().After(deadline) {
			return r, fmt.Errorf("fewer than 2 full ok rounds by the deadline (%d)", len(full))
		}
		select {
		case err := <-cohortErr:
			return r, fmt.Errorf("the volunteers stopped: %w", err)
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(2 * time.Second):
		}
		var recs struct {
			Rounds []roundRec `json:"rounds"`
		}
		if err := cl.GetJSON(ctx, "/api/rounds", &recs); err != nil {
			continue
		}
		full = full[:0]
		for _, rr := range recs.Rounds {
			if *verbose {
				fmt.Fprintf(os.Stderr, "round %d %s n=%d reports=%d checked_in=%d\n", rr.Round, rr.Status, rr.N, rr.Reports, rr.CheckedIn)
			}
			// The first round may start while volunteers connect: only
			// rounds with 90% of them count.
			if rr.Status == "ok" && rr.N >= n*9/10 {
				full = append(full, rr)
			}
		}
		if len(full) == 0 {
			before, cpuBefore, walBefore = storeStats(ctx, cl), pg.cpuTimes(bins), pg.wal(ctx)
			edgeBefore, prepBefore, relayPrepBefore = edgeCPU(), prepCPU(), relayPrepCPU()
			apartBefore, hereBefore = chunkCounts(ctx, cl)
			relayApartBefore, relayHereBefore = relayPrepared(ctx, cl)
		}
	}
	r.cpu["edges"] = edgeCPU() - edgeBefore
	r.cpu["prep"] = prepCPU() - prepBefore
	r.cpu["relayprep"] = relayPrepCPU() - relayPrepBefore
	apartAfter, hereAfter := chunkCounts(ctx, cl)
	r.apart, r.here = apartAfter-apartBefore, hereAfter-hereBefore
	relayApartAfter, relayHereAfter := relayPrepared(ctx, cl)
	r.relayApart, r.relayHere = relayApartAfter-relayApartBefore, relayHereAfter-relayHereBefore
	for _, e := range edgeProcs {
		r.edgeHWM = max(r.edgeHWM, procmem.OfPID(e.PID(), procmem.Peak))
	}
	after, cpuAfter, walAfter := storeStats(ctx, cl), pg.cpuTimes(bins), pg.wal(ctx)
	for k, v := range cpuAfter {
		r.cpu[k] = v - cpuBefore[k]
	}
	if walBefore != nil && walAfter != nil {
		r.wal = &walStats{bytes: walAfter.bytes - walBefore.bytes, syncs: walAfter.syncs - walBefore.syncs}
	}
	var relayRounds map[int]relayRound
	r.dropped, relayRounds = relayMetrics(ctx, cl)
	r.load = loadAvg()
	reports := 0
	for _, rr := range full[:2] {
		r.reports = append(r.reports, rr.Reports)
		r.checkedIn = append(r.checkedIn, rr.CheckedIn)
		r.roundWall = append(r.roundWall, rr.FinishedAt.Sub(rr.AnnouncedAt).Round(10*time.Millisecond))
		// -1: the relay no longer describes the round.
		first, closed := time.Duration(-1), time.Duration(-1)
		if x, ok := relayRounds[rr.Round]; ok && !x.ClosedAt.IsZero() {
			first = rr.FinishedAt.Sub(x.FirstReportAt).Round(10 * time.Millisecond)
			closed = rr.FinishedAt.Sub(x.ClosedAt).Round(time.Millisecond)
		}
		r.fromFirst = append(r.fromFirst, first)
		r.closeLeft = append(r.closeLeft, closed)
		reports += rr.Reports
	}
	for party, a := range after {
		b := before[party]
		if a.ok && b.ok && reports > 0 {
			r.store[party] = storeCost{bytes: a.bytes - b.bytes, fsyncs: a.fsyncs - b.fsyncs, ok: true}
		}
	}
	r.relayHWM, r.aggHWM = hwm(bins.Relay), hwm(bins.Aggregator)
	r.store["reports"] = storeCost{bytes: int64(reports), ok: true}

	// Recovery: SIGKILL each server mid-run and time its start to healthy.
	cancel()
	wg.Wait()
	for _, p := range []struct {
		name        string
		kill, start func() error
	}{
		{"aggregator", cl.KillAggregator, func() error { return cl.StartAggregator(ctx) }},
		{"relay", cl.KillRelay, func() error { return cl.StartRelay(ctx) }},
	} {
		if err := p.kill(); err != nil {
			return r, fmt.Errorf("kill the %s: %w", p.name, err)
		}
		t0 := time.Now()
		if err := p.start(); err != nil {
			return r, fmt.Errorf("restart the %s: %w", p.name, err)
		}
		r.restart[p.name] = time.Since(t0).Round(time.Millisecond)
	}
	return r, nil
}

// storeStats reads each server's datastore counters from its /api/metrics
// (the "datastore" object: bytes_written, fsyncs); a server without them
// is left out.
func storeStats(ctx context.Context, cl *localrun.Cluster) map[string]storeCost {
	out := map[string]storeCost{}
	for party, base := range map[string]string{"relay": cl.RelayURL(), "aggregator": cl.AggregatorURL()} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/metrics", nil)
		if err != nil {
			continue
		}
		req.Header.Set("Accept", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			continue
		}
		var m struct {
			Datastore *struct {
				BytesWritten int64 `json:"bytes_written"`
				Fsyncs       int64 `json:"fsyncs"`
			} `json:"datastore"`
		}
		err = json.NewDecoder(resp.Body).Decode(&m)
		resp.Body.Close()
		if err != nil || m.Datastore == nil {
			continue
		}
		out[party] = storeCost{bytes: m.Datastore.BytesWritten, fsyncs: m.Datastore.Fsyncs, ok: true}
	}
	return out
}

// cpuTimes returns the CPU time (user + system) used so far by the relay,
// the aggregator and this process (the simulated volunteers: the load
// generator's own cost, reported apart), and PostgreSQL's processes' for
// a throwaway cluster.
func (pg *pgBench) cpuTimes(bins localrun.Binaries) map[string]time.Duration {
	out := cpuTimes(bins)
	if pg != nil && pg.cluster != nil && pg.cluster.Owned() {
		if d, err := pg.cluster.ServerCPU(); err == nil {
			out["postgres"] = d
		}
	}
	return out
}

func cpuTimes(bins localrun.Binaries) map[string]time.Duration {
	out := map[string]time.Duration{}
	for name, bin := range map[string]string{"relay": bins.Relay, "aggregator": bins.Aggregator} {
		if pid := procmem.PIDOf(bin); pid != 0 {
			out[name] = procCPU(strconv.Itoa(pid))
		}
	}
	out["volunteers"] = procCPU("self")
	return out
}

// procCPU reads utime + stime of /proc/PID/stat (fields 14 and 15, in
// USER_HZ ticks, 100 per second on Linux).
func procCPU(pid string) time.Duration {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+st) * 10 * time.Millisecond
}

// relayDropped sums the relay's /api/metrics secagg.dropped (reports the
// round machine accepted that never reached a chunk).
// relayMetrics reads the relay's GET /api/metrics: the reports it dropped
// (secagg.dropped, summed; -1 when unreadable) and its recent rounds'
// steps by round number.
func relayMetrics(ctx context.Context, cl *localrun.Cluster) (float64, map[int]relayRound) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cl.RelayURL()+"/api/metrics", nil)
	if err != nil {
		return -1, nil
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1, nil
	}
	defer resp.Body.Close()
	var m struct {
		SecAgg struct {
			Dropped map[string]float64 `json:"dropped"`
		} `json:"secagg"`
		Recent []relayRound `json:"recent_rounds"`
	}
	if json.NewDecoder(resp.Body).Decode(&m) != nil {
		return -1, nil
	}
	sum := 0.0
	for _, v := range m.SecAgg.Dropped {
		sum += v
	}
	rounds := make(map[int]relayRound, len(m.Recent))
	for _, r := range m.Recent {
		rounds[r.Round] = r
	}
	return sum, rounds
}

// relayRound is when a round's steps happened at the relay (its /api/metrics
// recent_rounds).
type relayRound struct {
	Round         int       `json:"round"`
	FirstReportAt time.Time `json:"first_report_at"`
	ClosedAt      time.Time `json:"closed_at"`
}

func hwm(bin string) int64 {
	pid := procmem.PIDOf(bin)
	if pid == 0 {
		return -1
	}
	return procmem.OfPID(pid, procmem.Peak)
}

func printTable(out io.Writer, rows []row) {
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "n\tedges\treports / checked in\tdropped\tannounce→model\tfirst report→model\trelay close→model\tCPU ms/report relay/agg/volunteers\tpeak MiB relay/agg\tstore B/report relay/agg\tfsyncs/report relay/agg\trestart s relay/agg\tPostgreSQL CPU ms/report\tWAL B/report\tWAL fsyncs/report\tedges: CPU ms/report, peak MiB each\tprep workers: CPU ms/report, chunks apart\trelay prep workers: CPU ms/report, reports apart\tload average\t")
	for _, r := range rows {
		var rc []string
		for i := range r.reports {
			rc = append(rc, fmt.Sprintf("%d/%d", r.reports[i], r.checkedIn[i]))
		}
		per := func(party string, f func(storeCost) int64, format string) string {
			c, ok := r.store[party]
			rep := r.store["reports"].bytes
			if !ok || !c.ok || rep == 0 {
				return "-"
			}
			return fmt.Sprintf(format, float64(f(c))/float64(rep))
		}
		bytes := func(c storeCost) int64 { return c.bytes }
		fsyncs := func(c storeCost) int64 { return c.fsyncs }
		rep := float64(max(r.store["reports"].bytes, 1))
		ms := func(p string) float64 { return float64(r.cpu[p].Microseconds()) / 1000 / rep }
		pgCPU, walB, walS := "-", "-", "-"
		if d, ok := r.cpu["postgres"]; ok {
			pgCPU = fmt.Sprintf("%.2f", float64(d.Microseconds())/1000/rep)
		}
		if r.wal != nil {
			walB, walS = fmt.Sprintf("%.0f", float64(r.wal.bytes)/rep), fmt.Sprintf("%.3f", float64(r.wal.syncs)/rep)
		}
		edgeCol := "-"
		if r.edges > 0 {
			edgeCol = fmt.Sprintf("%.2f, %d", ms("edges"), r.edgeHWM>>20)
		}
		prepCol := "-"
		if r.prepWorkers > 0 {
			prepCol = fmt.Sprintf("%d: %.2f, %.0f%%", r.prepWorkers, ms("prep"), 100*r.apart/max(r.apart+r.here, 1))
		}
		relayPrepCol := "-"
		if r.relayPrep > 0 {
			relayPrepCol = fmt.Sprintf("%d: %.2f, %.0f%%", r.relayPrep, ms("relayprep"), 100*r.relayApart/max(r.relayApart+r.relayHere, 1))
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%.0f\t%v\t%v\t%v\t%.2f/%.2f/%.2f\t%d/%d\t%s/%s\t%s/%s\t%.2f/%.2f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.n, r.edges, strings.Join(rc, ", "),
			r.dropped, durations(r.roundWall), durations(r.fromFirst), durations(r.closeLeft), ms("relay"), ms("aggregator"), ms("volunteers"),
			r.relayHWM>>20, r.aggHWM>>20,
			per("relay", bytes, "%.0f"), per("aggregator", bytes, "%.0f"),
			per("relay", fsyncs, "%.3f"), per("aggregator", fsyncs, "%.3f"),
			r.restart["relay"].Seconds(), r.restart["aggregator"].Seconds(), pgCPU, walB, walS, edgeCol, prepCol, relayPrepCol, r.load)
	}
	tw.Flush()
	fmt.Fprintln(out)
}

func durations(ds []time.Duration) string {
	var s []string
	for _, d := range ds {
		if d < 0 {
			s = append(s, "-")
			continue
		}
		s = append(s, d.String())
	}
	return strings.Join(s, ", ")
}

// pgBench is the PostgreSQL server of -store postgres.
type pgBench struct {
	dsn, how string
	cluster  *pgtest.Cluster // nil: -pg-dsn's server
}

// walStats is pg_stat_wal's wal_bytes and wal_sync (cluster-wide).
type walStats struct{ bytes, syncs int64 }

func startPG(dsn string) (*pgBench, error) {
	if dsn != "" {
		return &pgBench{dsn: dsn, how: "the server of -pg-dsn (PostgreSQL's CPU is not measured)"}, nil
	}
	c, err := pgtest.StartCluster()
	if err != nil {
		return nil, fmt.Errorf("-store postgres: %w", err)
	}
	return &pgBench{dsn: c.DSN, how: c.How, cluster: c}, nil
}

func (pg *pgBench) close() {
	if pg.cluster != nil {
		pg.cluster.Close()
	}
}

// wal reads pg_stat_wal (nil for the log, or when it cannot be read).
func (pg *pgBench) wal(ctx context.Context) *walStats {
	if pg == nil {
		return nil
	}
	conn, err := pgx.Connect(ctx, pg.dsn)
	if err != nil {
		return nil
	}
	defer conn.Close(ctx)
	var w walStats
	var b float64 // wal_bytes is numeric
	if err := conn.QueryRow(ctx, "SELECT wal_bytes::float8, wal_sync FROM pg_stat_wal").Scan(&b, &w.syncs); err != nil {
		return nil
	}
	w.bytes = int64(b)
	return &w
}

// startEdges starts k edge relays of the cluster's relay (relay
// -edge-of, from a copy of the relay's binary, so that the relay's own
// process is told apart).
func startEdges(ctx context.Context, bins localrun.Binaries, cl *localrun.Cluster, k int) ([]*localrun.Edge, error) {
	bin, err := binaryCopy(bins.Relay, "-edge")
	if err != nil {
		return nil, err
	}
	var edges []*localrun.Edge
	for i := range k {
		e, err := cl.StartEdge(ctx, bin, "", fmt.Sprintf("edge-%d", i+1))
		if err != nil {
			for _, e := range edges {
				e.Kill()
			}
			return nil, err
		}
		edges = append(edges, e)
	}
	return edges, nil
}

// binaryCopy returns bin+suffix, a copy of bin made once: a process
// started from it is told apart from bin's by its path (procmem.PIDOf).
func binaryCopy(bin, suffix string) (string, error) {
	out := bin + suffix
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		return "", err
	}
	return out, os.WriteFile(out, b, 0o755)
}

// startPrepWorkers starts k `aggregator prep-worker` processes on the
// aggregator's schema, from a copy of its binary (so that the
// aggregator's own process is found by its path).
func startPrepWorkers(ctx context.Context, server, dsn, schema string, k int) ([]*exec.Cmd, error) {
	bin, err := binaryCopy(server, "-prep")
	if err != nil {
		return nil, err
	}
	var cmds []*exec.Cmd
	for range k {
		cmd := exec.CommandContext(ctx, bin, "prep-worker", "-store", dsn, "-store-schema", schema, "-log-level", "warn")
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			for _, c := range cmds {
				c.Process.Kill()
				c.Wait()
			}
			return nil, err
		}
		cmds = append(cmds, cmd)
	}
	return cmds, nil
}

// relayPrepared reads the relay's reports prepared apart and here (its
// /api/metrics: secagg.prepared).
func relayPrepared(ctx context.Context, cl *localrun.Cluster) (apart, here float64) {
	var m struct {
		SecAgg struct {
			Prepared map[string]float64 `json:"prepared"`
		} `json:"secagg"`
	}
	if err := cl.GetJSONFrom(ctx, cl.RelayURL(), "/api/metrics", &m); err != nil {
		return 0, 0
	}
	return m.SecAgg.Prepared["apart"], m.SecAgg.Prepared["here"]
}

// chunkCounts reads the aggregator's secagg_chunks_total (prepared apart
// and here) from its GET /metrics.
func chunkCounts(ctx context.Context, cl *localrun.Cluster) (apart, here float64) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cl.AggregatorURL()+"/metrics", nil)
	if err != nil {
		return 0, 0
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		var v float64
		if _, err := fmt.Sscanf(l, `blanket_aggregator_secagg_chunks_total{prepared="apart"} %g`, &v); err == nil {
			apart = v
		}
		if _, err := fmt.Sscanf(l, `blanket_aggregator_secagg_chunks_total{prepared="here"} %g`, &v); err == nil {
			here = v
		}
	}
	return apart, here
}
