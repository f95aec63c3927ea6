package api

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/blanket-fl/blanket/aggregator/internal/audit"
	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/aggregator/internal/liveaudit"
	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/wire"
)

// fake answers every frame with fixed outcomes and records what reached it.
type fake struct {
	frames  int
	abort   IntakeAnswer
	resumed []byte // the last resume frame that reached it
}

func (f *fake) BatchIntake(frame []byte) (wire.BatchReply, Intake, error) {
	f.frames++
	return wire.BatchReply{Round: 3, Status: wire.BatchStatusOK, Accepted: 5}, IntakeDuplicate, nil
}
func (f *fake) AbortIntake(frame []byte) IntakeAnswer { f.frames++; return f.abort }
func (f *fake) SecAggChunkIntake(frame []byte) (SecAggAnswer, error) {
	f.frames++
	return SecAggAnswer{Answer: IntakeAnswer{Round: 2, Outcome: IntakeAccepted}, Frame: []byte{1, 0x0A}}, nil
}
func (f *fake) SecAggResumeIntake(frame []byte) (SecAggAnswer, error) {
	f.frames++
	f.resumed = append([]byte(nil), frame...)
	return SecAggAnswer{Answer: IntakeAnswer{Round: 2, Outcome: IntakeAccepted}, Frame: []byte{1, 0x0A, 2}}, nil
}
func (f *fake) SecAggCloseIntake(frame []byte) (SecAggAnswer, error) {
	f.frames++
	return SecAggAnswer{Answer: IntakeAnswer{Round: 2, Outcome: IntakeObsolete}}, nil
}
func (f *fake) SecAggAggregateIntake(frame []byte) IntakeAnswer {
	f.frames++
	return IntakeAnswer{Round: 2, Outcome: IntakeInvalid}
}
func (f *fake) BodyLimits() Limits {
	return Limits{Batch: 64, SecAggChunk: 64, SecAggAggregate: 64}
}
func (f *fake) Status() Status {
	return Status{Round: 7, RejectedBatches: map[string]int{"malformed": 1}}
}
func (f *fake) Rounds() []checkpoint.RoundRecord {
	return []checkpoint.RoundRecord{{Round: 1, Status: checkpoint.StatusOK}}
}
func (f *fake) Audit(r int) *liveaudit.Status {
	if r != 1 {
		return nil
	}
	return &liveaudit.Status{State: liveaudit.StateDone, Bound: &audit.Bound{Lower: 0.25, Charged: 3, Confidence: 0.95, Trials: 50}}
}
func (f *fake) ModelView() Model              { return Model{Round: 7, Params: []float64{1}} }
func (f *fake) PublicKey() envelope.PublicKey { return envelope.PublicKey{} }

const token = "0123456789abcdef-token"

