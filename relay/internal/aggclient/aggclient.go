// Package aggclient is the relay's client of the aggregator: one attempt
// to deliver a stored batch or abort (Frame, the outbox Sender's
// DeliverFunc), a secure-summation request resent with the identical bytes
// until a definitive answer (Post), and the noise ledgers' anchor exchange
// (Anchor). Every answer is classified by outbox.Classify
// (docs/protocol.md, "Relay-aggregator outcomes"). It carries no payload
// into its logs: rounds, paths, attempts and reasons only.
package aggclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/blanket-fl/blanket/relay/internal/outbox"
	"github.com/blanket-fl/blanket/shared/wire"
)

// Client posts to one aggregator. Its fields are set once, before use.
type Client struct {
	// Aggregator is the base URL; Token the bearer token shared with it.
	Aggregator, Token string
	HTTP              *http.Client
	// SendTimeout bounds one attempt of a batch, an abort or an anchor
	// request; SecAggTimeout one secure-summation request.
	SendTimeout, SecAggTimeout time.Duration
	// RetryMin and RetryMax bound Post's exponential backoff.
	RetryMin, RetryMax time.Duration
	Logger             *slog.Logger
	// LastRound returns the last round the aggregator announced: Post gives
	// up on a round with ErrSuperseded once a later one is announced.
	LastRound func() uint64
	// Attempts and Failures, if set, count Post's requests and those
	// without a definitive answer.
	Attempts, Failures *atomic.Uint64
}

// ErrStopped and ErrSuperseded end a secure-summation conversation without
// a definitive answer: the relay stops, or the aggregator announced a
// later round meanwhile.
var (
	ErrStopped    = errors.New("relay stopping")
	ErrSuperseded = errors.New("aggregator announced a later round")
)

func (c *Client) request(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.Aggregator, "/")+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	return c.HTTP.Do(req)
}

// Classify maps the aggregator's answer to a batch or an abort to an
// outcome (outbox.Classify; an abort's other 2xx is accepted). A 2xx
// answer to a batch must carry the BatchReply of its round, else it is
// retried.
func Classify(kind outbox.Kind, round uint64, status int, body []byte) (outbox.Outcome, string) {
	out := outbox.Classify(status)
	if out == outbox.Retry {
		if kind == outbox.Abort && status/100 == 2 {
			return outbox.Accepted, fmt.Sprintf("HTTP %d", status) // 204 of an older aggregator
		}
		return outbox.Retry, fmt.Sprintf("HTTP %d", status)
	}
	if kind == outbox.Batch && (out == outbox.Accepted || out == outbox.Duplicate) {
		rep, err := wire.ParseBatchReply(body)
		if err != nil || rep.Round != round {
			return outbox.Retry, fmt.Sprintf("HTTP %d without a batch reply for the round", status)
		}
		if out == outbox.Accepted && rep.Status == wire.BatchStatusDuplicate {
			out = outbox.Duplicate // an aggregator that answers duplicates with 200
		}
		return out, fmt.Sprintf("reply status %d, accepted %d, rejectedOpen %d, rejectedValue %d",
			rep.Status, rep.Accepted, rep.RejectedOpen, rep.RejectedValue)
	}
	var ans struct {
		Outcome string `json:"outcome"`
		Detail  string `json:"detail"`
	}
	if json.Unmarshal(body, &ans) == nil && ans.Detail != "" {
		return out, ans.Detail
	}
	return out, fmt.Sprintf("HTTP %d", status)
}

// Frame makes one delivery attempt of a stored batch or abort (the
// outbox's DeliverFunc).
func (c *Client) Frame(ctx context.Context, e outbox.Entry, b []byte) (outbox.Outcome, string) {
	path := "/v1/batch"
	if e.Kind == outbox.Abort {
		path = "/v1/abort"
	}
	ctx, cancel := context.WithTimeout(ctx, c.SendTimeout)
	defer cancel()
	resp, err := c.request(ctx, http.MethodPost, path, b)
	if err != nil {
		return outbox.Retry, "request failed"
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return outbox.Retry, "reading reply failed"
	}
	return Classify(e.Kind, e.Round, resp.StatusCode, body)
}

