package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gorilla/websocket"

	"github.com/blanket-fl/blanket/relay/internal/outbox"
	"github.com/blanket-fl/blanket/shared/dataset"
	"github.com/blanket-fl/blanket/shared/dataset/sample"
	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/envelope/envelopetest"
	"github.com/blanket-fl/blanket/web"
)

// keyAgg is an aggregator that only serves GET /api/key: it fails the
// first fails requests with 503 and records the Authorization headers.
type keyAgg struct {
	mu    sync.Mutex
	key   envelope.PublicKey
	fails int
	reqs  int
	auth  []string
}

func (a *keyAgg) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/api/key" {
		http.NotFound(w, r)
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reqs++
	a.auth = append(a.auth, r.Header.Get("Authorization"))
	if a.fails > 0 {
		a.fails--
		http.Error(w, "starting", http.StatusServiceUnavailable)
		return
	}
	json.NewEncoder(w).Encode(a.key)
}

func (a *keyAgg) setKey(k envelope.PublicKey) {
	a.mu.Lock()
	a.key = k
	a.mu.Unlock()
}

func pubKey(t *testing.T, seed byte) envelope.PublicKey {
	t.Helper()
	k, err := envelopetest.DeriveKey([32]byte{seed})
	if err != nil {
		t.Fatal(err)
	}
	return k.Public()
}

// webRelay is a relay (with Run) and an aggregator on pipes.
type webRelay struct {
	t      *testing.T
	srv    *Server
	relayL *pipeListener
	aggL   *pipeListener
	hs     []*http.Server
	tr     *http.Transport
	hc     *http.Client
	cancel context.CancelFunc
	done   chan error
}

func newWebRelay(t *testing.T, agg http.Handler, wasm *web.WasmModule, refresh time.Duration, opts ...harnessOpt) *webRelay {
	t.Helper()
	ob, err := outbox.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w := &webRelay{t: t, relayL: newPipeListener(), aggL: newPipeListener(), done: make(chan error, 1)}
	w.tr = &http.Transport{DialContext: w.aggL.dial}
	cfg := Config{
		Aggregator: "http://aggregator",
		Token:      testToken,
		Outbox:     ob,
		HelperKey:  testHelperKey(t),
		Logger:     slog.New(slog.DiscardHandler),
		HTTPClient: &http.Client{Transport: w.tr},
		RetryMin:   100 * time.Millisecond,
		RetryMax:   time.Second,
		Wasm:       wasm,
		KeyRefresh: refresh,
	}
	for _, o := range opts {
		o(&cfg)
	}
	w.srv, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	aggH := &http.Server{Handler: agg}
	relayH := &http.Server{Handler: w.srv.Handler()}
	w.hs = []*http.Server{aggH, relayH}
	go aggH.Serve(w.aggL)
	go relayH.Serve(w.relayL)
	w.hc = &http.Client{Transport: &http.Transport{DialContext: w.relayL.dial}}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go func() { w.done <- w.srv.Run(ctx) }()
	return w
}

func (w *webRelay) close() {
	w.cancel()
	<-w.done
	for _, h := range w.hs {
		h.Close()
	}
	w.relayL.Close()
	w.aggL.Close()
	w.tr.CloseIdleConnections()
	w.hc.CloseIdleConnections()
}

func (w *webRelay) get(path string, header map[string]string) (*http.Response, []byte) {
	w.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://relay"+path, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := w.hc.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		w.t.Fatal(err)
	}
	return resp, b
}

// TestWebKey: GET /api/key is 503 until the relay has fetched the key
// (the aggregator fails twice; retries back off on the fake clock), then
// the key's JSON, shown on the join page by its fingerprint; a changed
// key is served after KeyRefresh. The relay never sends its token for
// the public key.
func TestWebKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k1, k2 := pubKey(t, 1), pubKey(t, 2)
		agg := &keyAgg{key: k1, fails: 2}
		w := newWebRelay(t, agg, nil, time.Minute)
		defer w.close()
		synctest.Wait() // the first attempt failed; the retry waits 100 ms
		resp, _ := w.get("/api/key", nil)
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("before the key is known: HTTP %d", resp.StatusCode)
		}
		_, page := w.get("/", nil)
		if !strings.Contains(string(page), "not known yet") {
			t.Fatal("join page does not say the key is unknown")
		}
		time.Sleep(time.Second) // retries at +100 ms and +300 ms
		synctest.Wait()
		resp, b := w.get("/api/key", nil)
		var got envelope.PublicKey
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || json.Unmarshal(b, &got) != nil || !got.Equal(k1) {
			t.Fatalf("key: HTTP %d %s", resp.StatusCode, b)
		}
		if !strings.Contains(string(b), k1.Fingerprint()) {
			t.Fatalf("key JSON without its fingerprint: %s", b)
		}
		_, page = w.get("/", nil)
		if !strings.Contains(string(page), `data-value="`+k1.Fingerprint()+`"`) {
			t.Fatal("join page does not show the fetched fingerprint")
		}

		agg.setKey(k2)
		time.Sleep(time.Minute)
		synctest.Wait()
		_, b = w.get("/api/key", nil)
		if json.Unmarshal(b, &got) != nil || !got.Equal(k2) {
			t.Fatalf("key not refreshed: %s", b)
		}
		agg.mu.Lock()
		defer agg.mu.Unlock()
		if agg.reqs != 4 {
			t.Errorf("%d key requests, want 4 (2 failures, first success, one refresh)", agg.reqs)
		}
		for _, a := range agg.auth {
			if a != "" {
				t.Fatalf("Authorization sent for the public key: %q", a)
			}
		}
	})
}

