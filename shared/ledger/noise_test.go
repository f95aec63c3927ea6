package ledger

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"github.com/blanket-fl/blanket/shared/privacy"
)

// secAggRel is a secure-summation round's release as roundspec.Spec.Release
// builds it (σ 300 grid units, sensitivity 138, check-in rate 1).
func secAggRel(round int) privacy.Release {
	return privacy.Release{Round: round, Protocol: privacy.ProtocolSecAgg, Randomizer: privacy.RandomizerDiscreteGaussian,
		D: 10, K: 10, N: 20, SecAggSigma: 300, SecAggSensitivity: 138, CheckInRate: 1}
}

func openNoise(t *testing.T, dir string, target float64) *Ledger {
	t.Helper()
	l, err := OpenNoise(dir, Options{TargetEpsilon: target, TargetDelta: 1e-5})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// secAggEps composes k rounds of secAggRel with the accountant directly.
func secAggEps(t *testing.T, k int) float64 {
	t.Helper()
	s, _ := privacy.NewSession(1e-5)
	var rep privacy.Report
	var err error
	for r := 1; r <= k; r++ {
		if s, rep, err = s.With(secAggRel(r)); err != nil {
			t.Fatal(err)
		}
	}
	return rep.Rows[rep.Tightest].Epsilon
}

// TestNoiseLedgerRefusesPastTarget (the relay's configuration, OpenNoise):
// with a target between the composition of 2 and 3 rounds, the charged
// epsilon is the accountant's, the third round is refused (nothing
// written) before and after a reopen, a round out of schedule is
// refused, and exactly the last release again is admitted without a
// second line (RepeatLast).
func TestNoiseLedgerRefusesPastTarget(t *testing.T) {
	e2, e3 := secAggEps(t, 2), secAggEps(t, 3)
	if !(e2 < e3) {
		t.Fatalf("eps %v %v", e2, e3)
	}
	dir := t.TempDir()
	l := openNoise(t, dir, (e2+e3)/2)
	for r := 1; r <= 2; r++ {
		if err := l.Charge(secAggRel(r)); err != nil {
			t.Fatal(err)
		}
	}
	before := readFile(t, filepath.Join(dir, NoiseFile))
	if _, err := l.CanCharge(secAggRel(2)); err != nil {
		t.Fatalf("CanCharge of the last release: %v", err)
	}
	if err := l.Charge(secAggRel(2)); err != nil {
		t.Fatalf("re-charging the last release: %v", err)
	}
	if eps, _, _ := l.Spent(); l.Head().Count != 2 || eps != e2 {
		t.Fatalf("head %d spent %v want 2, %v", l.Head().Count, eps, e2)
	}
	if _, err := l.CanCharge(secAggRel(3)); !errors.Is(err, ErrBudgetExhausted) {
		t.Fatalf("can charge past the target: %v", err)
	}
	if err := l.Charge(secAggRel(3)); !errors.Is(err, ErrBudgetExhausted) {
		t.Fatalf("charged past the target: %v", err)
	}
	r := secAggRel(2)
	r.N = 7
	if err := l.Charge(r); !errors.Is(err, ErrInvalidRelease) {
		t.Fatalf("charged another release for a round already noised: %v", err)
	}
	if !bytes.Equal(before, readFile(t, filepath.Join(dir, NoiseFile))) {
		t.Fatal("a repeated or refused charge wrote to the file")
	}
	h := l.Head()
	l.Close()
	l2 := openNoise(t, dir, (e2+e3)/2)
	if eps, _, _ := l2.Spent(); l2.Head() != h || eps != e2 {
		t.Fatalf("reopened: %+v %v, want %+v %v", l2.Head(), eps, h, e2)
	}
	if err := l2.Charge(secAggRel(3)); !errors.Is(err, ErrBudgetExhausted) {
		t.Fatalf("reopened ledger charged past the target: %v", err)
	}
}

// TestRepeatLastIsOptIn: without RepeatLast (the aggregator's ledger)
// the last release again is refused as out of schedule.
func TestRepeatLastIsOptIn(t *testing.T) {
	l := open(t, filepath.Join(t.TempDir(), "l"), opts(10))
	mustCharge(t, l, rel(1, 0.25))
	if err := l.Charge(rel(1, 0.25)); !errors.Is(err, ErrInvalidRelease) {
		t.Fatalf("repeat without RepeatLast: %v", err)
	}
	if _, err := l.CanCharge(rel(1, 0.25)); !errors.Is(err, ErrInvalidRelease) {
		t.Fatalf("CanCharge of a repeat without RepeatLast: %v", err)
	}
}

// TestOpenNoiseInvalidTarget: the relay's target is checked as any
// ledger's.
func TestOpenNoiseInvalidTarget(t *testing.T) {
	for _, o := range []Options{{TargetEpsilon: 0, TargetDelta: 1e-5}, {TargetEpsilon: 1, TargetDelta: 0}, {TargetEpsilon: 1, TargetDelta: 1}} {
		if l, err := OpenNoise(t.TempDir(), o); !errors.Is(err, ErrInvalidOptions) {
			if l != nil {
				l.Close()
			}
			t.Errorf("%+v: %v", o, err)
		}
	}
}
