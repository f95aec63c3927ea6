package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestBusyLoopHelper is not a test: run by TestMakeRunConvergesUnderLoad
// in a process of its own with BLANKET_BUSY_LOOP=1, it spins until killed,
// a competing load for the cores.
func TestBusyLoopHelper(t *testing.T) {
	if os.Getenv("BLANKET_BUSY_LOOP") != "1" {
		t.Skip("a busy loop for TestMakeRunConvergesUnderLoad")
	}
	for n := 0; ; n++ {
	}
}

// startBusyLoops starts n busy-loop processes (this test binary's
// TestBusyLoopHelper) and kills them when the test ends.
func startBusyLoops(t *testing.T, n int) {
	t.Helper()
	for range n {
		cmd := exec.Command(os.Args[0], "-test.run=^TestBusyLoopHelper$", "-test.timeout=0")
		cmd.Env = append(os.Environ(), "BLANKET_BUSY_LOOP=1")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
}

var roundLine = regexp.MustCompile(`^round\s+(\d+)\s+(\S+)`)
var reportsField = regexp.MustCompile(`reports\s+(\d+)`)
var memLine = regexp.MustCompile(`^peak memory \(resident\):.*; (\d+) MB in all;`)

// TestMakeRunConvergesUnderLoad runs `make run` (this command, its
// defaults: secure summation at epsilon 4, the rounds sized from a
// volunteer's measured speed, the pool of 2 x GOMAXPROCS trainers, a round
// closing once every volunteer who checked in has reported) scaled to 100
// simulated volunteers and 3 rounds, with two busy-loop processes
// competing for the cores. Every round must complete (status ok) and the
// share of reports that arrived in time is logged; it must be at least
// half (a lost volunteer's report is the only one the policy gives up,
// after the cap), where before the policy a competing load completed no
// round in 20 minutes. The three processes' peak resident memory
// together must stay under 1 GB. A full run on an idle machine is in the README.
// The wait is generous: 30 minutes for builds, three rounds and the
// busy loops (a run takes 2 to 5 minutes on two loaded cores).
func TestMakeRunConvergesUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries and runs 100 volunteers against two busy loops")
	}
	const clients, rounds = 100, 3
	_, file, _, _ := runtime.Caller(0)
	t.Chdir(filepath.Join(filepath.Dir(file), "..", ".."))
	// No 30 s compression; but a brotli copy left by an earlier make run
	// of another module would be refused by the relay as stale: drop it.
	compressWasm = dropStaleBrotli
	startBusyLoops(t, 2)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	pr, pw := io.Pipe()
	errc := make(chan error, 1)
	go func() {
		errc <- run(ctx, []string{"-clients", strconv.Itoa(clients), "-rounds", strconv.Itoa(rounds), "-dir", t.TempDir()}, pw, io.Discard)
		pw.Close()
	}()
	var out strings.Builder
	status := map[int]string{}
	received, finished, totalMB := 0, 0, -1
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		line := sc.Text()
		out.WriteString(line + "\n")
		if m := roundLine.FindStringSubmatch(line); m != nil {
			r, _ := strconv.Atoi(m[1])
			status[r] = m[2]
			finished++
			if f := reportsField.FindStringSubmatch(line); f != nil {
				n, _ := strconv.Atoi(f[1])
				received += n
			}
		}
		if m := memLine.FindStringSubmatch(line); m != nil {
			totalMB, _ = strconv.Atoi(m[1])
			cancel()
		}
	}
	if err := <-errc; err != nil && ctx.Err() == nil {
		t.Fatalf("make run: %v\n%s", err, out.String())
	}
	ok := 0
	for _, s := range status {
		if s == "ok" {
			ok++
		}
	}
	share := float64(received) / float64(max(finished, 1)*clients)
	t.Logf("%d of %d rounds ok, %d finished; %.1f%% of the reports in time (%d of %d)\n%s",
		ok, rounds, finished, 100*share, received, finished*clients, out.String())
	if ok < rounds {
		t.Fatalf("%d of %d rounds ok under load", ok, rounds)
	}
	// The footprint goal is 1 GB for `make run`'s 400 volunteers;
	// at 100 the same bound must hold with room to spare (the sum of the
	// three processes' peaks, as runlocal prints it).
	if runtime.GOOS == "linux" && (totalMB < 0 || totalMB > 1000) {
		t.Errorf("peak memory of the run: %d MB in all (-1: no line), want at most 1,000", totalMB)
	}
	if share < 0.5 {
		t.Fatalf("only %.1f%% of the reports in time", 100*share)
	}
}

// dropStaleBrotli removes file.br when it is not file's (its recorded
// SHA-256 differs), so the relay serves the module uncompressed.
func dropStaleBrotli(file string) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(raw)
	if got, err := os.ReadFile(file + ".br.sha256"); err == nil && string(got) == hex.EncodeToString(sum[:]) {
		return nil
	}
	for _, f := range []string{file + ".br", file + ".br.sha256"} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}
