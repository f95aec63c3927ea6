package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/blanket-fl/blanket/relay/internal/outbox"
	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/envelope/envelopetest"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/wire"
)

// Loopback load benchmarks: a relay on a real 127.0.0.1 listener and N
// websocket clients in a child process (this test binary re-executed with
// BLANKET_LOAD_CHILD=1, see TestLoadClientChild), so the relay process's
// memory is the relay's alone and each process needs only N + loadFDMargin
// file descriptors (N connections on both ends in one process would need
// 2N + margin, above this machine's hard limit of 20,000 for N = 10,000).
//
//	go test -run XXX -bench 'IdleConnMemory|Loopback' -benchtime 1x ./relay/internal/server
//
// BLANKET_LOAD_N overrides N (default 2,000 idle, 10,000 for the round).

const loadFDMargin = 256

// raiseNoFile raises the soft RLIMIT_NOFILE to at least want (up to the
// hard limit) and reports whether it got there.
func raiseNoFile(want uint64) (uint64, bool) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, false
	}
	if lim.Cur >= want {
		return lim.Cur, true
	}
	lim.Cur = min(want, lim.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, false
	}
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	return lim.Cur, lim.Cur >= want
}

func loadN(def int) int {
	if n, err := strconv.Atoi(os.Getenv("BLANKET_LOAD_N")); err == nil && n > 0 {
		return n
	}
	return def
}

// loadParams are benchParams scaled to n clients: K = 10 Reports of Width
// 1 per client over D = 100, quota n, and n_p 10% above the expected
// n*K/D real entries per dimension.
func loadParams(n int) wire.Params {
	p := benchParams()
	p.Quota = uint32(n)
	p.NP = uint32(max(2, (11*n*int(p.K)+10*int(p.D)-1)/(10*int(p.D))))
	return p
}

// loopbackRelay is a relay on 127.0.0.1 with a fake aggregator.
type loopbackRelay struct {
	srv   *Server
	hs    *httptest.Server
	agg   *httptest.Server
	got   chan []byte
	key   *envelopetest.Key
	stop  func()
	wsURL string
}

func newLoopbackRelay(tb testing.TB) *loopbackRelay {
	key, _ := envelopetest.DeriveKey([32]byte{5})
	r := &loopbackRelay{key: key, got: make(chan []byte, 4)}
	r.agg = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		if req.URL.Path == "/v1/batch" {
			rep := wire.BatchReply{Round: binary.BigEndian.Uint64(body[2:10])}
			out, _ := rep.MarshalBinary()
			w.Write(out)
		}
		r.got <- body
	}))
	ob, err := outbox.Open(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	r.srv, err = New(Config{Aggregator: r.agg.URL, Token: testToken, Outbox: ob, HelperKey: testHelperKey(tb),
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	r.hs = httptest.NewServer(r.srv.Handler())
	r.wsURL = "ws" + strings.TrimPrefix(r.hs.URL, "http") + "/ws"
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.srv.Run(ctx); close(done) }()
	r.stop = func() { cancel(); <-done; r.hs.Close(); r.agg.Close() }
	return r
}

func (r *loopbackRelay) announce(tb testing.TB, round uint64, p wire.Params) {
	a := wire.Announcement{Round: round, Deadline: time.Now().Add(10 * time.Minute), Params: p,
		HPKEPub: r.key.Public().HPKE, Model: make([]float64, p.D)}
	if err := a.Sign(r.key); err != nil {
		tb.Fatal(err)
	}
	ann, _ := a.MarshalBinary()
	req, _ := http.NewRequest(http.MethodPost, r.hs.URL+"/v1/rounds", bytesReader(ann))
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		tb.Fatalf("announce: %v %v", err, resp)
	}
	resp.Body.Close()
}

// loadChild is the client process.
type loadChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
}

