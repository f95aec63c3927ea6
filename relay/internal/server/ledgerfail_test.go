package server

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/blanket-fl/blanket/shared/envelope/envelopetest"
	"github.com/blanket-fl/blanket/shared/ledger"
	"github.com/blanket-fl/blanket/shared/ledger/ledgertest"
	"github.com/blanket-fl/blanket/shared/wire"
)

// TestSecAggRelayNoShareWhenNoiseChargeNotDurable (issue 23): a round
// whose noise charge cannot be made durable — the write fails, or the
// fsync after it — releases no noised share: the aggregator gets a
// no-release abort instead, the noise ledger's head and spent epsilon
// stay as before the charge, and the ledger reopened from disk holds no
// charge for the round (failed write) or verifies against the head
// before it (failed fsync: the complete line may count, an over-count).
func TestSecAggRelayNoShareWhenNoiseChargeNotDurable(t *testing.T) {
	p := secAggTestParams()
	for _, op := range []ledgertest.Op{ledgertest.Write, ledgertest.Sync} {
		t.Run(op.String(), func(t *testing.T) {
			dir := t.TempDir()
			var before wire.Head
			synctest.Test(t, func(t *testing.T) {
				key, _ := envelopetest.DeriveKey([32]byte{7})
				nl, err := ledger.OpenNoise(dir, ledger.Options{TargetEpsilon: 1e9, TargetDelta: 1e-5, WrapFile: ledgertest.FailAt(op, 1)})
				if err != nil {
					t.Fatal(err)
				}
				defer nl.Close()
				agg := &anchorAgg{leaderAgg: &leaderAgg{t: t, key: key, p: p}}
				h := newHarness(t, agg, dir, func(c *Config) { c.NoiseLedger = nl })
				defer h.close()
				time.Sleep(time.Second) // the start check
				synctest.Wait()
				before = nl.Head()
				clients := h.sendHonestSecAggRound(p)
				agg.mu.Lock()
				nc, na, aborts := len(agg.closes), len(agg.attempts[secAggAggregatePath]), agg.aborts
				agg.mu.Unlock()
				if nc != 1 || na != 0 {
					t.Fatalf("%d closes, %d aggregate shares: want 1, 0", nc, na)
				}
				if len(aborts) != 1 || aborts[0].Round != 1 || aborts[0].Reason != wire.AbortNoRelease {
					t.Fatalf("aborts %+v: want one no-release abort for round 1", aborts)
				}
				if eps, _, _ := nl.Spent(); eps != 0 || nl.Head() != before || !before.IsZero() {
					t.Fatalf("after the failed charge: spent %v, head %+v (before %+v)", eps, nl.Head(), before)
				}
				if s := h.srv.Metrics(); s.SecAgg.Rounds[SecAggFailed] != 1 || s.SecAgg.Rounds[SecAggForwarded] != 0 {
					t.Fatalf("metrics %+v", s.SecAgg)
				}
				for _, c := range clients {
					c.ws.Close()
				}
			})
			// The relay stopped and its ledger closed: reopen from disk.
			re, err := ledger.OpenNoise(dir, ledger.Options{TargetEpsilon: 1e9, TargetDelta: 1e-5})
			if err != nil {
				t.Fatal(err)
			}
			defer re.Close()
			if err := re.Verify(before); err != nil {
				t.Fatalf("reopened: %v", err)
			}
			if n := re.Head().Count; n > 1 || (op == ledgertest.Write && n != 0) {
				t.Fatalf("reopened after a failed %s: %d records", op, n)
			}
		})
	}
}
