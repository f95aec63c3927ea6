package rounds

import (
	"bytes"
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/aggregator/internal/outcome"
	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/wire"
)

// TestChunkAfterCloseIsRefused: once the close charged the round, a
// further chunk is not folded (obsolete) and charges nothing; the relay's
// re-sent close gets the stored reply byte for byte, without a second
// charge.
func TestChunkAfterCloseIsRefused(t *testing.T) {
	r := newRig(t, &memStore{})
	round := r.announce()
	h, reply := r.charged(round, 4)
	late := h.chunk(r.reports(round, 1))
	ans, err := r.m.SecAggChunkIntake(late)
	if err != nil || ans.Outcome != outcome.Obsolete {
		t.Fatalf("chunk after the close: %+v %v, want obsolete", ans.Answer, err)
	}
	again, err := r.m.SecAggCloseIntake(h.close())
	if err != nil || again.Outcome != outcome.Duplicate || !bytes.Equal(again.Frame, reply) {
		t.Fatalf("re-sent close: %+v %v, want duplicate with the stored reply", again.Answer, err)
	}
	if n := len(r.ledger.Releases()); n != 1 {
		t.Fatalf("%d releases charged, want 1", n)
	}
}

// TestRestartBetweenChargeAndAggregateResumes: the prepared round is saved
// before its charge, so a machine opened again from the store and the
// ledger between the charge and the relay's aggregate share resumes it:
// the re-sent close gets the stored reply, the aggregate share moves the
// model by about the honest mean, and the ledger holds one charge.
func TestRestartBetweenChargeAndAggregateResumes(t *testing.T) {
	store := &memStore{}
	r := newRig(t, store)
	round := r.announce()
	h, reply := r.charged(round, 4)
	if store.pendingSaves != 1 {
		t.Fatalf("pending saved %d times before the answer, want 1", store.pendingSaves)
	}
	r.open() // restart
	if r.m.PendingUntil(round).IsZero() {
		t.Fatal("the charged round was not resumed")
	}
	again, err := r.m.SecAggCloseIntake(h.close())
	if err != nil || again.Outcome != outcome.Duplicate || !bytes.Equal(again.Frame, reply) {
		t.Fatalf("re-sent close after the restart: %+v %v", again.Answer, err)
	}
	if ans := r.m.SecAggAggregateIntake(h.aggregate()); ans.Outcome != outcome.Accepted {
		t.Fatalf("aggregate after the restart: %+v", ans)
	}
	rec := r.lastRecord()
	if rec.Status != checkpoint.StatusOK || rec.Round != round || rec.Accepted != 4 {
		t.Fatalf("record %+v", rec)
	}
	if n := len(r.ledger.Releases()); n != 1 {
		t.Fatalf("%d releases, want 1", n)
	}
	if store.pending != nil {
		t.Fatal("the applied round's pending record is still stored")
	}
	// The model moved by the noisy mean of 4 updates of |x_i| <= 0.3:
	// each coordinate within 0.3 plus the two servers' noise (σ = 2 grid
	// units of 1/127 each, over 4 reports: 6σ√2/(4·127) < 0.04).
	moved := false
	for _, v := range r.state().Model {
		if math.Abs(v) > 0.34 {
			t.Fatalf("model coordinate %v beyond the updates' range", v)
		}
		moved = moved || v != 0
	}
	if !moved {
		t.Fatal("the model did not move")
	}
	if ans := r.m.SecAggAggregateIntake(h.aggregate()); ans.Outcome != outcome.Duplicate {
		t.Fatalf("re-sent aggregate: %+v, want duplicate", ans)
	}
}

