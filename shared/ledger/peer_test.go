package ledger

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/blanket-fl/blanket/shared/wire"
)

// TestPeerNeverGoesBack: the other server's head is recorded durably and
// a head behind it (fewer records, or another hash at the same count)
// refused, whether kept by a Peer (the aggregator) or by the ledger's
// PeerFile (the relay, OpenNoise); both reopen to the recorded head.
func TestPeerNeverGoesBack(t *testing.T) {
	dir := t.TempDir()
	p, err := OpenPeer(filepath.Join(dir, "relay-anchor.json"))
	if err != nil {
		t.Fatal(err)
	}
	l := openNoise(t, dir, 100)
	h3 := wire.Head{Count: 3, Hash: [32]byte{3}}
	for name, s := range map[string]struct {
		head   func() wire.Head
		record func(wire.Head) error
	}{"Peer": {p.Head, p.Record}, "Ledger": {l.Peer, l.RecordPeer}} {
		if h := s.head(); !h.IsZero() {
			t.Fatalf("%s: fresh peer %+v", name, h)
		}
		for range 2 {
			if err := s.record(h3); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		for _, h := range []wire.Head{{Count: 2, Hash: [32]byte{2}}, {}, {Count: 3, Hash: [32]byte{9}}} {
			if err := s.record(h); !errors.Is(err, ErrRollback) {
				t.Errorf("%s: %d: %v", name, h.Count, err)
			}
		}
	}
	l.Close()
	q, err := OpenPeer(filepath.Join(dir, "relay-anchor.json"))
	if err != nil {
		t.Fatal(err)
	}
	if h := q.Head(); h != h3 {
		t.Fatalf("reopened Peer %+v", h)
	}
	if l2 := openNoise(t, dir, 100); l2.Peer() != h3 {
		t.Fatalf("reopened noise ledger's peer %+v", l2.Peer())
	}
	// A ledger without a peer file has none.
	l3 := open(t, filepath.Join(dir, "l"), opts(1))
	if err := l3.RecordPeer(h3); err == nil || !l3.Peer().IsZero() {
		t.Fatalf("RecordPeer without a peer file: %v %+v", err, l3.Peer())
	}
}

// TestPeerFileCorrupt: a peer file that parses as neither format, or a
// zero count with a hash, fails OpenPeer and OpenNoise with ErrCorrupt.
func TestPeerFileCorrupt(t *testing.T) {
	for name, data := range map[string]string{
		"garbage":          "x",
		"bad hash":         `{"count":1,"hash":"zz"}`,
		"unknown field":    `{"count":1,"hash":"` + Hash{1}.String() + `","x":1}`,
		"empty with hash":  `{"count":0,"hash":"` + Hash{1}.String() + `"}`,
		"short anchor":     "\x01\x40\x00",
		"anchor wrong len": string(make([]byte, wire.AnchorSize+1)),
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, NoisePeerFile), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenPeer(filepath.Join(dir, NoisePeerFile)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: OpenPeer: %v", name, err)
		}
		if l, err := OpenNoise(dir, Options{TargetEpsilon: 1, TargetDelta: 1e-5}); !errors.Is(err, ErrCorrupt) {
			if l != nil {
				l.Close()
			}
			t.Errorf("%s: OpenNoise: %v", name, err)
		}
	}
}

// TestSuspendRefusesCharges: a suspended ledger refuses Charge and
// CanCharge with ErrSuspended and writes nothing; Resume allows them.
func TestSuspendRefusesCharges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	l := open(t, path, opts(100))
	l.Suspend(errors.New("not yet checked against the relay"))
	if _, err := l.CanCharge(rel(1, 1)); !errors.Is(err, ErrSuspended) {
		t.Fatalf("CanCharge: %v", err)
	}
	if err := l.Charge(rel(1, 1)); !errors.Is(err, ErrSuspended) {
		t.Fatalf("Charge: %v", err)
	}
	if h := l.Head(); h.Count != 0 || len(readFile(t, path)) != 0 {
		t.Fatalf("a suspended ledger wrote %d records", h.Count)
	}
	l.Resume()
	mustCharge(t, l, rel(1, 1))
}