// TestRelayEndpoints: without the token or over the body limit nothing
// reaches the backend; otherwise the outcome is the status code and the
// header, with the reply frame or the JSON answer.
func TestRelayEndpoints(t *testing.T) {
	f := &fake{abort: IntakeAnswer{Round: 4, Outcome: IntakeAccepted}}
	mux := http.NewServeMux()
	Register(mux, f, token, slog.New(slog.DiscardHandler))
	do := func(path, tok string, body []byte) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		if tok != "" {
			r.Header.Set("Authorization", "Bearer "+tok)
		}
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		return w
	}
	for _, path := range []string{"/v1/batch", "/v1/abort", "/v1/secagg/chunk", "/v1/secagg/resume", "/v1/secagg/close", "/v1/secagg/aggregate"} {
		if w := do(path, "", []byte{1}); w.Code != http.StatusUnauthorized {
			t.Errorf("%s without token: %d", path, w.Code)
		}
		if w := do(path, token+"x", []byte{1}); w.Code != http.StatusUnauthorized {
			t.Errorf("%s with a wrong token: %d", path, w.Code)
		}
		if w := do(path, token, make([]byte, 2<<10)); w.Code != http.StatusRequestEntityTooLarge {
			t.Errorf("%s over the limit: %d", path, w.Code)
		}
	}
	if f.frames != 0 {
		t.Fatalf("%d refused requests reached the backend", f.frames)
	}
	w := do("/v1/batch", token, []byte{1})
	reply, err := wire.ParseBatchReply(w.Body.Bytes())
	if w.Code != http.StatusAlreadyReported || w.Header().Get(OutcomeHeader) != "duplicate" || err != nil || reply.Accepted != 5 {
		t.Errorf("batch: %d %q %+v %v", w.Code, w.Header().Get(OutcomeHeader), reply, err)
	}
	if w := do("/v1/secagg/chunk", token, []byte{1}); w.Code != http.StatusOK || w.Header().Get(OutcomeHeader) != "accepted" ||
		w.Header().Get("Content-Type") != "application/octet-stream" || !bytes.Equal(w.Body.Bytes(), []byte{1, 0x0A}) {
		t.Errorf("secagg chunk: %d %q %x", w.Code, w.Header().Get(OutcomeHeader), w.Body.Bytes())
	}
	// A resume frame is 14 bytes: one byte more is refused unread, the
	// frame itself reaches the backend and its SecAggPrep is the reply.
	resume, err := (&wire.SecAggResume{Round: 2, Seq: 3}).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	n0 := f.frames
	if w := do("/v1/secagg/resume", token, append(resume, 0)); w.Code != http.StatusRequestEntityTooLarge || f.frames != n0 {
		t.Errorf("secagg resume of %d bytes: %d, %d reached the backend", len(resume)+1, w.Code, f.frames-n0)
	}
	if w := do("/v1/secagg/resume", token, resume); w.Code != http.StatusOK || w.Header().Get(OutcomeHeader) != "accepted" ||
		w.Header().Get("Content-Type") != "application/octet-stream" || !bytes.Equal(w.Body.Bytes(), []byte{1, 0x0A, 2}) ||
		!bytes.Equal(f.resumed, resume) {
		t.Errorf("secagg resume: %d %q %x, backend got %x", w.Code, w.Header().Get(OutcomeHeader), w.Body.Bytes(), f.resumed)
	}
	// The whole-round batch endpoint is gone: the relay streams chunks.
	n := f.frames
	if w := do("/v1/secagg/batch", token, []byte{1}); w.Code != http.StatusNotFound || f.frames != n {
		t.Errorf("/v1/secagg/batch: %d, %d requests reached the backend; want 404 and none", w.Code, f.frames-n)
	}
	for path, want := range map[string]int{"/v1/abort": http.StatusOK, "/v1/secagg/close": http.StatusConflict, "/v1/secagg/aggregate": http.StatusBadRequest} {
		w := do(path, token, []byte{1})
		var ans IntakeAnswer
		if w.Code != want || json.Unmarshal(w.Body.Bytes(), &ans) != nil || string(ans.Outcome) != w.Header().Get(OutcomeHeader) {
			t.Errorf("%s: %d, want %d; %q %+v", path, w.Code, want, w.Header().Get(OutcomeHeader), ans)
		}
	}
	r := httptest.NewRequest(http.MethodGet, "/api/status", nil)
	sw := httptest.NewRecorder()
	mux.ServeHTTP(sw, r)
	var st map[string]any
	if err := json.Unmarshal(sw.Body.Bytes(), &st); err != nil || st["round"] != 7.0 || st["rejected_batches"] == nil {
		t.Errorf("status %s, %v", sw.Body.String(), err)
	}
}

// TestRoundsCarryTheAudit: each /api/rounds row is the round record with
// its configuration's live audit (absent when the backend has none).
func TestRoundsCarryTheAudit(t *testing.T) {
	mux := http.NewServeMux()
	Register(mux, &fake{}, token, slog.New(slog.DiscardHandler))
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/api/rounds", nil))
	var got struct {
		Rounds []struct {
			Round  int    `json:"round"`
			Status string `json:"status"`
			Audit  *struct {
				State string `json:"state"`
				Bound struct {
					Lower, Charged float64
				} `json:"bound"`
			} `json:"audit"`
		} `json:"rounds"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || len(got.Rounds) != 1 {
		t.Fatalf("rounds %s: %v", w.Body.String(), err)
	}
	r := got.Rounds[0]
	if r.Round != 1 || r.Status != checkpoint.StatusOK || r.Audit == nil || r.Audit.State != "done" || r.Audit.Bound.Lower != 0.25 || r.Audit.Bound.Charged != 3 {
		t.Errorf("row %s", w.Body.String())
	}
}
