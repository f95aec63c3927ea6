package edge

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/blanket-fl/blanket/relay/internal/round"
	"github.com/blanket-fl/blanket/shared/wire"
)

// owner is an Owner on a round.Machine behind an HTTP server, recording
// the verdicts it counts.
type owner struct {
	srv      *httptest.Server
	m        *round.Machine
	o        *Owner
	mu       sync.Mutex
	verdicts []round.Verdict
	closed   []*round.Closed
	// fate, if set, is the accepted reports' fate (sumrelay.Relay.Report)
	// the owner's answer waits for.
	fate func() <-chan bool
}

func newOwner(t *testing.T) *owner {
	t.Helper()
	ow := &owner{m: round.New(0)}
	ow.m.SetStreamShares(true)
	ow.o = NewOwner(OwnerConfig{Rounds: ow.m, Logger: slog.New(slog.DiscardHandler), PollWait: 200 * time.Millisecond,
		Authorized: func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer tok" },
		Verdict: func(v round.Verdict) <-chan bool {
			ow.mu.Lock()
			ow.verdicts = append(ow.verdicts, v)
			fate := ow.fate
			ow.mu.Unlock()
			if fate == nil || v.Accepted != round.Shares {
				return nil
			}
			return fate()
		},
		Closed: func(c *round.Closed) {
			if c != nil {
				ow.mu.Lock()
				ow.closed = append(ow.closed, c)
				ow.mu.Unlock()
			}
		}})
	mux := http.NewServeMux()
	for p, h := range ow.o.Routes() {
		mux.Handle(p, h)
	}
	mux.HandleFunc("GET /api/round", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, `{"owner":true}`) })
	ow.srv = httptest.NewServer(mux)
	t.Cleanup(ow.srv.Close)
	return ow
}

// startEdge runs an edge of ow (largeFrames: Config.LargeFrames, 0 for
// the default) until the test ends, and returns its server.
func startEdge(t *testing.T, ow *owner, largeFrames int) *httptest.Server {
	t.Helper()
	e, err := New(Config{Owner: ow.srv.URL, Token: "tok", Name: "e1", Logger: slog.New(slog.DiscardHandler), LargeFrames: largeFrames})
	if err != nil {
		t.Fatal(err)
	}
	es := httptest.NewServer(e.Handler())
	t.Cleanup(es.Close)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return es
}

