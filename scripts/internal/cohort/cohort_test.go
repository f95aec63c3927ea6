package cohort

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/blanket-fl/blanket/shared/client"
	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/envelope/envelopetest"
	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/task"
	"github.com/blanket-fl/blanket/shared/wire"
)

// wsRelay is a minimal relay for tests: it accepts websocket clients,
// broadcasts frames to them, records their CheckIn and Report frames and
// acks every report. restart drops every connection, like a relay restart.
type wsRelay struct {
	t      *testing.T
	url    string
	mu     sync.Mutex
	conns  map[*websocket.Conn]*sync.Mutex
	total  int // connections ever accepted
	frames chan []byte
}

func newRelay(t *testing.T) *wsRelay {
	r := &wsRelay{t: t, conns: map[*websocket.Conn]*sync.Mutex{}, frames: make(chan []byte, 1024)}
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		c, err := up.Upgrade(w, req, nil)
		if err != nil {
			return
		}
		wmu := &sync.Mutex{}
		r.mu.Lock()
		r.conns[c] = wmu
		r.total++
		r.mu.Unlock()
		defer func() {
			r.mu.Lock()
			delete(r.conns, c)
			r.mu.Unlock()
			c.Close()
		}()
		for {
			_, b, err := c.ReadMessage()
			if err != nil {
				return
			}
			r.frames <- b
			if typ, _ := wire.PeekType(b); typ == wire.TypeReport {
				ack, _ := (&wire.Ack{Round: 0, Status: wire.AckAccepted, Received: 1}).MarshalBinary()
				// The round of the ack is the report's (bytes 2..10).
				copy(ack[2:10], b[2:10])
				wmu.Lock()
				c.WriteMessage(websocket.BinaryMessage, ack)
				wmu.Unlock()
			}
		}
	}))
	t.Cleanup(srv.Close)
	r.url = "ws" + strings.TrimPrefix(srv.URL, "http")
	return r
}

// waitConns waits until n connections are open and total have ever been
// accepted.
func (r *wsRelay) waitConns(n, total int) {
	r.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r.mu.Lock()
		k, tot := len(r.conns), r.total
		r.mu.Unlock()
		if k == n && tot == total {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%d connections (%d ever), want %d (%d)", k, tot, n, total)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (r *wsRelay) broadcast(f []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for c, wmu := range r.conns {
		wmu.Lock()
		c.WriteMessage(websocket.BinaryMessage, f)
		wmu.Unlock()
	}
}

func (r *wsRelay) restart() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for c := range r.conns {
		c.Close()
	}
}

// collect reads frames until n CheckIns and n*m Reports have arrived and
// checks that all are for round, open with k, and are equally sized.
func (r *wsRelay) collect(k *envelopetest.Key, round uint64, p wire.Params, n int) {
	r.t.Helper()
	checkIns, reports := 0, 0
	timeout := time.After(30 * time.Second)
	for checkIns < n || reports < n*p.Messages() {
		select {
		case f := <-r.frames:
			typ, err := wire.PeekType(f)
			if err != nil {
				r.t.Fatal(err)
			}
			switch typ {
			case wire.TypeCheckIn:
				ci, err := wire.ParseCheckIn(f)
				if err != nil || ci.Round != round {
					r.t.Fatalf("check-in %+v (%v), want round %d", ci, err, round)
				}
				checkIns++
			case wire.TypeReport:
				rep, err := wire.ParseReport(f, p)
				if err != nil || rep.Round != round {
					r.t.Fatalf("report for round %d (%v), want round %d", rep.Round, err, round)
				}
				if _, err := k.OpenValues(round, rep.Sealed, make([]float64, p.Width)); err != nil {
					r.t.Fatalf("open: %v", err)
				}
				reports++
			default:
				r.t.Fatalf("unexpected %v frame", typ)
			}
		case <-timeout:
			r.t.Fatalf("round %d: %d check-ins and %d reports, want %d and %d", round, checkIns, reports, n, n*p.Messages())
		}
	}
	if checkIns > n || reports > n*p.Messages() {
		r.t.Fatalf("round %d: too many frames", round)
	}
}

