package ledger

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/blanket-fl/blanket/shared/privacy"
)

// TestWriteGolden writes shared/ledger/testdata/aggregator/ with this
// (pre-merge) package: the privacy ledger the aggregator writes (an
// incremental privacy.Session at delta 1e-5, as accounting.LedgerOptions
// configures it), its relay-anchor.json, and want.json with the head and
// spent epsilon this code reports. Run with BLANKET_WRITE_GOLDEN=1.
func TestWriteGolden(t *testing.T) {
	if os.Getenv("BLANKET_WRITE_GOLDEN") == "" {
		t.Skip("set BLANKET_WRITE_GOLDEN=1")
	}
	dir := filepath.Join("..", "..", "..", "shared", "ledger", "testdata", "aggregator")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := privacy.NewSession(1e-5)
	if err != nil {
		t.Fatal(err)
	}
	l, err := Open(filepath.Join(dir, "ledger.jsonl"), Options{TargetEpsilon: 750, TargetDelta: 1e-5, Session: s})
	if err != nil {
		t.Fatal(err)
	}
	rels := []privacy.Release{
		{Round: 1, Protocol: privacy.ProtocolSSTopk, Randomizer: privacy.RandomizerLaplace, Eps0: 0.5, D: 7850, K: 157, L: 16, N: 200, NP: 67},
		{Round: 2, Protocol: privacy.ProtocolSSTopk, Randomizer: privacy.RandomizerLaplace, Eps0: 0.5, D: 7850, K: 157, L: 16, N: 180, NP: 67},
		{Round: 4, Protocol: privacy.ProtocolSSSimple, Randomizer: privacy.RandomizerLaplace, Eps0: 0.25, D: 10, K: 10, N: 100, NP: 120},
	}
	for _, r := range rels {
		if err := l.Charge(r); err != nil {
			t.Fatal(err)
		}
	}
	n, h := l.Head()
	eps, delta, method := l.Spent()
	l.Close()
	p, err := OpenPeer(filepath.Join(dir, "relay-anchor.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Record(3, Hash{0xab, 0xcd, 3}); err != nil {
		t.Fatal(err)
	}
	want, _ := json.MarshalIndent(map[string]any{
		"count": n, "hash": h.String(), "eps": eps, "delta": delta, "method": method,
		"releases": rels, "peer_count": 3, "peer_hash": Hash{0xab, 0xcd, 3}.String(),
	}, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "want.json"), append(want, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}
