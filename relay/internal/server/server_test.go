package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gorilla/websocket"

	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/wire"
)

// TestRoundForwarded: three clients report, one stays out; the quota closes
// the round; the batch pads every dimension to exactly n_p (ParseBatch
// checks coverage), carries the realized counts, dummies have the size of
// real messages and open to blanket values, and the counters add up.
func TestRoundForwarded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		agg := &fakeAgg{}
		h := newHarness(t, agg, "")
		defer h.close()
		p := testParams()
		p.Quota = 3
		clients := make([]*tclient, 4)
		for i := range clients {
			clients[i] = h.mustDial()
		}
		synctest.Wait()
		if st := h.announce(1, p, time.Minute); st != http.StatusOK {
			t.Fatalf("announce: HTTP %d", st)
		}
		for _, c := range clients {
			if a := c.announcement(); a.Round != 1 {
				t.Fatalf("announcement round %d", a.Round)
			}
		}
		idx := [][]uint32{{0, 1, 2, 3}, {0, 1, 2, 3}, {4, 5, 6, 7}}
		for i, c := range clients[:3] {
			h.participate(c, 1, p, idx[i], 0.25)
		}
		synctest.Wait()
		batches, aborts := agg.snapshot()
		if len(batches) != 1 || len(aborts) != 0 {
			t.Fatalf("%d batches, %d aborts", len(batches), len(aborts))
		}
		b, err := wire.ParseBatch(batches[0], p)
		if err != nil {
			t.Fatalf("ParseBatch: %v", err)
		}
		if b.Round != 1 || b.NP != p.NP || b.Reports != 3 || b.CheckedIn != 3 || b.Population != 4 {
			t.Fatalf("batch header %+v", b)
		}
		if want := int(p.D * p.NP / p.Width); len(b.Messages) != want {
			t.Fatalf("%d messages, want %d", len(b.Messages), want)
		}
		real := 0
		for _, m := range b.Messages {
			if len(m.Sealed) != envelope.SealedLen(int(p.Width)) {
				t.Fatalf("message of %d sealed bytes", len(m.Sealed))
			}
			vals, err := h.key.OpenValues(1, m.Sealed, nil)
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			if vals[0] == 0.25 {
				real++
			}
		}
		if real != 3*p.Messages() {
			t.Fatalf("%d real messages in the batch, want %d", real, 3*p.Messages())
		}
		s := h.srv.Metrics()
		checkCounters(t, s)
		if s.ReportsComplete != 3 || s.RoundsForwarded != 1 || s.LastRound == nil ||
			s.LastRound.CheckInRate != 0.75 || s.LastRound.Outcome != "forwarded" {
			t.Fatalf("metrics %+v last %+v", s, s.LastRound)
		}
		// The outbox is empty once the aggregator answered.
		if l, _ := h.srv.cfg.Outbox.List(); len(l) != 0 {
			t.Fatalf("outbox not empty: %v", l)
		}
		// A report after the quota closed the round: too late, connection kept.
		c := clients[3]
		c.send(checkIn(1))
		if a := c.ack(); a.Status != wire.AckTooLate {
			t.Fatalf("late check-in: status %d", a.Status)
		}
		for _, c := range clients {
			c.ws.Close()
		}
	})
}

