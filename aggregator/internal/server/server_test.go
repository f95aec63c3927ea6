package server

import (
	"encoding/json"
	"github.com/blanket-fl/blanket/aggregator/internal/rounds"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/accounting"
	"github.com/blanket-fl/blanket/aggregator/internal/analysis"
	"github.com/blanket-fl/blanket/aggregator/internal/api"
	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/ledger"
	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/wire"
)

// With Laplace bounded as roundspec states (the debiasing line is the
// clamped mean's tangent at 1/2, slope s), C = 0.5 and SS-Topk (no
// rescaling), a dimension whose n_p = 4 values are all 1/2 + e estimates
// 2C * 4e / (s n) = 4e/(s n), and the model moves by ServerLR (2) times
// that.
func wantCoordinate(e float64, n int) float64 { return 2 * 4 * e / float64(n) / testSlope() }

// testSlope is the debiasing slope of testParams' bounded randomizer.
func testSlope() float64 {
	s, err := roundspec.New(testParams())
	if err != nil {
		panic(err)
	}
	_, slope := s.Randomizer().Affine()
	return slope
}

func TestValidBatchUpdatesModelAndChargesOnce(t *testing.T) {
	h := newHarness(t, t.TempDir(), newFakeRelay(t), nil)
	a := h.relay.next(t)
	if a.Round != 1 || !slices.Equal(a.Model, make([]float64, 8)) || a.Params != testParams() {
		t.Fatalf("first announcement: round %d, model %v, params %+v", a.Round, a.Model, a.Params)
	}
	if !a.Deadline.After(time.Now()) {
		t.Fatalf("deadline %v already passed", a.Deadline)
	}
	frame := makeBatch(t, h.srv.PublicKey(), testParams(), batchSpec{round: 1, reports: 4, value: constValue(0.6)})
	r := h.sendBatch(frame)
	if r.Status != wire.BatchStatusOK || r.Round != 1 || r.Accepted != 32 || r.RejectedOpen != 0 || r.RejectedValue != 0 {
		t.Fatalf("reply %+v", r)
	}
	want := wantCoordinate(0.1, 4)
	for j, v := range h.srv.Model() {
		if math.Abs(v-want) > 1e-12 {
			t.Fatalf("model[%d] = %v, want %v", j, v, want)
		}
	}
	rels := h.srv.ledger.Releases()
	if len(rels) != 1 || rels[0].Round != 1 || rels[0].N != 4 || rels[0].NP != 4 || rels[0].Protocol != privacy.ProtocolSSTopk ||
		rels[0].Eps0 != 1 || rels[0].K != 2 || rels[0].L != 2 || rels[0].D != 8 {
		t.Fatalf("ledger releases %+v", rels)
	}
	// The next round carries the updated model.
	a2 := h.relay.next(t)
	if a2.Round != 2 || !slices.Equal(a2.Model, h.srv.Model()) {
		t.Fatalf("second announcement: round %d, model %v", a2.Round, a2.Model)
	}
	rec := h.srv.Rounds()[0]
	if rec.Status != checkpoint.StatusOK || rec.Accuracy == nil || rec.Loss == nil || rec.N != 4 || rec.NP != 4 ||
		rec.CheckInRate != 5.0/7 || rec.EpsilonTightest == nil || *rec.EpsilonTightest != 1 || len(rec.Epsilon) != 3 {
		t.Fatalf("history record %+v", rec)
	}
}

