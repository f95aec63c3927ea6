package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/accounting"
	"github.com/blanket-fl/blanket/aggregator/internal/api"
	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/aggregator/internal/rounds"
	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/wire"
)

const testToken = "test-token-0123456789abcdef"

// Test configuration: a logistic regression of 3 features and 2 classes
// (d = 8), SS-Topk with k = 2, l = 2, width 2 (2 messages per client),
// n_p = 4: a batch has d*n_p/width = 16 messages, room for 8 clients.
func testParams() wire.Params {
	return wire.Params{Protocol: wire.ProtocolSSTopk, Randomizer: wire.RandomizerLaplace, D: 8, K: 2, L: 2, Width: 1,
		NP: 4, MinBatch: 2, EpsL: 2, Clip: 0.5, CheckInP: 1}
}

func testSet(t testing.TB) logreg.Dataset {
	t.Helper()
	x := []float32{1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 0, -1, 0, 1, 0, -1, -1}
	y := []uint8{0, 1, 1, 0, 1, 0}
	ds, err := logreg.NewDataset(logreg.Shape{Features: 3, Classes: 2}, x, y)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// fakeAccountant composes by a rule the tests control: the "sum" row is
// sum over releases of per(r), the tightest valid row; a caveated row at
// half of it and an inapplicable row exercise the API's row conversion.
func fakeAccountant(per func(privacy.Release) float64) accounting.Accountant {
	return func(rs []privacy.Release, delta float64) (privacy.Report, error) {
		var eps float64
		for _, r := range rs {
			eps += per(r)
		}
		return privacy.Report{Delta: delta, Rounds: len(rs), Tightest: 0, TightestAny: 1, Rows: []privacy.AccountRow{
			{Bound: privacy.Bound{Method: "sum", Epsilon: eps, Delta: delta, Valid: true}},
			{Bound: privacy.Bound{Method: "caveated", Epsilon: eps / 2, Delta: delta, Valid: true}, Caveat: "not re-derived"},
			{Bound: privacy.Bound{Method: "inapplicable", Epsilon: math.NaN(), Delta: math.NaN(), Reason: "no"}},
		}}, nil
	}
}

// fakeRelay records the announcements it receives (after checking the
// token and the signature).
type fakeRelay struct {
	t     testing.TB
	srv   *httptest.Server
	pub   *envelope.PublicKey
	mu    sync.Mutex
	anns  []*wire.Announcement
	ch    chan *wire.Announcement
	fails int // answer 503 to this many requests first
	// conflicts: answer 409 without an outcome (a round still open) to
	// this many requests first.
	conflicts int
	down      bool // GET /healthz answers 503 (the relay unreachable)
	// refuse, when set, is the outcome of a 409 answer to every
	// announcement (as the relay's writeOutcome), with detail.
	refuse, detail string
	posts          int         // announcements posted
	targets        [][2]string // their target headers (epsilon, delta)
}

// setDown makes GET /healthz answer 503 (down) or 200.
func (f *fakeRelay) setDown(down bool) {
	f.mu.Lock()
	f.down = down
	f.mu.Unlock()
}

// healthz answers GET /healthz as the relay does, 503 while it is down.
func (f *fakeRelay) healthz(w http.ResponseWriter) {
	f.mu.Lock()
	down := f.down
	f.mu.Unlock()
	if down {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}
}

func newFakeRelay(t testing.TB) *fakeRelay {
	f := &fakeRelay{t: t, ch: make(chan *wire.Announcement, 64)}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" { // the aggregator's waitRound asks
			f.healthz(w)
			return
		}
		if r.URL.Path != "/v1/rounds" || r.Header.Get("Authorization") != "Bearer "+testToken {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		f.mu.Lock()
		f.posts++
		f.targets = append(f.targets, [2]string{r.Header.Get(wire.TargetEpsilonHeader), r.Header.Get(wire.TargetDeltaHeader)})
		if f.refuse != "" {
			out, detail := f.refuse, f.detail
			f.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set(api.OutcomeHeader, out)
			w.WriteHeader(http.StatusConflict)
			json.NewEncoder(w).Encode(map[string]any{"outcome": out, "detail": detail})
			return
		}
		if f.conflicts > 0 {
			f.conflicts--
			f.mu.Unlock()
			http.Error(w, "round: a round is still open: round 7", http.StatusConflict)
			return
		}
		if f.fails > 0 {
			f.fails--
			f.mu.Unlock()
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		pub := f.pub
		f.mu.Unlock()
		b, _ := io.ReadAll(r.Body)
		a, err := wire.ParseAnnouncement(b, wire.Limits{})
		if err != nil {
			f.t.Errorf("relay: bad announcement: %v", err)
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		if pub != nil {
			if err := a.Verify(*pub); err != nil {
				f.t.Errorf("relay: announcement signature: %v", err)
			}
		}
		f.mu.Lock()
		f.anns = append(f.anns, a)
		f.mu.Unlock()
		f.ch <- a
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// next waits for the next announcement.
func (f *fakeRelay) next(t testing.TB) *wire.Announcement {
	t.Helper()
	select {
	case a := <-f.ch:
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("no announcement within 10 s")
		return nil
	}
}

// none checks that no announcement arrives within d.
func (f *fakeRelay) none(t testing.TB, d time.Duration) {
	t.Helper()
	select {
	case a := <-f.ch:
		t.Fatalf("unexpected announcement of round %d", a.Round)
	case <-time.After(d):
	}
}

type harness struct {
	t      *testing.T
	dir    string
	cfg    Config
	relay  *fakeRelay
	srv    *Server
	http   *httptest.Server
	cancel context.CancelFunc
	done   chan error
}

func newHarness(t *testing.T, dir string, relay *fakeRelay, mod func(*Config)) *harness {
	t.Helper()
	cfg := Config{
		Params: testParams(), RelayURL: relay.srv.URL, Token: testToken, StateDir: dir,
		RoundTimeout: 10 * time.Second, BatchGrace: 10 * time.Second, RetryInterval: 20 * time.Millisecond,
		TargetEpsilon: 100, TargetDelta: 1e-5, ServerLR: 2, Test: testSet(t), Workers: 2,
		Accountant: fakeAccountant(func(privacy.Release) float64 { return 1 }),
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if testing.Verbose() {
		cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	}
	if mod != nil {
		mod(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pub := srv.PublicKey()
	relay.mu.Lock()
	relay.pub = &pub
	relay.mu.Unlock()
	h := &harness{t: t, dir: dir, cfg: cfg, relay: relay, srv: srv, http: httptest.NewServer(srv.Handler()), done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- srv.Run(ctx) }()
	t.Cleanup(h.stop)
	return h
}

// stop cancels the round loop, waits for it, and closes everything.
func (h *harness) stop() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	h.cancel = nil
	select {
	case err := <-h.done:
		if err != nil {
			h.t.Errorf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		h.t.Error("Run did not return after cancel")
	}
	h.http.Close()
	if err := h.srv.Close(); err != nil {
		h.t.Error(err)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

// batchSpec describes a test batch: messages cover dimension pairs (0,1),
// (2,3), ... n_p times; value(i, t) gives entry t of message i.
type batchSpec struct {
	round   uint64
	reports uint32
	value   func(i, t int) float64
	tamper  map[int]bool // messages whose sealed bytes are flipped
	// np is the batch's n_p (0: the announced p.NP), as a relay that
	// raised it (SS-Simple, APES, S-APES) sends it.
	np uint32
}

func makeBatch(t testing.TB, pub envelope.PublicKey, p wire.Params, s batchSpec) []byte {
	t.Helper()
	w := int(p.Width)
	np := p.NP
	if s.np != 0 {
		np = s.np
	}
	n := p.BatchMessages(np)
	b := wire.Batch{Round: s.round, D: p.Columns(), Width: p.Width, NP: np, Reports: s.reports, CheckedIn: s.reports + 1,
		Population: s.reports + 3}
	perRound := int(p.Columns()) / w
	for i := range n {
		idx := make([]uint32, w)
		vals := make([]float64, w)
		for t := range w {
			idx[t] = uint32((i%perRound)*w + t)
			vals[t] = s.value(i, t)
		}
		sealed, err := envelope.SealValues(pub.HPKE, s.round, vals)
		if err != nil {
			t.Fatal(err)
		}
		if s.tamper[i] {
			sealed[len(sealed)-1] ^= 1
		}
		b.Messages = append(b.Messages, wire.BatchMessage{Indices: idx, Sealed: sealed})
	}
	frame, err := b.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return frame
}

// post sends a body with the token and returns the status code and body.
func post(t testing.TB, url, token string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

func (h *harness) sendBatch(frame []byte) *wire.BatchReply {
	h.t.Helper()
	r, _ := h.sendBatchOutcome(frame)
	return r
}

// sendBatchOutcome posts a batch and returns the reply and the outcome,
// checking that the status code and the outcome header agree.
func (h *harness) sendBatchOutcome(frame []byte) (*wire.BatchReply, api.Intake) {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.http.URL+"/v1/batch", bytes.NewReader(frame))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	in := api.Intake(resp.Header.Get(api.OutcomeHeader))
	switch in {
	case api.IntakeAccepted, api.IntakeDuplicate, api.IntakeObsolete, api.IntakeInvalid:
	default:
		h.t.Fatalf("batch: HTTP %d, outcome %q: %s", resp.StatusCode, in, body)
	}
	if resp.StatusCode != api.HTTPStatus(in) {
		h.t.Fatalf("batch: HTTP %d for outcome %s", resp.StatusCode, in)
	}
	r, err := wire.ParseBatchReply(body)
	if err != nil {
		h.t.Fatal(err)
	}
	return r, in
}

func constValue(v float64) func(int, int) float64 { return func(int, int) float64 { return v } }

// waitAnnounced waits until the server knows the relay accepted the
// announcement of round.
func (h *harness) waitAnnounced(round int) {
	h.t.Helper()
	for range 1000 {
		var ok bool
		h.srv.View(func(st *checkpoint.State, _ rounds.Control) {
			ok = st.Open != nil && st.Open.Round == round && st.Open.Announced
		})
		if ok {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.t.Fatalf("round %d not marked announced", round)
}

// loadCheckpoint reads the checkpoint from a stopped server's datastore.
func loadCheckpoint(t *testing.T, dir string) *checkpoint.State {
	t.Helper()
	db, err := datastore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st, err := rounds.NewDBStore(db).LoadState()
	if err != nil || st == nil {
		t.Fatalf("no checkpoint in %s: %v", dir, err)
	}
	return st
}

// saveCheckpoint replaces the checkpoint in a stopped server's datastore.
func saveCheckpoint(t *testing.T, dir string, st *checkpoint.State) {
	t.Helper()
	db, err := datastore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := rounds.NewDBStore(db).SaveState(st); err != nil {
		t.Fatal(err)
	}
}
