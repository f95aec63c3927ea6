package ledger

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/shared/privacy"
)

// basic is basic composition of pure eps0-DP rounds (Dwork and Roth 2014,
// Theorem 3.16 with delta = 0): the sum of the eps0. Test releases use eps0
// values that are exact in binary, so sums compare exactly.
func basic(rels []privacy.Release, _ float64) (float64, string, error) {
	var s float64
	for _, r := range rels {
		s += r.Eps0
	}
	return s, "basic", nil
}

func rel(round int, eps0 float64) privacy.Release {
	return privacy.Release{
		Round: round, Protocol: privacy.ProtocolSSSimple, Randomizer: privacy.RandomizerLaplace,
		Eps0: eps0, D: 10, K: 10, N: 100, NP: 120,
	}
}

func opts(target float64) Options {
	return Options{TargetEpsilon: target, TargetDelta: 1e-6, Composer: basic}
}

func open(t *testing.T, path string, o Options) *Ledger {
	t.Helper()
	l, err := Open(path, o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func mustCharge(t *testing.T, l *Ledger, rs ...privacy.Release) {
	t.Helper()
	for _, r := range rs {
		if err := l.Charge(r); err != nil {
			t.Fatalf("Charge(round %d): %v", r.Round, err)
		}
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestChargeReplayRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	l := open(t, path, opts(10))
	if eps, delta, method := l.Spent(); eps != 0 || delta != 0 || method != "" {
		t.Fatalf("empty ledger Spent = (%v, %v, %q), want (0, 0, \"\")", eps, delta, method)
	}
	apes := privacy.Release{
		Round: 7, Protocol: privacy.ProtocolAPES, Randomizer: privacy.RandomizerClipLaplace,
		D: 3, K: 3, N: 50, PersonalEps: []float64{0.5, 1.25, 0.1}, Population: 1000, CheckInRate: 0.05,
	}
	want := []privacy.Release{rel(1, 0.25), rel(2, 0.5), rel(4, 1.0/3), apes}
	mustCharge(t, l, want...)
	eps, delta, method := l.Spent()
	if wantEps, _, _ := basic(want, 0); eps != wantEps || delta != 1e-6 || method != "basic" {
		t.Fatalf("Spent = (%v, %v, %q), want (%v, 1e-6, basic)", eps, delta, method, wantEps)
	}
	if got := l.Releases(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Releases = %+v, want %+v", got, want)
	}
	if got := l.LastRound(); got != 7 {
		t.Fatalf("LastRound = %d, want 7", got)
	}
	if n := bytes.Count(readFile(t, path), []byte("\n")); n != len(want) {
		t.Fatalf("file has %d lines, want %d", n, len(want))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	// Restart: identical state, every float bit-identical.
	l2 := open(t, path, opts(10))
	if got := l2.Releases(); !reflect.DeepEqual(got, want) {
		t.Fatalf("replayed Releases = %+v, want %+v", got, want)
	}
	eps2, delta2, method2 := l2.Spent()
	if math.Float64bits(eps2) != math.Float64bits(eps) || delta2 != delta || method2 != method {
		t.Fatalf("replayed Spent = (%v, %v, %q), want (%v, %v, %q)", eps2, delta2, method2, eps, delta, method)
	}
	if l2.DiscardedTail() != nil {
		t.Fatalf("clean file reported a torn tail %q", l2.DiscardedTail())
	}
	// Appending after a restart continues the sequence.
	if err := l2.Charge(rel(7, 0.25)); !errors.Is(err, ErrInvalidRelease) {
		t.Fatalf("re-charging round 7 after restart: err = %v, want ErrInvalidRelease", err)
	}
	mustCharge(t, l2, rel(8, 0.25))
	l2.Close()
	l3 := open(t, path, opts(10))
	if got := len(l3.Releases()); got != 5 {
		t.Fatalf("after second restart %d releases, want 5", got)
	}
}

func TestReleasesIsACopy(t *testing.T) {
	l := open(t, filepath.Join(t.TempDir(), "l"), opts(10))
	r := privacy.Release{Round: 1, Protocol: privacy.ProtocolAPES, Randomizer: privacy.RandomizerLaplace,
		D: 2, K: 2, N: 5, PersonalEps: []float64{1, 2}}
	mustCharge(t, l, r)
	r.PersonalEps[0] = 99 // the caller's slice
	got := l.Releases()
	got[0].PersonalEps[1] = 99
	if again := l.Releases(); again[0].PersonalEps[0] != 1 || again[0].PersonalEps[1] != 2 {
		t.Fatalf("ledger state aliased a caller's slice: %v", again[0].PersonalEps)
	}
}

func TestRefusalWritesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	l := open(t, path, opts(1))
	mustCharge(t, l, rel(1, 0.5), rel(2, 0.25))
	before := readFile(t, path)

	if eps, err := l.CanCharge(rel(3, 0.5)); !errors.Is(err, ErrBudgetExhausted) || eps != 1.25 {
		t.Fatalf("CanCharge = (%v, %v), want (1.25, ErrBudgetExhausted)", eps, err)
	}
	err := l.Charge(rel(3, 0.5))
	var be *BudgetError
	if !errors.Is(err, ErrBudgetExhausted) || !errors.As(err, &be) {
		t.Fatalf("Charge over budget: err = %v, want a *BudgetError", err)
	}
	if be.WouldBe != 1.25 || be.Target != 1 || be.Round != 3 || be.Method != "basic" || be.Delta != 1e-6 {
		t.Fatalf("BudgetError = %+v", be)
	}
	if !strings.Contains(err.Error(), "1.25") {
		t.Fatalf("error %q does not name the would-be epsilon", err)
	}
	if after := readFile(t, path); !bytes.Equal(before, after) {
		t.Fatalf("refused charge wrote to the file:\n%s", after[len(before):])
	}
	if eps, _, _ := l.Spent(); eps != 0.75 {
		t.Fatalf("Spent after refusal = %v, want 0.75", eps)
	}
	if got := l.Remaining(); got != 0.25 {
		t.Fatalf("Remaining = %v, want 0.25", got)
	}
	// A release that exactly reaches the target fits; nothing more does.
	if _, err := l.CanCharge(rel(3, 0.25)); err != nil {
		t.Fatalf("CanCharge(exactly the rest) = %v", err)
	}
	mustCharge(t, l, rel(3, 0.25))
	if got := l.Remaining(); got != 0 {
		t.Fatalf("Remaining = %v, want 0", got)
	}
	if err := l.Charge(rel(4, 1.0/1024)); !errors.Is(err, ErrBudgetExhausted) {
		t.Fatalf("charge past an exhausted budget: err = %v", err)
	}
}

func TestInvalidReleasesRejected(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	l := open(t, path, opts(100))
	mustCharge(t, l, rel(5, 0.5))
	before := readFile(t, path)
	mod := func(f func(*privacy.Release)) privacy.Release {
		r := rel(6, 0.5)
		f(&r)
		return r
	}
	cases := []struct {
		name  string
		rel   privacy.Release
		param bool   // also a privacy.ErrInvalidParameter
		want  string // in the message
	}{
		{"NaN eps0", mod(func(r *privacy.Release) { r.Eps0 = math.NaN() }), true, "eps0"},
		{"infinite eps0", mod(func(r *privacy.Release) { r.Eps0 = math.Inf(1) }), true, "eps0"},
		{"negative eps0", mod(func(r *privacy.Release) { r.Eps0 = -0.5 }), true, "eps0"},
		{"zero n", mod(func(r *privacy.Release) { r.N = 0 }), true, "n=0"},
		{"negative n_p", mod(func(r *privacy.Release) { r.NP = -1 }), true, "n_p=-1"},
		{"unknown protocol", mod(func(r *privacy.Release) { r.Protocol = "flame2" }), true, `unknown protocol "flame2"`},
		{"round zero", mod(func(r *privacy.Release) { r.Round = 0 }), true, "round must be >= 1"},
		{"same round", mod(func(r *privacy.Release) { r.Round = 5 }), false, "round 5 does not follow the last charged round 5"},
		{"earlier round", mod(func(r *privacy.Release) { r.Round = 3 }), false, "round 3 does not follow"},
		{"delta0 one", mod(func(r *privacy.Release) { r.Delta0 = 1 }), true, "delta0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for name, f := range map[string]func(privacy.Release) error{
				"Charge":    l.Charge,
				"CanCharge": func(r privacy.Release) error { _, err := l.CanCharge(r); return err },
			} {
				err := f(c.rel)
				if !errors.Is(err, ErrInvalidRelease) {
					t.Fatalf("%s: err = %v, want ErrInvalidRelease", name, err)
				}
				if c.param != errors.Is(err, privacy.ErrInvalidParameter) {
					t.Fatalf("%s: errors.Is(err, privacy.ErrInvalidParameter) = %v, want %v", name, !c.param, c.param)
				}
				if !strings.Contains(err.Error(), c.want) {
					t.Fatalf("%s: err = %q, want it to mention %q", name, err, c.want)
				}
			}
		})
	}
	if after := readFile(t, path); !bytes.Equal(before, after) {
		t.Fatalf("rejected releases wrote to the file:\n%s", after[len(before):])
	}
	if got := l.Releases(); len(got) != 1 {
		t.Fatalf("%d releases after rejections, want 1", len(got))
	}
}

func TestInvalidOptions(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		o    Options
	}{
		{"zero epsilon", Options{TargetEpsilon: 0, TargetDelta: 1e-6, Composer: basic}},
		{"negative epsilon", Options{TargetEpsilon: -1, TargetDelta: 1e-6, Composer: basic}},
		{"NaN epsilon", Options{TargetEpsilon: math.NaN(), TargetDelta: 1e-6, Composer: basic}},
		{"infinite epsilon", Options{TargetEpsilon: math.Inf(1), TargetDelta: 1e-6, Composer: basic}},
		{"zero delta", Options{TargetEpsilon: 1, TargetDelta: 0, Composer: basic}},
		{"negative delta", Options{TargetEpsilon: 1, TargetDelta: -1e-6, Composer: basic}},
		{"delta one", Options{TargetEpsilon: 1, TargetDelta: 1, Composer: basic}},
		{"NaN delta", Options{TargetEpsilon: 1, TargetDelta: math.NaN(), Composer: basic}},
		{"no composer", Options{TargetEpsilon: 1, TargetDelta: 1e-6}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, "l")
			l, err := Open(path, c.o)
			if !errors.Is(err, ErrInvalidOptions) {
				if l != nil {
					l.Close()
				}
				t.Fatalf("Open: err = %v, want ErrInvalidOptions", err)
			}
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("invalid options created the file (stat err %v)", err)
			}
		})
	}
}

func TestComposerFailureWritesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l")
	var mode atomic.Int32 // 0 ok, 1 error, 2 NaN, 3 negative
	o := opts(10)
	o.Composer = func(rs []privacy.Release, d float64) (float64, string, error) {
		switch mode.Load() {
		case 1:
			return 0, "", errors.New("boom")
		case 2:
			return math.NaN(), "nan", nil
		case 3:
			return -1, "neg", nil
		}
		return basic(rs, d)
	}
	l := open(t, path, o)
	mustCharge(t, l, rel(1, 0.5))
	before := readFile(t, path)
	for m := int32(1); m <= 3; m++ {
		mode.Store(m)
		if err := l.Charge(rel(2, 0.5)); !errors.Is(err, ErrComposer) {
			t.Fatalf("mode %d: err = %v, want ErrComposer", m, err)
		}
	}
	if !bytes.Equal(before, readFile(t, path)) {
		t.Fatal("composer failure wrote to the file")
	}
	// A composer that fails on replay makes Open fail: the loss is unknown.
	l.Close()
	mode.Store(1)
	if l2, err := Open(path, o); !errors.Is(err, ErrComposer) {
		if l2 != nil {
			l2.Close()
		}
		t.Fatalf("Open with failing composer: err = %v, want ErrComposer", err)
	}
}