func TestDuplicateAndIdenticalResend(t *testing.T) {
	h := newHarness(t, t.TempDir(), newFakeRelay(t), nil)
	h.relay.next(t)
	pub := h.srv.PublicKey()
	frame := makeBatch(t, pub, testParams(), batchSpec{round: 1, reports: 4, value: constValue(0.6)})
	first, in := h.sendBatchOutcome(frame)
	if in != api.IntakeAccepted || first.Status != wire.BatchStatusOK {
		t.Fatalf("first batch: %s %+v", in, first)
	}
	model := h.srv.Model()
	opened := h.srv.Opened()
	// An identical re-send (a relay retry) gets the stored reply, as a
	// duplicate.
	again, in := h.sendBatchOutcome(frame)
	if *again != *first || in != api.IntakeDuplicate {
		t.Fatalf("identical resend: %s %+v, first %+v", in, again, first)
	}
	// A different batch for the same round is ignored: obsolete.
	other := makeBatch(t, pub, testParams(), batchSpec{round: 1, reports: 5, value: constValue(0.9)})
	dup, in := h.sendBatchOutcome(other)
	if dup.Status != wire.BatchStatusDuplicate || dup.Accepted != 0 || in != api.IntakeObsolete {
		t.Fatalf("different batch: %s %+v", in, dup)
	}
	if n := len(h.srv.ledger.Releases()); n != 1 {
		t.Fatalf("ledger charged %d times", n)
	}
	if !slices.Equal(h.srv.Model(), model) || h.srv.Opened() != opened {
		t.Fatal("a duplicate changed the model or was decrypted")
	}
}

func TestBadTokenRejected(t *testing.T) {
	h := newHarness(t, t.TempDir(), newFakeRelay(t), nil)
	h.relay.next(t)
	frame := makeBatch(t, h.srv.PublicKey(), testParams(), batchSpec{round: 1, reports: 4, value: constValue(0.6)})
	for _, tok := range []string{"", "wrong-token-0123456789abcdef", testToken + "x"} {
		if code, _ := post(t, h.http.URL+"/v1/batch", tok, frame); code != http.StatusUnauthorized {
			t.Errorf("token %q: HTTP %d, want 401", tok, code)
		}
	}
	if code, _ := post(t, h.http.URL+"/v1/abort", "nope", []byte{1, 6}); code != http.StatusUnauthorized {
		t.Errorf("abort with a bad token: HTTP %d, want 401", code)
	}
	if len(h.srv.ledger.Releases()) != 0 || h.srv.Opened() != 0 {
		t.Fatal("an unauthenticated batch was charged or opened")
	}
}

func TestTamperedAndNonFiniteValues(t *testing.T) {
	h := newHarness(t, t.TempDir(), newFakeRelay(t), nil)
	h.relay.next(t)
	// Width-1 message i covers dimension i mod 8. Message 0 is tampered,
	// message 1 opens to a NaN and message 2 to 1e6, far outside what the
	// bounded Laplace randomizer can output (a malicious volunteer's
	// attempt to move the model): all three are replaced by the center 1/2
	// (zero contribution); the other 3 messages of those dimensions carry
	// 0.6.
	spec := batchSpec{round: 1, reports: 4, tamper: map[int]bool{0: true},
		value: func(i, t int) float64 {
			switch i {
			case 1:
				return math.NaN()
			case 2:
				return 1e6
			}
			return 0.6
		}}
	r := h.sendBatch(makeBatch(t, h.srv.PublicKey(), testParams(), spec))
	if r.Status != wire.BatchStatusOK || r.Accepted != 29 || r.RejectedOpen != 1 || r.RejectedValue != 2 {
		t.Fatalf("reply %+v", r)
	}
	m := h.srv.Model()
	for j, v := range m {
		want := wantCoordinate(0.1, 4)
		if j < 3 {
			want = 2 * 3 * 0.1 / 4 / testSlope()
		}
		if math.Abs(v-want) > 1e-12 {
			t.Fatalf("model[%d] = %v, want %v", j, v, want)
		}
	}
}