// Post posts body to path until a definitive answer, resending the
// identical bytes with exponential backoff. It returns the outcome
// (outbox.Classify), the reply (at most limit bytes; for accepted and
// duplicate, one that check accepts, else the answer is retried) and a
// short reason for logs; or ErrStopped when ctx ends, ErrSuperseded when
// the aggregator has announced a later round than num meanwhile.
func (c *Client) Post(ctx context.Context, num uint64, path string, body []byte, limit int64,
	check func([]byte) error) (outbox.Outcome, []byte, string, error) {
	wait := c.RetryMin
	for attempt := 1; ; attempt++ {
		count(c.Attempts)
		out, reply, why := c.attempt(ctx, path, body, limit, check)
		if out.Final() {
			return out, reply, why, nil
		}
		if ctx.Err() != nil {
			return outbox.Retry, nil, "", ErrStopped
		}
		count(c.Failures)
		if c.LastRound != nil && c.LastRound() > num {
			return outbox.Retry, nil, "", ErrSuperseded
		}
		c.Logger.Warn("secure-summation request failed; will resend the same bytes", "round", num, "path", path,
			"attempt", attempt, "reason", why, "retry_in", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return outbox.Retry, nil, "", ErrStopped
		case <-t.C:
		}
		wait = min(2*wait, c.RetryMax)
	}
}

func count(n *atomic.Uint64) {
	if n != nil {
		n.Add(1)
	}
}

// attempt makes one request, its outcome by outbox.Classify; an accepted
// or duplicate reply that check refuses is retried.
func (c *Client) attempt(ctx context.Context, path string, body []byte, limit int64,
	check func([]byte) error) (outbox.Outcome, []byte, string) {
	ctx, cancel := context.WithTimeout(ctx, c.SecAggTimeout)
	defer cancel()
	resp, err := c.request(ctx, http.MethodPost, path, body)
	if err != nil {
		return outbox.Retry, nil, "request failed"
	}
	defer resp.Body.Close()
	reply, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return outbox.Retry, nil, "reading reply failed"
	}
	out := outbox.Classify(resp.StatusCode)
	if out == outbox.Retry {
		return outbox.Retry, nil, fmt.Sprintf("HTTP %d", resp.StatusCode)
	}
	if int64(len(reply)) > limit {
		if out == outbox.Accepted || out == outbox.Duplicate {
			return outbox.Retry, nil, fmt.Sprintf("HTTP %d with a reply above %d bytes", resp.StatusCode, limit)
		}
		reply = reply[:limit]
	}
	if (out == outbox.Accepted || out == outbox.Duplicate) && check != nil {
		if err := check(reply); err != nil {
			return outbox.Retry, nil, fmt.Sprintf("HTTP %d without a valid reply for the round", resp.StatusCode)
		}
	}
	why := fmt.Sprintf("HTTP %d", resp.StatusCode)
	var ans struct {
		Detail string `json:"detail"`
	}
	if out != outbox.Accepted && out != outbox.Duplicate && json.Unmarshal(reply, &ans) == nil && ans.Detail != "" {
		why = ans.Detail
	}
	return out, reply, why
}

// AnchorPath is the aggregator's (and the relay's) anchor route.
const AnchorPath = "/v1/anchor"

// StatusError is a non-200 answer to an anchor request.
type StatusError struct {
	Code   int
	Detail string
}

func (e *StatusError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Code, e.Detail) }

// Anchor makes one GET (body nil) or POST of an anchor to the aggregator
// and returns its answer.
func (c *Client) Anchor(ctx context.Context, body []byte) (*wire.Anchor, error) {
	ctx, cancel := context.WithTimeout(ctx, c.SendTimeout)
	defer cancel()
	method := http.MethodGet
	if body != nil {
		method = http.MethodPost
	}
	resp, err := c.request(ctx, method, AnchorPath, body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &StatusError{resp.StatusCode, strings.TrimSpace(string(b))}
	}
	return wire.ParseAnchor(b)
}