// TestRestartMidCollectResumes: the chunks' state is saved before each
// answer; after a restart the re-sent last chunk gets its answer again
// (duplicate, the same bytes) and the round goes on from the next chunk.
func TestRestartMidCollectResumes(t *testing.T) {
	store := &memStore{}
	r := newRig(t, store)
	round := r.announce()
	reps := r.reports(round, 4)
	h := r.helperSide(round)
	c1 := h.chunk(reps[:2])
	a1, err := r.m.SecAggChunkIntake(c1)
	if err != nil || a1.Outcome != outcome.Accepted {
		t.Fatalf("chunk 1: %+v %v", a1.Answer, err)
	}
	h.verdicts(a1.Frame)
	r.open()
	again, err := r.m.SecAggChunkIntake(c1)
	if err != nil || again.Outcome != outcome.Duplicate || !bytes.Equal(again.Frame, a1.Frame) {
		t.Fatalf("re-sent chunk 1 after the restart: %+v %v", again.Answer, err)
	}
	a2, err := r.m.SecAggChunkIntake(h.chunk(reps[2:]))
	if err != nil || a2.Outcome != outcome.Accepted {
		t.Fatalf("chunk 2 after the restart: %+v %v", a2.Answer, err)
	}
	h.verdicts(a2.Frame)
	ans, err := r.m.SecAggCloseIntake(h.close())
	if ch, perr := wire.ParseSecAggCharged(ans.Frame); err != nil || perr != nil || ch.Accepted != 4 {
		t.Fatalf("close: %+v %v %v", ans.Answer, err, perr)
	}
}

// TestCollectSaveFailureAnswersNoVerdicts: a chunk whose state cannot be
// saved is not answered accepted (its verdicts would let the relay fold
// reports the aggregator could not resume after a restart): the round is
// closed invalid with nothing charged.
func TestCollectSaveFailureAnswersNoVerdicts(t *testing.T) {
	store := &memStore{failCollect: true}
	r := newRig(t, store)
	round := r.announce()
	h := r.helperSide(round)
	ans, err := r.m.SecAggChunkIntake(h.chunk(r.reports(round, 2)))
	if err != nil || ans.Outcome != outcome.Invalid {
		t.Fatalf("chunk with a failing save: %+v %v, want invalid", ans.Answer, err)
	}
	if p, perr := wire.ParseSecAggPrep(ans.Frame); perr != nil || p.Status != wire.BatchStatusInvalid || len(p.Msg) != 0 {
		t.Fatalf("answer %+v %v carries verdicts", p, perr)
	}
	if rec := r.lastRecord(); rec.Status != checkpoint.StatusInvalid || rec.Round != round {
		t.Fatalf("record %+v", rec)
	}
	if n := len(r.ledger.Releases()); n != 0 {
		t.Fatalf("%d releases", n)
	}
}

// TestPendingSaveFailureChargesNothing: a close whose prepared round
// cannot be saved before the charge is an error (the server answers 500)
// and nothing is charged, so nothing can be released.
func TestPendingSaveFailureChargesNothing(t *testing.T) {
	store := &memStore{failPending: true}
	r := newRig(t, store)
	round := r.announce()
	h := r.streamed(round, r.reports(round, 4), 2)
	ans, err := r.m.SecAggCloseIntake(h.close())
	if err == nil {
		t.Fatalf("close with a failing save answered %+v", ans.Answer)
	}
	if n := len(r.ledger.Releases()); n != 0 {
		t.Fatalf("%d releases after a failed save", n)
	}
	if st := r.state(); st.Charging != nil || st.Open == nil || st.Open.Round != round {
		t.Fatalf("state after the failed close: charging %+v, open %+v", st.Charging, st.Open)
	}
	if ans := r.m.SecAggAggregateIntake(h.aggregate()); ans.Outcome != outcome.Obsolete {
		t.Fatalf("aggregate of an uncharged round: %+v, want obsolete", ans)
	}
}

// TestAbandonChargedRoundIsLost: a charged round whose aggregate share
// does not come is recorded lost when abandoned; its charge stays, and
// the late aggregate share is obsolete (nothing applied).
func TestAbandonChargedRoundIsLost(t *testing.T) {
	r := newRig(t, &memStore{})
	round := r.announce()
	h, _ := r.charged(round, 3)
	r.m.Abandon(round, "test: grace expired")
	rec := r.lastRecord()
	if rec.Status != checkpoint.StatusLost || len(r.ledger.Releases()) != 1 {
		t.Fatalf("record %+v, %d releases", rec, len(r.ledger.Releases()))
	}
	if ans := r.m.SecAggAggregateIntake(h.aggregate()); ans.Outcome != outcome.Obsolete {
		t.Fatalf("late aggregate: %+v", ans)
	}
	for _, v := range r.state().Model {
		if v != 0 {
			t.Fatal("a lost round moved the model")
		}
	}
}