func TestInvalidBatchNotCharged(t *testing.T) {
	h := newHarness(t, t.TempDir(), newFakeRelay(t), nil)
	h.relay.next(t)
	frame := makeBatch(t, h.srv.PublicKey(), testParams(), batchSpec{round: 1, reports: 4, value: constValue(0.6)})
	for name, f := range map[string][]byte{
		"truncated":    frame[:len(frame)-1],
		"wrong round":  makeBatch(t, h.srv.PublicKey(), testParams(), batchSpec{round: 3, reports: 4, value: constValue(0.6)}),
		"below min":    makeBatch(t, h.srv.PublicKey(), testParams(), batchSpec{round: 1, reports: 1, value: constValue(0.6)}),
		"other params": makeBatch(t, h.srv.PublicKey(), wire.Params{Protocol: wire.ProtocolSSTopk, Randomizer: wire.RandomizerLaplace, D: 8, K: 2, L: 2, Width: 4, NP: 4, MinBatch: 2, EpsL: 2, Clip: 0.5, CheckInP: 1}, batchSpec{round: 1, reports: 2, value: constValue(0.6)}),
	} {
		if r := h.sendBatch(f); r.Status != wire.BatchStatusInvalid {
			t.Errorf("%s: status %d, want invalid", name, r.Status)
		}
	}
	for name, f := range map[string][]byte{"empty": {}, "not a batch": {1, 5, 0}, "garbage": []byte("hello, world")} {
		if code, _ := post(t, h.http.URL+"/v1/batch", testToken, f); code != http.StatusBadRequest {
			t.Errorf("%s: HTTP %d, want 400", name, code)
		}
	}
	if len(h.srv.ledger.Releases()) != 0 || h.srv.Opened() != 0 {
		t.Fatal("an invalid batch was charged or opened")
	}
	// The round is still open and accepts the valid batch.
	if r := h.sendBatch(frame); r.Status != wire.BatchStatusOK {
		t.Fatalf("valid batch after invalid ones: %+v", r)
	}
}

// The accountant charges 10/N per round against a target of 3: the
// pre-announcement check (ExpectedN = 8: would-be 1.25) passes, but a batch
// of only 2 reports would cost 5 and is refused.
func TestBudgetRefusalDecryptsNothing(t *testing.T) {
	h := newHarness(t, t.TempDir(), newFakeRelay(t), func(c *Config) {
		c.TargetEpsilon, c.ExpectedN = 3, 8
		c.Accountant = fakeAccountant(func(r privacy.Release) float64 { return 10 / float64(r.N) })
	})
	h.relay.next(t)
	r := h.sendBatch(makeBatch(t, h.srv.PublicKey(), testParams(), batchSpec{round: 1, reports: 2, value: constValue(0.6)}))
	if r.Status != wire.BatchStatusRefused || r.Accepted != 0 {
		t.Fatalf("reply %+v, want refused", r)
	}
	if h.srv.Opened() != 0 || len(h.srv.ledger.Releases()) != 0 || !slices.Equal(h.srv.Model(), make([]float64, 8)) {
		t.Fatal("a refused batch was decrypted, charged or applied")
	}
	select {
	case err := <-h.done:
		if err != nil {
			t.Fatal(err)
		}
		h.done <- nil
	case <-time.After(10 * time.Second):
		t.Fatal("round loop did not stop after the refusal")
	}
	h.relay.none(t, 100*time.Millisecond)
	if st := h.srv.Status(); st.Running || st.Stopped == "" {
		t.Fatalf("status %+v", st)
	}
}

// After one charged round (eps 1) the would-be second round (eps 2) exceeds
// the target 1.5: it is never announced.
func TestNextRoundNotAnnouncedOverBudget(t *testing.T) {
	h := newHarness(t, t.TempDir(), newFakeRelay(t), func(c *Config) { c.TargetEpsilon = 1.5 })
	h.relay.next(t)
	if r := h.sendBatch(makeBatch(t, h.srv.PublicKey(), testParams(), batchSpec{round: 1, reports: 4, value: constValue(0.6)})); r.Status != wire.BatchStatusOK {
		t.Fatalf("reply %+v", r)
	}
	select {
	case err := <-h.done:
		if err != nil {
			t.Fatal(err)
		}
		h.done <- nil
	case <-time.After(10 * time.Second):
		t.Fatal("round loop did not stop")
	}
	h.relay.none(t, 100*time.Millisecond)
	st := h.srv.Status()
	if st.Round != 1 || st.OpenRound != 0 || st.Running || st.Epsilon != 1 || st.Method != "sum" {
		t.Fatalf("status %+v", st)
	}
}