// TestBadInputs: every bad input is rejected with its Ack status and/or
// close code and counted under its reason.
func TestBadInputs(t *testing.T) {
	p := testParams()
	type step func(h *harness, c *tclient) []byte
	good := func(seq int) step {
		return func(h *harness, c *tclient) []byte { return h.reportFrames(1, p, []uint32{0, 1, 2, 3}, 0.5)[seq] }
	}
	edit := func(f func(b []byte) []byte) step {
		return func(h *harness, c *tclient) []byte { return f(good(0)(h, c)) }
	}
	cases := []struct {
		name     string
		checkIn  bool
		pre      []step // accepted frames first
		frame    step
		text     bool
		status   int // Ack status expected, -1 none
		code     int // close code expected, 0 = stays open
		reason   string
		announce bool
	}{
		{name: "oversized", checkIn: true, frame: edit(func(b []byte) []byte { return append(b, make([]byte, 100)...) }), status: -1, code: websocket.CloseMessageTooBig, reason: ReasonOversized, announce: true},
		{name: "trailing byte", checkIn: true, frame: edit(func(b []byte) []byte { return append(b, 0) }), status: -1, code: websocket.CloseMessageTooBig, reason: ReasonOversized, announce: true},
		{name: "text frame", checkIn: true, text: true, frame: good(0), status: -1, code: websocket.CloseUnsupportedData, reason: ReasonText, announce: true},
		{name: "truncated", checkIn: true, frame: edit(func(b []byte) []byte { return b[:len(b)-1] }), status: int(wire.AckMalformed), code: websocket.CloseInvalidFramePayloadData, reason: ReasonMalformed, announce: true},
		{name: "wrong width", checkIn: true, frame: edit(func(b []byte) []byte { b[17] = 3; return b }), status: int(wire.AckMalformed), code: websocket.CloseInvalidFramePayloadData, reason: ReasonMalformed, announce: true},
		{name: "index >= d", checkIn: true, frame: edit(func(b []byte) []byte { b[21] = 8; return b }), status: int(wire.AckMalformed), code: websocket.CloseInvalidFramePayloadData, reason: ReasonMalformed, announce: true},
		{name: "bad version", checkIn: true, frame: edit(func(b []byte) []byte { b[0] = 2; return b }), status: int(wire.AckMalformed), code: websocket.CloseInvalidFramePayloadData, reason: ReasonMalformed, announce: true},
		{name: "unexpected type", checkIn: true, frame: func(h *harness, c *tclient) []byte {
			b, _ := (&wire.Ack{Round: 1}).MarshalBinary()
			return b
		}, status: int(wire.AckMalformed), code: websocket.ClosePolicyViolation, reason: ReasonUnexpected, announce: true},
		{name: "replayed frame", checkIn: true, pre: []step{good(0)}, frame: good(0), status: int(wire.AckDuplicate), code: websocket.ClosePolicyViolation, reason: ReasonDuplicate, announce: true},
		{name: "second report", checkIn: true, pre: []step{good(0), good(1)}, frame: good(0), status: int(wire.AckDuplicate), code: websocket.ClosePolicyViolation, reason: ReasonDuplicate, announce: true},
		{name: "second check-in", checkIn: true, frame: func(*harness, *tclient) []byte { return checkIn(1) }, status: int(wire.AckDuplicate), code: websocket.ClosePolicyViolation, reason: ReasonDuplicate, announce: true},
		{name: "out of order", checkIn: true, frame: good(1), status: int(wire.AckMalformed), code: websocket.ClosePolicyViolation, reason: ReasonOutOfOrder, announce: true},
		// The wrong-round check-in refreshes the read limit from CheckIn size
		// to the round's Report size (round.Machine.ReadLimit); then the report.
		{name: "no check-in", pre: []step{func(*harness, *tclient) []byte { return checkIn(9) }}, frame: good(0), status: int(wire.AckMalformed), code: websocket.ClosePolicyViolation, reason: ReasonNoCheckIn, announce: true},
		{name: "wrong round", checkIn: true, frame: edit(func(b []byte) []byte { b[9] = 9; return b }), status: int(wire.AckWrongRound), reason: ReasonWrongRound, announce: true},
		{name: "no open round", frame: func(*harness, *tclient) []byte { return checkIn(1) }, status: int(wire.AckNoRound), reason: ReasonNoOpenRound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, &fakeAgg{}, "")
				defer h.close()
				c := h.mustDial()
				synctest.Wait()
				if tc.announce {
					if st := h.announce(1, p, time.Minute); st != http.StatusOK {
						t.Fatalf("announce: %d", st)
					}
					c.announcement()
				}
				if tc.checkIn {
					c.send(checkIn(1))
					if a := c.ack(); a.Status != 0 {
						t.Fatalf("check-in: %d", a.Status)
					}
				}
				for _, s := range tc.pre {
					c.send(s(h, c))
					if a := c.ack(); a.Status != 0 && tc.name != "no check-in" {
						t.Fatalf("pre frame: %d", a.Status)
					}
				}
				mt := websocket.BinaryMessage
				if tc.text {
					mt = websocket.TextMessage
				}
				if err := c.ws.WriteMessage(mt, tc.frame(h, c)); err != nil {
					t.Fatal(err)
				}
				if tc.status >= 0 {
					if a := c.ack(); int(a.Status) != tc.status {
						t.Fatalf("ack status %d, want %d", a.Status, tc.status)
					}
				}
				if tc.code != 0 {
					if code := c.closeCode(); code != tc.code {
						t.Fatalf("close code %d, want %d", code, tc.code)
					}
				} else {
					// Still open: a valid check-in or nothing more is fine.
					c.ws.Close()
				}
				synctest.Wait()
				s := h.srv.Metrics()
				checkCounters(t, s)
				if s.Rejected[tc.reason] != 1 {
					t.Fatalf("rejected[%s] = %d (%v)", tc.reason, s.Rejected[tc.reason], s.Rejected)
				}
				if tc.name == "replayed frame" && s.PartialDiscarded != 1 {
					t.Fatalf("partial report not discarded: %+v", s)
				}
			})
		})
	}
}