// TestWebBadKey: an answer that is not a valid key (fingerprint not
// matching its keys) is not served.
func TestWebBadKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := pubKey(t, 1)
		b, _ := json.Marshal(k)
		bad := bytes.Replace(b, []byte(k.Fingerprint()), []byte(pubKey(t, 2).Fingerprint()), 1)
		agg := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(bad) })
		w := newWebRelay(t, agg, nil, time.Minute)
		defer w.close()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if resp, _ := w.get("/api/key", nil); resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("inconsistent key served: HTTP %d", resp.StatusCode)
		}
	})
}

// TestWebRoutes: the join page, static assets, the wasm module and its
// info, and the sample files as stored.
func TestWebRoutes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mod, err := web.NewWasmModule(append([]byte{0, 'a', 's', 'm', 1, 0, 0, 0}, bytes.Repeat([]byte{7}, 4096)...))
		if err != nil {
			t.Fatal(err)
		}
		w := newWebRelay(t, &keyAgg{}, mod, 0)
		defer w.close()

		resp, page := w.get("/", nil)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			t.Fatalf("/: HTTP %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		for _, id := range []string{"consent", "start", "stop", "status", "canvas", "fingerprint", "wasm-sha256"} {
			if !strings.Contains(string(page), `id="`+id+`"`) {
				t.Errorf("join page without #%s", id)
			}
		}
		if !strings.Contains(string(page), mod.SHA256()) {
			t.Error("join page does not show the module's SHA-256")
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "ws://relay") || !strings.Contains(csp, "'wasm-unsafe-eval'") {
			t.Errorf("CSP %q does not allow the websocket or the wasm", csp)
		}

		resp, js := w.get("/static/join.js", nil)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/javascript") || !bytes.Contains(js, []byte("blanket")) {
			t.Fatalf("/static/join.js: HTTP %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
		}

		resp, b := w.get("/blanket.wasm", map[string]string{"Accept-Encoding": "identity"})
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/wasm" || resp.Header.Get("ETag") != `"`+mod.SHA256()+`"` || len(b) != mod.Size() {
			t.Fatalf("/blanket.wasm: HTTP %d %v (%d bytes)", resp.StatusCode, resp.Header, len(b))
		}
		// The transport asks for gzip itself and decodes it.
		resp, b = w.get("/blanket.wasm", nil)
		if !resp.Uncompressed || len(b) != mod.Size() {
			t.Fatalf("/blanket.wasm gzip: uncompressed=%v, %d bytes", resp.Uncompressed, len(b))
		}
		_, b = w.get("/api/wasm", nil)
		var info web.WasmInfo
		if err := json.Unmarshal(b, &info); err != nil || info != mod.Info() {
			t.Fatalf("/api/wasm: %s", b)
		}

		files := map[string][]byte{}
		for path, open := range map[string]func() *bytes.Reader{"/digits.idx.gz": sample.ImagesGz, "/labels.idx.gz": sample.LabelsGz} {
			resp, b := w.get(path, nil)
			want, _ := io.ReadAll(open())
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/octet-stream" ||
				resp.Header.Get("Content-Encoding") != "" || !bytes.Equal(b, want) {
				t.Fatalf("%s: HTTP %d %v", path, resp.StatusCode, resp.Header)
			}
			if cc := resp.Header.Get("Cache-Control"); !strings.Contains(cc, "max-age=2592000") {
				t.Fatalf("%s: Cache-Control %q", path, cc)
			}
			et := resp.Header.Get("ETag")
			if r, _ := w.get(path, map[string]string{"If-None-Match": et}); et == "" || r.StatusCode != http.StatusNotModified {
				t.Fatalf("%s: revalidation with ETag %q", path, et)
			}
			files[path] = b
		}
		set, err := dataset.ReadIDX(bytes.NewReader(files["/digits.idx.gz"]), bytes.NewReader(files["/labels.idx.gz"]))
		if err != nil || set.Len() != sample.Size {
			t.Fatalf("served files do not decode to the %d digits: %v", sample.Size, err)
		}
		// The standardizer a drawing volunteer fetches instead of the
		// digits is the one fitted on the training part of the very digits
		// served above (what PrepareDigits fits in the browser).
		train, _, err := dataset.DefaultSplit(set)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := dataset.FitStandardizer(train)
		resp, b = w.get("/standardizer.bin", nil)
		got, err := dataset.UnmarshalStandardizer(b, set.Features)
		if resp.StatusCode != 200 || err != nil || !slices.Equal(got.Mean, want.Mean) || !slices.Equal(got.Std, want.Std) || len(b) > 13000 {
			t.Fatalf("/standardizer.bin: HTTP %d, %d bytes, %v", resp.StatusCode, len(b), err)
		}

		if resp, _ := w.get("/nowhere", nil); resp.StatusCode != 404 {
			t.Fatalf("/nowhere: HTTP %d", resp.StatusCode)
		}
		// No key fetching configured: /api/key stays 503.
		if resp, _ := w.get("/api/key", nil); resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("/api/key: HTTP %d", resp.StatusCode)
		}
	})
}