// TestAbortIntake: the relay's abort closes the open round with nothing
// charged (accepted); its re-send is a duplicate; a chunk of the aborted
// round is obsolete; the next round follows.
func TestAbortIntake(t *testing.T) {
	r := newRig(t, &memStore{})
	round := r.announce()
	f, err := (&wire.Abort{Round: uint64(round), Reason: wire.AbortBelowMinBatch}).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if ans := r.m.AbortIntake(f); ans.Outcome != outcome.Accepted {
		t.Fatalf("abort: %+v", ans)
	}
	if ans := r.m.AbortIntake(f); ans.Outcome != outcome.Duplicate {
		t.Fatalf("re-sent abort: %+v", ans)
	}
	h := r.helperSide(round)
	if ans, err := r.m.SecAggChunkIntake(h.chunk(r.reports(round, 2))); err != nil || ans.Outcome != outcome.Obsolete {
		t.Fatalf("chunk of an aborted round: %+v %v", ans.Answer, err)
	}
	if next := r.announce(); next != round+1 || len(r.ledger.Releases()) != 0 {
		t.Fatalf("next round %d, %d releases", next, len(r.ledger.Releases()))
	}
}

// TestBatchIntakeRefusedInSecAggRound: a shuffle batch is not taken in a
// secure-summation round (invalid, counted), nor for a round never
// announced (obsolete); nothing is charged.
func TestBatchIntakeRefusedInSecAggRound(t *testing.T) {
	r := newRig(t, &memStore{})
	round := r.announce()
	// A well-formed frame (d·n_p = 32 messages of width 1, opaque bytes).
	msgs := make([]wire.BatchMessage, 32)
	for i := range msgs {
		msgs[i] = wire.BatchMessage{Indices: []uint32{uint32(i % 8)}, Sealed: make([]byte, envelope.SealedLen(1))}
	}
	frame, err := (&wire.Batch{Round: uint64(round), D: 8, Width: 1, NP: 4, Reports: 3, CheckedIn: 3, Population: 5, Messages: msgs}).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if _, in, err := r.m.BatchIntake(frame); err != nil || in != outcome.Invalid {
		t.Fatalf("batch in a secagg round: %s %v", in, err)
	}
	never, err := (&wire.Batch{Round: uint64(round) + 5, D: 8, Width: 1, NP: 4, Reports: 3, CheckedIn: 3, Population: 5, Messages: msgs}).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if _, in, err := r.m.BatchIntake(never); err != nil || in != outcome.Obsolete {
		t.Fatalf("batch of a round never announced: %s %v", in, err)
	}
	if _, in, err := r.m.BatchIntake([]byte("not a frame")); err != nil || in != outcome.Invalid {
		t.Fatalf("garbage: %s %v", in, err)
	}
	var rejected int
	r.m.View(func(_ *checkpoint.State, c Control) {
		for _, n := range c.Rejected {
			rejected += n
		}
	})
	if rejected != 2 || len(r.ledger.Releases()) != 0 {
		t.Fatalf("rejected %d, releases %d", rejected, len(r.ledger.Releases()))
	}
}