// TestTornTail cuts the last record at every byte (a crash mid-write) and
// checks the documented semantics: the fragment is not counted, is reported,
// is truncated away durably, and its round can be charged again.
func TestTornTail(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "full")
	l := open(t, src, opts(10))
	mustCharge(t, l, rel(1, 0.25), rel(2, 0.25), rel(3, 0.5))
	l.Close()
	full := readFile(t, src)
	lastStart := bytes.LastIndexByte(full[:len(full)-1], '\n') + 1

	// Every strict prefix of the last line, including the complete JSON
	// object missing only its '\n'.
	for cut := lastStart + 1; cut < len(full); cut++ {
		path := filepath.Join(dir, fmt.Sprintf("cut%d", cut))
		if err := os.WriteFile(path, full[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		l, err := Open(path, opts(10))
		if err != nil {
			t.Fatalf("cut at %d: Open: %v", cut, err)
		}
		if got := l.Releases(); len(got) != 2 || got[1].Round != 2 {
			l.Close()
			t.Fatalf("cut at %d: replayed %d releases, want rounds 1-2", cut, len(got))
		}
		if eps, _, _ := l.Spent(); eps != 0.5 {
			l.Close()
			t.Fatalf("cut at %d: Spent = %v, want 0.5", cut, eps)
		}
		if got := l.DiscardedTail(); !bytes.Equal(got, full[lastStart:cut]) {
			l.Close()
			t.Fatalf("cut at %d: DiscardedTail = %q, want %q", cut, got, full[lastStart:cut])
		}
		if st, _ := os.Stat(path); st.Size() != int64(lastStart) {
			l.Close()
			t.Fatalf("cut at %d: file is %d bytes after recovery, want %d", cut, st.Size(), lastStart)
		}
		// The uncommitted round 3 was not released: it can be charged.
		if err := l.Charge(rel(3, 0.5)); err != nil {
			l.Close()
			t.Fatalf("cut at %d: re-charging round 3: %v", cut, err)
		}
		l.Close()
		if got := readFile(t, path); !bytes.Equal(got[:lastStart], full[:lastStart]) || bytes.Count(got, []byte("\n")) != 3 {
			t.Fatalf("cut at %d: file after re-charge:\n%s", cut, got)
		}
		os.Remove(path)
	}

	// A file system may leave zero bytes where an unsynced write was.
	path := filepath.Join(dir, "zeros")
	if err := os.WriteFile(path, append(slicesClone(full), make([]byte, 37)...), 0o600); err != nil {
		t.Fatal(err)
	}
	l2 := open(t, path, opts(10))
	if got := len(l2.Releases()); got != 3 {
		t.Fatalf("zero-filled tail: %d releases, want 3", got)
	}
	if got := len(l2.DiscardedTail()); got != 37 {
		t.Fatalf("zero-filled tail: discarded %d bytes, want 37", got)
	}

	// A torn first record leaves an empty, usable ledger.
	path = filepath.Join(dir, "first")
	first := full[:bytes.IndexByte(full, '\n')]
	if err := os.WriteFile(path, first[:len(first)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	l3 := open(t, path, opts(10))
	if eps, _, _ := l3.Spent(); len(l3.Releases()) != 0 || eps != 0 || l3.LastRound() != 0 {
		t.Fatalf("torn first record: %d releases, eps %v", len(l3.Releases()), eps)
	}
	mustCharge(t, l3, rel(1, 0.25))
}

var timeZero time.Time

// rawLine builds a committed line around raw release bytes, with a correct
// CRC, to test what the release decoder rejects.
func rawLine(t *testing.T, raw string) []byte {
	t.Helper()
	line, err := json.Marshal(record{V: 1, Release: json.RawMessage(raw), CRC: crc32.Checksum([]byte(raw), castagnoli)})
	if err != nil {
		t.Fatal(err)
	}
	return append(line, '\n')
}

func slicesClone(b []byte) []byte { return append([]byte(nil), b...) }

// TestCorruptLineIsHardError: a committed line that cannot be trusted fails
// Open with ErrCorrupt, and Open leaves the file untouched.
func TestCorruptLineIsHardError(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	l := open(t, src, opts(10))
	mustCharge(t, l, rel(1, 0.25), rel(2, 0.25), rel(3, 0.25))
	l.Close()
	full := readFile(t, src)
	lines := bytes.SplitAfter(full, []byte("\n"))[:3]
	join := func(ls ...[]byte) []byte { return bytes.Join(ls, nil) }
	replaceIn := func(line []byte, old, new string) []byte {
		if !bytes.Contains(line, []byte(old)) {
			t.Fatalf("line %q lacks %q", line, old)
		}
		return bytes.Replace(line, []byte(old), []byte(new), 1)
	}
	// A valid record with a correct CRC whose release is invalid.
	badRel := rel(2, 0.25)
	badRel.N = 0
	badLine, err := encodeRecord(badRel, timeZero, 0.5, 1e-6, "basic", Hash{})
	if err != nil {
		t.Fatal(err)
	}
	// A correct record for round 1 again (not increasing).
	dupLine, _ := encodeRecord(rel(1, 0.25), timeZero, 0.5, 1e-6, "basic", Hash{})

	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"garbage middle line", join(lines[0], []byte("not json\n"), lines[2]), "line 2"},
		{"blank middle line", join(lines[0], []byte("\n"), lines[1], lines[2]), "blank line"},
		{"bit flip in eps0 (crc)", join(lines[0], replaceIn(lines[1], `"eps0":0.25`, `"eps0":0.05`), lines[2]), "crc32c mismatch"},
		{"unknown field", join(lines[0], replaceIn(lines[1], `"v":2,`, `"v":2,"extra":2,`), lines[2]), "unknown field"},
		{"unknown release field", join(lines[0], rawLine(t, `{"round":2,"protocol":"ss-simple","randomizer":"laplace","eps0":0.25,"delta0":0,"d":10,"k":10,"n":100,"n_p":120,"sigma2":1}`), lines[2]), `unknown field "sigma2"`},
		{"release is not an object", join(lines[0], rawLine(t, `[1,2]`), lines[2]), "bad release"},
		{"future version", join(lines[0], replaceIn(lines[1], `"v":2,`, `"v":3,`), lines[2]), "version 3"},
		{"invalid release", join(lines[0], badLine, lines[2]), "n=0"},
		{"round not increasing", join(lines[0], lines[1], dupLine), "round 1 does not follow round 2"},
		{"swapped lines", join(lines[1], lines[0], lines[2]), "hash chain broken"},
		{"corrupt last complete line", join(lines[0], lines[1], []byte("{\"v\":1}\n")), "line 3"},
		{"trailing data", join(lines[0], bytes.Replace(lines[1], []byte("\n"), []byte(" {}\n"), 1), lines[2]), "trailing data"},
		{"corrupt line before torn tail", join(lines[0], []byte("xx\n"), lines[2][:10]), "line 2"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, fmt.Sprintf("case%d", i))
			if err := os.WriteFile(path, c.data, 0o600); err != nil {
				t.Fatal(err)
			}
			l, err := Open(path, opts(10))
			if err == nil {
				l.Close()
				t.Fatal("Open succeeded on a corrupt ledger")
			}
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Open: err = %v, want ErrCorrupt mentioning %q", err, c.want)
			}
			if got := readFile(t, path); !bytes.Equal(got, c.data) {
				t.Fatal("Open modified a corrupt ledger file")
			}
		})
	}
}