func TestRestartResumes(t *testing.T) {
	dir := t.TempDir()
	relay := newFakeRelay(t)
	h := newHarness(t, dir, relay, nil)
	relay.next(t)
	h.sendBatch(makeBatch(t, h.srv.PublicKey(), testParams(), batchSpec{round: 1, reports: 4, value: constValue(0.6)}))
	relay.next(t) // round 2 announced and open
	h.waitAnnounced(2)
	model, fp := h.srv.Model(), h.srv.Fingerprint()
	h.stop()

	h2 := newHarness(t, dir, relay, nil)
	if h2.srv.Fingerprint() != fp || !slices.Equal(h2.srv.Model(), model) {
		t.Fatal("restart changed the key or the model")
	}
	st := h2.srv.Status()
	if st.Round != 1 || st.OpenRound != 2 || st.RoundsOK != 1 || st.Epsilon != 1 {
		t.Fatalf("status after restart %+v", st)
	}
	// Round 2 was already announced: not announced again, and its batch
	// is accepted.
	relay.none(t, 100*time.Millisecond)
	r := h2.sendBatch(makeBatch(t, h2.srv.PublicKey(), testParams(), batchSpec{round: 2, reports: 4, value: constValue(0.6)}))
	if r.Status != wire.BatchStatusOK {
		t.Fatalf("round 2 after restart: %+v", r)
	}
	if a := relay.next(t); a.Round != 3 {
		t.Fatalf("announced round %d, want 3", a.Round)
	}
	if n := len(h2.srv.ledger.Releases()); n != 2 {
		t.Fatalf("ledger has %d rounds, want 2", n)
	}
}

// A crash between Charge and the checkpoint: the ledger holds round 2, the
// checkpoint does not. The restarted server counts it (lost), keeps the
// model, and continues at round 3.
func TestRestartAfterChargeBeforeCheckpoint(t *testing.T) {
	dir := t.TempDir()
	relay := newFakeRelay(t)
	h := newHarness(t, dir, relay, nil)
	relay.next(t)
	h.sendBatch(makeBatch(t, h.srv.PublicKey(), testParams(), batchSpec{round: 1, reports: 4, value: constValue(0.6)}))
	relay.next(t)
	model := h.srv.Model()
	h.stop()

	l, done := openStateLedger(t, dir, ledger.Options{TargetEpsilon: 100, TargetDelta: 1e-5,
		Composer: accounting.New(h.cfg.Accountant).Composer()})
	ps, _ := analysis.NewProtocol(testParams())
	if err := l.Charge(ps.Release(2, 4, 4)); err != nil {
		t.Fatal(err)
	}
	done()

	h2 := newHarness(t, dir, relay, nil)
	if a := relay.next(t); a.Round != 3 || !slices.Equal(a.Model, model) {
		t.Fatalf("announced round %d (model %v), want 3 with the round-1 model", a.Round, a.Model)
	}
	st := h2.srv.Status()
	if st.Epsilon != 2 || st.Round != 2 {
		t.Fatalf("status %+v: the lost round must stay charged", st)
	}
	rounds := h2.srv.Rounds()
	if len(rounds) != 2 || rounds[1].Round != 2 || rounds[1].Status != checkpoint.StatusLost {
		t.Fatalf("history %+v", rounds)
	}
	// A late batch for the lost round is not processed.
	r := h2.sendBatch(makeBatch(t, h2.srv.PublicKey(), testParams(), batchSpec{round: 2, reports: 4, value: constValue(0.6)}))
	if r.Status != wire.BatchStatusDuplicate || len(h2.srv.ledger.Releases()) != 2 {
		t.Fatalf("late batch for the lost round: %+v", r)
	}
}