// TestPartialReportAndMinBatch: a client dropping mid-upload has its
// partial report discarded; with fewer complete reports than MinBatch at
// the deadline the round aborts, the abort is posted and nothing is
// forwarded.
func TestPartialReportAndMinBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		agg := &fakeAgg{}
		h := newHarness(t, agg, "")
		defer h.close()
		p := testParams()
		p.MinBatch = 2
		a, b := h.mustDial(), h.mustDial()
		synctest.Wait()
		if st := h.announce(1, p, 30*time.Second); st != http.StatusOK {
			t.Fatal(st)
		}
		a.announcement()
		b.announcement()
		h.participate(a, 1, p, []uint32{0, 1, 2, 3}, 0.5)
		b.send(checkIn(1))
		b.ack()
		b.send(h.reportFrames(1, p, []uint32{4, 5, 6, 7}, 0.5)[0])
		b.ack()
		b.ws.Close() // drops mid-upload
		time.Sleep(31 * time.Second)
		synctest.Wait()
		batches, aborts := agg.snapshot()
		if len(batches) != 0 || len(aborts) != 1 {
			t.Fatalf("%d batches, %d aborts", len(batches), len(aborts))
		}
		ab, err := wire.ParseAbort(aborts[0])
		if err != nil {
			t.Fatal(err)
		}
		if ab.Round != 1 || ab.Reason != wire.AbortBelowMinBatch || ab.Reports != 1 || ab.CheckedIn != 2 || ab.Population != 2 {
			t.Fatalf("abort %+v", ab)
		}
		s := h.srv.Metrics()
		checkCounters(t, s)
		if s.PartialDiscarded != 1 || s.RoundsAborted != 1 || s.RoundsForwarded != 0 {
			t.Fatalf("metrics %+v", s)
		}
		if l, _ := h.srv.cfg.Outbox.List(); len(l) != 0 {
			t.Fatalf("outbox not empty: %v", l)
		}
		a.ws.Close()
	})
}

// TestRetryResendsIdenticalBytes: the aggregator fails twice; the relay
// resends the identical persisted bytes until it succeeds.
func TestRetryResendsIdenticalBytes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		agg := &fakeAgg{failFirst: 2}
		h := newHarness(t, agg, "")
		defer h.close()
		p := testParams()
		p.Quota = 2
		cs := []*tclient{h.mustDial(), h.mustDial()}
		synctest.Wait()
		h.announce(1, p, time.Minute)
		for i, c := range cs {
			c.announcement()
			h.participate(c, 1, p, []uint32{uint32(i), 2, 4, 6}, 0.5)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		batches, _ := agg.snapshot()
		if len(batches) != 3 {
			t.Fatalf("%d attempts, want 3", len(batches))
		}
		for i := 1; i < 3; i++ {
			if !bytes.Equal(batches[i], batches[0]) {
				t.Fatalf("attempt %d sent different bytes", i)
			}
		}
		s := h.srv.Metrics()
		if s.SendAttempts != 3 || s.SendFailures != 2 || s.RoundsForwarded != 1 {
			t.Fatalf("metrics %+v", s)
		}
		for _, c := range cs {
			c.ws.Close()
		}
	})
}

// TestRestartResendsPersistedBatch: the aggregator is down when the round
// closes; the relay stops; a new relay on the same state directory sends
// the identical persisted bytes (no second padding). A round open at a
// stop is aborted (relay restart) by the next start.
func TestRestartResendsPersistedBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		agg := &fakeAgg{failFirst: 1 << 30}
		h := newHarness(t, agg, "")
		defer h.close()
		p := testParams()
		p.Quota = 2
		cs := []*tclient{h.mustDial(), h.mustDial()}
		synctest.Wait()
		h.announce(1, p, time.Minute)
		for i, c := range cs {
			c.announcement()
			h.participate(c, 1, p, []uint32{uint32(i), 2, 4, 6}, 0.5)
		}
		synctest.Wait()
		// Round 2 opens and is still open when the relay stops.
		if st := h.announce(2, p, time.Minute); st != http.StatusOK {
			t.Fatal(st)
		}
		for _, c := range cs {
			c.announcement()
		}
		h.stop()
		for _, c := range cs {
			if code := c.closeCode(); code != websocket.CloseGoingAway {
				t.Fatalf("close code at shutdown %d", code)
			}
		}
		first, _ := agg.snapshot()
		if len(first) == 0 {
			t.Fatal("no attempt before the stop")
		}
		agg.mu.Lock()
		agg.failFirst = 0
		agg.mu.Unlock()
		h.start() // a different random source: re-padding would differ
		time.Sleep(time.Second)
		synctest.Wait()
		batches, aborts := agg.snapshot()
		last := batches[len(batches)-1]
		if !bytes.Equal(last, first[0]) {
			t.Fatal("the restarted relay sent different batch bytes")
		}
		if len(aborts) != 1 {
			t.Fatalf("%d aborts, want 1", len(aborts))
		}
		ab, err := wire.ParseAbort(aborts[0])
		if err != nil || ab.Round != 2 || ab.Reason != wire.AbortRelayRestart {
			t.Fatalf("abort %+v %v", ab, err)
		}
		if l, _ := h.srv.cfg.Outbox.List(); len(l) != 0 {
			t.Fatalf("outbox not empty: %v", l)
		}
		// Round numbers do not go back after a restart.
		if st := h.announce(2, p, time.Minute); st != http.StatusConflict {
			t.Fatalf("re-announcing round 2: HTTP %d", st)
		}
	})
}

