package main

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/scripts/internal/localrun"
)

func TestFlagsRealStudentsOnly(t *testing.T) {
	o, err := parseFlags([]string{"-clients", "0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	args := o.aggregatorArgs()
	want := map[string]string{"-expected-n": "20", "-min-batch": "10", "-round-timeout": "30s"}
	for i := 0; i+1 < len(args); i++ {
		if v, ok := want[args[i]]; ok && args[i+1] != v {
			t.Errorf("%s %s, want %s", args[i], args[i+1], v)
		}
	}
	if !slices.Contains(args, "-paused") {
		t.Error("real students only should wait for the operator's Start")
	}
	if o, _ := parseFlags([]string{"-clients", "0", "-students", "4"}, io.Discard); !slices.Contains(o.aggregatorArgs(), "3") {
		t.Errorf("4 students: minimum batch should be 3, args %v", o.aggregatorArgs())
	}
	for _, bad := range [][]string{{"-clients", "0", "-students", "0"}, {"-clients", "-1"}, {"-lan", "-host", "10.0.0.2"},
		{"-public-url", "ftp://x"}, {"-host", "laptop"}, {"-class", "../x"}, {"-class", "a", "-resume"}} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// TestClassDir: a new run is a new class and never touches an earlier
// one's directory (its ledger); -resume takes the latest, -class a name.
func TestClassDir(t *testing.T) {
	root := t.TempDir()
	now := time.Date(2026, 11, 23, 9, 30, 0, 0, time.UTC)
	o, _ := parseFlags(nil, io.Discard)
	if _, err := classDir(root, options{resume: true}, now); err == nil {
		t.Error("-resume without a class should fail")
	}
	first, err := classDir(root, o, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(first, 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(first, "ledger.jsonl"), []byte("spent"), 0o600)
	second, _ := classDir(root, o, now)
	if second == first {
		t.Fatalf("a second class in the same second reuses %s", first)
	}
	os.MkdirAll(second, 0o700)
	if got, _ := classDir(root, options{resume: true}, now); got != second {
		t.Errorf("-resume: %s, want the latest %s", got, second)
	}
	if got, _ := classDir(root, options{class: "monday"}, now); got != filepath.Join(root, "classes", "monday") {
		t.Errorf("-class monday: %s", got)
	}
	if b, _ := os.ReadFile(filepath.Join(first, "ledger.jsonl")); string(b) != "spent" {
		t.Error("the first class's ledger changed")
	}
}

func TestPassword(t *testing.T) {
	a, b := password(), password()
	if a == b || len(a) != 19 || strings.Count(a, "-") != 3 || strings.ContainsAny(a, "01ilo") {
		t.Errorf("passwords %q, %q", a, b)
	}
}

// TestRoundTiming: 400 volunteers at one report every 32 ms (13 s of
// work) get a cap of 49 s and a grace of 36 s; a fast machine keeps the
// 30 s floor and grace; a slow one (4x) gets proportionally more.
func TestRoundTiming(t *testing.T) {
	for _, c := range []struct {
		per           time.Duration
		n             int
		timeout, grce time.Duration
	}{
		{32500 * time.Microsecond, 400, 49 * time.Second, 36 * time.Second},
		{500 * time.Microsecond, 400, 30 * time.Second, 30 * time.Second},
		{130 * time.Millisecond, 400, 166 * time.Second, 114 * time.Second},
	} {
		to, g := roundTiming(c.per, c.n, 30*time.Second)
		if to != c.timeout || g != c.grce {
			t.Errorf("%v x %d: timeout %v grace %v, want %v %v", c.per, c.n, to, g, c.timeout, c.grce)
		}
	}
}

// TestAbortAdvice: the sentence says how many answered in what time, and
// what to do.
func TestAbortAdvice(t *testing.T) {
	a := localrun.LastAbort{Round: 3, Reason: "below min batch", Received: 12, Expected: 400, CheckedIn: 30, Timeout: 30}
	got := abortAdvice(a, 400)
	if !strings.Contains(got, "only 12 of 400 volunteers answered in 30s") || !strings.Contains(got, "-clients 100") {
		t.Errorf("advice %q", got)
	}
	if got := abortAdvice(a, 0); !strings.Contains(got, "-round-time 60s") {
		t.Errorf("classroom advice %q", got)
	}
}
