// Command bench measures embedded datastore engines on the aggregator's
// secure-summation round (see RESULTS.md for the workload and the commands).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	chunk     = 8
	aggBytes  = 7850 * 16 // 125,600
	recBytes  = 48
	keyBytes  = 32
	ckptEvery = 64 // reports, variant b
)

var (
	mode     = flag.String("mode", "run", "run | kill | recover")
	engine   = flag.String("engine", "bbolt", "bbolt | bbolt-batch | sqlite | minilog | datastore")
	variant  = flag.String("variant", "a", "a: aggregate rewritten every chunk; b: aggregate checkpointed every 64 reports")
	n        = flag.Int("n", 1000, "reports per round (multiple of 8); 0 = open+close only (fsync baseline)")
	conc     = flag.Int("conc", 1, "chunks in flight (goroutines)")
	dir      = flag.String("dir", "", "store directory (wiped first in run/kill modes)")
	progress = flag.Bool("progress", false, "print one line per committed chunk (for -mode kill)")
	noWipe   = flag.Bool("nowipe", false, "do not wipe dir (run mode)")
)

type ioStat map[string]int64

func readIO() ioStat {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		panic(err)
	}
	m := ioStat{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ": "); ok {
			m[k], _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return m
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func open(name, d string) (Engine, error) {
	f, ok := engines[name]
	if !ok {
		return nil, fmt.Errorf("unknown engine %q", name)
	}
	return f(d)
}

func main() {
	flag.Parse()
	if *dir == "" {
		*dir = fmt.Sprintf("data/%s-%s-n%d-c%d", *engine, *variant, *n, *conc)
	}
	var err error
	switch *mode {
	case "run":
		err = run()
	case "kill":
		err = kill()
	case "recover":
		err = recoverMode()
	default:
		err = fmt.Errorf("unknown mode %q", *mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	if !*noWipe {
		os.RemoveAll(*dir)
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	// Inputs are generated before timing (deterministic; content is irrelevant to these engines).
	rng := rand.New(rand.NewChaCha8([32]byte{1}))
	keys := make([][]byte, *n)
	recs := make([][2][]byte, *n)
	for i := range keys {
		k, v := make([]byte, keyBytes), make([]byte, recBytes)
		for j := range k {
			k[j] = byte(rng.Uint32())
		}
		for j := range v {
			v[j] = byte(rng.Uint32())
		}
		keys[i], recs[i] = k, [2][]byte{k, v}
	}
	agg0 := make([]byte, aggBytes)
	for j := range agg0 {
		agg0[j] = byte(rng.Uint32())
	}

	t0 := time.Now()
	e, err := open(*engine, *dir)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	openDur := time.Since(t0)
	io0, cpu0, w0 := readIO(), cpuNow(), time.Now()
	total := *n / chunk
	var next, done atomic.Int64
	var wg sync.WaitGroup
	var out = bufio.NewWriter(os.Stdout)
	var outMu sync.Mutex
	errs := make(chan error, *conc)
	for g := 0; g < *conc; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			agg := append([]byte(nil), agg0...) // this goroutine's snapshot buffer
			for {
				c := int(next.Add(1)) // 1-based chunk index
				if c > total {
					return
				}
				var a []byte
				if *variant == "a" || (c*chunk)%ckptEvery == 0 {
					agg[c%aggBytes]++ // the aggregate changed
					a = agg
				}
				if err := e.Commit(recs[(c-1)*chunk:c*chunk], a); err != nil {
					errs <- fmt.Errorf("chunk %d: %w", c, err)
					return
				}
				d := done.Add(1)
				if *progress {
					outMu.Lock()
					fmt.Fprintf(out, "C %d\n", d)
					out.Flush()
					outMu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return err
	}
	if *n > 0 {
		rv := make([]byte, 200)
		if err := e.CloseRound([]byte(fmt.Sprintf("%020d", 1)), rv, keys); err != nil {
			return fmt.Errorf("close round: %w", err)
		}
	}
	wall, cpu, io1 := time.Since(w0), cpuNow()-cpu0, readIO()
	sizeOpen, filesOpen := dirSize(*dir)
	t1 := time.Now()
	extra := map[string]any{}
	if s, ok := e.(interface{ Stats() map[string]any }); ok {
		extra = s.Stats()
	}
	if err := e.Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	closeDur := time.Since(t1)
	io2 := readIO()
	sizeClosed, filesClosed := dirSize(*dir)
	res := map[string]any{
		"engine": *engine, "variant": *variant, "n": *n, "conc": *conc,
		"open_ms": ms(openDur), "wall_ms": ms(wall), "cpu_ms": ms(cpu), "close_ms": ms(closeDur),
		"write_bytes_round":     io1["write_bytes"] - io0["write_bytes"],
		"write_bytes_withclose": io2["write_bytes"] - io0["write_bytes"],
		"cancelled_write_bytes": io2["cancelled_write_bytes"] - io0["cancelled_write_bytes"],
		"wchar_round":           io1["wchar"] - io0["wchar"],
		"syscw_round":           io1["syscw"] - io0["syscw"],
		"size_open":             sizeOpen, "files_open": filesOpen,
		"size_closed": sizeClosed, "files_closed": filesClosed,
		"extra": extra,
	}
	if !*progress {
		b, _ := json.Marshal(res)
		fmt.Println(string(b))
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// kill runs the round in a child process, SIGKILLs it once half the chunks are
// committed, then measures recovery (Open + first read) in 3 fresh processes.
func kill() error {
	os.RemoveAll(*dir)
	self, _ := os.Executable()
	args := []string{"-mode", "run", "-progress", "-engine", *engine, "-variant", *variant,
		"-n", strconv.Itoa(*n), "-conc", strconv.Itoa(*conc), "-dir", *dir}
	cmd := exec.Command(self, args...)
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	sc := bufio.NewScanner(stdout)
	half, last := *n/chunk/2, 0
	for sc.Scan() {
		last, _ = strconv.Atoi(strings.TrimPrefix(sc.Text(), "C "))
		if last >= half {
			cmd.Process.Signal(syscall.SIGKILL)
			break
		}
	}
	cmd.Wait()
	sizeKilled, files := dirSize(*dir)
	var recs []map[string]any
	var totals []float64
	for i := 0; i < 3; i++ {
		out, err := exec.Command(self, "-mode", "recover", "-engine", *engine, "-dir", *dir).Output()
		if err != nil {
			return fmt.Errorf("recover: %w", err)
		}
		var r map[string]any
		if err := json.Unmarshal(out, &r); err != nil {
			return err
		}
		recs = append(recs, r)
		totals = append(totals, r["total_ms"].(float64))
	}
	sort.Float64s(totals)
	b, _ := json.Marshal(map[string]any{
		"engine": *engine, "variant": *variant, "n": *n, "conc": *conc,
		"killed_after_chunks": last, "size_killed": sizeKilled, "files_killed": files,
		"recover_median_ms": totals[1], "recover_runs": recs,
	})
	fmt.Println(string(b))
	return nil
}

func recoverMode() error {
	t0 := time.Now()
	e, err := open(*engine, *dir)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	t1 := time.Now()
	a, nn, err := e.ReadState()
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	t2 := time.Now()
	e.Close()
	b, _ := json.Marshal(map[string]any{"open_ms": ms(t1.Sub(t0)), "read_ms": ms(t2.Sub(t1)),
		"total_ms": ms(t2.Sub(t0)), "agg_len": a, "nonces": nn})
	fmt.Println(string(b))
	return nil
}
