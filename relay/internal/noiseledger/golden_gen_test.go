package noiseledger

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/wire"
)

// TestWriteGolden writes shared/ledger/testdata/relay/ with this
// (pre-merge) package: the relay's noise-ledger.jsonl (secure-summation
// releases as roundspec.Spec.Release builds them), its peer-anchor, and
// want.json with the head and spent epsilon this code reports. Run with
// BLANKET_WRITE_GOLDEN=1.
func TestWriteGolden(t *testing.T) {
	if os.Getenv("BLANKET_WRITE_GOLDEN") == "" {
		t.Skip("set BLANKET_WRITE_GOLDEN=1")
	}
	dir := filepath.Join("..", "..", "..", "shared", "ledger", "testdata", "relay")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := Open(dir, Options{TargetEpsilon: 750, TargetDelta: 1e-5})
	if err != nil {
		t.Fatal(err)
	}
	var rels []privacy.Release
	for _, r := range []int{1, 2, 5} {
		rl := rel(r)
		rl.N = 18 + r
		rels = append(rels, rl)
		if err := l.Charge(rl); err != nil {
			t.Fatal(err)
		}
	}
	peer := wire.Head{Count: 4, Hash: [32]byte{0x12, 0x34, 4}}
	if err := l.RecordPeer(peer); err != nil {
		t.Fatal(err)
	}
	h := l.Head()
	eps := l.Spent()
	l.Close()
	want, _ := json.MarshalIndent(map[string]any{
		"count": h.Count, "hash": hex.EncodeToString(h.Hash[:]), "eps": eps,
		"releases": rels, "peer_count": peer.Count, "peer_hash": hex.EncodeToString(peer.Hash[:]),
	}, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "want.json"), append(want, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}