func startLoadChild(tb testing.TB, url string, n int, mode string) *loadChild {
	cmd := exec.Command(os.Args[0], "-test.run=^TestLoadClientChild$", "-test.v")
	cmd.Env = append(os.Environ(), "BLANKET_LOAD_CHILD=1", "BLANKET_LOAD_URL="+url,
		"BLANKET_LOAD_N="+strconv.Itoa(n), "BLANKET_LOAD_MODE="+mode)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	return &loadChild{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
}

// expect waits for a line starting with "LOAD " and returns the rest.
func (c *loadChild) expect(tb testing.TB) string {
	for c.out.Scan() {
		if l, ok := strings.CutPrefix(c.out.Text(), "LOAD "); ok {
			if strings.HasPrefix(l, "error") {
				tb.Fatalf("client process: %s", l)
			}
			return l
		}
	}
	tb.Fatalf("client process ended: %v", c.out.Err())
	return ""
}

func (c *loadChild) close() {
	c.stdin.Close()
	c.cmd.Wait()
}

// TestLoadClientChild is the client process of the loopback benchmarks;
// it is skipped unless the benchmark started it.
func TestLoadClientChild(t *testing.T) {
	if os.Getenv("BLANKET_LOAD_CHILD") != "1" {
		t.Skip("client process of the loopback load benchmarks only")
	}
	fail := func(err error) { fmt.Printf("LOAD error %v\n", err); os.Exit(1) }
	n := loadN(0)
	url, mode := os.Getenv("BLANKET_LOAD_URL"), os.Getenv("BLANKET_LOAD_MODE")
	if _, ok := raiseNoFile(uint64(n + loadFDMargin)); !ok {
		fail(fmt.Errorf("cannot raise RLIMIT_NOFILE to %d", n+loadFDMargin))
	}
	d := websocket.Dialer{ReadBufferSize: 512, WriteBufferSize: 512, HandshakeTimeout: time.Minute}
	conns := make([]*websocket.Conn, n)
	var wg sync.WaitGroup
	var errOnce sync.Once
	var dialErr error
	next := make(chan int)
	for range 32 {
		wg.Go(func() {
			for i := range next {
				c, _, err := d.Dial(url, nil)
				if err != nil {
					errOnce.Do(func() { dialErr = err })
					continue
				}
				conns[i] = c
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if dialErr != nil {
		fail(dialErr)
	}
	fmt.Println("LOAD connected")
	if mode == "round" {
		var sealOnce sync.Once
		var sealed []byte
		var rwg sync.WaitGroup
		for i, c := range conns {
			rwg.Go(func() {
				_, b, err := c.ReadMessage()
				if err != nil {
					fail(err)
				}
				a, err := wire.ParseAnnouncement(b, wire.DefaultLimits())
				if err != nil {
					fail(err)
				}
				sealOnce.Do(func() { sealed, err = envelope.SealValues(a.HPKEPub, a.Round, make([]float64, a.Params.Width)) })
				if err != nil {
					fail(err)
				}
				c.WriteMessage(websocket.BinaryMessage, checkIn(a.Round))
				if _, _, err := c.ReadMessage(); err != nil {
					fail(err)
				}
				perm := make([]uint32, a.Params.D)
				for j := range perm {
					perm[j] = uint32(j)
				}
				src := noise.NewSeeded(uint64(i))
				noise.Shuffle(src, len(perm), func(x, y int) { perm[x], perm[y] = perm[y], perm[x] })
				m := a.Params.Messages()
				w := int(a.Params.Width)
				for s := range m {
					// One seal, its encapsulated key stamped per round,
					// client and message: the relay sees no replay.
					sl := stamp(sealed, uint64(i), uint64(s))
					binary.BigEndian.PutUint64(sl, a.Round)
					r := wire.Report{Round: a.Round, Seq: uint16(s), Count: uint16(m), Indices: perm[s*w : (s+1)*w], Sealed: sl}
					f, err := r.MarshalBinary()
					if err != nil {
						fail(err)
					}
					c.WriteMessage(websocket.BinaryMessage, f)
					if _, _, err := c.ReadMessage(); err != nil {
						fail(err)
					}
				}
			})
		}
		rwg.Wait()
		fmt.Println("LOAD reported")
	}
	io.Copy(io.Discard, os.Stdin) // hold the connections until the parent is done
	for _, c := range conns {
		c.Close()
	}
}

// heapStacks returns live heap plus goroutine stack bytes after a GC.
func heapStacks() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc + m.StackInuse
}

func waitConns(tb testing.TB, s *Server, n int) {
	deadline := time.Now().Add(2 * time.Minute)
	for s.Metrics().Connections != int64(n) {
		if time.Now().After(deadline) {
			tb.Fatalf("%d of %d connections after 2 minutes", s.Metrics().Connections, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// BenchmarkIdleConnMemory measures the relay's memory per idle client
// connection (target <= 12 KiB): live heap plus goroutine stacks after a
// GC, with N connections open and idle, minus the same before they were
// opened, over N. Connections are real loopback TCP; the clients live in a
// child process. Metrics: B/conn (heap+stacks), heap-B/conn,
// stack-B/conn, goroutines/conn.
func BenchmarkIdleConnMemory(b *testing.B) {
	n := loadN(2000)
	if _, ok := raiseNoFile(uint64(n + loadFDMargin)); !ok {
		b.Skipf("cannot raise RLIMIT_NOFILE to %d (N=%d connections + margin)", n+loadFDMargin, n)
	}
	for i := 0; i < b.N; i++ {
		r := newLoopbackRelay(b)
		g0 := runtime.NumGoroutine()
		var m0, m1 runtime.MemStats
		heapStacks()
		runtime.ReadMemStats(&m0)
		child := startLoadChild(b, r.wsURL, n, "idle")
		child.expect(b)
		waitConns(b, r.srv, n)
		time.Sleep(300 * time.Millisecond) // handshakes settle, handlers block in NextReader
		heapStacks()
		runtime.ReadMemStats(&m1)
		g1 := runtime.NumGoroutine()
		if f := os.Getenv("BLANKET_LOAD_HEAPPROFILE"); f != "" {
			if w, err := os.Create(f); err == nil {
				pprof.WriteHeapProfile(w)
				w.Close()
			}
		}
		child.close()
		r.stop()
		heap := float64(m1.HeapAlloc) - float64(m0.HeapAlloc)
		stack := float64(m1.StackInuse) - float64(m0.StackInuse)
		b.ReportMetric((heap+stack)/float64(n), "B/conn")
		b.ReportMetric(heap/float64(n), "heap-B/conn")
		b.ReportMetric(stack/float64(n), "stack-B/conn")
		b.ReportMetric(float64(g1-g0)/float64(n), "goroutines/conn")
	}
}

// BenchmarkLoopback10k connects N = 10,000 clients (child process) to a
// relay over loopback TCP and runs one round in which all of them check in
// and report (loadParams: D = 100, Width = K = 10, quota N, n_p 10% above
// the expected counts): round-s is announce to batch received by the
// aggregator, connect-s the time to open the N connections, idle-MiB and
// round-MiB the relay process's heap+stacks with N idle connections and
// right after the batch is forwarded, sys-MiB the memory obtained from the
// OS.
func BenchmarkLoopback10k(b *testing.B) {
	n := loadN(10000)
	if _, ok := raiseNoFile(uint64(n + loadFDMargin)); !ok {
		b.Skipf("cannot raise RLIMIT_NOFILE to %d (N=%d connections + margin)", n+loadFDMargin, n)
	}
	p := loadParams(n)
	for i := 0; i < b.N; i++ {
		r := newLoopbackRelay(b)
		base := heapStacks()
		t0 := time.Now()
		child := startLoadChild(b, r.wsURL, n, "round")
		child.expect(b)
		waitConns(b, r.srv, n)
		connect := time.Since(t0)
		idle := heapStacks()
		t1 := time.Now()
		r.announce(b, 1, p)
		body := <-r.got
		round := time.Since(t1)
		child.expect(b)
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		after := ms.HeapAlloc + ms.StackInuse
		batch, err := wire.ParseBatch(body, p)
		if err != nil {
			b.Fatalf("batch: %v", err)
		}
		if int(batch.Reports) != n {
			b.Fatalf("%d reports in the batch, want %d", batch.Reports, n)
		}
		child.close()
		r.stop()
		b.ReportMetric(round.Seconds(), "round-s")
		b.ReportMetric(connect.Seconds(), "connect-s")
		b.ReportMetric(float64(idle-base)/(1<<20), "idle-MiB")
		b.ReportMetric(float64(after-base)/(1<<20), "round-MiB")
		b.ReportMetric(float64(ms.Sys)/(1<<20), "sys-MiB")
		b.Logf("N=%d: connect %v, round %v (%d messages, %d dummies by n_p=%d), idle %.0f B/conn",
			n, connect, round, len(batch.Messages), len(batch.Messages)-n*p.Messages(), batch.NP, float64(idle-base)/float64(n))
	}
}