func TestAbort(t *testing.T) {
	h := newHarness(t, t.TempDir(), newFakeRelay(t), nil)
	h.relay.next(t)
	abort := func(round uint64) int {
		b, err := (&wire.Abort{Round: round, Reason: wire.AbortBelowMinBatch, Reports: 1, CheckedIn: 1, Population: 9}).MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		code, _ := post(t, h.http.URL+"/v1/abort", testToken, b)
		return code
	}
	if code := abort(7); code != http.StatusConflict {
		t.Fatalf("abort of a round never announced: HTTP %d", code)
	}
	if code := abort(1); code != http.StatusOK {
		t.Fatalf("abort: HTTP %d", code)
	}
	if a := h.relay.next(t); a.Round != 2 {
		t.Fatalf("after the abort: announced round %d, want 2", a.Round)
	}
	if code := abort(1); code != http.StatusAlreadyReported {
		t.Fatalf("repeated abort: HTTP %d", code)
	}
	if len(h.srv.ledger.Releases()) != 0 {
		t.Fatal("an aborted round was charged")
	}
	rec := h.srv.Rounds()[0]
	if rec.Status != checkpoint.StatusAborted || rec.Population != 9 || rec.Accuracy != nil {
		t.Fatalf("record %+v", rec)
	}
	// /api/status says why, in numbers and in words, for the pages.
	var st struct {
		LastAbort *struct {
			Round, Received, Expected int
			MinBatch                  int `json:"min_batch"`
			Reason, Message, Advice   string
			Timeout                   float64
		} `json:"last_abort"`
	}
	if code, body := get(t, h.http.URL+"/api/status"); code != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil {
		t.Fatalf("status: HTTP %d %s", code, body)
	}
	if a := st.LastAbort; a == nil || a.Round != 1 || a.Received != 1 || a.Expected != 9 || a.Reason != "below min batch" ||
		a.MinBatch != int(testParams().MinBatch) || a.Timeout <= 0 || !strings.Contains(a.Message, "only 1 of the 9 connected volunteers") || a.Advice == "" {
		t.Errorf("last_abort %+v", a)
	}
	// A batch for the aborted round is not processed.
	r := h.sendBatch(makeBatch(t, h.srv.PublicKey(), testParams(), batchSpec{round: 1, reports: 4, value: constValue(0.6)}))
	if r.Status != wire.BatchStatusDuplicate || h.srv.Opened() != 0 {
		t.Fatalf("batch for an aborted round: %+v", r)
	}
}

// TestRoundWaitsForADownRelay: a round whose relay does not answer
// /healthz is not abandoned at deadline + grace: the relay persists what
// it owes and sends it when it is back (here the batch, after more than
// ten graces, before /healthz answers again), and the status says what
// the round waits for. Round
// timeout 300 ms, grace 100 ms.
func TestRoundWaitsForADownRelay(t *testing.T) {
	relay := newFakeRelay(t)
	h := newHarness(t, t.TempDir(), relay, func(c *Config) {
		c.RoundTimeout, c.BatchGrace = 300*time.Millisecond, 100*time.Millisecond
	})
	relay.setDown(true) // only /healthz: the announcement still goes through
	a := relay.next(t)
	time.Sleep(time.Until(a.Deadline.Add(15 * 100 * time.Millisecond)))
	if rs := h.srv.Rounds(); len(rs) != 0 {
		t.Fatalf("a round was closed while the relay was down: %+v", rs)
	}
	if st := h.srv.Status(); st.OpenRound != 1 || st.Waiting != RelayDownWaiting {
		t.Fatalf("status while the relay is down: open round %d, waiting %q", st.OpenRound, st.Waiting)
	}
	// The relay's first act when it is back: the batch it persisted.
	if r := h.sendBatch(makeBatch(t, h.srv.PublicKey(), testParams(), batchSpec{round: 1, reports: 4, value: constValue(0.6)})); r.Status != wire.BatchStatusOK {
		t.Fatalf("the batch sent after the outage: %+v", r)
	}
	if rs := h.srv.Rounds(); len(rs) != 1 || rs[0].Status != checkpoint.StatusOK {
		t.Fatalf("rounds %+v", rs)
	}
	relay.setDown(false)
	if a := relay.next(t); a.Round != 2 {
		t.Fatalf("next round %d", a.Round)
	}
}

