package server

import (
	"github.com/blanket-fl/blanket/relay/internal/aggclient"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gorilla/websocket"

	"github.com/blanket-fl/blanket/relay/internal/outbox"
	"github.com/blanket-fl/blanket/shared/wire"
)

// TestReplayOnNewConnection: the attack found on the real binaries. A
// report captured from a volunteer is replayed on new connections; the
// forwarded batch used to hold the same sealed message up to 3 times. Now
// every replayed frame is rejected (Ack duplicate, close 1008) and counted
// once under "replay", the batch holds each sealed message once, and
// received = accepted + rejected still holds.
func TestReplayOnNewConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		agg := &fakeAgg{}
		h := newHarness(t, agg, "")
		defer h.close()
		p := testParams()
		honest, other := h.mustDial(), h.mustDial()
		thieves := []*tclient{h.mustDial(), h.mustDial()}
		synctest.Wait()
		if st := h.announce(1, p, time.Minute); st != http.StatusOK {
			t.Fatalf("announce: HTTP %d", st)
		}
		for _, c := range append([]*tclient{honest, other}, thieves...) {
			c.announcement()
		}
		captured := h.reportFrames(1, p, []uint32{0, 1, 2, 3}, 0.25)
		honest.send(checkIn(1))
		honest.ack()
		for _, f := range captured {
			honest.send(f)
			if a := honest.ack(); a.Status != wire.AckAccepted {
				t.Fatalf("honest frame: %+v", a)
			}
		}
		for _, c := range thieves {
			c.send(checkIn(1))
			if a := c.ack(); a.Status != wire.AckAccepted {
				t.Fatalf("thief check-in: %+v", a)
			}
			c.send(captured[0])
			if a := c.ack(); a.Status != wire.AckDuplicate {
				t.Fatalf("replayed frame: ack %+v", a)
			}
			if code := c.closeCode(); code != websocket.ClosePolicyViolation {
				t.Fatalf("replay: close code %d", code)
			}
		}
		h.participate(other, 1, p, []uint32{4, 5, 6, 7}, 0.75)
		time.Sleep(time.Minute)
		synctest.Wait()
		batches, _ := agg.snapshot()
		if len(batches) != 1 {
			t.Fatalf("%d batches", len(batches))
		}
		b, err := wire.ParseBatch(batches[0], p)
		if err != nil {
			t.Fatal(err)
		}
		seen := make(map[string]int)
		for _, m := range b.Messages {
			seen[string(m.Sealed)]++
		}
		for _, f := range captured {
			rep, _ := wire.ParseReport(f, p)
			if n := seen[string(rep.Sealed)]; n != 1 {
				t.Fatalf("a captured message is %d times in the batch", n)
			}
		}
		if b.Reports != 2 || b.CheckedIn != 4 {
			t.Fatalf("batch header %+v", b)
		}
		s := h.srv.Metrics()
		checkCounters(t, s)
		if s.Rejected[ReasonReplay] != 2 || s.Received != uint64(4+2*p.Messages()+len(thieves)) ||
			s.Delivered[outbox.Accepted.String()] != 1 {
			t.Fatalf("metrics %+v", s)
		}
		honest.ws.Close()
		other.ws.Close()
	})
}

// TestClassify: the relay's reading of the aggregator's answers.
func TestClassify(t *testing.T) {
	reply := func(round uint64, st uint8) []byte {
		b, _ := (&wire.BatchReply{Round: round, Status: st}).MarshalBinary()
		return b
	}
	cases := []struct {
		kind   outbox.Kind
		status int
		body   []byte
		want   outbox.Outcome
	}{
		{outbox.Batch, 200, reply(4, wire.BatchStatusOK), outbox.Accepted},
		{outbox.Batch, 200, reply(4, wire.BatchStatusRefused), outbox.Accepted},
		{outbox.Batch, 200, reply(4, wire.BatchStatusDuplicate), outbox.Duplicate}, // an aggregator before outcomes
		{outbox.Batch, 200, reply(5, wire.BatchStatusOK), outbox.Retry},            // another round's reply
		{outbox.Batch, 200, []byte("ok"), outbox.Retry},
		{outbox.Batch, 208, reply(4, wire.BatchStatusOK), outbox.Duplicate},
		{outbox.Batch, 409, reply(4, wire.BatchStatusDuplicate), outbox.Obsolete},
		{outbox.Batch, 409, nil, outbox.Obsolete},
		{outbox.Batch, 400, nil, outbox.Invalid},
		{outbox.Batch, 413, nil, outbox.Invalid},
		{outbox.Batch, 500, nil, outbox.Retry},
		{outbox.Batch, 503, nil, outbox.Retry},
		{outbox.Batch, 401, nil, outbox.Retry},
		{outbox.Batch, 204, nil, outbox.Retry},
		{outbox.Abort, 200, []byte(`{"round":4,"outcome":"accepted"}`), outbox.Accepted},
		{outbox.Abort, 204, nil, outbox.Accepted}, // an aggregator before outcomes
		{outbox.Abort, 208, nil, outbox.Duplicate},
		{outbox.Abort, 409, []byte(`{"round":4,"outcome":"obsolete","detail":"abandoned"}`), outbox.Obsolete},
		{outbox.Abort, 400, nil, outbox.Invalid},
		{outbox.Abort, 502, nil, outbox.Retry},
		{outbox.Abort, 404, nil, outbox.Retry},
	}
	for _, c := range cases {
		if got, why := aggclient.Classify(c.kind, 4, c.status, c.body); got != c.want {
			t.Errorf("%s HTTP %d %q: %v (%s), want %v", c.kind, c.status, c.body, got, why, c.want)
		}
	}
}
