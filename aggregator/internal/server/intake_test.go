package server

import (
	"bytes"
	"encoding/json"
	"github.com/blanket-fl/blanket/aggregator/internal/rounds"
	"net/http"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/api"
	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/shared/wire"
)

// TestIntakeAfterAbandon is the wedge the chaos tester found: the relay
// was down past round 1's deadline + grace, the aggregator abandoned round
// 1 and moved on, and the relay, restarted, posts its abort (relay
// restart) and perhaps a batch for round 1. Every answer must be
// definitive and say so: obsolete (409, outcome header, machine-readable
// body), never an answer the relay would have to retry.
func TestIntakeAfterAbandon(t *testing.T) {
	relay := newFakeRelay(t)
	h := newHarness(t, t.TempDir(), relay, nil)
	if a := relay.next(t); a.Round != 1 {
		t.Fatalf("round %d", a.Round)
	}
	h.srv.Abandon(1, "test: no batch or abort in time")
	if a := relay.next(t); a.Round != 2 {
		t.Fatalf("after the abandon: round %d, want 2", a.Round)
	}

	abortFrame := func(round uint64) []byte {
		b, err := (&wire.Abort{Round: round, Reason: wire.AbortRelayRestart}).MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	postAbort := func(body []byte) (int, string, api.IntakeAnswer) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, h.http.URL+"/v1/abort", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var ans api.IntakeAnswer
		if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil {
			t.Fatalf("abort answer not JSON: %v", err)
		}
		return resp.StatusCode, resp.Header.Get(api.OutcomeHeader), ans
	}

	code, hdr, ans := postAbort(abortFrame(1))
	if code != http.StatusConflict || hdr != string(api.IntakeObsolete) || ans.Outcome != api.IntakeObsolete || ans.Round != 1 || ans.Detail == "" {
		t.Fatalf("abort of the abandoned round: HTTP %d, %q, %+v", code, hdr, ans)
	}
	// Asked again (the relay's answer was lost): the same definitive answer.
	if code, _, ans := postAbort(abortFrame(1)); code != http.StatusConflict || ans.Outcome != api.IntakeObsolete {
		t.Fatalf("abort again: HTTP %d %+v", code, ans)
	}
	// Not an abort at all: invalid, also final.
	if code, hdr, ans := postAbort([]byte{1, 6, 0}); code != http.StatusBadRequest || hdr != string(api.IntakeInvalid) || ans.Outcome != api.IntakeInvalid {
		t.Fatalf("malformed abort: HTTP %d %q %+v", code, hdr, ans)
	}
	// A round the aggregator never announced.
	if code, _, ans := postAbort(abortFrame(1 << 40)); code != http.StatusConflict || ans.Outcome != api.IntakeObsolete || ans.Round != 1<<40 {
		t.Fatalf("abort of a future round: HTTP %d %+v", code, ans)
	}

	// A batch for the abandoned round, and for a round never announced.
	pub := h.srv.PublicKey()
	r, in := h.sendBatchOutcome(makeBatch(t, pub, testParams(), batchSpec{round: 1, reports: 4, value: constValue(0.6)}))
	if in != api.IntakeObsolete || r.Round != 1 || r.Status != wire.BatchStatusDuplicate {
		t.Fatalf("batch for the abandoned round: %s %+v", in, r)
	}
	r, in = h.sendBatchOutcome(makeBatch(t, pub, testParams(), batchSpec{round: 1 << 40, reports: 4, value: constValue(0.6)}))
	if in != api.IntakeObsolete || r.Round != 1<<40 {
		t.Fatalf("batch for a future round: %s %+v", in, r)
	}
	if code, _ := post(t, h.http.URL+"/v1/batch", testToken, []byte("not a frame")); code != http.StatusBadRequest {
		t.Fatalf("garbage batch: HTTP %d", code)
	}
	if len(h.srv.ledger.Releases()) != 0 || h.srv.Opened() != 0 {
		t.Fatal("an obsolete frame was charged or opened")
	}
	// The open round is untouched: its abort is accepted, then a duplicate.
	if code, hdr, ans := postAbort(abortFrame(2)); code != http.StatusOK || hdr != string(api.IntakeAccepted) || ans.Outcome != api.IntakeAccepted {
		t.Fatalf("abort of the open round: HTTP %d %q %+v", code, hdr, ans)
	}
	if code, _, ans := postAbort(abortFrame(2)); code != http.StatusAlreadyReported || ans.Outcome != api.IntakeDuplicate {
		t.Fatalf("abort of the open round again: HTTP %d %+v", code, ans)
	}
	if a := relay.next(t); a.Round != 3 {
		t.Fatalf("after the abort: round %d, want 3", a.Round)
	}
}

// TestStretchTimeout: rounds that finished after their deadline with the
// reports of checked-in volunteers missing stretch the next round's
// timeout by 1.5 each, up to 4x; a round with at most 5% missing, or that
// finished before its deadline, resets it; abandoned rounds say nothing.
func TestStretchTimeout(t *testing.T) {
	d := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	after := d.Add(time.Second)
	late := checkpoint.RoundRecord{Status: checkpoint.StatusOK, CheckedIn: 400, N: 200, Deadline: d, FinishedAt: after}
	aborted := checkpoint.RoundRecord{Status: checkpoint.StatusAborted, CheckedIn: 400, N: 12, Deadline: d, FinishedAt: after}
	done := checkpoint.RoundRecord{Status: checkpoint.StatusOK, CheckedIn: 400, N: 390, Deadline: d, FinishedAt: after}
	early := checkpoint.RoundRecord{Status: checkpoint.StatusOK, CheckedIn: 400, N: 200, Deadline: d, FinishedAt: d.Add(-time.Second)}
	gone := checkpoint.RoundRecord{Status: checkpoint.StatusAbandoned}
	const c = 30 * time.Second
	for _, tc := range []struct {
		h    []checkpoint.RoundRecord
		want time.Duration
	}{
		{nil, c},
		{[]checkpoint.RoundRecord{done}, c},
		{[]checkpoint.RoundRecord{late}, 45 * time.Second},
		{[]checkpoint.RoundRecord{late, gone, aborted}, 67500 * time.Millisecond},
		{[]checkpoint.RoundRecord{late, late, late, late, late}, 120 * time.Second},
		{[]checkpoint.RoundRecord{late, late, done}, c},
		{[]checkpoint.RoundRecord{done, late}, 45 * time.Second},
		{[]checkpoint.RoundRecord{late, early}, c},
	} {
		if got := rounds.StretchTimeout(c, tc.h); got != tc.want {
			t.Errorf("history %+v: timeout %v, want %v", tc.h, got, tc.want)
		}
	}
}
