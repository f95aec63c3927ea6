package cohort

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/shared/task"
)

// The cohort's volunteers agree to the consent text the relay serves: the
// hash FetchConsent derives from the relay's re-encoded definition
// (json.Marshal of task.Parse's result, as relay/internal/server's
// handleTask serves it) is the aggregator's, task.ConsentHash of the task
// it loaded. waitConsent finds it behind a websocket URL once the relay
// serves it (503 first: the relay has not reached the aggregator).
func TestFetchConsentAgreesWithAggregator(t *testing.T) {
	tk, err := task.Digits()
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(tk) // the relay's re-encoding
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/task" {
			http.NotFound(w, r)
			return
		}
		if calls.Add(1) == 1 {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
			return
		}
		w.Write(body)
	}))
	defer srv.Close()
	h, v, err := FetchConsent(t.Context(), nil, srv.URL)
	if err == nil || h != ([32]byte{}) {
		t.Fatalf("first call (503): %x, %v", h, err)
	}
	h, v, err = FetchConsent(t.Context(), nil, srv.URL)
	if err != nil || h != task.ConsentHash(tk) || v != task.ConsentVersion(h) {
		t.Fatalf("FetchConsent = %x %q %v, want %x", h, v, err, task.ConsentHash(tk))
	}
	calls.Store(0)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	got, err := waitConsent(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/ws", slog.New(slog.DiscardHandler))
	if err != nil || got != task.ConsentHash(tk) {
		t.Fatalf("waitConsent = %x, %v", got, err)
	}
	other := *tk
	other.Consent += " "
	if task.ConsentHash(&other) == got {
		t.Fatal("a changed consent text has the same hash")
	}
}
