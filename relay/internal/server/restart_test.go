package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gorilla/websocket"

	"github.com/blanket-fl/blanket/relay/internal/outbox"
	"github.com/blanket-fl/blanket/shared/wire"
)

// modelAgg is an aggregator with the real one's round loop and intake
// rules (aggregator/internal/server: announce with retries until the
// deadline, wait for a batch or an abort until deadline + grace, else
// abandon; answer every batch and abort accepted 200, duplicate 208 or
// obsolete 409), on the bubble's clock. The relay cannot import the
// aggregator; the aggregator's own tests check the same answers.
type modelAgg struct {
	h                     *harness
	p                     wire.Params
	timeout, grace, retry time.Duration

	mu      sync.Mutex
	last    uint64 // last finished round
	open    *modelRound
	recs    map[uint64]*modelRec
	order   []uint64 // finished rounds in order
	wake    chan struct{}
	down    bool           // answer 503 to batches and aborts ("killed")
	answers map[string]int // outcomes given, by name
}

type modelRound struct {
	num       uint64
	deadline  time.Time
	announced bool
	at        time.Time // announcement accepted by the relay
}

type modelRec struct {
	status string // ok, aborted, abandoned
	digest [32]byte
	reply  []byte
	at     time.Time
	pop    uint32
}

func newModelAgg(p wire.Params) *modelAgg {
	return &modelAgg{p: p, timeout: 30 * time.Second, grace: 10 * time.Second, retry: time.Second,
		recs: map[uint64]*modelRec{}, wake: make(chan struct{}, 1), answers: map[string]int{}}
}

func (a *modelAgg) notify() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

func (a *modelAgg) finishLocked(num uint64, rec *modelRec) {
	rec.at = time.Now()
	a.recs[num] = rec
	a.order = append(a.order, num)
	a.last, a.open = num, nil
	a.notify()
}

func (a *modelAgg) answer(w http.ResponseWriter, code int, outcome string, body []byte) {
	a.answers[outcome]++
	w.Header().Set("Blanket-Outcome", outcome)
	w.WriteHeader(code)
	w.Write(body)
}

func (a *modelAgg) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+testToken {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	body, _ := io.ReadAll(r.Body)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.down {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	_, num, err := wire.PeekRound(body)
	if err != nil {
		http.Error(w, "invalid", http.StatusBadRequest)
		return
	}
	switch r.URL.Path {
	case "/v1/batch":
		dig := sha256.Sum256(body)
		if rec := a.recs[num]; rec != nil {
			if rec.digest == dig {
				a.answer(w, http.StatusAlreadyReported, "duplicate", rec.reply)
				return
			}
			b, _ := (&wire.BatchReply{Round: num, Status: wire.BatchStatusDuplicate}).MarshalBinary()
			a.answer(w, http.StatusConflict, "obsolete", b)
			return
		}
		if a.open == nil || a.open.num != num {
			b, _ := (&wire.BatchReply{Round: num, Status: wire.BatchStatusInvalid}).MarshalBinary()
			a.answer(w, http.StatusConflict, "obsolete", b)
			return
		}
		bt, err := wire.ParseBatch(body, a.p)
		if err != nil {
			http.Error(w, "invalid", http.StatusBadRequest)
			return
		}
		reply, _ := (&wire.BatchReply{Round: num, Accepted: uint32(len(bt.Messages)), Status: wire.BatchStatusOK}).MarshalBinary()
		a.finishLocked(num, &modelRec{status: "ok", digest: dig, reply: reply, pop: bt.Population})
		a.answer(w, http.StatusOK, "accepted", reply)
	case "/v1/abort":
		ab, err := wire.ParseAbort(body)
		if err != nil {
			http.Error(w, "invalid", http.StatusBadRequest)
			return
		}
		js := func(outcome string) []byte {
			b, _ := json.Marshal(map[string]any{"round": num, "outcome": outcome, "detail": "model"})
			return b
		}
		if rec := a.recs[num]; rec != nil {
			if rec.status == "aborted" {
				a.answer(w, http.StatusAlreadyReported, "duplicate", js("duplicate"))
			} else {
				a.answer(w, http.StatusConflict, "obsolete", js("obsolete"))
			}
			return
		}
		if a.open == nil || a.open.num != num {
			a.answer(w, http.StatusConflict, "obsolete", js("obsolete"))
			return
		}
		a.finishLocked(num, &modelRec{status: "aborted", pop: ab.Population})
		a.answer(w, http.StatusOK, "accepted", js("accepted"))
	default:
		http.NotFound(w, r)
	}
}

// postRelay posts to whichever relay runs now; an error if none does.
func (a *modelAgg) postRelay(ctx context.Context, body []byte) (int, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://relay/v1/rounds", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testToken)
	c := &http.Client{Transport: &http.Transport{DialContext: a.h.relayDial}}
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// run is the round loop.
func (a *modelAgg) run(ctx context.Context) {
	for ctx.Err() == nil {
		a.mu.Lock()
		if a.open == nil {
			a.open = &modelRound{num: a.last + 1, deadline: time.Now().Add(a.timeout).Truncate(time.Millisecond)}
		}
		o := a.open
		a.mu.Unlock()
		for !o.announced && ctx.Err() == nil {
			code, err := a.postRelay(ctx, a.h.announcement(o.num, a.p, time.Until(o.deadline)))
			if err == nil && code == http.StatusOK {
				a.mu.Lock()
				o.announced, o.at = true, time.Now()
				a.mu.Unlock()
				break
			}
			if time.Now().Add(a.retry).After(o.deadline) {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(a.retry):
			}
		}
		t := time.NewTimer(time.Until(o.deadline.Add(a.grace)))
		if !o.announced {
			t.Reset(time.Until(o.deadline))
		}
	wait:
		for {
			a.mu.Lock()
			closed := a.open != o
			a.mu.Unlock()
			if closed {
				break
			}
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-a.wake:
			case <-t.C:
				a.mu.Lock()
				if a.open == o {
					a.finishLocked(o.num, &modelRec{status: "abandoned"})
				}
				a.mu.Unlock()
				break wait
			}
		}
		t.Stop()
	}
}

// okAfter returns the first round finished ok at or after t.
func (a *modelAgg) okAfter(t time.Time) (uint64, *modelRec) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, n := range a.order {
		if r := a.recs[n]; r.status == "ok" && !r.at.Before(t) {
			return n, r
		}
	}
	return 0, nil
}

