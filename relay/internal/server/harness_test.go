package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/blanket-fl/blanket/relay/internal/helperkey"
	"github.com/blanket-fl/blanket/relay/internal/relaystore"
	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/envelope/envelopetest"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/wire"
)

// The server tests run inside testing/synctest bubbles: every connection is
// a net.Pipe (durably blocking), so deadlines, pings and retries run on the
// bubble's fake clock and the tests never sleep in real time.

// testToken is the relay-aggregator token (secure summation derives its
// verify keys from it: 16 bytes at least).
const testToken = "s3cret-token-of-the-tests"

// testHelperKey is a fixed helper key for relays whose tests never open a
// helper share.
func testHelperKey(tb testing.TB) *helperkey.Key {
	tb.Helper()
	k, err := helperkey.Unmarshal(bytes.Repeat([]byte{9}, 32))
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

// pipeListener is a net.Listener whose connections are net.Pipe pairs.
type pipeListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	a, b := net.Pipe()
	select {
	case l.ch <- a:
		return b, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// fakeAgg is the aggregator: it records every request body and answers
// batches with a BatchReply after failing the first failFirst attempts.
type fakeAgg struct {
	mu        sync.Mutex
	batches   [][]byte
	aborts    [][]byte
	failFirst int
	unauth    int
}

func (a *fakeAgg) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+testToken {
		a.mu.Lock()
		a.unauth++
		a.mu.Unlock()
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	body, _ := io.ReadAll(r.Body)
	a.mu.Lock()
	defer a.mu.Unlock()
	switch r.URL.Path {
	case "/v1/batch":
		a.batches = append(a.batches, body)
		if a.failFirst > 0 {
			a.failFirst--
			http.Error(w, "try later", http.StatusServiceUnavailable)
			return
		}
		rep := wire.BatchReply{Round: binary.BigEndian.Uint64(body[2:10]), Status: wire.BatchStatusOK}
		b, _ := rep.MarshalBinary()
		w.Write(b)
	case "/v1/abort":
		a.aborts = append(a.aborts, body)
	default:
		http.NotFound(w, r)
	}
}

func (a *fakeAgg) snapshot() (batches, aborts [][]byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([][]byte(nil), a.batches...), append([][]byte(nil), a.aborts...)
}

// harness is one relay with a fake aggregator, all on pipes.
type harness struct {
	t      *testing.T
	key    *envelopetest.Key
	agg    http.Handler
	dir    string
	srv    *Server
	lmu    sync.Mutex // guards relayL across restarts
	relayL *pipeListener
	aggL   *pipeListener
	relayH *http.Server
	aggH   *http.Server
	tr     *http.Transport
	cancel context.CancelFunc
	runErr chan error
	seed   uint64
	keys   *keyCheck // every log attribute key must be snake_case
	store  *relaystore.Store
	fs     datastore.FileSystem // the store's (nil: the OS)
}

type harnessOpt func(*Config)

func newHarness(t *testing.T, agg http.Handler, dir string, opts ...harnessOpt) *harness {
	t.Helper()
	return newHarnessFS(t, agg, dir, nil, opts...)
}

// newHarnessFS is newHarness with the relay's store on fsys (nil: the OS;
// a failing disk in tests).
func newHarnessFS(t *testing.T, agg http.Handler, dir string, fsys datastore.FileSystem, opts ...harnessOpt) *harness {
	t.Helper()
	key, err := envelopetest.DeriveKey([32]byte{7})
	if err != nil {
		t.Fatal(err)
	}
	if dir == "" {
		dir = t.TempDir()
	}
	h := &harness{t: t, key: key, agg: agg, dir: dir, relayL: newPipeListener(), aggL: newPipeListener(), keys: newKeyCheck(), fs: fsys}
	// Registered first, so it runs last: after the relay has stopped.
	t.Cleanup(func() { h.keys.check(t) })
	h.tr = &http.Transport{DialContext: h.aggL.dial}
	h.aggH = &http.Server{Handler: agg}
	go h.aggH.Serve(h.aggL)
	h.start(opts...)
	return h
}

func (h *harness) start(opts ...harnessOpt) {
	h.t.Helper()
	st, err := relaystore.Open(h.dir, &datastore.Options{FS: h.fs}) // imports a state directory of the former format
	if err != nil {
		h.t.Fatal(err)
	}
	h.store = st
	hk, _, err := st.HelperKey()
	if err != nil {
		h.t.Fatal(err)
	}
	h.seed++
	seed := h.seed
	cfg := Config{
		HelperKey:  hk,
		Aggregator: "http://aggregator",
		Token:      testToken,
		Outbox:     st,
		StoreStats: st.DB().Stats,
		Reports:    st,
		Logger:     slog.New(h.keys),
		NewSource:  func() noise.Source { seed++; return noise.NewSeeded(seed) },
		HTTPClient: &http.Client{Transport: h.tr},
		RetryMin:   100 * time.Millisecond,
		RetryMax:   time.Second,
	}
	for _, o := range opts {
		o(&cfg)
	}
	h.srv, err = New(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	l := newPipeListener()
	h.lmu.Lock()
	h.relayL = l
	h.lmu.Unlock()
	h.relayH = &http.Server{Handler: h.srv.Handler()}
	go h.relayH.Serve(l)
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.runErr = make(chan error, 1)
	go func() { h.runErr <- h.srv.Run(ctx) }()
}

// stop shuts the relay down (like SIGTERM).
func (h *harness) stop() {
	h.cancel()
	<-h.runErr
	h.store.Close()
	h.relayH.Close()
	h.lmu.Lock()
	h.relayL.Close()
	h.lmu.Unlock()
}

// close stops everything so the bubble can end.
func (h *harness) close() {
	h.stop()
	h.aggH.Close()
	h.aggL.Close()
	h.tr.CloseIdleConnections()
}

func testParams() wire.Params {
	return wire.Params{
		Protocol: wire.ProtocolSSDouble, Randomizer: wire.RandomizerLaplace,
		D: 8, K: 4, L: 1, Width: 1, NP: 6, MinBatch: 2, Quota: 0,
		EpsL: 2, Clip: 1, CheckInP: 1,
	}
}

// announce posts a signed announcement and returns the HTTP status.
func (h *harness) announce(round uint64, p wire.Params, deadline time.Duration) int {
	h.t.Helper()
	b := h.announcement(round, p, deadline)
	return h.post("/v1/rounds", testToken, b)
}

func (h *harness) announcement(round uint64, p wire.Params, deadline time.Duration) []byte {
	h.t.Helper()
	a := wire.Announcement{Round: round, Deadline: time.Now().Add(deadline), Params: p,
		HPKEPub: h.key.Public().HPKE, Model: make([]float64, p.D)}
	if err := a.Sign(h.key); err != nil {
		h.t.Fatal(err)
	}
	b, err := a.MarshalBinary()
	if err != nil {
		h.t.Fatal(err)
	}
	return b
}

// relayDial dials the relay running now (its listener changes at every
// restart).
func (h *harness) relayDial(ctx context.Context, n, a string) (net.Conn, error) {
	h.lmu.Lock()
	l := h.relayL
	h.lmu.Unlock()
	return l.dial(ctx, n, a)
}

func (h *harness) httpClient() *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: h.relayDial}}
}

