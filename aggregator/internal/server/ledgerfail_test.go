package server

import (
	"errors"
	"slices"
	"testing"

	"github.com/blanket-fl/blanket/aggregator/internal/accounting"
	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/shared/ledger"
	"github.com/blanket-fl/blanket/shared/ledger/ledgertest"
	"github.com/blanket-fl/blanket/shared/wire"
)

// checkNothingCharged fails unless the server's ledger is empty in memory
// and, once h has stopped, reopened from disk it holds nothing (failed
// write) or verifies against the empty head (failed fsync: the complete
// line may count, an over-count, never an under-count).
func checkNothingCharged(t *testing.T, h *harness, op ledgertest.Op) {
	t.Helper()
	if eps, _, _ := h.srv.ledger.Spent(); eps != 0 || len(h.srv.ledger.Releases()) != 0 || !h.srv.ledger.Head().IsZero() {
		t.Fatalf("after the failed charge: spent %v, head %+v", eps, h.srv.ledger.Head())
	}
	for _, rec := range h.srv.Rounds() {
		if rec.Status == checkpoint.StatusOK {
			t.Fatalf("a round was recorded ok: %+v", rec)
		}
	}
	h.stop()
	l, done := openStateLedger(t, h.dir, ledger.Options{TargetEpsilon: h.cfg.TargetEpsilon, TargetDelta: h.cfg.TargetDelta,
		Composer: accounting.New(h.cfg.Accountant).Composer()})
	defer done()
	if err := l.Verify(wire.Head{}); err != nil {
		t.Fatal(err)
	}
	if n := l.Head().Count; n > 1 || (op == ledgertest.Write && n != 0) {
		t.Fatalf("reopened after a failed %s: %d records", op, n)
	}
}

// TestBatchNotOpenedWhenChargeNotDurable (issue 23): a shuffle batch whose
// charge cannot be made durable (the ledger's write fails, or its fsync)
// is answered with the error, and nothing of it is opened or applied: no
// message decrypted, the model unchanged, no round recorded ok, the
// ledger's state unchanged.
func TestBatchNotOpenedWhenChargeNotDurable(t *testing.T) {
	for _, op := range []ledgertest.Op{ledgertest.Write, ledgertest.Sync} {
		t.Run(op.String(), func(t *testing.T) {
			relay := newFakeRelay(t)
			fsys := &ledgertest.StoreFS{}
			h := newHarness(t, t.TempDir(), relay, func(c *Config) { c.storeFS = fsys })
			relay.next(t)
			fsys.Arm(op, []byte(ledger.BucketRecords)) // the charge's transaction
			model := h.srv.Model()
			frame := makeBatch(t, h.srv.PublicKey(), testParams(), batchSpec{round: 1, reports: 4, value: constValue(0.6)})
			if _, _, err := h.srv.BatchIntake(frame); !errors.Is(err, ledger.ErrBroken) || !errors.Is(err, ledgertest.ErrInjected) {
				t.Fatalf("batch with a failing %s: %v, want ErrBroken wrapping the failure", op, err)
			}
			if n := h.srv.Opened(); n != 0 || !slices.Equal(h.srv.Model(), model) {
				t.Fatalf("%d messages opened, model changed %v", n, !slices.Equal(h.srv.Model(), model))
			}
			checkNothingCharged(t, h, op)
		})
	}
}

// TestSecAggNotAnsweredWhenChargeNotDurable (issue 23): a secure-summation
// close whose charge cannot be made durable gets no answer (no charged
// count, so the relay releases no noised share), leaves no round waiting for an
// aggregate share, and the ledger's state unchanged.
func TestSecAggNotAnsweredWhenChargeNotDurable(t *testing.T) {
	for _, op := range []ledgertest.Op{ledgertest.Write, ledgertest.Sync} {
		t.Run(op.String(), func(t *testing.T) {
			relay := newSecAggRelay(t)
			fsys := &ledgertest.StoreFS{}
			h := newSecAggHarness(t, t.TempDir(), relay, func(c *Config) { c.storeFS = fsys })
			a := relay.next(t)
			var vs []volunteer
			for i := range 4 {
				vs = append(vs, relay.shardAndSeal(t, a, honestUpdate(uint64(i+1), 8), uint64(100+i)))
			}
			rs := relay.streamChunks(t, h, a, vs, 2)   // nothing is charged before the close
			fsys.Arm(op, []byte(ledger.BucketRecords)) // the charge's transaction
			ans, err := h.srv.SecAggCloseIntake(rs.closeFrame(t))
			if !errors.Is(err, ledger.ErrBroken) || !errors.Is(err, ledgertest.ErrInjected) || len(ans.Frame) != 0 {
				t.Fatalf("secagg close with a failing %s: %v, answer %d bytes", op, err, len(ans.Frame))
			}
			if until := h.srv.PendingUntil(1); !until.IsZero() {
				t.Fatal("a round waits for an aggregate share its charge never paid for")
			}
			if !slices.Equal(h.srv.Model(), make([]float64, 8)) {
				t.Fatal("the model changed")
			}
			checkNothingCharged(t, h, op)
		})
	}
}