// volunteer connects, reports in every round it is invited to (after a
// delay, one frame per gap), and reconnects after any failure.
func volunteer(ctx context.Context, h *harness, p wire.Params, idx []uint32, delay, gap time.Duration) {
	for ctx.Err() == nil {
		d := websocket.Dialer{NetDialContext: func(ctx context.Context, n, a string) (net.Conn, error) { return h.relayDial(ctx, n, a) }}
		ws, _, err := d.DialContext(ctx, "ws://relay/ws", nil)
		if err == nil {
			stop := context.AfterFunc(ctx, func() { ws.Close() })
			serveVolunteer(h, ws, p, idx, delay, gap)
			stop()
			ws.Close()
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func serveVolunteer(h *harness, ws *websocket.Conn, p wire.Params, idx []uint32, delay, gap time.Duration) {
	next := func() ([]byte, bool) {
		_, b, err := ws.ReadMessage()
		return b, err == nil
	}
	for {
		b, ok := next()
		if !ok {
			return
		}
		a, err := wire.ParseAnnouncement(b, wire.DefaultLimits())
		if err != nil {
			continue // an ack of a round gone by
		}
		time.Sleep(delay)
		if ws.WriteMessage(websocket.BinaryMessage, checkIn(a.Round)) != nil {
			return
		}
		if b, ok = next(); !ok {
			return
		}
		if ack, err := wire.ParseAck(b); err != nil || ack.Status != wire.AckAccepted {
			continue
		}
		for _, f := range h.reportFrames(a.Round, p, idx, 0.5) {
			time.Sleep(gap)
			if ws.WriteMessage(websocket.BinaryMessage, f) != nil {
				return
			}
			if b, ok = next(); !ok {
				return
			}
			if ack, err := wire.ParseAck(b); err != nil || ack.Status != wire.AckAccepted {
				break
			}
		}
	}
}

// TestRestartAtAnyPointResumes: the relay is stopped at a point of round
// 2 (before any check-in, mid-report, just before the quota, after the
// close with the aggregator down so the batch is persisted but not
// delivered) and started again after a short outage or one longer than
// round timeout + batch grace (the wedge found on the real binaries: the
// aggregator had abandoned the round and answered the relay's abort 409
// forever). Every time: the relay's frames get definitive answers and
// leave the outbox, nothing is sent again after a definitive answer, the
// interrupted round is closed on both sides, and a round completes within
// one round timeout of the restart.
func TestRestartAtAnyPointResumes(t *testing.T) {
	p := testParams()
	p.Quota = 4
	const gap = time.Second
	points := []struct {
		name   string
		at     time.Duration // after round 2's announcement
		aggOff bool          // the aggregator is down from the close to the restart
	}{
		{"open, before check-ins", 500 * time.Millisecond, false},
		{"mid-report", 3500 * time.Millisecond, false},
		{"before the quota", 9500 * time.Millisecond, false},
		{"after the close, batch undelivered", 12 * time.Second, true},
	}
	for _, pt := range points {
		for _, outage := range []time.Duration{2 * time.Second, 45 * time.Second} {
			t.Run(fmt.Sprintf("%s/outage %v", pt.name, outage), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					agg := newModelAgg(p)
					h := newHarness(t, agg, "", func(c *Config) { c.Warmup = 2 * time.Second })
					agg.h = h
					ctx, cancel := context.WithCancel(context.Background())
					var wg sync.WaitGroup
					defer func() {
						cancel()
						wg.Wait()
						h.close()
					}()
					for i := range 4 {
						idx := []uint32{uint32(i), uint32(i + 4), uint32((i + 1) % 4), uint32((i+1)%4 + 4)}
						wg.Go(func() { volunteer(ctx, h, p, idx, time.Duration(2*i)*time.Second, gap) })
					}
					time.Sleep(time.Second) // volunteers connect
					wg.Go(func() { agg.run(ctx) })
					// Round 1 completes normally; round 2 is announced.
					var ann2 time.Time
					for {
						time.Sleep(100 * time.Millisecond)
						agg.mu.Lock()
						if agg.open != nil && agg.open.num == 2 && agg.open.announced {
							ann2 = agg.open.at
						}
						agg.mu.Unlock()
						if !ann2.IsZero() {
							break
						}
					}
					if n, _ := agg.okAfter(time.Time{}); n != 1 {
						t.Fatalf("round 1 did not complete: %d", n)
					}
					if pt.aggOff {
						time.Sleep(time.Until(ann2.Add(9 * time.Second)))
						agg.mu.Lock()
						agg.down = true
						agg.mu.Unlock()
					}
					time.Sleep(time.Until(ann2.Add(pt.at)))
					h.stop()
					time.Sleep(outage)
					agg.mu.Lock()
					agg.down = false
					agg.mu.Unlock()
					restart := time.Now()
					h.start(func(c *Config) { c.Warmup = 2 * time.Second })
					time.Sleep(agg.timeout)
					synctest.Wait()

					// A round completed within one round timeout of the
					// restart, with the volunteers back in it.
					n, rec := agg.okAfter(restart)
					if rec == nil {
						agg.mu.Lock()
						t.Fatalf("no round completed within %v of the restart; history %v", agg.timeout, agg.order)
					}
					if rec.pop != 4 || rec.at.Sub(restart) > agg.timeout {
						t.Fatalf("round %d: population %d, completed %v after the restart", n, rec.pop, rec.at.Sub(restart))
					}
					agg.mu.Lock()
					// Round 2 is closed on the aggregator's side.
					if agg.recs[2] == nil {
						t.Fatalf("round 2 still open at the aggregator (open %+v)", agg.open)
					}
					agg.mu.Unlock()
					// Every frame got a definitive answer: none pending, the
					// outbox empty (outbox's TestSenderOutcomes checks that
					// nothing is sent again after one).
					s := h.srv.Metrics()
					if s.Pending != 0 {
						t.Fatalf("frames still pending after the restart: %+v", s)
					}
					l, _ := h.srv.cfg.Outbox.List()
					for _, e := range l {
						if e.Kind != outbox.OpenRound || e.Round <= n {
							t.Fatalf("outbox holds %v", l)
						}
					}
					checkCounters(t, s)
					if s.Rejected[ReasonMalformed] != 0 || s.Rejected[ReasonReplay] != 0 {
						t.Fatalf("honest volunteers rejected: %v", s.Rejected)
					}
				})
			})
		}
	}
}