func (h *harness) post(path, token string, body []byte) int {
	h.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://relay"+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	c := h.httpClient()
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// tclient is a test websocket client with a reader goroutine (so pings
// are answered, like a real client).
type tclient struct {
	t      *testing.T
	ws     *websocket.Conn
	raw    net.Conn
	frames chan []byte
	err    error // read error, valid after frames is closed
}

func (h *harness) dial(header http.Header) (*tclient, *http.Response, error) {
	return h.dialOpt(header, true)
}

// dialOpt dials; without a reader goroutine the client never reads, so it
// never answers pings (an unresponsive client).
func (h *harness) dialOpt(header http.Header, reader bool) (*tclient, *http.Response, error) {
	var raw net.Conn
	d := websocket.Dialer{NetDialContext: func(ctx context.Context, n, a string) (net.Conn, error) {
		c, err := h.relayDial(ctx, n, a)
		raw = c
		return c, err
	}}
	ws, resp, err := d.Dial("ws://relay/ws", header)
	if err != nil {
		return nil, resp, err
	}
	c := &tclient{t: h.t, ws: ws, raw: raw, frames: make(chan []byte, 64)}
	if !reader {
		return c, resp, nil
	}
	go func() {
		defer close(c.frames)
		for {
			_, b, err := ws.ReadMessage()
			if err != nil {
				c.err = err
				return
			}
			c.frames <- b
		}
	}()
	return c, resp, nil
}

func (h *harness) mustDial() *tclient {
	h.t.Helper()
	c, _, err := h.dial(nil)
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

// next returns the next frame from the relay, or nil once the connection
// ended.
func (c *tclient) next() []byte {
	return <-c.frames
}

func (c *tclient) send(b []byte) {
	c.t.Helper()
	if err := c.ws.WriteMessage(websocket.BinaryMessage, b); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

// ack reads the next frame as an Ack.
func (c *tclient) ack() *wire.Ack {
	c.t.Helper()
	b := c.next()
	if b == nil {
		c.t.Fatalf("connection ended (%v), want an ack", c.err)
	}
	a, err := wire.ParseAck(b)
	if err != nil {
		c.t.Fatalf("not an ack: %v", err)
	}
	return a
}

// closeCode waits for the end of the connection and returns the close code.
func (c *tclient) closeCode() int {
	c.t.Helper()
	for b := range c.frames {
		if _, err := wire.ParseAck(b); err != nil {
			c.t.Fatalf("unexpected frame before close")
		}
	}
	var ce *websocket.CloseError
	if errors.As(c.err, &ce) {
		return ce.Code
	}
	return -1
}

// announcementFrame reads the announcement the relay forwarded.
func (c *tclient) announcement() *wire.Announcement {
	c.t.Helper()
	b := c.next()
	a, err := wire.ParseAnnouncement(b, wire.DefaultLimits())
	if err != nil {
		c.t.Fatalf("not an announcement: %v", err)
	}
	return a
}

func checkIn(round uint64) []byte {
	b, _ := (&wire.CheckIn{Round: round}).MarshalBinary()
	return b
}

// reportFrames builds a full report: message s carries indices
// idx[s*w:(s+1)*w] and values all equal to mark.
func (h *harness) reportFrames(round uint64, p wire.Params, idx []uint32, mark float64) [][]byte {
	h.t.Helper()
	w, m := int(p.Width), p.Messages()
	out := make([][]byte, m)
	for s := range m {
		vals := make([]float64, w)
		for i := range vals {
			vals[i] = mark
		}
		sealed, err := envelope.SealValues(h.key.Public().HPKE, round, vals)
		if err != nil {
			h.t.Fatal(err)
		}
		r := wire.Report{Round: round, Seq: uint16(s), Count: uint16(m), Indices: idx[s*w : (s+1)*w], Sealed: sealed}
		out[s], err = r.MarshalBinary()
		if err != nil {
			h.t.Fatal(err)
		}
	}
	return out
}

// participate runs one client through a round: check in and send a full
// report, checking every Ack.
func (h *harness) participate(c *tclient, round uint64, p wire.Params, idx []uint32, mark float64) {
	h.t.Helper()
	c.send(checkIn(round))
	if a := c.ack(); a.Status != wire.AckAccepted {
		h.t.Fatalf("check-in ack status %d", a.Status)
	}
	for i, f := range h.reportFrames(round, p, idx, mark) {
		c.send(f)
		if a := c.ack(); a.Status != wire.AckAccepted || int(a.Received) != i+1 {
			h.t.Fatalf("report frame %d: ack %+v", i, a)
		}
	}
}

// counters checks the invariant received = accepted + rejected.
func checkCounters(t *testing.T, s Snapshot) {
	t.Helper()
	var sum uint64
	for _, v := range s.Accepted {
		sum += v
	}
	for _, v := range s.Rejected {
		sum += v
	}
	if s.Received != sum {
		t.Fatalf("received %d != accepted+rejected %d (%+v)", s.Received, sum, s)
	}
}

var _ = strings.TrimSpace