// TestAbandonedAndRetriedAnnouncement: a relay that answers an
// announcement 409 without an outcome (another round still open) until
// the round's deadline gets the round abandoned, uncharged, and the next
// one announced.
func TestAbandonedAndRetriedAnnouncement(t *testing.T) {
	relay := newFakeRelay(t)
	relay.conflicts = 1000 // until the deadline
	h := newHarness(t, t.TempDir(), relay, func(c *Config) {
		c.RoundTimeout, c.BatchGrace = 300*time.Millisecond, 50*time.Millisecond
		c.RetryInterval = 100 * time.Millisecond
	})
	deadline := time.Now().Add(10 * time.Second)
	for len(h.srv.Rounds()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	relay.mu.Lock()
	relay.conflicts = 0
	relay.mu.Unlock()
	if a := relay.next(t); a.Round != 2 {
		t.Fatalf("after an abandoned round: round %d, want 2", a.Round)
	}
	rec := h.srv.Rounds()[0]
	if rec.Status != checkpoint.StatusAbandoned || len(h.srv.ledger.Releases()) != 0 || !strings.Contains(rec.Detail, "still open") {
		t.Fatalf("record %+v", rec)
	}
}

// TestAnnouncementWaitsForARelayNotReady: a relay that answers 503 (warming
// up after a restart, so that its volunteers reconnect) past the round's
// deadline does not cost the round: it gets a new deadline, its full time
// from when it is announced, and is announced once the relay is ready
// (issue 25: TestRelayKilledMidRound lost round 2 this way under load).
func TestAnnouncementWaitsForARelayNotReady(t *testing.T) {
	relay := newFakeRelay(t)
	relay.fails = 8 // 8 × 100 ms of 503: well past the 300 ms round
	h := newHarness(t, t.TempDir(), relay, func(c *Config) {
		c.RoundTimeout, c.BatchGrace = 300*time.Millisecond, 50*time.Millisecond
		c.RetryInterval = 100 * time.Millisecond
	})
	start := time.Now()
	a := relay.next(t)
	if a.Round != 1 {
		t.Fatalf("round %d announced first, want 1 (not abandoned)", a.Round)
	}
	if recs := h.srv.Rounds(); len(recs) != 0 && recs[0].Round == 1 && recs[0].Status == checkpoint.StatusAbandoned {
		t.Fatalf("round 1 abandoned: %+v", recs[0])
	}
	// Its deadline was renewed: it is at least a full round after the
	// last refusal, well after start + 300 ms.
	if !a.Deadline.After(start.Add(600 * time.Millisecond)) {
		t.Fatalf("deadline %v, %v after the first attempt: not renewed", a.Deadline, a.Deadline.Sub(start))
	}
}

func TestRoundsLimit(t *testing.T) {
	h := newHarness(t, t.TempDir(), newFakeRelay(t), func(c *Config) { c.Rounds = 1 })
	h.relay.next(t)
	h.sendBatch(makeBatch(t, h.srv.PublicKey(), testParams(), batchSpec{round: 1, reports: 4, value: constValue(0.6)}))
	select {
	case err := <-h.done:
		if err != nil {
			t.Fatal(err)
		}
		h.done <- nil
	case <-time.After(10 * time.Second):
		t.Fatal("round loop did not stop after -rounds")
	}
	h.relay.none(t, 50*time.Millisecond)
}

func TestAPIShape(t *testing.T) {
	h := newHarness(t, t.TempDir(), newFakeRelay(t), nil)
	h.relay.next(t)
	h.sendBatch(makeBatch(t, h.srv.PublicKey(), testParams(), batchSpec{round: 1, reports: 4, value: constValue(0.6)}))
	h.relay.next(t)
	get := func(path string, v any) {
		t.Helper()
		resp, err := http.Get(h.http.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("%s: HTTP %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	var status map[string]any
	get("/api/status", &status)
	for _, k := range []string{"round", "open_round", "accuracy", "loss", "epsilon", "delta", "method", "target_epsilon", "target_delta", "fingerprint", "params"} {
		if _, ok := status[k]; !ok {
			t.Errorf("status lacks %q: %v", k, status)
		}
	}
	if status["fingerprint"] != h.srv.Fingerprint() || status["round"] != 1.0 || status["epsilon"] != 1.0 || status["target_epsilon"] != 100.0 {
		t.Errorf("status %v", status)
	}
	var rounds struct {
		Rounds []map[string]any `json:"rounds"`
	}
	get("/api/rounds", &rounds)
	if len(rounds.Rounds) != 1 {
		t.Fatalf("rounds %v", rounds)
	}
	r := rounds.Rounds[0]
	for _, k := range []string{"round", "status", "accuracy", "loss", "n", "n_p", "check_in_rate", "epsilon", "epsilon_tightest", "method"} {
		if _, ok := r[k]; !ok {
			t.Errorf("round record lacks %q: %v", k, r)
		}
	}
	rows := r["epsilon"].([]any)
	if len(rows) != 3 || rows[0].(map[string]any)["method"] != "sum" || rows[0].(map[string]any)["tightest"] != true ||
		rows[1].(map[string]any)["caveated"] != true || rows[2].(map[string]any)["epsilon"] != nil {
		t.Errorf("epsilon rows %v", rows)
	}
	// /api/key is the key's own JSON form, which clients unmarshal and
	// check (envelope.PublicKey.UnmarshalJSON verifies the fingerprint).
	var key envelope.PublicKey
	get("/api/key", &key)
	if key.Fingerprint() != h.srv.Fingerprint() {
		t.Errorf("key fingerprint %s, want %s", key.Fingerprint(), h.srv.Fingerprint())
	}
	var model struct {
		Round    int       `json:"round"`
		Features int       `json:"features"`
		Classes  int       `json:"classes"`
		Params   []float64 `json:"params"`
	}
	get("/api/model", &model)
	if model.Round != 1 || model.Features != 3 || model.Classes != 2 || !slices.Equal(model.Params, h.srv.Model()) {
		t.Errorf("model %+v", model)
	}
}

// TestRelayRefusalStopsAnnouncing (issue 23): when the relay refuses an
// announcement for good (409, outcome refused: its own noise ledger's
// budget is spent), the aggregator does not re-announce every
// RetryInterval forever: the round is abandoned with the relay's words,
// the loop stops, and /api/status says the relay's budget is spent. Every
// announcement carries the aggregator's target ε and δ for the relay to
// compare with its own.
func TestRelayRefusalStopsAnnouncing(t *testing.T) {
	relay := newFakeRelay(t)
	relay.refuse, relay.detail = "refused", "noiseledger: the round would take the relay's composed epsilon past its target: round 1 would bring epsilon to 4.2, target 4"
	h := newHarness(t, t.TempDir(), relay, nil)
	deadline := time.Now().Add(10 * time.Second)
	for h.srv.Status().Stopped == "" {
		if time.Now().After(deadline) {
			t.Fatal("the aggregator did not stop within 10 s of the relay's refusal")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(20 * h.cfg.RetryInterval) // 20 retry intervals: none may come
	relay.mu.Lock()
	posts, targets := relay.posts, relay.targets
	relay.mu.Unlock()
	if posts != 1 {
		t.Fatalf("%d announcements after a definitive refusal, want 1", posts)
	}
	if targets[0] != [2]string{"100", "1e-05"} {
		t.Fatalf("target headers %v, want the ledger's 100 and 1e-05", targets[0])
	}
	st := h.srv.Status()
	if !strings.Contains(st.Stopped, "privacy budget is spent") || st.Running {
		t.Fatalf("status stopped %q running %v", st.Stopped, st.Running)
	}
	recs := h.srv.Rounds()
	if len(recs) != 1 || recs[0].Status != checkpoint.StatusAbandoned || !strings.Contains(recs[0].Detail, "round 1 would bring epsilon") {
		t.Fatalf("records %+v", recs)
	}
}

// TestDeadlinesIncrease (issue 23): a round's deadline is strictly after
// the last one's even when the operator shortened the round timeout
// meanwhile, since volunteers act only on an announcement with a later
// deadline than every one before.
func TestDeadlinesIncrease(t *testing.T) {
	now := time.Now().Truncate(time.Millisecond)
	hist := []checkpoint.RoundRecord{{Round: 1, Deadline: now.Add(10 * time.Minute)}}
	if d := rounds.LaterDeadline(now.Add(30*time.Second), hist); !d.Equal(now.Add(10*time.Minute + time.Millisecond)) {
		t.Errorf("after a 10-minute round, a 30 s one ends at %v, want a millisecond after the last", d.Sub(now))
	}
	if d := rounds.LaterDeadline(now.Add(time.Hour), hist); !d.Equal(now.Add(time.Hour)) {
		t.Errorf("a later deadline moved: %v", d.Sub(now))
	}
	if d := rounds.LaterDeadline(now.Add(time.Minute), nil); !d.Equal(now.Add(time.Minute)) {
		t.Errorf("first round: %v", d.Sub(now))
	}
}