// TestExpireDecisions: the waiting for a round's close ends only while the
// relay answers: a round the relay may still keep open waits until its
// cap plus the grace; a relay that does not answer is probed; one that is
// back gives the round the whole grace again; up and silent, the round is
// abandoned.
func TestExpireDecisions(t *testing.T) {
	r := newRig(t, &memStore{})
	round := r.announce()
	now := time.Now()
	up := func() bool { return true }
	down := func() bool { return false }
	if e, until := r.m.Expire(round, now, now.Add(time.Minute), false, up); e != ExpiryWait || !until.Equal(now.Add(time.Minute+10*time.Second)) {
		t.Fatalf("before the cap: %v %v", e, until)
	}
	if e, _ := r.m.Expire(round, now, now.Add(-time.Hour), false, down); e != ExpiryProbe {
		t.Fatalf("relay down: %v", e)
	}
	if e, until := r.m.Expire(round, now, now.Add(-time.Hour), true, up); e != ExpiryRegrace || !until.Equal(now.Add(10*time.Second)) {
		t.Fatalf("relay back: %v %v", e, until)
	}
	if e, _ := r.m.Expire(round, now, now.Add(-time.Hour), false, up); e != ExpiryAbandon {
		t.Fatalf("relay up and silent: %v", e)
	}
	// A charged round waits for its pending aggregate's expiry, and a
	// relay back moves that expiry.
	r.charged(round, 3)
	if e, until := r.m.Expire(round, now, now, false, up); e != ExpiryWait || until.Before(now.Add(9*time.Second)) {
		t.Fatalf("charged round: %v %v", e, until)
	}
	later := now.Add(time.Hour)
	if e, _ := r.m.Expire(round, later, now, true, up); e != ExpiryRegrace || !r.m.PendingUntil(round).Equal(later.Add(10*time.Second)) {
		t.Fatalf("charged round, relay back: %v, pending until %v", e, r.m.PendingUntil(round))
	}
}

// TestResetWaitsForOpenRound: a model reset asked while a round is open
// applies only when the round has closed (at the next NextRound), and
// the ledger keeps its charges.
func TestResetWaitsForOpenRound(t *testing.T) {
	r := newRig(t, &memStore{})
	round := r.announce()
	h, _ := r.charged(round, 4)
	if err := r.m.ResetModel(); err != nil {
		t.Fatal(err)
	}
	if ans := r.m.SecAggAggregateIntake(h.aggregate()); ans.Outcome != outcome.Accepted {
		t.Fatalf("aggregate: %+v", ans)
	}
	var moved bool
	for _, v := range r.state().Model {
		moved = moved || v != 0
	}
	if !moved {
		t.Fatal("the reset applied before the open round's update")
	}
	r.announce()
	st := r.state()
	for _, v := range st.Model {
		if v != 0 {
			t.Fatal("the model was not reset before the next round")
		}
	}
	if len(st.ModelResets) != 1 || len(r.ledger.Releases()) != 1 {
		t.Fatalf("resets %v, releases %d", st.ModelResets, len(r.ledger.Releases()))
	}
}

// TestWaitResumeStops: WaitResume returns false once the loop stopped,
// and true when the operator resumes.
func TestWaitResumeStops(t *testing.T) {
	r := newRig(t, &memStore{})
	r.m.Pause()
	done := make(chan bool)
	go func() { done <- r.m.WaitResume(context.Background()) }()
	if err := r.m.Resume(); err != nil {
		t.Fatal(err)
	}
	if !<-done {
		t.Fatal("resumed loop did not continue")
	}
	r.m.Stop("test")
	if r.m.WaitResume(context.Background()) {
		t.Fatal("stopped loop continued")
	}
	if err := r.m.Resume(); !errors.Is(err, ErrStopped) {
		t.Fatalf("resume after stop: %v", err)
	}
}

// TestRelayAnswers: a 409 refusal with an outcome stops announcing; a
// helper-key mismatch does not (the key is fetched again); 503 and
// transport errors are "not ready".
func TestRelayAnswers(t *testing.T) {
	refused := &RelayError{Code: 409, Outcome: "refused", Body: `{"detail":"noise ledger spent"}`}
	if why, ok := RelayRefusal(refused); !ok || why == "" {
		t.Fatal("409 refused is not a refusal")
	}
	mismatch := &RelayError{Code: 409, Outcome: "invalid", Body: `{"detail":"` + HelperKeyMismatch + `"}`}
	if _, ok := RelayRefusal(mismatch); ok || !IsHelperKeyMismatch(mismatch) {
		t.Fatal("helper key mismatch taken for a refusal")
	}
	if _, ok := RelayRefusal(&RelayError{Code: 409, Body: "round open"}); ok {
		t.Fatal("409 without an outcome taken for a refusal")
	}
	if !RelayNotReady(&RelayError{Code: 503}) || !RelayNotReady(errors.New("connection refused")) || RelayNotReady(refused) {
		t.Fatal("not-ready misread")
	}
}