// open opens a secure-summation round at the owner and offers it to the
// edges.
func (ow *owner) open(t *testing.T, num uint64) *round.Round {
	t.Helper()
	p := wire.Params{Protocol: wire.ProtocolSecAgg, Randomizer: wire.RandomizerDiscreteGaussian,
		D: 8, K: 1, L: 1, Width: 1, Sigma: 2, Clip: 1, CheckInP: 1, MinBatch: 2, Quota: 10}
	a := &wire.Announcement{Round: num, Deadline: time.Now().Add(time.Minute), Params: p, Model: make([]float64, p.D), RelayPub: [32]byte{5}}
	b, err := a.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	rd, err := ow.m.Open(a, b, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ow.o.Opened(rd)
	return rd
}

func shares(t *testing.T, rd *round.Round, lead, help byte) []byte {
	t.Helper()
	l, h := make([]byte, rd.LeaderLen), make([]byte, rd.HelperLen)
	l[0], h[0] = lead, help
	b, err := (&wire.Shares{Round: rd.Num, Leader: l, Helper: h}).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// volunteer is a websocket client of the edge.
type volunteer struct{ ws *websocket.Conn }

func dial(t *testing.T, url string) *volunteer {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(strings.Replace(url, "http://", "ws://", 1)+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return &volunteer{ws}
}

func (v *volunteer) read(t *testing.T) []byte {
	t.Helper()
	v.ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, b, err := v.ws.ReadMessage()
	if err != nil {
		t.Fatalf("reading: %v", err)
	}
	return b
}

func (v *volunteer) ack(t *testing.T, frame []byte) *wire.Ack {
	t.Helper()
	if err := v.ws.WriteMessage(websocket.BinaryMessage, frame); err != nil {
		t.Fatal(err)
	}
	a, err := wire.ParseAck(v.read(t))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestEdgeHandsReportsToTheOwner: an edge opens the owner's round for its
// connections (the announcement reaches its volunteers byte for byte),
// hands an accepted report to the owner, and answers a report the owner
// refuses (the same sealed shares another edge already handed over: a
// replay) with the owner's Ack status, closing the connection; its
// counts reach the owner when its round completes, and the owner's round
// then closes counting the edge's population. Other routes are the
// owner's; the owner's routes refuse a wrong token.
func TestEdgeHandsReportsToTheOwner(t *testing.T) {
	ow := newOwner(t)
	es := startEdge(t, ow, 0)

	resp, err := http.Get(es.URL + "/api/round")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != `{"owner":true}` {
		t.Fatalf("GET /api/round through the edge: %q, want the owner's", body)
	}
	resp, err = http.Post(ow.srv.URL+SharesPath+"?round=1", "application/octet-stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an edge route without the token: %s", resp.Status)
	}

	a, b := dial(t, es.URL), dial(t, es.URL)
	for deadline := time.Now().Add(30 * time.Second); ow.o.Connections() < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the owner counts %d edge connections, want 2", ow.o.Connections())
		}
	}
	rd := ow.open(t, 1)
	for _, v := range []*volunteer{a, b} {
		if got := v.read(t); string(got) != string(rd.Ann) {
			t.Fatal("the edge's volunteer did not get the owner's announcement byte for byte")
		}
		ci, _ := (&wire.CheckIn{Round: 1}).MarshalBinary()
		if ack := v.ack(t, ci); ack.Status != wire.AckAccepted {
			t.Fatalf("check-in: ack %+v", ack)
		}
	}
	// The same report already handed over by another edge: the owner's
	// replay rule refuses the edge's copy.
	dup := shares(t, rd, 7, 8)
	if v := ow.m.EdgeShares(1, dup); v.Accepted != round.Shares {
		t.Fatalf("another edge's report: %+v", v)
	}
	if ack := a.ack(t, dup); ack.Status != wire.AckDuplicate {
		t.Fatalf("a replay across edges: ack %+v, want the owner's duplicate", ack)
	}
	a.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, _, err := a.ws.ReadMessage(); !websocket.IsCloseError(err, websocket.ClosePolicyViolation) {
		t.Fatalf("after the refused replay: %v, want a policy close", err)
	}
	if ack := b.ack(t, shares(t, rd, 1, 2)); ack.Status != wire.AckAccepted {
		t.Fatalf("an honest report through the edge: ack %+v", ack)
	}
	// b reported and a left: the edge's round is complete, its counts
	// complete the owner's (2 reports: the other edge's and b's).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ow.mu.Lock()
		n := len(ow.closed)
		ow.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the owner's round did not close on the edge's counts")
		}
	}
	var counts struct {
		Received, Accepted uint64
		Rejected           map[string]uint64
	}
	resp, err = http.Get(es.URL + "/api/edge")
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&counts)
	resp.Body.Close()
	if counts.Received != 4 || counts.Accepted != 3 || counts.Rejected[round.ReasonReplay] != 1 || len(counts.Rejected) != 1 {
		t.Fatalf("edge counts %+v: want 4 frames received, 3 accepted (2 check-ins, 1 report), 1 rejected as a replay", counts)
	}
	c := ow.closed[0]
	if c.Why != "complete" || c.Reports != 2 || c.Population != 2 || c.CheckedIn != 2 {
		t.Fatalf("owner's round closed %+v, want complete with 2 reports, the edge's 2 volunteers", c)
	}
	ow.mu.Lock()
	defer ow.mu.Unlock()
	acc, rej := 0, 0
	for _, v := range ow.verdicts {
		if v.Accepted == round.Shares {
			acc++
		} else if v.Reason == round.ReasonReplay {
			rej++
		}
	}
	if acc != 1 || rej != 1 {
		t.Fatalf("the owner counted %d accepted and %d replays from the edge, want 1 and 1", acc, rej)
	}
}