func TestSpentBy(t *testing.T) {
	l := open(t, filepath.Join(t.TempDir(), "l"), opts(10))
	mustCharge(t, l, rel(1, 0.125), rel(2, 0.25), rel(4, 0.5), rel(9, 1))
	var seen [][]int
	l.opts.Composer = func(rs []privacy.Release, d float64) (float64, string, error) {
		var rounds []int
		for _, r := range rs {
			rounds = append(rounds, r.Round)
		}
		seen = append(seen, rounds)
		return basic(rs, d)
	}
	eps, method, err := l.SpentBy([]int{9, 2})
	if err != nil || eps != 1.25 || method != "basic" {
		t.Fatalf("SpentBy(9, 2) = (%v, %q, %v), want (1.25, basic, nil)", eps, method, err)
	}
	if !reflect.DeepEqual(seen, [][]int{{2, 9}}) {
		t.Fatalf("composer saw rounds %v, want [[2 9]] (sorted, only those rounds)", seen)
	}
	if eps, _, err := l.SpentBy([]int{1, 2, 4, 9}); err != nil || eps != 1.875 {
		t.Fatalf("SpentBy(all) = (%v, %v), want 1.875", eps, err)
	}
	if total, _, _ := l.Spent(); total != 1.875 {
		t.Fatalf("Spent = %v, want 1.875", total)
	}
	if eps, method, err := l.SpentBy(nil); eps != 0 || method != "" || err != nil {
		t.Fatalf("SpentBy(nil) = (%v, %q, %v)", eps, method, err)
	}
	if _, _, err := l.SpentBy([]int{2, 3}); !errors.Is(err, ErrUnknownRound) || !strings.Contains(err.Error(), "3") {
		t.Fatalf("SpentBy with an uncharged round: err = %v, want ErrUnknownRound naming 3", err)
	}
	if _, _, err := l.SpentBy([]int{4, 4}); err == nil {
		t.Fatal("SpentBy with a repeated round succeeded")
	}
}