// TestWebNoWasm: without a module the page says so and /blanket.wasm is 404.
func TestWebNoWasm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWebRelay(t, &keyAgg{}, nil, 0)
		defer w.close()
		if resp, _ := w.get("/blanket.wasm", nil); resp.StatusCode != 404 {
			t.Fatalf("/blanket.wasm: HTTP %d", resp.StatusCode)
		}
		if resp, _ := w.get("/api/wasm", nil); resp.StatusCode != 404 {
			t.Fatalf("/api/wasm: HTTP %d", resp.StatusCode)
		}
		if _, page := w.get("/", nil); !strings.Contains(string(page), "no Blanket client module configured") {
			t.Fatal("join page does not say that no module is configured")
		}
	})
}

// TestWebSameOrigin: the join page's own origin may open the websocket;
// another site's may not.
func TestWebSameOrigin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWebRelay(t, &keyAgg{}, nil, 0)
		defer w.close()
		d := websocket.Dialer{NetDialContext: w.relayL.dial}
		for origin, ok := range map[string]bool{"http://relay:8081": true, "https://other.example": false} {
			ws, resp, err := d.Dial("ws://relay:8081/ws", http.Header{"Origin": {origin}})
			if ok != (err == nil) {
				t.Fatalf("origin %s: %v", origin, err)
			}
			if err == nil {
				ws.Close()
			} else if resp.StatusCode != http.StatusForbidden {
				t.Fatalf("origin %s: HTTP %d", origin, resp.StatusCode)
			}
		}
		synctest.Wait()
	})
}

// statusAgg serves /api/key and a fixed /api/status, counting status
// requests.
type statusAgg struct {
	keyAgg
	status string
	n      int
}

func (a *statusAgg) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/api/status" {
		a.mu.Lock()
		a.n++
		a.mu.Unlock()
		io.WriteString(w, a.status)
		return
	}
	a.keyAgg.ServeHTTP(w, r)
}

// TestWebRound: GET /api/round passes on the aggregator's round state
// (open round, deadline, paused) that the join page counts down from,
// readable by the dashboard's origin, and asks the aggregator at most once
// per second however many phones poll.
func TestWebRound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		agg := &statusAgg{keyAgg: keyAgg{key: pubKey(t, 1)},
			status: `{"round": 3, "open_round": 4, "deadline": "2030-01-02T03:04:05Z", "paused": true, "epsilon": 1.5}`}
		w := newWebRelay(t, agg, nil, time.Minute)
		defer w.close()
		synctest.Wait()
		var info RoundInfo
		for range 5 {
			resp, b := w.get("/api/round", nil)
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
				t.Fatalf("HTTP %d, CORS %q", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
			}
			if err := json.Unmarshal(b, &info); err != nil {
				t.Fatal(err)
			}
		}
		want := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
		if !info.Reachable || info.Round != 3 || info.OpenRound != 4 || !info.Deadline.Equal(want) || !info.Paused {
			t.Errorf("round info %+v", info)
		}
		if agg.n != 1 {
			t.Errorf("%d status requests for 5 polls within a second, want 1", agg.n)
		}
		time.Sleep(2 * time.Second)
		w.get("/api/round", nil)
		if agg.n != 2 {
			t.Errorf("%d status requests after the cache expired, want 2", agg.n)
		}
	})
}

// TestWebRoundUnreachable: without an aggregator status the answer says
// so instead of failing.
func TestWebRoundUnreachable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWebRelay(t, &keyAgg{key: pubKey(t, 1)}, nil, time.Minute)
		defer w.close()
		synctest.Wait()
		resp, b := w.get("/api/round", nil)
		var info RoundInfo
		if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &info) != nil || info.Reachable {
			t.Fatalf("HTTP %d: %s", resp.StatusCode, b)
		}
	})
}
