package noiseledger

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/wire"
)

// rel is a secure-summation round's release as roundspec.Spec.Release
// builds it (σ 300 grid units, sensitivity 138, check-in rate 1).
func rel(round int) privacy.Release {
	return privacy.Release{Round: round, Protocol: privacy.ProtocolSecAgg, Randomizer: privacy.RandomizerDiscreteGaussian,
		D: 10, K: 10, N: 20, SecAggSigma: 300, SecAggSensitivity: 138, CheckInRate: 1}
}

func open(t *testing.T, dir string, target float64) *Ledger {
	t.Helper()
	l, err := Open(dir, Options{TargetEpsilon: target, TargetDelta: 1e-5})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// epsOf composes k rounds of rel with the accountant directly.
func epsOf(t *testing.T, k int) float64 {
	s, _ := privacy.NewSession(1e-5)
	var rep privacy.Report
	var err error
	for r := 1; r <= k; r++ {
		if s, rep, err = s.With(rel(r)); err != nil {
			t.Fatal(err)
		}
	}
	return rep.Rows[rep.Tightest].Epsilon
}

// TestRefusesPastTarget: with a target between the composition of 2 and
// 3 rounds, the third round is refused (nothing written), its ε is the
// accountant's, a round out of schedule is refused, and the same release
// again is idempotent.
func TestRefusesPastTarget(t *testing.T) {
	e2, e3 := epsOf(t, 2), epsOf(t, 3)
	if !(e2 < e3) {
		t.Fatalf("eps %v %v", e2, e3)
	}
	dir := t.TempDir()
	l := open(t, dir, (e2+e3)/2)
	for r := 1; r <= 2; r++ {
		if err := l.Charge(rel(r)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Charge(rel(2)); err != nil {
		t.Fatalf("re-charging the last release: %v", err)
	}
	if l.Head().Count != 2 || l.Spent() != e2 {
		t.Fatalf("head %d spent %v want %v", l.Head().Count, l.Spent(), e2)
	}
	if err := l.CanCharge(rel(3)); !errors.Is(err, ErrBudget) {
		t.Fatalf("can charge past the target: %v", err)
	}
	if err := l.Charge(rel(3)); !errors.Is(err, ErrBudget) {
		t.Fatalf("charged past the target: %v", err)
	}
	r := rel(2)
	r.N = 7
	if err := l.Charge(r); !errors.Is(err, ErrSchedule) {
		t.Fatalf("charged a round already noised: %v", err)
	}
	h := l.Head()
	l.Close()
	l2 := open(t, dir, (e2+e3)/2)
	if l2.Head() != h || l2.Spent() != e2 {
		t.Fatalf("reopened: %+v %v, want %+v %v", l2.Head(), l2.Spent(), h, e2)
	}
	if err := l2.Charge(rel(3)); !errors.Is(err, ErrBudget) {
		t.Fatalf("reopened ledger charged past the target: %v", err)
	}
}

// TestVerifyDetectsRollback: a head recorded after 3 lines fails against
// the file cut to 2 lines, emptied, or with a rewritten line; a torn last
// line is discarded; a suspended ledger refuses charges.
func TestVerifyDetectsRollback(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, 100)
	var heads []wire.Head
	for r := 1; r <= 3; r++ {
		if err := l.Charge(rel(r)); err != nil {
			t.Fatal(err)
		}
		heads = append(heads, l.Head())
	}
	for _, h := range heads {
		if err := l.Verify(h); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	path := filepath.Join(dir, File)
	full, _ := os.ReadFile(path)
	cut := func(n int) []byte {
		b := full
		for i := 0; i < n; i++ {
			j := len(b) - 2
			for j >= 0 && b[j] != '\n' {
				j--
			}
			b = b[:j+1]
		}
		return b
	}
	for name, data := range map[string][]byte{"last line deleted": cut(1), "emptied": nil} {
		os.WriteFile(path, data, 0o600)
		l := open(t, dir, 100)
		if err := l.Verify(heads[2]); !errors.Is(err, ErrRollback) {
			t.Errorf("%s: %v", name, err)
		}
		l.Close()
	}
	os.WriteFile(path, append(cut(1), `{"v":1,"round":3,"rel`...), 0o600)
	l = open(t, dir, 100)
	if l.Head() != heads[1] {
		t.Fatalf("torn line not discarded: %+v", l.Head())
	}
	l.Suspend(errors.New("unchecked"))
	if err := l.Charge(rel(3)); !errors.Is(err, ErrSuspended) {
		t.Fatalf("suspended ledger charged: %v", err)
	}
	l.Resume()
	if err := l.Charge(rel(3)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	os.WriteFile(path, append(cut(2), []byte(`{"v":1,"time":"2026-01-01T00:00:00Z","round":3,"release":{},"eps":0,"method":"","prev":"00"}`+"\n")...), 0o600)
	if _, err := Open(dir, Options{TargetEpsilon: 100, TargetDelta: 1e-5}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a line that does not chain: %v", err)
	}
}

// TestPeerNeverGoesBack: the aggregator's head is kept durably and a head
// behind it is refused.
func TestPeerNeverGoesBack(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, 100)
	h5 := wire.Head{Count: 5, Hash: [32]byte{5}}
	if err := l.RecordPeer(h5); err != nil {
		t.Fatal(err)
	}
	if err := l.RecordPeer(h5); err != nil {
		t.Fatal(err)
	}
	for _, h := range []wire.Head{{Count: 4, Hash: [32]byte{4}}, {}, {Count: 5, Hash: [32]byte{6}}} {
		if err := l.RecordPeer(h); !errors.Is(err, ErrRollback) {
			t.Errorf("%d: %v", h.Count, err)
		}
	}
	l.Close()
	if l2 := open(t, dir, 100); l2.Peer() != h5 {
		t.Fatalf("peer after reopen %+v", l2.Peer())
	}
}
