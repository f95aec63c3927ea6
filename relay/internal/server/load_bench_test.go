package server

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/blanket-fl/blanket/relay/internal/intake"
	"github.com/blanket-fl/blanket/relay/internal/outbox"
	"github.com/blanket-fl/blanket/shared/envelope/envelopetest"
	"github.com/blanket-fl/blanket/shared/wire"
)

// BenchmarkRoundRelayVsRaw runs the two pipelines of bench_test.go side by
// side in one benchmark, alternating one relay round and one raw round per
// iteration on the same machine state, and reports the ratio of their wall
// times (target <= 1.25): the relay (announce, check-in, report, acks,
// quota close, pad with pre-sealed dummies, shuffle, fsync, forward to a
// fake aggregator) against bare gorilla ingest of the same bytes, both over
// benchClients net.Pipe connections (benchParams: D = 100, K = 10, Width = 1,
// n_p = 1100, about 10,000 dummies per round).
//
// Sub-benchmarks:
//   - open=0: clients report the moment they get the announcement, so the
//     dummies are sealed while ingest runs on the same two cores (the worst
//     case for pre-sealing; a real round is open while clients train).
//   - open=250ms: clients wait 250 ms after the announcement before they
//     check in, as if training; the wait is excluded from both timings
//     (timed: announce to all clients holding the announcement, then
//     check-in to batch forwarded / last ack).
//
// Measured (2-core KVM VM, nice -10, load average 1.6-2.1 from other
// jobs, 8 rounds each): open=0 ratio 1.83-1.89, close-ms 25-44 (was about
// 2.1 and 90-140 ms before pre-sealing); open=250ms ratio 1.31-1.89,
// close-ms 11-14. What remains is the announcement phase (relay 127-159
// ms vs raw 66-105: the pool's sealing starts with the broadcast and
// shares the two cores with it) while check-in + report ingest is within
// about 10% of raw.
//
// Metrics: relay-ms and raw-ms per round, ratio = relay/raw, close-ms
// (last client done to batch received by the aggregator), relay-ann-ms and
// raw-ann-ms (the announcement phase: announce to every client holding
// the announcement, included in relay-ms and raw-ms).
func BenchmarkRoundRelayVsRaw(b *testing.B) {
	for _, open := range []time.Duration{0, 250 * time.Millisecond} {
		b.Run("open="+open.String(), func(b *testing.B) { benchRelayVsRaw(b, open) })
	}
}

func benchRelayVsRaw(b *testing.B, open time.Duration) {
	key, _ := envelopetest.DeriveKey([32]byte{3})
	frames := benchFrames(b, key.Public().HPKE)
	rel := newRelayBench(b, key)
	defer rel.close()
	raw := newRawBench(b, key)
	defer raw.close()
	var relayT, rawT, closeT, relayAnn, rawAnn time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		round := uint64(i + 1)
		rt, at, ct := rel.round(b, round, frames, open)
		relayT += rt
		relayAnn += at
		closeT += ct
		rt, at = raw.round(b, round, frames, open)
		rawT += rt
		rawAnn += at
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(relayT.Milliseconds())/n, "relay-ms")
	b.ReportMetric(float64(rawT.Milliseconds())/n, "raw-ms")
	b.ReportMetric(float64(closeT.Milliseconds())/n, "close-ms")
	b.ReportMetric(float64(relayAnn.Milliseconds())/n, "relay-ann-ms")
	b.ReportMetric(float64(rawAnn.Milliseconds())/n, "raw-ann-ms")
	b.ReportMetric(relayT.Seconds()/rawT.Seconds(), "ratio")
}

// relayBench is the relay of BenchmarkRoundRelay with its clients.
type relayBench struct {
	key    *envelopetest.Key
	got    chan struct{}
	srv    *Server
	relayL *pipeListener
	conns  []*websocket.Conn
	stop   func()
}

func newRelayBench(b *testing.B, key *envelopetest.Key) *relayBench {
	r := &relayBench{key: key, got: make(chan struct{}, 1)}
	aggL := newPipeListener()
	aggH := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		rep := wire.BatchReply{Round: binary.BigEndian.Uint64(body[2:10])}
		out, _ := rep.MarshalBinary()
		w.Write(out)
		r.got <- struct{}{}
	})}
	go aggH.Serve(aggL)
	ob, err := outbox.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	r.srv, err = New(Config{Aggregator: "http://agg", Token: testToken, Outbox: ob, HelperKey: testHelperKey(b),
		Logger:     slog.New(slog.DiscardHandler),
		HTTPClient: &http.Client{Transport: &http.Transport{DialContext: aggL.dial}},
		// The clients read only during their rounds and a net.Pipe write
		// blocks until it is read: a ping between rounds would time out
		// and cut the connection.
		PingInterval: time.Hour, PongWait: 2 * time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	r.relayL = newPipeListener()
	relayH := &http.Server{Handler: r.srv.Handler()}
	go relayH.Serve(r.relayL)
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { r.srv.Run(ctx); close(runDone) }()
	r.stop = func() { cancel(); <-runDone; relayH.Close(); aggH.Close() }
	r.conns = dialAll(b, r.relayL)
	for r.srv.Metrics().Connections != benchClients {
		time.Sleep(time.Millisecond)
	}
	return r
}

func (r *relayBench) close() {
	for _, c := range r.conns {
		c.Close()
	}
	r.stop()
}

// round runs one round and returns its timed part, the announcement phase
// and the close latency.
func (r *relayBench) round(b *testing.B, round uint64, frames [][][]byte, open time.Duration) (timed, ann, closing time.Duration) {
	p := benchParams()
	t0 := time.Now()
	a := wire.Announcement{Round: round, Deadline: time.Now().Add(time.Hour), Params: p,
		HPKEPub: r.key.Public().HPKE, Model: make([]float64, p.D)}
	a.Sign(r.key)
	annB, _ := a.MarshalBinary()
	req, _ := http.NewRequest(http.MethodPost, "http://relay/v1/rounds", bytesReader(annB))
	req.Header.Set("Authorization", "Bearer "+testToken)
	hc := &http.Client{Transport: &http.Transport{DialContext: r.relayL.dial}}
	resp, err := hc.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("announce: %v %v", err, resp)
	}
	resp.Body.Close()
	hc.CloseIdleConnections()
	ci := checkIn(round)
	var announced, start sync.WaitGroup
	announced.Add(len(r.conns))
	start.Add(1)
	var wg sync.WaitGroup
	for k, c := range r.conns {
		wg.Go(func() {
			_, _, err := c.ReadMessage() // announcement
			announced.Done()
			if err != nil {
				b.Error(err)
				return
			}
			start.Wait()
			c.WriteMessage(websocket.BinaryMessage, ci)
			c.ReadMessage()
			for _, f := range frames[k] {
				setRound(f, round)
				c.WriteMessage(websocket.BinaryMessage, f)
				c.ReadMessage()
			}
		})
	}
	announced.Wait()
	t1 := time.Now()
	time.Sleep(open) // clients train
	t2 := time.Now()
	start.Done()
	wg.Wait()
	t3 := time.Now()
	<-r.got
	t4 := time.Now()
	return t1.Sub(t0) + t4.Sub(t2), t1.Sub(t0), t4.Sub(t3)
}