// TestEdgeFollowsAnOwnerThatMovedOn: the owner gives up a round the edge
// still has open (a restart, a standby's takeover) and announces the next
// one: the edge ends its round and opens the new one for its volunteers
// at once, rather than at the old round's deadline.
func TestEdgeFollowsAnOwnerThatMovedOn(t *testing.T) {
	ow := newOwner(t)
	es := startEdge(t, ow, 0)
	v := dial(t, es.URL)
	for deadline := time.Now().Add(30 * time.Second); ow.o.Connections() < 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the edge's volunteer is not counted at the owner")
		}
	}
	r1 := ow.open(t, 1)
	if got := v.read(t); string(got) != string(r1.Ann) {
		t.Fatal("round 1's announcement did not reach the edge's volunteer")
	}
	ow.m.Close(r1, "relay restart") // the owner gives round 1 up
	r2 := ow.open(t, 2)
	if got := v.read(t); string(got) != string(r2.Ann) {
		t.Fatal("round 2's announcement did not reach the edge's volunteer while round 1 was open at the edge")
	}
	ci, _ := (&wire.CheckIn{Round: 2}).MarshalBinary()
	if ack := v.ack(t, ci); ack.Status != wire.AckAccepted {
		t.Fatalf("check-in to round 2 at the edge: %+v", ack)
	}
}

// TestEdgeAckWaitsForTheOwnersFate: the owner answers an edge's report
// only once the report's fate is known (its chunk answered by the
// aggregator: sumrelay.Relay.Report), and the edge's volunteer gets its
// ack only then, accepted if the report made it into the round and too
// late if the round ended first. Meanwhile the edge reads on: with one
// large-frame slot, a second volunteer's report reaches the owner while
// the first one's ack still waits.
func TestEdgeAckWaitsForTheOwnersFate(t *testing.T) {
	ow := newOwner(t)
	fates := make(chan chan bool, 2)
	ow.fate = func() <-chan bool {
		f := make(chan bool, 1)
		fates <- f
		return f
	}
	es := startEdge(t, ow, 1)

	a, b := dial(t, es.URL), dial(t, es.URL)
	for deadline := time.Now().Add(30 * time.Second); ow.o.Connections() < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the owner counts %d edge connections, want 2", ow.o.Connections())
		}
	}
	rd := ow.open(t, 1)
	for _, v := range []*volunteer{a, b} {
		v.read(t) // the announcement
		ci, _ := (&wire.CheckIn{Round: 1}).MarshalBinary()
		if ack := v.ack(t, ci); ack.Status != wire.AckAccepted {
			t.Fatalf("check-in: ack %+v", ack)
		}
	}
	if err := a.ws.WriteMessage(websocket.BinaryMessage, shares(t, rd, 1, 2)); err != nil {
		t.Fatal(err)
	}
	fa := <-fates // a's report is at the owner, its fate pending
	if err := b.ws.WriteMessage(websocket.BinaryMessage, shares(t, rd, 3, 4)); err != nil {
		t.Fatal(err)
	}
	fb := <-fates // b's too: the edge read it while a's ack waited
	got := make(chan []byte, 1)
	go func() { got <- a.read(t) }()
	select {
	case <-got:
		t.Fatal("an ack before the report's fate was known")
	case <-time.After(200 * time.Millisecond):
	}
	fa <- true
	aa, err := wire.ParseAck(<-got)
	if err != nil || aa.Status != wire.AckAccepted {
		t.Fatalf("a report whose chunk was answered: ack %+v %v, want accepted", aa, err)
	}
	fb <- false // b's round ended before its chunk was answered
	ab, err := wire.ParseAck(b.read(t))
	if err != nil {
		t.Fatal(err)
	}
	if ab.Status != wire.AckTooLate {
		t.Fatalf("a report whose round ended before its chunk was answered: ack %+v, want too late", ab)
	}
}
