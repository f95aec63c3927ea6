package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"github.com/blanket-fl/blanket/relay/internal/sumrelay"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/blanket-fl/blanket/relay/internal/helperkey"
	"github.com/blanket-fl/blanket/relay/internal/intake"
	"github.com/blanket-fl/blanket/relay/internal/outbox"
	"github.com/blanket-fl/blanket/relay/internal/round"
	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/envelope/envelopetest"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/secagg"
	"github.com/blanket-fl/blanket/shared/wire"
)

// Benchmarks of one round with benchClients clients over net.Pipe
// connections (10,000 TCP connections on both ends exceed this machine's
// 20,000 file descriptors; both benchmarks use the same transport, so
// their ratio is the relay's overhead):
//
//   - BenchmarkRoundRelay: announce, every client checks in and sends its
//     report (each frame acked), the quota closes the round, the relay pads
//     (sealing the dummies), shuffles, persists (fsync) and forwards the
//     batch to a fake aggregator.
//   - BenchmarkRoundRawIngest: the same websocket traffic with a bare
//     gorilla server: it writes the same announcement bytes to every
//     client, reads the same CheckIn and Report frames (same read limit,
//     same buffers) and answers each with a fixed 13-byte frame, as the
//     relay's Acks; no parsing, no state, no padding, no forwarding.
//
// Parameters: ss-double, D = 100, K = 10, Width = 1 (ten Reports per
// client: the only layout the shuffler pads), n_p = 1100 (10% above the
// expected 1000 real entries per dimension, so about 10,000 dummy messages
// are sealed per round).
const benchClients = 10000

func benchParams() wire.Params {
	return wire.Params{Protocol: wire.ProtocolSSDouble, Randomizer: wire.RandomizerLaplace,
		D: 100, K: 10, L: 1, Width: 1, NP: 1100, MinBatch: 1, Quota: benchClients,
		EpsL: 1, Clip: 1, CheckInP: 1}
}

// benchFrames returns each client's report frames (round field patched
// per iteration), with indices drawn uniformly without replacement. One
// seal serves every frame: its encapsulated key is stamped with the
// client, the message and (setRound) the round, so the relay sees no
// replay (it never opens a value).
func benchFrames(b *testing.B, pub [32]byte) [][][]byte {
	p := benchParams()
	src := noise.NewSeeded(1)
	sealed, err := envelope.SealValues(pub, 1, make([]float64, p.Width))
	if err != nil {
		b.Fatal(err)
	}
	out := make([][][]byte, benchClients)
	for i := range out {
		perm := make([]uint32, p.D)
		for j := range perm {
			perm[j] = uint32(j)
		}
		noise.Shuffle(src, len(perm), func(a, c int) { perm[a], perm[c] = perm[c], perm[a] })
		m, w := p.Messages(), int(p.Width)
		for s := range m {
			r := wire.Report{Round: 1, Seq: uint16(s), Count: uint16(m), Indices: perm[s*w : (s+1)*w], Sealed: stamp(sealed, uint64(i), uint64(s))}
			f, err := r.MarshalBinary()
			if err != nil {
				b.Fatal(err)
			}
			out[i] = append(out[i], f)
		}
	}
	return out
}

// stamp returns a copy of sealed whose encapsulated key carries a and b
// in bytes 8..24 (bytes 0..8 are left for setRound's round).
func stamp(sealed []byte, a, b uint64) []byte {
	c := bytes.Clone(sealed)
	binary.BigEndian.PutUint64(c[8:16], a)
	binary.BigEndian.PutUint64(c[16:24], b)
	return c
}

// setRound sets a Report frame's round and stamps it into the frame's
// encapsulated key.
func setRound(f []byte, round uint64) {
	binary.BigEndian.PutUint64(f[2:10], round)
	w := (len(f) - 18 - envelope.Overhead) / 12
	binary.BigEndian.PutUint64(f[18+4*w:], round)
}

func dialAll(b *testing.B, l *pipeListener) []*websocket.Conn {
	d := websocket.Dialer{NetDialContext: l.dial}
	conns := make([]*websocket.Conn, benchClients)
	for i := range conns {
		c, _, err := d.Dial("ws://relay/ws", nil)
		if err != nil {
			b.Fatal(err)
		}
		conns[i] = c
	}
	return conns
}

