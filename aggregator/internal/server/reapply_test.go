package server

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/blanket-fl/blanket/aggregator/internal/accounting"
	"github.com/blanket-fl/blanket/aggregator/internal/analysis"
	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/shared/ledger"
	"github.com/blanket-fl/blanket/shared/wire"
)

// TestChargedBatchReappliedAfterRestart: the aggregator stopped after
// charging round 2 and before its checkpoint (simulated: the checkpoint
// records the batch being charged, the ledger holds the charge). After the
// restart the round is lost until the relay re-sends the identical batch,
// which is then applied without a second charge; a different batch for
// that round is still refused, and a second identical re-send is a
// duplicate.
func TestChargedBatchReappliedAfterRestart(t *testing.T) {
	dir := t.TempDir()
	relay := newFakeRelay(t)
	h := newHarness(t, dir, relay, nil)
	relay.next(t)
	h.sendBatch(makeBatch(t, h.srv.PublicKey(), testParams(), batchSpec{round: 1, reports: 4, value: constValue(0.6)}))
	relay.next(t)
	model1 := h.srv.Model()
	frame := makeBatch(t, h.srv.PublicKey(), testParams(), batchSpec{round: 2, reports: 4, value: constValue(0.7)})
	other := makeBatch(t, h.srv.PublicKey(), testParams(), batchSpec{round: 2, reports: 4, value: constValue(0.3)})
	h.stop()

	// What a stop between the charge and the checkpoint leaves behind.
	sum := sha256.Sum256(frame)
	st := loadCheckpoint(t, dir)
	st.Charging = &checkpoint.Charging{Round: 2, Digest: hex.EncodeToString(sum[:])}
	l, done := openStateLedger(t, dir, ledger.Options{TargetEpsilon: 100, TargetDelta: 1e-5,
		Composer: accounting.New(h.cfg.Accountant).Composer()})
	ps, _ := analysis.NewProtocol(testParams())
	if err := l.Charge(ps.Release(2, 4, 4)); err != nil {
		t.Fatal(err)
	}
	st.LedgerRecords, st.LedgerHead = checkpoint.LedgerHead(l)
	done()
	saveCheckpoint(t, dir, st)

	h2 := newHarness(t, dir, relay, nil)
	if a := relay.next(t); a.Round != 3 || !slices.Equal(a.Model, model1) {
		t.Fatalf("announced round %d, want 3 with the round-1 model", a.Round)
	}
	if rec := h2.srv.Rounds()[1]; rec.Round != 2 || rec.Status != checkpoint.StatusLost {
		t.Fatalf("round 2 after the restart: %+v", rec)
	}
	if r := h2.sendBatch(other); r.Status == wire.BatchStatusOK {
		t.Fatalf("a different batch for the charged round was applied: %+v", r)
	}
	r := h2.sendBatch(frame)
	if r.Status != wire.BatchStatusOK || r.Accepted != 32 {
		t.Fatalf("identical re-send: %+v", r)
	}
	if n := len(h2.srv.ledger.Releases()); n != 2 {
		t.Fatalf("%d releases in the ledger, want 2 (no second charge)", n)
	}
	if rec := h2.srv.Rounds()[1]; rec.Status != checkpoint.StatusOK || rec.Accuracy == nil {
		t.Fatalf("round 2 after the re-send: %+v", rec)
	}
	if slices.Equal(h2.srv.Model(), model1) {
		t.Fatal("the re-sent round did not change the model")
	}
	if r := h2.sendBatch(frame); r.Status != wire.BatchStatusOK || len(h2.srv.ledger.Releases()) != 2 {
		t.Fatalf("second identical re-send: %+v", r)
	}
}

// TestBatchWithDuplicatedSealedMessageRefused: a batch in which one sealed
// message appears twice (a replayed report that got through) is refused as
// invalid before anything is charged or opened; the same batch without the
// duplicate is then accepted.
func TestBatchWithDuplicatedSealedMessageRefused(t *testing.T) {
	h := newHarness(t, t.TempDir(), newFakeRelay(t), nil)
	h.relay.next(t)
	frame := makeBatch(t, h.srv.PublicKey(), testParams(), batchSpec{round: 1, reports: 4, value: constValue(0.6)})
	b, err := wire.ParseBatch(frame, testParams())
	if err != nil {
		t.Fatal(err)
	}
	dup := *b
	dup.Messages = append([]wire.BatchMessage(nil), b.Messages...)
	// Message 8 covers the same dimension as message 0 (8 mod 8): a copy
	// of message 0 in its place keeps every dimension at n_p.
	dup.Messages[8] = dup.Messages[0]
	bad, err := dup.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if r := h.sendBatch(bad); r.Status != wire.BatchStatusInvalid {
		t.Fatalf("duplicated sealed message: %+v", r)
	}
	if len(h.srv.ledger.Releases()) != 0 || h.srv.Opened() != 0 {
		t.Fatal("a batch with a duplicated sealed message was charged or opened")
	}
	if r := h.sendBatch(frame); r.Status != wire.BatchStatusOK {
		t.Fatalf("the honest batch after it: %+v", r)
	}
}

// TestMetricsCountTheDatastore: GET /api/metrics reports the datastore's
// work, and a finished round is a commit that moved its counters.
func TestMetricsCountTheDatastore(t *testing.T) {
	relay := newFakeRelay(t)
	h := newHarness(t, t.TempDir(), relay, nil)
	defer h.stop()
	get := func() map[string]int64 {
		resp, err := http.Get(h.http.URL + "/api/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m struct {
			Datastore map[string]int64 `json:"datastore"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatal(err)
		}
		return m.Datastore
	}
	relay.next(t)
	before := get()
	h.sendBatch(makeBatch(t, h.srv.PublicKey(), testParams(), batchSpec{round: 1, reports: 4, value: constValue(0.6)}))
	after := get()
	if after["commits"] <= before["commits"] || after["bytes_written"] <= before["bytes_written"] || after["fsyncs"] <= before["fsyncs"] {
		t.Fatalf("a finished round moved no datastore counter: before %v, after %v", before, after)
	}
}