func TestReplayOverTarget(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l")
	l := open(t, path, opts(2))
	mustCharge(t, l, rel(1, 1), rel(2, 1))
	l.Close()
	// The operator lowered the target: the ledger opens (its state must stay
	// readable) but refuses every charge.
	l2 := open(t, path, opts(1))
	if eps, _, _ := l2.Spent(); eps != 2 {
		t.Fatalf("Spent = %v, want 2", eps)
	}
	if got := l2.Remaining(); got != 0 {
		t.Fatalf("Remaining = %v, want 0", got)
	}
	if err := l2.Charge(rel(3, 0.001)); !errors.Is(err, ErrBudgetExhausted) {
		t.Fatalf("Charge: err = %v, want ErrBudgetExhausted", err)
	}
}

func TestSecondOpenIsLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l")
	l := open(t, path, opts(10))
	l2, err := Open(path, opts(10))
	if err == nil {
		l2.Close()
		t.Skip("no file locking on this platform")
	}
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: err = %v, want ErrLocked", err)
	}
	l.Close()
	l3 := open(t, path, opts(10)) // the lock goes with Close
	l3.Close()
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(filepath.Join(dir, "missing", "l"), opts(10)); err == nil {
		t.Fatal("Open in a missing directory succeeded")
	}
	if _, err := Open(dir, opts(10)); err == nil {
		t.Fatal("Open of a directory succeeded")
	}
}