func BenchmarkRoundRelay(b *testing.B) {
	key, _ := envelopetest.DeriveKey([32]byte{3})
	frames := benchFrames(b, key.Public().HPKE)
	got := make(chan struct{}, 1)
	aggL := newPipeListener()
	aggH := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rep := wire.BatchReply{Round: binary.BigEndian.Uint64(body[2:10])}
		out, _ := rep.MarshalBinary()
		w.Write(out)
		got <- struct{}{}
	})}
	go aggH.Serve(aggL)
	defer aggH.Close()
	ob, err := outbox.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	srv, err := New(Config{Aggregator: "http://agg", Token: testToken, Outbox: ob, HelperKey: testHelperKey(b), PingInterval: time.Hour, PongWait: 2 * time.Hour,
		Logger:     slog.New(slog.DiscardHandler),
		HTTPClient: &http.Client{Transport: &http.Transport{DialContext: aggL.dial}}})
	if err != nil {
		b.Fatal(err)
	}
	relayL := newPipeListener()
	relayH := &http.Server{Handler: srv.Handler()}
	go relayH.Serve(relayL)
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { srv.Run(ctx); close(runDone) }()
	defer func() { cancel(); <-runDone; relayH.Close() }()
	conns := dialAll(b, relayL)
	for srv.Metrics().Connections != benchClients {
		time.Sleep(time.Millisecond)
	}
	p := benchParams()
	h := &harness{t: nil, key: key}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		round := uint64(i + 1)
		t0 := time.Now()
		a := wire.Announcement{Round: round, Deadline: time.Now().Add(time.Hour), Params: p,
			HPKEPub: key.Public().HPKE, Model: make([]float64, p.D)}
		a.Sign(key)
		ann, _ := a.MarshalBinary()
		_ = h
		req, _ := http.NewRequest(http.MethodPost, "http://relay/v1/rounds", bytesReader(ann))
		req.Header.Set("Authorization", "Bearer "+testToken)
		hc := &http.Client{Transport: &http.Transport{DialContext: relayL.dial}}
		resp, err := hc.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("announce: %v %v", err, resp)
		}
		resp.Body.Close()
		hc.CloseIdleConnections()
		ci := checkIn(round)
		var wg sync.WaitGroup
		for k, c := range conns {
			wg.Go(func() {
				if _, _, err := c.ReadMessage(); err != nil { // announcement
					b.Error(err)
					return
				}
				c.WriteMessage(websocket.BinaryMessage, ci)
				c.ReadMessage()
				for _, f := range frames[k] {
					setRound(f, round)
					c.WriteMessage(websocket.BinaryMessage, f)
					c.ReadMessage()
				}
			})
		}
		wg.Wait()
		t1 := time.Now()
		<-got
		if i == b.N-1 {
			b.Logf("clients done after %v, batch %v later", t1.Sub(t0), time.Since(t1))
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchClients, "ns/client")
	for _, c := range conns {
		c.Close()
	}
}

func BenchmarkRoundRawIngest(b *testing.B) {
	key, _ := envelopetest.DeriveKey([32]byte{3})
	frames := benchFrames(b, key.Public().HPKE)
	p := benchParams()
	var count atomic.Int64
	done := make(chan struct{}, 1)
	want := int64(benchClients * (1 + p.Messages()))
	up := websocket.Upgrader{ReadBufferSize: 512, WriteBufferSize: 512, WriteBufferPool: &sync.Pool{}}
	l := newPipeListener()
	var connMu sync.Mutex
	type rawConn struct {
		mu sync.Mutex // one writer at a time, as the relay's client.wmu
		ws *websocket.Conn
	}
	var srvConns []*rawConn
	ack, _ := (&wire.Ack{Round: 1}).MarshalBinary()
	a := wire.Announcement{Round: 1, Deadline: time.Now().Add(time.Hour), Params: p,
		HPKEPub: key.Public().HPKE, Model: make([]float64, p.D)}
	a.Sign(key)
	ann, _ := a.MarshalBinary()
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		rc := &rawConn{ws: c}
		connMu.Lock()
		srvConns = append(srvConns, rc)
		connMu.Unlock()
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
			if count.Add(1)%want == 0 {
				done <- struct{}{}
			}
		}
	})}
	go hs.Serve(l)
	defer hs.Close()
	conns := dialAll(b, l)
	for {
		connMu.Lock()
		n := len(srvConns)
		connMu.Unlock()
		if n == benchClients {
			break
		}
		time.Sleep(time.Millisecond)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		round := uint64(i + 1)
		ci := checkIn(round)
		go func() { // broadcast, as the relay does with 8 writers
			ch := make(chan *rawConn)
			var bw sync.WaitGroup
			for range 8 {
				bw.Go(func() {
					for c := range ch {
						c.mu.Lock()
						c.ws.WriteMessage(websocket.BinaryMessage, ann)
						c.mu.Unlock()
					}
				})
			}
			for _, c := range srvConns {
				ch <- c
			}
			close(ch)
			bw.Wait()
		}()
		var wg sync.WaitGroup
		for k, c := range conns {
			wg.Go(func() {
				c.ReadMessage()
				c.WriteMessage(websocket.BinaryMessage, ci)
				c.ReadMessage()
				for _, f := range frames[k] {
					setRound(f, round)
					c.WriteMessage(websocket.BinaryMessage, f)
					c.ReadMessage()
				}
			})
		}
		wg.Wait()
		<-done
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchClients, "ns/client")
	for _, c := range conns {
		c.Close()
	}
}

