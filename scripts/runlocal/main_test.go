package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/scripts/internal/localrun"
	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/task"
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

// TestTaskFlag: -task passes the file to the aggregator and takes the
// task's suggested protocol, epsilon and rounds unless a flag sets them;
// a task without simulation rows runs with real volunteers only, and more
// simulated volunteers than rows is refused.
func TestTaskFlag(t *testing.T) {
	bc := "../../tasks/breast-cancer/task.json"
	o, err := parseFlags([]string{"-task", bc, "-epsilon", "1"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Join(o.aggregatorArgs(), " ")
	if !strings.Contains(args, "-task "+bc) || !strings.Contains(args, "-rounds 10") || !strings.Contains(args, "-epsilon 1") || o.clients != 400 {
		t.Errorf("args %s, clients %d", args, o.clients)
	}
	o, err = parseFlags([]string{"-task", "../../tasks/class-survey/task.json"}, io.Discard)
	if err != nil || o.clients != 0 || !o.paused {
		t.Errorf("survey: clients %d paused %v: %v", o.clients, o.paused, err)
	}
	if _, err := parseFlags([]string{"-task", bc, "-clients", "500"}, io.Discard); err == nil {
		t.Error("500 simulated volunteers for 456 rows accepted")
	}
	if _, err := parseFlags([]string{"-task", "../../tasks/class-survey/task.json", "-clients", "5"}, io.Discard); err == nil {
		t.Error("simulated volunteers without simulation rows accepted")
	}
	// The built-in digits task named: its digits are mapped by the
	// cohort (the shares dealt) and the aggregator (its holdout), not here.
	o, err = parseFlags([]string{"-task", task.DigitsName}, io.Discard)
	if err != nil || o.tk == nil || o.tk.Source != task.SourceBuiltin || o.sets != nil {
		t.Errorf("digits task file: task %v, sets %v: %v", o.tk, o.sets, err)
	}
}

// TestNextClassTaskSuggestions: a new class whose task was chosen on the
// operator page runs with that task's suggested rounds and budget where
// the command line gave none (breast cancer suggests 10 rounds, the
// digits' default is 5), the relay's target follows, a flag still wins,
// and a class without a chosen task changes nothing.
func TestNextClassTaskSuggestions(t *testing.T) {
	class := t.TempDir()
	b, err := os.ReadFile("../../tasks/breast-cancer/task.json")
	if err != nil {
		t.Fatal(err)
	}
	db, err := datastore.Open(class, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *datastore.Tx) error { tx.Put(task.NextClassBucket, task.FileName, b); return nil })
	if err := errors.Join(err, db.Close()); err != nil {
		t.Fatal(err)
	}
	o, err := parseFlags([]string{"-epsilon", "2"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.rounds != 5 || o.epsilon != 2 || o.protocol != "secagg" {
		t.Fatalf("digits: %s, %d rounds, epsilon %v", o.protocol, o.rounds, o.epsilon)
	}
	if o.nextClass(t.TempDir(), io.Discard) {
		t.Error("a class without a chosen task changed the parameters")
	}
	var out strings.Builder
	if !o.nextClass(class, &out) || o.rounds != 10 || o.epsilon != 2 || o.protocol != "secagg" {
		t.Fatalf("breast cancer next: %s, %d rounds, epsilon %v (%q)", o.protocol, o.rounds, o.epsilon, out.String())
	}
	if args := strings.Join(o.aggregatorArgs(), " "); !strings.Contains(args, "-rounds 10") || !strings.Contains(args, "-epsilon 2") {
		t.Errorf("aggregator args %s", args)
	}
	// The relay composes at the same target and δ (the task's; the
	// breast cancer task names 1e-05) and holds the same minimum batch.
	if r := strings.Join(o.relayArgs(), " "); r != "-target-epsilon 2 -target-delta 1e-05 -min-batch 20" {
		t.Errorf("relay args %s", r)
	}
	if args := strings.Join(o.aggregatorArgs(), " "); !strings.Contains(args, "-delta 1e-05") || !strings.Contains(args, "-min-batch 20") {
		t.Errorf("aggregator args %s", args)
	}
	if !strings.Contains(out.String(), "10 rounds") {
		t.Errorf("the terminal was not told: %q", out.String())
	}
	o, _ = parseFlags([]string{"-rounds", "3"}, io.Discard)
	if o.nextClass(class, io.Discard) || o.rounds != 3 {
		t.Errorf("-rounds 3 given: %d rounds for the next class", o.rounds)
	}
}

// TestAbortLines: a cancelled round is explained in the terminal, with
// what to do once for a streak of rounds cancelled for the same cause.
func TestAbortLines(t *testing.T) {
	a := &abortNote{Round: 3, Message: "Round 3 was cancelled: only 12 of the 400 connected volunteers sent an update within 30 s.",
		Advice: "start with fewer (go run ./scripts/runlocal -clients 100)"}
	lines, advised := abortLines(a, 3, "")
	if len(lines) != 2 || !strings.Contains(lines[0], "only 12 of the 400") || !strings.Contains(lines[1], "what to do: start with fewer") {
		t.Fatalf("lines %q", lines)
	}
	b := *a
	b.Round, b.Message = 4, "Round 4 was cancelled: only 15 of the 400 connected volunteers sent an update within 30 s."
	if again, _ := abortLines(&b, 4, advised); len(again) != 1 || !strings.Contains(again[0], "only 15") {
		t.Errorf("the next round of the streak: %q, want its numbers without the advice again", again)
	}
	if other, _ := abortLines(a, 4, ""); other != nil {
		t.Errorf("round 3's explanation printed for round 4: %q", other)
	}
	if none, _ := abortLines(nil, 3, ""); none != nil {
		t.Errorf("lines without an abort: %q", none)

	}
}

// TestDeltaForTask (issue 23): a task's δ reaches both servers; without
// one both compose at 1e-5. A task at δ = 1e-6 once left the relay's
// backstop at 1e-5.
func TestDeltaForTask(t *testing.T) {
	if d := deltaFor(nil); d != 1e-5 {
		t.Errorf("digits: delta %v", d)
	}
	tk := &task.Task{Privacy: task.Privacy{Delta: 1e-6}}
	if d := deltaFor(tk); d != 1e-6 {
		t.Errorf("task at 1e-6: delta %v", d)
	}
	o := options{epsilon: 4, delta: deltaFor(tk), clients: 400, rounds: 5, protocol: "secagg"}
	if r := strings.Join(o.relayArgs(), " "); !strings.Contains(r, "-target-delta 1e-06") {
		t.Errorf("relay args %s", r)
	}
	if a := strings.Join(o.aggregatorArgs(), " "); !strings.Contains(a, "-delta 1e-06") {
		t.Errorf("aggregator args %s", a)
	}
}

// TestFormatRoundSaysOfHowMany (issue 25): the terminal says how many of
// the volunteers who checked in reported, and when a round closed short,
// that it did and why.
func TestFormatRoundSaysOfHowMany(t *testing.T) {
	acc := 0.78
	full := formatRound(localrun.Round{Round: 3, Status: "ok", Accuracy: &acc, N: 389, Reports: 389, CheckedIn: 400})
	if !strings.Contains(full, "reports  389 of 400 checked in (97%)") || strings.Contains(full, "short") {
		t.Errorf("%q", full)
	}
	short := formatRound(localrun.Round{Round: 4, Status: "ok", N: 209, Reports: 209, CheckedIn: 400})
	if !strings.Contains(short, "209 of 400 checked in (52%)") || !strings.Contains(short, "closed short: 191 checked-in volunteers") {
		t.Errorf("%q", short)
	}
}
