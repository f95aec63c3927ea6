package ledger

import (
	"errors"
	"path/filepath"
	"testing"
)

// TestPeerNeverGoesBack: the relay's head is recorded durably and a head
// behind it (fewer records, or another hash at the same count) refused.
func TestPeerNeverGoesBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "relay-anchor.json")
	p, err := OpenPeer(path)
	if err != nil {
		t.Fatal(err)
	}
	if c, h := p.Head(); c != 0 || h != (Hash{}) {
		t.Fatalf("fresh peer %d %v", c, h)
	}
	if err := p.Record(3, Hash{3}); err != nil {
		t.Fatal(err)
	}
	if err := p.Record(3, Hash{3}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		n uint64
		h Hash
	}{{2, Hash{2}}, {0, Hash{}}, {3, Hash{9}}} {
		if err := p.Record(c.n, c.h); !errors.Is(err, ErrRollback) {
			t.Errorf("%d: %v", c.n, err)
		}
	}
	q, err := OpenPeer(path)
	if err != nil {
		t.Fatal(err)
	}
	if c, h := q.Head(); c != 3 || h != (Hash{3}) {
		t.Fatalf("reopened %d %v", c, h)
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
	if n, _ := l.Head(); n != 0 || len(readFile(t, path)) != 0 {
		t.Fatalf("a suspended ledger wrote %d records", n)
	}
	l.Resume()
	mustCharge(t, l, rel(1, 1))
}