func bytesReader(b []byte) io.Reader { return &byteReader{b: b} }

type byteReader struct{ b []byte }

func (r *byteReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

// BenchmarkSecAggStream measures the relay's side of a secure-summation
// round on its own: n PINE reports at d = 7850 (the MNIST model) already
// in the round's stream, prepared (helper share opened, PrepInit), posted
// in chunks of 8 to a fake aggregator over loopback TCP (net.Pipe has no
// buffer: 8.6 MB chunks would cost thousands of goroutine hand-offs each)
// and their verdicts
// applied (PrepNext, fold), until the last chunk's answer: the queue a
// relay drains after the close. The fake aggregator answers each chunk
// with the real leader's verdicts, computed before the timer (it parses
// the chunk and its 'P' entries, nothing more), after aggDelay (0: an
// aggregator that costs nothing; 15 ms: roughly its preparation of a chunk
// of 8 on its own cores). Every report carries its own helper share; all
// carry the same sealed leader share (the relay only forwards it).
//
// Each iteration runs the serial stream (runStreamSerial, the relay before
// the pipeline) and the pipelined one (runStream, GOMAXPROCS workers)
// alternately on the same reports, so that both see the same machine; it
// reports, for each, reports/s (wall) and the process's CPU time per
// report (getrusage: the relay's work, the fake aggregator's parsing and
// the GC), the cores it kept busy (CPU time over wall time; on a machine
// shared with other work, the share of the cores it got), and their
// ratios.
//
//	go test -run '^$' -bench SecAggStream -benchtime 3x ./relay/internal/server/
func BenchmarkSecAggStream(b *testing.B) {
	const n, d = 400, 7850
	p := wire.Params{Protocol: wire.ProtocolSecAgg, Randomizer: wire.RandomizerDiscreteGaussian,
		D: d, K: 1, L: 1, Width: 1, Sigma: 20000, Clip: 1, CheckInP: 1, MinBatch: 2, Quota: n}
	spec, err := roundspec.New(p)
	if err != nil {
		b.Fatal(err)
	}
	const num = 1
	sr, err := spec.SecAggRound(num)
	if err != nil {
		b.Fatal(err)
	}
	leaderLen, _, err := spec.SharesSizes()
	if err != nil {
		b.Fatal(err)
	}
	key, _ := envelopetest.DeriveKey([32]byte{3})
	hk := testHelperKey(b)
	vk, err := secagg.DeriveVerifyKey([]byte(testToken), num)
	if err != nil {
		b.Fatal(err)
	}
	leng, err := secagg.NewEngine(sr, true, vk)
	if err != nil {
		b.Fatal(err)
	}
	heng, err := secagg.NewEngine(sr, false, vk)
	if err != nil {
		b.Fatal(err)
	}
	// The reports, and the leader's verdict on each by nonce.
	reps := make([]round.SharesReport, n)
	verdicts := make(map[[16]byte]secagg.Entry, n)
	src := noise.NewSeeded(1)
	x := make([]float64, d)
	for i := range reps {
		for j := range x {
			x[j] = (noise.Uniform(src) - 0.5) * 0.01
		}
		l, h, err := sr.Shard(x, noise.NewSeeded(uint64(i)))
		if err != nil {
			b.Fatal(err)
		}
		if reps[i].Helper, err = envelope.SealShare(hk.Public(), num, envelope.ShareHelper, [32]byte{}, h); err != nil {
			b.Fatal(err)
		}
		if i == 0 {
			if reps[0].Leader, err = envelope.SealShare(key.Public().HPKE, num, envelope.ShareLeader, [32]byte{}, l); err != nil {
				b.Fatal(err)
			}
		}
		reps[i].Leader = reps[0].Leader
		m, out := leng.Decide(leng.PrepInit(l), heng.PrepInit(h).Entry)
		if out == nil {
			b.Fatalf("report %d rejected by the leader: %v", i, m.Reason)
		}
		verdicts[m.Nonce] = m
	}
	for _, delay := range []time.Duration{0, 15 * time.Millisecond} {
		b.Run(fmt.Sprintf("n=%d/d=%d/agg=%v", n, d, delay), func(b *testing.B) {
			benchSecAggStream(b, p, spec, sr, leaderLen, hk, reps, verdicts, delay)
		})
	}
}

func benchSecAggStream(b *testing.B, p wire.Params, spec *roundspec.Spec, sr *secagg.Round, leaderLen int,
	hk *helperkey.Key, reps []round.SharesReport, verdicts map[[16]byte]secagg.Entry, delay time.Duration) {
	aggH := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		c, err := wire.ParseSecAggChunk(body, leaderLen, int(p.Quota))
		var ps []secagg.Entry
		if err == nil {
			ps, err = sr.ParsePrep(c.Prep)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ms := make([]secagg.Entry, len(ps))
		for i, e := range ps {
			ms[i] = verdicts[e.Nonce]
		}
		msg, err := sr.MarshalVerdicts(ms)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		time.Sleep(delay)
		out, _ := (&wire.SecAggPrep{Round: c.Round, Status: wire.BatchStatusOK, Msg: msg}).MarshalBinary()
		w.Write(out)
	}))
	defer aggH.Close()
	ob, err := outbox.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	srv, err := New(Config{Aggregator: aggH.URL, Token: testToken, Outbox: ob, HelperKey: hk,
		Logger: slog.New(slog.DiscardHandler), HTTPClient: aggH.Client()})
	if err != nil {
		b.Fatal(err)
	}
	rd := &round.Round{Num: 1, Params: p, SecAgg: spec}
	run := func(serial bool) (wall, cpu time.Duration) {
		srv.sa.SetKnobs(sumrelay.Knobs{Serial: serial})
		runtime.GC()
		c0, t0 := processCPU(b), time.Now()
		srv.sa.OpenStream(rd)
		st := srv.sa.Take(rd.Num)
		for i := range reps {
			st.Feed(reps[i]) // the channel holds the round's quota
		}
		r := st.End(uint32(len(reps)))
		wall, cpu = time.Since(t0), processCPU(b)-c0
		if r.End != nil || r.SetupErr != nil || int(r.Sent) != len(reps) || r.Accepted != len(reps) || r.Late != 0 {
			b.Fatalf("serial %v: end %v, setup %v, %d sent, %d accepted, %d late", serial, r.End, r.SetupErr, r.Sent, r.Accepted, r.Late)
		}
		return wall, cpu
	}
	var wall, cpu [2]time.Duration // serial, pipelined
	for b.Loop() {
		for i, serial := range []bool{true, false} {
			w, c := run(serial)
			wall[i] += w
			cpu[i] += c
		}
	}
	per := float64(b.N * len(reps))
	rate := func(w time.Duration) float64 { return per / w.Seconds() }
	ms := func(c time.Duration) float64 { return c.Seconds() * 1e3 / per }
	b.ReportMetric(rate(wall[0]), "serial-rep/s")
	b.ReportMetric(rate(wall[1]), "pipe-rep/s")
	b.ReportMetric(ms(cpu[0]), "serial-cpu-ms/rep")
	b.ReportMetric(ms(cpu[1]), "pipe-cpu-ms/rep")
	b.ReportMetric(cpu[0].Seconds()/wall[0].Seconds(), "serial-cores")
	b.ReportMetric(cpu[1].Seconds()/wall[1].Seconds(), "pipe-cores")
	b.ReportMetric(wall[0].Seconds()/wall[1].Seconds(), "wall-speedup")
	b.ReportMetric(cpu[1].Seconds()/cpu[0].Seconds(), "cpu-ratio")
}

// processCPU is the process's user and system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
