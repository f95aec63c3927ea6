package aggclient

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/relay/internal/outbox"
)

// roundTrip answers requests in process (no network).
type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func answer(code int, body string) *http.Response {
	return &http.Response{StatusCode: code, Body: io.NopCloser(strings.NewReader(body)), Header: http.Header{}}
}

func client(rt roundTrip, last func() uint64) *Client {
	return &Client{Aggregator: "http://agg/", Token: "t", HTTP: &http.Client{Transport: rt}, SendTimeout: time.Minute,
		SecAggTimeout: time.Minute, RetryMin: time.Microsecond, RetryMax: time.Microsecond,
		Logger: slog.New(slog.DiscardHandler), LastRound: last, Attempts: new(atomic.Uint64), Failures: new(atomic.Uint64)}
}

// TestPostResendsIdenticalBytes: a request without a definitive answer
// (503, then a 200 whose reply the caller's check refuses) is resent with
// the identical bytes and token until one comes (208: duplicate), counted.
func TestPostResendsIdenticalBytes(t *testing.T) {
	body := []byte("frame-bytes")
	var seen [][]byte
	codes := []int{503, 200, 208}
	c := client(func(r *http.Request) (*http.Response, error) {
		b, _ := io.ReadAll(r.Body)
		if r.Header.Get("Authorization") != "Bearer t" || r.URL.String() != "http://agg/v1/secagg/close" {
			t.Errorf("request %s with %q", r.URL, r.Header.Get("Authorization"))
		}
		seen = append(seen, b)
		code := codes[len(seen)-1]
		if code == 200 {
			return answer(code, "bad"), nil
		}
		return answer(code, "good"), nil
	}, nil)
	out, reply, _, err := c.Post(t.Context(), 1, "/v1/secagg/close", body, 64, func(b []byte) error {
		if string(b) != "good" {
			return errors.New("not for the round")
		}
		return nil
	})
	if err != nil || out != outbox.Duplicate || string(reply) != "good" {
		t.Fatalf("%v %q %v", out, reply, err)
	}
	for _, b := range seen {
		if !bytes.Equal(b, body) {
			t.Errorf("resent %q, want %q", b, body)
		}
	}
	if len(seen) != 3 || c.Attempts.Load() != 3 || c.Failures.Load() != 2 {
		t.Errorf("%d requests, %d attempts, %d failures: want 3, 3, 2", len(seen), c.Attempts.Load(), c.Failures.Load())
	}
}

// TestPostSuperseded: a round the aggregator has announced past gives up
// after a failed attempt, without a definitive answer; a stopped relay
// gives up too.
func TestPostSuperseded(t *testing.T) {
	down := func(*http.Request) (*http.Response, error) { return answer(503, ""), nil }
	c := client(down, func() uint64 { return 2 })
	if _, _, _, err := c.Post(t.Context(), 1, "/v1/secagg/chunk", nil, 64, nil); !errors.Is(err, ErrSuperseded) {
		t.Errorf("superseded round: %v", err)
	}
	c = client(down, func() uint64 { return 1 })
	c.RetryMin, c.RetryMax = time.Hour, time.Hour
	done := make(chan error)
	cctx, stop := context.WithCancel(t.Context())
	go func() { _, _, _, err := c.Post(cctx, 1, "/v1/secagg/chunk", nil, 64, nil); done <- err }()
	stop()
	if err := <-done; !errors.Is(err, ErrStopped) {
		t.Errorf("stopped relay: %v", err)
	}
}

// TestClassify: the batch and abort outcomes of docs/protocol.md.
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		kind   outbox.Kind
		status int
		want   outbox.Outcome
	}{
		{outbox.Abort, 204, outbox.Accepted}, // an older aggregator
		{outbox.Abort, 503, outbox.Retry},
		{outbox.Batch, 200, outbox.Retry}, // no batch reply
		{outbox.Abort, 409, outbox.Obsolete},
		{outbox.Batch, 422, outbox.Invalid},
	} {
		if got, _ := Classify(tc.kind, 4, tc.status, nil); got != tc.want {
			t.Errorf("%s HTTP %d: %v, want %v", tc.kind, tc.status, got, tc.want)
		}
	}
}