func TestClosedAndBroken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l")
	l := open(t, path, opts(10))
	mustCharge(t, l, rel(1, 0.25))
	// Simulate an I/O failure: the file descriptor goes away under the
	// ledger, so the next write fails.
	l.f.Close()
	if err := l.Charge(rel(2, 0.25)); !errors.Is(err, ErrBroken) {
		t.Fatalf("Charge with a failing write: err = %v, want ErrBroken", err)
	}
	if eps, _, _ := l.Spent(); eps != 0.25 || l.LastRound() != 1 {
		t.Fatalf("failed charge changed the state: eps %v, last round %d", eps, l.LastRound())
	}
	if err := l.Charge(rel(3, 0.25)); !errors.Is(err, ErrBroken) {
		t.Fatalf("Charge after a failure: err = %v, want ErrBroken", err)
	}
	l.Close()
	if err := l.Charge(rel(3, 0.25)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Charge after Close: err = %v, want ErrClosed", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	// Reopening recovers.
	l2 := open(t, path, opts(10))
	mustCharge(t, l2, rel(2, 0.25))
}

// TestConcurrentCharges races writers that each try to charge the next round
// against readers, under a budget that admits exactly 40 rounds: the ledger
// must end with exactly rounds 1..40, never past the target, and replay to
// the same state. Run with -race.
func TestConcurrentCharges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l")
	const fit = 40
	l := open(t, path, opts(fit*0.25))
	var wg sync.WaitGroup
	var charged atomic.Int32
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				err := l.Charge(rel(l.LastRound()+1, 0.25))
				switch {
				case err == nil:
					charged.Add(1)
				case errors.Is(err, ErrBudgetExhausted):
					return
				case errors.Is(err, ErrInvalidRelease):
					// Lost the race for this round number; retry.
				default:
					t.Errorf("Charge: %v", err)
					return
				}
			}
		}()
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for r := 0; r < 2; r++ {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				runtime.Gosched() // js/wasm has one thread and no preemption: a spinning reader would starve the writers
				eps, _, _ := l.Spent()
				rs := l.Releases()
				if eps > fit*0.25 || len(rs) > fit {
					t.Errorf("over budget: eps %v, %d releases", eps, len(rs))
				}
				if len(rs) > 0 {
					if _, _, err := l.SpentBy([]int{rs[len(rs)-1].Round}); err != nil {
						t.Errorf("SpentBy: %v", err)
					}
				}
				l.CanCharge(rel(1000, 0.25))
				l.Remaining()
			}
		}()
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	rs := l.Releases()
	if len(rs) != fit || charged.Load() != fit {
		t.Fatalf("%d releases, %d successful charges; want %d", len(rs), charged.Load(), fit)
	}
	for i, r := range rs {
		if r.Round != i+1 {
			t.Fatalf("release %d has round %d", i, r.Round)
		}
	}
	eps, _, _ := l.Spent()
	if eps != fit*0.25 {
		t.Fatalf("Spent = %v, want %v", eps, fit*0.25)
	}
	l.Close()
	l2 := open(t, path, opts(fit*0.25))
	if eps2, _, _ := l2.Spent(); eps2 != eps || !reflect.DeepEqual(l2.Releases(), rs) {
		t.Fatalf("replay after concurrent charges differs: eps %v vs %v", eps2, eps)
	}
}