// TestSlowClients: an idle client that never answers pings and a client
// that stalls mid-frame are both cut and counted.
func TestSlowClients(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, &fakeAgg{}, "", func(c *Config) {
			c.PingInterval, c.PongWait, c.FrameTimeout, c.WriteWait = time.Second, 3*time.Second, 2*time.Second, time.Second
		})
		defer h.close()
		p := testParams()
		// A client that sends nothing and never reads (so never pongs).
		idle, _, err := h.dialOpt(nil, false)
		if err != nil {
			t.Fatal(err)
		}
		// A client that starts a frame and stalls.
		slow := h.mustDial()
		synctest.Wait()
		h.announce(1, p, time.Minute)
		slow.announcement()
		slow.send(checkIn(1))
		slow.ack()
		frame := h.reportFrames(1, p, []uint32{0, 1, 2, 3}, 0.5)[0]
		// Masked binary frame header for len(frame) < 126, then half the payload.
		hdr := []byte{0x82, 0x80 | byte(len(frame)), 0, 0, 0, 0}
		if _, err := slow.raw.Write(append(hdr, frame[:len(frame)/2]...)); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if code := slow.closeCode(); code != websocket.CloseAbnormalClosure && code != -1 { // cut, no close frame
			t.Fatalf("slow client: close code %d", code)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("slow client cut after %v", d)
		}
		defer idle.ws.Close()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		s := h.srv.Metrics()
		// The idle client is cut by its failed ping write or its read
		// deadline, whichever comes first; the slow one by FrameTimeout.
		if s.Timeouts < 1 || s.Connections != 0 {
			t.Fatalf("metrics %+v", s)
		}
		checkCounters(t, s)
	})
}

// TestHTTPPolicy: bearer token, origin policy, metrics JSON.
func TestHTTPPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, &fakeAgg{}, "", func(c *Config) { c.Origins = []string{"https://app.example"} })
		defer h.close()
		p := testParams()
		ann := h.announcement(1, p, time.Minute)
		if st := h.post("/v1/rounds", "wrong", ann); st != http.StatusUnauthorized {
			t.Fatalf("wrong token: HTTP %d", st)
		}
		if st := h.post("/v1/rounds", testToken, ann[:50]); st != http.StatusBadRequest {
			t.Fatalf("malformed announcement: HTTP %d", st)
		}
		if st := h.post("/v1/rounds", testToken, h.announcement(1, p, -time.Second)); st != http.StatusBadRequest {
			t.Fatalf("past deadline: HTTP %d", st)
		}
		for _, tc := range []struct {
			origin string
			ok     bool
		}{{"", true}, {"http://relay", true}, {"https://app.example", true}, {"https://evil.example", false}} {
			hdr := http.Header{}
			if tc.origin != "" {
				hdr.Set("Origin", tc.origin)
			}
			c, resp, err := h.dial(hdr)
			if tc.ok != (err == nil) {
				t.Fatalf("origin %q: err %v", tc.origin, err)
			}
			if err == nil {
				if ext := resp.Header.Get("Sec-Websocket-Extensions"); ext != "" {
					t.Fatalf("extension negotiated: %q", ext)
				}
				c.ws.Close()
			} else if resp == nil || resp.StatusCode != http.StatusForbidden {
				t.Fatalf("origin %q: response %v", tc.origin, resp)
			}
		}
		hc := h.httpClient()
		defer hc.CloseIdleConnections()
		resp, err := hc.Get("http://relay/api/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var s Snapshot
		if err := json.Unmarshal(body, &s); err != nil {
			t.Fatal(err)
		}
		if s.OriginRejected != 1 || s.ConnectionsTotal != 3 {
			t.Fatalf("metrics %+v", s)
		}
		synctest.Wait()
	})
}
