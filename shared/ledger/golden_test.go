package ledger_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/blanket-fl/blanket/shared/ledger"
	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/wire"
)

// The golden files in testdata were written by the two packages this one
// replaces, before the merge (commit d61979f, TestWriteGolden in
// aggregator/internal/ledger and relay/internal/noiseledger): an
// aggregator's ledger.jsonl (version 2 lines) and relay-anchor.json, a
// relay's noise-ledger.jsonl (its own chained version 1 lines) and
// peer-anchor (a wire.Anchor frame), and want.json with the head, spent
// epsilon, releases and peer head the old code reported.

type golden struct {
	Count     uint64            `json:"count"`
	Hash      string            `json:"hash"`
	Eps       float64           `json:"eps"`
	Method    string            `json:"method"`
	Releases  []privacy.Release `json:"releases"`
	PeerCount uint64            `json:"peer_count"`
	PeerHash  string            `json:"peer_hash"`
}

// copyGolden copies testdata/<server> into a temporary directory (Open
// may truncate a torn tail, and charges append) and returns it with
// want.json.
func copyGolden(t *testing.T, server string) (string, golden) {
	t.Helper()
	src := filepath.Join("testdata", server)
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var g golden
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == "want.json" {
			if err := json.Unmarshal(b, &g); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir, g
}

func head(t *testing.T, count uint64, hash string) wire.Head {
	t.Helper()
	h, err := hex.DecodeString(hash)
	if err != nil || len(h) != 32 {
		t.Fatalf("hash %q", hash)
	}
	return wire.Head{Count: count, Hash: [32]byte(h)}
}

// closeTo: the replay composes the releases in one step
// (privacy.Session.WithAll) where the old code's charges composed them
// one by one; both are upper bounds on the same grid, equal to 1e-9.
// closeTo compares a recomputed epsilon with the one the golden file's
// code printed: the accountant's numerical composition (PLD by FFT) agrees
// to about 1e-6 relative across platforms (natively 52.55230148, under
// GOOS=js 52.55223511 for the aggregator's golden ledger), so 1e-5.
func closeTo(a, b float64) bool { return math.Abs(a-b) <= 1e-5*math.Abs(b) }

// TestGoldenAggregatorLedger: the aggregator's ledger as the old package
// wrote it opens with the same head, releases and spent epsilon, its
// relay-anchor.json with the same peer head; a new charge chains onto it
// and the old head still verifies.
func TestGoldenAggregatorLedger(t *testing.T) {
	dir, g := copyGolden(t, "aggregator")
	open := func() *ledger.Ledger {
		s, _ := privacy.NewSession(1e-5)
		l, err := ledger.Open(filepath.Join(dir, "ledger.jsonl"), ledger.Options{TargetEpsilon: 750, TargetDelta: 1e-5, Session: s})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	l := open()
	want := head(t, g.Count, g.Hash)
	if l.Head() != want {
		t.Fatalf("head %+v, the old code's %+v", l.Head(), want)
	}
	if !reflect.DeepEqual(l.Releases(), g.Releases) {
		t.Fatalf("releases %+v, want %+v", l.Releases(), g.Releases)
	}
	if eps, delta, method := l.Spent(); !closeTo(eps, g.Eps) || delta != 1e-5 || method != g.Method {
		t.Fatalf("spent (%v, %v, %q), the old code's (%v, 1e-5, %q)", eps, delta, method, g.Eps, g.Method)
	}
	p, err := ledger.OpenPeer(filepath.Join(dir, "relay-anchor.json"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Head() != head(t, g.PeerCount, g.PeerHash) {
		t.Fatalf("peer head %+v", p.Head())
	}
	old, _ := os.ReadFile(filepath.Join(dir, "ledger.jsonl"))
	next := g.Releases[len(g.Releases)-1]
	next.Round++
	if err := l.Charge(next); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l2 := open()
	if err := l2.Verify(want); err != nil || l2.Head().Count != g.Count+1 {
		t.Fatalf("after a new charge: %v, head %+v", err, l2.Head())
	}
	if now, _ := os.ReadFile(filepath.Join(dir, "ledger.jsonl")); !bytes.HasPrefix(now, old) {
		t.Fatal("the old records were rewritten")
	}
}

// TestGoldenNoiseLedger: the relay's noise ledger as the old package
// wrote it (its chained version 1 lines) opens with the same head,
// releases and spent epsilon, its peer-anchor (a wire.Anchor frame) with
// the same peer head. The last release again is a repeat (no line); a
// new charge appends a version 2 line chained onto the old ones, and the
// old head still verifies. A torn old-format line is discarded, and an
// old-format line after a version 2 line, or a rewritten one, is corrupt.
func TestGoldenNoiseLedger(t *testing.T) {
	dir, g := copyGolden(t, "relay")
	path := filepath.Join(dir, ledger.NoiseFile)
	old, _ := os.ReadFile(path)
	open := func() (*ledger.Ledger, error) {
		return ledger.OpenNoise(dir, ledger.Options{TargetEpsilon: 750, TargetDelta: 1e-5})
	}
	l, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	want := head(t, g.Count, g.Hash)
	if l.Head() != want {
		t.Fatalf("head %+v, the old code's %+v", l.Head(), want)
	}
	if !reflect.DeepEqual(l.Releases(), g.Releases) {
		t.Fatalf("releases %+v, want %+v", l.Releases(), g.Releases)
	}
	// The spent epsilon is the current accountant's composition of the old
	// releases: since the exact Gaussian dominating pair row (docs/
	// accounting.md) it is below the old code's RDP figure, never above (a
	// tighter proven bound), and not by more than the row's 8-9%.
	if eps, _, _ := l.Spent(); eps > g.Eps*(1+1e-12) || eps < 0.85*g.Eps {
		t.Fatalf("spent %v, the old code's %v", eps, g.Eps)
	}
	if l.Peer() != head(t, g.PeerCount, g.PeerHash) {
		t.Fatalf("peer head %+v", l.Peer())
	}
	last := g.Releases[len(g.Releases)-1]
	if err := l.Charge(last); err != nil || l.Head() != want {
		t.Fatalf("repeat of the last old release: %v, head %+v", err, l.Head())
	}
	next := last
	next.Round++
	if err := l.Charge(next); err != nil {
		t.Fatal(err)
	}
	newHead := l.Head()
	newPeer := wire.Head{Count: g.PeerCount + 1, Hash: [32]byte{9}}
	if err := l.RecordPeer(newPeer); err != nil {
		t.Fatal(err)
	}
	l.Close()
	withV2, _ := os.ReadFile(path)
	if !bytes.HasPrefix(withV2, old) || !bytes.HasPrefix(withV2[len(old):], []byte(`{"v":2,`)) {
		t.Fatalf("after a new charge the file is\n%s", withV2)
	}
	l2, err := open()
	if err != nil {
		t.Fatal(err)
	}
	if err := l2.Verify(want); err != nil || l2.Head() != newHead || l2.Peer() != newPeer {
		t.Fatalf("reopened: %v, head %+v (want %+v), peer %+v", err, l2.Head(), newHead, l2.Peer())
	}
	l2.Close()

	lines := bytes.SplitAfter(old, []byte("\n"))[:3]
	write := func(data []byte) {
		t.Helper()
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(append(bytes.Clone(old), lines[0][:len(lines[0])/2]...))
	l3, err := open()
	if err != nil {
		t.Fatalf("torn old-format tail: %v", err)
	}
	if l3.Head() != want || len(l3.DiscardedTail()) == 0 {
		t.Fatalf("torn old-format tail: head %+v, discarded %q", l3.Head(), l3.DiscardedTail())
	}
	l3.Close()
	for name, data := range map[string][]byte{
		"old-format line after a version 2 line": append(bytes.Clone(withV2), lines[2]...),
		"rewritten old-format line":              bytes.Join([][]byte{lines[0], bytes.Replace(lines[1], []byte(`"eps":6.`), []byte(`"eps":1.`), 1), lines[2]}, nil),
		"old-format line naming another round":   bytes.Join([][]byte{lines[0], lines[1], bytes.Replace(lines[2], []byte(`"round":5,"release"`), []byte(`"round":6,"release"`), 1)}, nil),
	} {
		write(data)
		if l, err := open(); !errors.Is(err, ledger.ErrCorrupt) {
			if l != nil {
				l.Close()
			}
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}