// rawBench is the bare gorilla server of BenchmarkRoundRawIngest.
type rawBench struct {
	ann   []byte
	count atomic.Int64
	want  int64
	done  chan struct{}
	mu    sync.Mutex
	srv   []*rawBenchConn
	conns []*websocket.Conn
	hs    *http.Server
}

type rawBenchConn struct {
	mu sync.Mutex // one writer at a time, as the relay's client.wmu
	ws *websocket.Conn
}

func newRawBench(b *testing.B, key *envelopetest.Key) *rawBench {
	p := benchParams()
	r := &rawBench{done: make(chan struct{}, 1), want: int64(benchClients * (1 + p.Messages()))}
	up := websocket.Upgrader{ReadBufferSize: 512, WriteBufferSize: 512, WriteBufferPool: &sync.Pool{}}
	ack, _ := (&wire.Ack{Round: 1}).MarshalBinary()
	a := wire.Announcement{Round: 1, Deadline: time.Now().Add(time.Hour), Params: p,
		HPKEPub: key.Public().HPKE, Model: make([]float64, p.D)}
	a.Sign(key)
	r.ann, _ = a.MarshalBinary()
	l := newPipeListener()
	r.hs = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		c, err := up.Upgrade(w, req, nil)
		if err != nil {
			return
		}
		defer c.Close()
		rc := &rawBenchConn{ws: c}
		r.mu.Lock()
		r.srv = append(r.srv, rc)
		r.mu.Unlock()
		for {
			c.SetReadLimit(int64(p.ReportFrameSize()))
			_, rd, err := c.NextReader()
			if err != nil {
				return
			}
			if _, _, err := intake.ReadFrame(context.Background(), rd, p.ReportFrameSize(), nil, nil); err != nil {
				return
			}
			rc.mu.Lock()
			c.WriteMessage(websocket.BinaryMessage, ack)
			rc.mu.Unlock()
			if r.count.Add(1)%r.want == 0 {
				r.done <- struct{}{}
			}
		}
	})}
	go r.hs.Serve(l)
	r.conns = dialAll(b, l)
	for {
		r.mu.Lock()
		n := len(r.srv)
		r.mu.Unlock()
		if n == benchClients {
			break
		}
		time.Sleep(time.Millisecond)
	}
	return r
}

func (r *rawBench) close() {
	for _, c := range r.conns {
		c.Close()
	}
	r.hs.Close()
}

func (r *rawBench) round(b *testing.B, round uint64, frames [][][]byte, open time.Duration) (timed, ann time.Duration) {
	t0 := time.Now()
	ci := checkIn(round)
	go func() { // broadcast, as the relay does with 8 writers
		ch := make(chan *rawBenchConn)
		var bw sync.WaitGroup
		for range 8 {
			bw.Go(func() {
				for c := range ch {
					c.mu.Lock()
					c.ws.WriteMessage(websocket.BinaryMessage, r.ann)
					c.mu.Unlock()
				}
			})
		}
		for _, c := range r.srv {
			ch <- c
		}
		close(ch)
		bw.Wait()
	}()
	var announced, start sync.WaitGroup
	announced.Add(len(r.conns))
	start.Add(1)
	var wg sync.WaitGroup
	for k, c := range r.conns {
		wg.Go(func() {
			c.ReadMessage()
			announced.Done()
			start.Wait()
			c.WriteMessage(websocket.BinaryMessage, ci)
			c.ReadMessage()
			for _, f := range frames[k] {
				setRound(f, round)
				c.WriteMessage(websocket.BinaryMessage, f)
				c.ReadMessage()
			}
		})
	}
	announced.Wait()
	t1 := time.Now()
	time.Sleep(open)
	t2 := time.Now()
	start.Done()
	wg.Wait()
	<-r.done
	t3 := time.Now()
	return t1.Sub(t0) + t3.Sub(t2), t1.Sub(t0)
}
