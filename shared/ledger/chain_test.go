package ledger

import (
	"bytes"
	"encoding/json"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/wire"
)

// TestHeadDetectsRollback: a head stored after three charges detects a
// deleted last line, an emptied file, a deleted file and a rewritten last
// record on reopen (ErrRollback), while a longer ledger with the same
// prefix passes; a rewritten middle record breaks the chain (ErrCorrupt).
func TestHeadDetectsRollback(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ledger.jsonl")
	l := open(t, path, opts(10))
	if h := l.Head(); !h.IsZero() {
		t.Fatalf("empty head = %+v", h)
	}
	mustCharge(t, l, rel(1, 0.25), rel(2, 0.25), rel(3, 0.25))
	head := l.Head()
	if head.Count != 3 {
		t.Fatalf("head count %d", head.Count)
	}
	if err := l.Verify(head); err != nil {
		t.Fatalf("own head: %v", err)
	}
	head2 := wire.Head{Count: 2, Hash: l.hashes[1]}
	l.Close()
	full := readFile(t, path)
	lines := bytes.SplitAfter(full, []byte("\n"))[:3]

	reopen := func(data []byte) *Ledger {
		t.Helper()
		p := filepath.Join(t.TempDir(), "ledger.jsonl")
		if data != nil {
			if err := os.WriteFile(p, data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return open(t, p, opts(10))
	}
	// The last record's eps is outside its CRC: rewriting it keeps the
	// line valid but changes its hash.
	var rec record
	if err := json.Unmarshal(lines[2], &rec); err != nil {
		t.Fatal(err)
	}
	rec.Eps = 0.01
	forged, _ := json.Marshal(rec)
	for name, data := range map[string][]byte{
		"last line deleted":     bytes.Join(lines[:2], nil),
		"emptied":               {},
		"deleted":               nil,
		"last record rewritten": bytes.Join([][]byte{lines[0], lines[1], append(forged, '\n')}, nil),
	} {
		lg := reopen(data)
		if err := lg.Verify(head); !errors.Is(err, ErrRollback) {
			t.Errorf("%s: Verify = %v, want ErrRollback", name, err)
		}
	}
	// The earlier head of two records still matches the full file, and
	// the file truncated to it.
	if err := reopen(full).Verify(head2); err != nil {
		t.Errorf("prefix head: %v", err)
	}
	if err := reopen(bytes.Join(lines[:2], nil)).Verify(head2); err != nil {
		t.Errorf("exact head: %v", err)
	}
	// A rewritten middle record breaks the chain at the next line.
	var mid record
	if err := json.Unmarshal(lines[1], &mid); err != nil {
		t.Fatal(err)
	}
	mid.Eps = 0.01
	midLine, _ := json.Marshal(mid)
	p := filepath.Join(t.TempDir(), "ledger.jsonl")
	if err := os.WriteFile(p, bytes.Join([][]byte{lines[0], append(midLine, '\n'), lines[2]}, nil), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(p, opts(10)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("rewritten middle record: Open = %v, want ErrCorrupt", err)
	}
}

// TestVersion1Prefix: a ledger written before the hash chain (version 1
// lines, no prev) is read; new records chain onto it; a version 1 line
// after a version 2 line is corrupt.
func TestVersion1Prefix(t *testing.T) {
	v1 := func(r privacy.Release) []byte {
		raw, _ := json.Marshal(r)
		line, _ := json.Marshal(record{V: 1, Time: time.Unix(0, 0).UTC(), Release: raw, CRC: crc32.Checksum(raw, castagnoli), Eps: 0.5, Delta: 1e-6, Method: "basic"})
		return append(line, '\n')
	}
	p := filepath.Join(t.TempDir(), "ledger.jsonl")
	if err := os.WriteFile(p, append(v1(rel(1, 0.25)), v1(rel(2, 0.25))...), 0o600); err != nil {
		t.Fatal(err)
	}
	l := open(t, p, opts(10))
	mustCharge(t, l, rel(3, 0.25))
	h := l.Head()
	l.Close()
	l2 := open(t, p, opts(10))
	if err := l2.Verify(h); err != nil || h.Count != 3 {
		t.Fatalf("reopen: n=%d %v", h.Count, err)
	}
	l2.Close()
	data := append(readFile(t, p), v1(rel(4, 0.25))...)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(p, opts(10)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("v1 after v2: %v, want ErrCorrupt", err)
	}
}

// TestSessionLedgerRefusesAtTarget is the aggregator's default run (SS-Topk,
// Laplace, d = 7850, k = 157, l = 16, n = 200, n_p = 67) against its
// default target (750, 1e-5) through an incremental privacy.Session. The
// former full recomputation hit the PLD inversion's overflow above 709
// nats: it charged 709.4 for rounds 46-65, 0 after, and never refused.
// Now the charged epsilon increases every round, stays above 700 from
// round 48 on, and a round is refused once it would pass 750 (round 51:
// 756), with the report's structured rows available.
func TestSessionLedgerRefusesAtTarget(t *testing.T) {
	if testing.Short() {
		t.Skip("about 55 charges")
	}
	s, err := privacy.NewSession(1e-5)
	if err != nil {
		t.Fatal(err)
	}
	l := open(t, filepath.Join(t.TempDir(), "ledger.jsonl"), Options{TargetEpsilon: 750, TargetDelta: 1e-5, Session: s})
	prev := 0.0
	refused := 0
	for r := 1; r <= 60; r++ {
		rl := privacy.Release{Round: r, Protocol: privacy.ProtocolSSTopk, Randomizer: privacy.RandomizerLaplace, Eps0: 0.5, D: 7850, K: 157, L: 16, N: 200, NP: 67}
		err := l.Charge(rl)
		var be *BudgetError
		if errors.As(err, &be) {
			refused = r
			if !(be.WouldBe > 750) {
				t.Errorf("round %d refused at %v", r, be.WouldBe)
			}
			break
		}
		if err != nil {
			t.Fatalf("round %d: %v", r, err)
		}
		eps, _, method := l.Spent()
		if !(eps > prev) || eps > 750 {
			t.Errorf("round %d: eps %v after %v", r, eps, prev)
		}
		if r >= 48 && eps < 700 {
			t.Errorf("round %d: eps %v (%s), want above 700", r, eps, method)
		}
		prev = eps
	}
	if refused < 45 || refused > 55 {
		t.Errorf("refused round %d, want about 51", refused)
	}
	rep, ok := l.Report()
	if !ok || rep.Tightest < 0 {
		t.Fatalf("report: ok=%v tightest=%d", ok, rep.Tightest)
	}
	row := rep.Rows[rep.Tightest]
	if !row.Proven || row.Composition != privacy.CompositionPLD || row.Family == "" || row.Epsilon != prev {
		t.Errorf("tightest row %+v", row)
	}
	// Replay on reopen (one WithAll step, composed by squaring)
	// reproduces the charged epsilon within the grid's slack.
	l.Close()
	s2, _ := privacy.NewSession(1e-5)
	l2 := open(t, l.path, Options{TargetEpsilon: 750, TargetDelta: 1e-5, Session: s2})
	if eps, _, _ := l2.Spent(); eps < 0.99*prev || eps > 1.01*prev {
		t.Errorf("replayed eps %v, charged %v", eps, prev)
	}
}