func signedAnnouncement(t *testing.T, k *envelopetest.Key, round uint64, p wire.Params) []byte {
	t.Helper()
	a := &wire.Announcement{Round: round, Deadline: time.Now().Add(time.Minute + time.Duration(round)*time.Millisecond), Params: p, // later for each round, as the aggregator's
		HPKEPub: k.Public().HPKE, Model: make([]float64, p.D)}
	if err := a.Sign(k); err != nil {
		t.Fatal(err)
	}
	b, err := a.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCohortAgainstRelay runs 4 volunteers on real websockets against the
// test relay: round 1 gets one report from each; the relay then restarts,
// every volunteer reconnects, the resent round 1 is ignored and round 2 gets
// one report from each.
func TestCohortAgainstRelay(t *testing.T) {
	const n = 4
	k, err := envelopetest.DeriveKey([32]byte{7})
	if err != nil {
		t.Fatal(err)
	}
	p := wire.Params{Protocol: wire.ProtocolSSDouble, Randomizer: wire.RandomizerLaplace,
		D: uint32(digitsD(t)), K: 50, L: 1, Width: 1, NP: 10, MinBatch: 1, EpsL: 1, Clip: 0.1, CheckInP: 1}
	relay := newRelay(t)
	var out bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		sums []RoundSummary
		err  error
	}
	done := make(chan result, 1)
	go func() {
		s, err := Run(ctx, Config{
			Relay: relay.url, Key: k.Public(), Clients: n, PerUser: 10, Seed: 3, SeededNoise: true,
			Consent: task.ConsentTextHash("the cohort test's consent text"), // the test relay serves no task
			Train:   logreg.FLAMEConfig(2, 0.1),
			Backoff: client.Backoff{Initial: time.Millisecond, Max: 20 * time.Millisecond},
			Out:     &out,
		})
		done <- result{s, err}
	}()
	relay.waitConns(n, n)
	a1 := signedAnnouncement(t, k, 1, p)
	relay.broadcast(a1)
	relay.collect(k, 1, p, n)

	relay.restart()
	relay.waitConns(n, 2*n)
	relay.broadcast(a1)
	relay.broadcast(signedAnnouncement(t, k, 2, p))
	relay.collect(k, 2, p, n)
	time.Sleep(50 * time.Millisecond) // let the last acks arrive
	cancel()
	var res result
	select {
	case res = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("cohort did not stop")
	}
	if res.err != nil {
		t.Fatal(res.err)
	}
	if len(res.sums) != 2 {
		t.Fatalf("summaries %+v, want rounds 1 and 2", res.sums)
	}
	for i, s := range res.sums {
		if s.Round != uint64(i+1) || s.Announced != n || s.CheckedIn != n || s.Reports != n ||
			s.Messages != n*p.Messages() || s.Bytes != n*p.Messages()*p.ReportFrameSize() || s.MaxEpsilon != float64(i+1)*p.EpsL {
			t.Errorf("round %d summary %+v", i+1, s)
		}
	}
	if got := strings.Count(out.String(), "\n"); got != 2 || !strings.HasPrefix(out.String(), "round 1: announced to 4, joined 4") {
		t.Errorf("output %q, want two summary lines", out.String())
	}
}

func TestFetchKey(t *testing.T) {
	k, _ := envelopetest.DeriveKey([32]byte{1})
	body, err := json.Marshal(k.Public())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/key" {
			http.NotFound(w, r)
			return
		}
		w.Write(body)
	}))
	defer srv.Close()
	ctx := context.Background()
	got, err := FetchKey(ctx, nil, srv.URL+"/", "")
	if err != nil || !got.Equal(k.Public()) {
		t.Fatalf("FetchKey: %v", err)
	}
	if _, err := FetchKey(ctx, nil, srv.URL, strings.ToUpper(k.Public().Fingerprint())); err != nil {
		t.Fatalf("matching pin refused: %v", err)
	}
	other, _ := envelopetest.DeriveKey([32]byte{2})
	if _, err := FetchKey(ctx, nil, srv.URL, other.Public().Fingerprint()); err == nil {
		t.Fatal("a key with another fingerprint was accepted")
	}
	if _, err := FetchKey(ctx, nil, srv.URL+"/nothing", ""); err == nil {
		t.Fatal("HTTP 404 accepted")
	}
}

func TestConfigValidated(t *testing.T) {
	k, _ := envelopetest.DeriveKey([32]byte{1})
	good := Config{Relay: "ws://x", Key: k.Public(), Clients: 2, PerUser: 3}
	for name, mut := range map[string]func(*Config){
		"no relay":   func(c *Config) { c.Relay = "" },
		"no key":     func(c *Config) { c.Key = envelope.PublicKey{} },
		"no clients": func(c *Config) { c.Clients = 0 },
		"no data":    func(c *Config) { c.PerUser = -1 },
		"too many":   func(c *Config) { c.Clients, c.PerUser = 9000, 1 },
		"shares":     func(c *Config) { c.Shares = make([]logreg.Dataset, 3) }, // 3 shares for 2 clients
	} {
		cfg := good
		mut(&cfg)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := Run(ctx, cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestReportCost: a volunteer's rehearsed report at make run's secure
// summation size takes a positive time and sends nothing.
func TestReportCost(t *testing.T) {
	p, _, err := roundspec.Build(digitsD(t), 400, roundspec.Options{Protocol: wire.ProtocolSecAgg, Sigma: 100, MinBatch: 1})
	if err != nil {
		t.Fatal(err)
	}
	d, err := ReportCost(t.Context(), Config{PerUser: 20, Seed: 1}, p)
	if err != nil || d <= 0 {
		t.Fatalf("report cost %v (%v)", d, err)
	}
	t.Logf("one secure-summation report: %v", d)
}

// digitsD is the built-in digits task's d: the model LoadShares's shares
// train (its feature map's features).
func digitsD(tb testing.TB) int {
	tb.Helper()
	tk, err := task.Digits()
	if err != nil {
		tb.Fatal(err)
	}
	return tk.D()
}
