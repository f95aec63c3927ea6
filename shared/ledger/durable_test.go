package ledger_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/blanket-fl/blanket/shared/ledger"
	"github.com/blanket-fl/blanket/shared/ledger/ledgertest"
	"github.com/blanket-fl/blanket/shared/privacy"
)

// configs are the two servers' ledgers: the aggregator's (Open with an
// incremental privacy.Session, as accounting.LedgerOptions configures
// it) and the relay's (OpenNoise), each with a release of its kind.
var configs = []struct {
	name string
	open func(dir string, wrap func(ledger.File) ledger.File) (*ledger.Ledger, string, error)
	rel  func(round int) privacy.Release
}{
	{"aggregator", func(dir string, wrap func(ledger.File) ledger.File) (*ledger.Ledger, string, error) {
		s, err := privacy.NewSession(1e-5)
		if err != nil {
			return nil, "", err
		}
		path := filepath.Join(dir, "ledger.jsonl")
		l, err := ledger.Open(path, ledger.Options{TargetEpsilon: 750, TargetDelta: 1e-5, Session: s, WrapFile: wrap})
		return l, path, err
	}, func(round int) privacy.Release {
		return privacy.Release{Round: round, Protocol: privacy.ProtocolSSSimple, Randomizer: privacy.RandomizerLaplace,
			Eps0: 0.25, D: 10, K: 10, N: 100, NP: 120}
	}},
	{"relay", func(dir string, wrap func(ledger.File) ledger.File) (*ledger.Ledger, string, error) {
		l, err := ledger.OpenNoise(dir, ledger.Options{TargetEpsilon: 750, TargetDelta: 1e-5, WrapFile: wrap})
		return l, filepath.Join(dir, ledger.NoiseFile), err
	}, func(round int) privacy.Release {
		return privacy.Release{Round: round, Protocol: privacy.ProtocolSecAgg, Randomizer: privacy.RandomizerDiscreteGaussian,
			D: 10, K: 10, N: 20, SecAggSigma: 300, SecAggSensitivity: 138, CheckInRate: 1}
	}},
}

// TestChargeFailsWhenNotDurable: for both servers' ledgers, a third
// charge whose write fails, whose write is torn, or whose fsync fails
// returns an error (ErrBroken, wrapping the failure), leaves the spent
// epsilon, the head and the releases as they were (the round is not
// charged, so its caller releases nothing), and refuses every later
// charge until reopened. Reopened from disk, the ledger holds no charge
// for the round (failed or torn write: the fragment is discarded) or the
// complete line the failed fsync may have left (an over-count), and in
// both cases verifies against the head from before the failure.
func TestChargeFailsWhenNotDurable(t *testing.T) {
	for _, c := range configs {
		for _, op := range []ledgertest.Op{ledgertest.Write, ledgertest.TornWrite, ledgertest.Sync} {
			t.Run(c.name+"/"+op.String(), func(t *testing.T) {
				dir := t.TempDir()
				l, path, err := c.open(dir, ledgertest.FailAt(op, 3))
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				for r := 1; r <= 2; r++ {
					if err := l.Charge(c.rel(r)); err != nil {
						t.Fatal(err)
					}
				}
				head := l.Head()
				eps, _, method := l.Spent()
				onDisk, _ := os.ReadFile(path)

				err = l.Charge(c.rel(3))
				if !errors.Is(err, ledger.ErrBroken) || !errors.Is(err, ledgertest.ErrInjected) {
					t.Fatalf("charge with a failing %s: %v, want ErrBroken wrapping the failure", op, err)
				}
				if eps2, _, method2 := l.Spent(); eps2 != eps || method2 != method || l.Head() != head || l.LastRound() != 2 || len(l.Releases()) != 2 {
					t.Fatalf("the failed charge changed the state: eps %v -> %v, head %+v -> %+v, last round %d",
						eps, eps2, head, l.Head(), l.LastRound())
				}
				if err := l.Charge(c.rel(4)); !errors.Is(err, ledger.ErrBroken) {
					t.Fatalf("charge after a failure: %v, want ErrBroken", err)
				}
				if _, err := l.CanCharge(c.rel(4)); !errors.Is(err, ledger.ErrBroken) {
					t.Fatalf("CanCharge after a failure: %v, want ErrBroken", err)
				}
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}

				l2, _, err := c.open(dir, nil)
				if err != nil {
					t.Fatalf("reopen: %v", err)
				}
				defer l2.Close()
				if err := l2.Verify(head); err != nil {
					t.Fatalf("reopened ledger does not verify against the head before the failure: %v", err)
				}
				switch op {
				case ledgertest.Write, ledgertest.TornWrite:
					if l2.Head() != head || l2.LastRound() != 2 {
						t.Fatalf("reopened after a failed write: head %+v, want %+v", l2.Head(), head)
					}
					if got, _, _ := l2.Spent(); got != eps {
						t.Fatalf("reopened spent %v, want %v", got, eps)
					}
					if torn := len(l2.DiscardedTail()) > 0; torn != (op == ledgertest.TornWrite) {
						t.Fatalf("discarded tail %q", l2.DiscardedTail())
					}
					if now, _ := os.ReadFile(path); !bytes.Equal(now, onDisk) {
						t.Fatalf("file after recovery is not the file before the failed charge")
					}
					// The round was never charged: it can be now.
					if err := l2.Charge(c.rel(3)); err != nil {
						t.Fatal(err)
					}
				case ledgertest.Sync:
					// The write reached the file: counted on replay (an
					// over-count, never an under-count).
					if l2.Head().Count != 3 || l2.LastRound() != 3 {
						t.Fatalf("reopened after a failed fsync: head %+v, last round %d", l2.Head(), l2.LastRound())
					}
					if got, _, _ := l2.Spent(); !(got > eps) {
						t.Fatalf("reopened spent %v, want more than %v", got, eps)
					}
				}
			})
		}
	}
}

// TestChargeFailsAtFirstRecord: a failing first write leaves an empty
// ledger, on disk and in memory.
func TestChargeFailsAtFirstRecord(t *testing.T) {
	for _, c := range configs {
		dir := t.TempDir()
		l, path, err := c.open(dir, ledgertest.FailAt(ledgertest.TornWrite, 1))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Charge(c.rel(1)); !errors.Is(err, ledger.ErrBroken) {
			t.Fatalf("%s: %v", c.name, err)
		}
		if eps, _, _ := l.Spent(); eps != 0 || !l.Head().IsZero() {
			t.Fatalf("%s: eps %v head %+v", c.name, eps, l.Head())
		}
		l.Close()
		l2, _, err := c.open(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !l2.Head().IsZero() {
			t.Fatalf("%s: reopened head %+v", c.name, l2.Head())
		}
		l2.Close()
		if st, _ := os.Stat(path); st.Size() != 0 {
			t.Fatalf("%s: %d bytes left", c.name, st.Size())
		}
	}
}
