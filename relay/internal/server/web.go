package server

// The relay serves everything a volunteer's browser loads (docs/web.md):
// the relay already knows who the volunteers are, so the aggregator never
// has to. These are the page, its static assets, the wasm client, the
// embedded sample digits, and the aggregator's public key as the relay
// fetched it.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/blanket-fl/blanket/relay/internal/metrics"
	"github.com/blanket-fl/blanket/shared/dataset"
	"github.com/blanket-fl/blanket/shared/dataset/sample"
	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/web"
)

// keyLimit bounds the aggregator's /api/key answer.
const keyLimit = 64 << 10

// sampleMaxAge is the Cache-Control max-age of the sample files: they are
// part of the binary, so they change only with an upgrade (and then the
// ETag changes).
const sampleMaxAge = 30 * 24 * time.Hour

// webState is the relay's view of the aggregator's public key and, for
// the join page's countdown, of its round status.
type webState struct {
	mu      sync.RWMutex
	key     envelope.PublicKey
	keyJSON []byte // nil until the key is known

	// roundMu serializes status fetches: at most one per roundTTL, however
	// many phones poll.
	roundMu   sync.Mutex
	round     RoundInfo
	roundTime time.Time

	// predictor serves GET /api/predictor (classroom.go); the receipts of
	// GET /api/receipt are secure summation's (sumrelay.Relay.Receipts).
	predictor predictorCache
	// task serves GET /api/task (classroom.go).
	task taskCache
}

// roundTTL is how long the relay reuses the aggregator's status for GET
// /api/round; roundLimit bounds the status answer.
const (
	roundTTL   = time.Second
	roundLimit = 64 << 10
)

// RoundInfo is the JSON of the relay's GET /api/round: what a volunteer's
// page (and the projected dashboard) needs to say what happens next. It
// carries no volunteer's data: the round state is the aggregator's public
// status, Volunteers the relay's count of open connections.
type RoundInfo struct {
	// Reachable is false while the relay cannot reach the aggregator.
	Reachable bool `json:"reachable"`
	// Round is the last finished round, OpenRound the open one (0: none)
	// and Deadline when it closes.
	Round     int       `json:"round"`
	OpenRound int       `json:"open_round"`
	Deadline  time.Time `json:"deadline,omitzero"`
	// Paused: the teacher paused training; Stopped says why training
	// ended ("" while it goes on).
	Paused  bool   `json:"paused"`
	Stopped string `json:"stopped,omitempty"`
	// Volunteers is the number of volunteers connected to the relay now.
	Volunteers int64 `json:"volunteers"`
	// Now is the relay's clock, so a page can correct its own.
	Now time.Time `json:"now"`

	// What the class made so far, from the aggregator's public status:
	// the test accuracy after the last model update (nil before), the
	// rounds that updated the model, the privacy the ledger charged in
	// all (Epsilon, the dashboard's figure) against TargetEpsilon, the
	// running protocol ("secagg", "ss-topk", ...: the join page offers
	// a personal privacy level only where it applies), the model resets
	// and why the latest round was cancelled (nil if a round updated the
	// model since).
	Accuracy      *float64        `json:"accuracy"`
	RoundsOK      int             `json:"rounds_ok"`
	Epsilon       float64         `json:"epsilon"`
	TargetEpsilon float64         `json:"target_epsilon"`
	Protocol      string          `json:"protocol,omitempty"`
	ModelResets   int             `json:"model_resets"`
	LastAbort     *RoundAbortNote `json:"last_abort,omitempty"`
	// AccuracySource is where Accuracy comes from ("public_holdout", or
	// "none": the study has no public test data; docs/tasks.md).
	AccuracySource string `json:"accuracy_source,omitempty"`
}

// RoundAbortNote is the part of the aggregator's last_abort a volunteer's
// page shows: which round was cancelled and why, in numbers.
type RoundAbortNote struct {
	Round    int     `json:"round"`
	Reason   string  `json:"reason"`
	Received int     `json:"received"`
	MinBatch int     `json:"min_batch"`
	Timeout  float64 `json:"timeout"`
}

// currentKey returns the key's JSON and fingerprint ("" and nil while
// unknown).
func (s *Server) currentKey() ([]byte, string) {
	s.web.mu.RLock()
	defer s.web.mu.RUnlock()
	if s.web.keyJSON == nil {
		return nil, ""
	}
	return s.web.keyJSON, s.web.key.Fingerprint()
}

// route is one pattern of the relay's mux. Every route is in routes, and
// TestPublishedAllowList checks each against what it may publish: the
// relay's answers carry nothing about the volunteers' data beyond what the
// aggregator's own view (the batch: n, n_p, sizes) already holds
// (docs/privacy.md, "What the relay publishes").
type route struct {
	pattern string
	handler http.Handler
}

// routes returns every route of the relay: the volunteers' websocket, the
// aggregator's announcements and helper key, health and counters, and the
// volunteers' web routes: GET / (the join page), /static/, /blanket.wasm,
// /api/wasm, /api/key, /api/round, /digits.idx.gz, /labels.idx.gz and
// /standardizer.bin (all a volunteer learning from its own drawings needs
// of the digits: 12.5 KB instead of 1.59 MB).
func (s *Server) routes() []route {
	return []route{
		{"GET /ws", http.HandlerFunc(s.handleWS)},
		{"POST /v1/rounds", http.HandlerFunc(s.handleRounds)},
		{"GET /v1/helper-key", http.HandlerFunc(s.handleHelperKey)},
		{"GET /v1/anchor", http.HandlerFunc(s.handleAnchor)},  // anchor.go
		{"POST /v1/anchor", http.HandlerFunc(s.handleAnchor)}, // anchor.go
		{"GET /healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })},
		{"GET /readyz", s.readyHandler()},                    // ready.go
		{"GET /metrics", metrics.Handler(s.Snapshot, false)}, // Prometheus, without the runtime series
		{"GET /api/metrics", http.HandlerFunc(s.handleMetricsJSON)},
		{"GET /{$}", http.HandlerFunc(s.handleJoin)},
		{"GET /static/", web.Static()},
		{"GET /blanket.wasm", s.cfg.Wasm},
		{"GET /api/wasm", s.cfg.Wasm.InfoHandler()},
		{"GET /api/key", http.HandlerFunc(s.handleKey)},
		{"GET /api/round", http.HandlerFunc(s.handleRound)},
		{"GET /digits.idx.gz", sampleFile(sample.ImagesGz)},
		{"GET /labels.idx.gz", sampleFile(sample.LabelsGz)},
		{"GET /standardizer.bin", standardizerFile()},
		// classroom.go: the short join code, the icon, receipts, the public model.
		{"GET /{code}", http.HandlerFunc(s.handleCode)},
		{"GET /favicon.ico", web.Icon()},
		{"GET /api/receipt", http.HandlerFunc(s.handleReceipt)},
		{"GET /api/predictor", http.HandlerFunc(s.handlePredictor)},
		{"GET /api/task", http.HandlerFunc(s.handleTask)},
	}
}

// mux registers every route.
func (s *Server) mux() *http.ServeMux {
	mux := http.NewServeMux()
	for _, r := range s.routes() {
		mux.Handle(r.pattern, r.handler)
	}
	for pattern, h := range s.edges.Routes() {
		mux.Handle(pattern, h)
	}
	return mux
}

// standardizerFile serves the standardizer fitted on the training part of
// the embedded digits (sample.TrainTest, dataset.FitStandardizer), as the
// aggregator and every volunteer fit it, in dataset's binary form.
func standardizerFile() http.Handler {
	var (
		once sync.Once
		b    []byte
		err  error
	)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() {
			var train *dataset.Set
			if train, _, err = sample.TrainTest(); err != nil {
				return
			}
			var z *dataset.Standardizer
			if z, err = dataset.FitStandardizer(train); err != nil {
				return
			}
			b, err = z.MarshalBinary()
		})
		if err != nil {
			http.Error(w, "standardizer unavailable", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Cache-Control", fmt.Sprintf("public, max-age=%d", int(sampleMaxAge.Seconds())))
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
	})
}

// handleJoin renders the join page with the key fingerprint and module
// hash as they are now. The Content-Security-Policy allows only this
// origin's scripts and styles, wasm compilation, and websockets to this
// host.
func (s *Server) handleJoin(w http.ResponseWriter, r *http.Request) {
	_, fp := s.currentKey()
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; "+
		"style-src 'self'; img-src 'self' data:; connect-src 'self' ws://"+r.Host+" wss://"+r.Host+"; "+
		"base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	if err := web.JoinPage(web.JoinData{Fingerprint: fp, Wasm: s.cfg.Wasm}).Render(r.Context(), w); err != nil {
		s.log.Warn("join page not rendered", "err", err)
	}
}

// handleRound serves RoundInfo. The answer is public (the aggregator's own
// status is), so any origin may read it: the teacher's dashboard, served by
// the aggregator, shows the relay's volunteer count.
func (s *Server) handleRound(w http.ResponseWriter, r *http.Request) {
	info := s.roundInfo(r.Context())
	info.Volunteers = s.Metrics().Connections + int64(s.edges.Connections()) // the edges' too (relay/internal/edge)
	info.Now = time.Now().UTC()
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Access-Control-Allow-Origin", "*")
	json.NewEncoder(w).Encode(info)
}

// roundInfo returns the aggregator's round status, fetched at most once
// per roundTTL (requests meanwhile wait for the one fetch and share it).
func (s *Server) roundInfo(ctx context.Context) RoundInfo {
	st := &s.web
	st.roundMu.Lock()
	defer st.roundMu.Unlock()
	if time.Since(st.roundTime) < roundTTL {
		return st.round
	}
	info, err := s.fetchRound(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return st.round // this caller went away: keep the old answer for the others
		}
		s.log.Debug("cannot fetch the aggregator's status", "err", err)
		info = RoundInfo{}
	}
	st.round, st.roundTime = info, time.Now()
	return info
}

// fetchRound reads the aggregator's GET /api/status.
func (s *Server) fetchRound(ctx context.Context) (RoundInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(s.cfg.Aggregator, "/")+"/api/status", nil)
	if err != nil {
		return RoundInfo{}, fmt.Errorf("status request: %w", err)
	}
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return RoundInfo{}, fmt.Errorf("status request: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return RoundInfo{}, fmt.Errorf("status request: HTTP %s", resp.Status)
	}
	var st struct {
		Round     int       `json:"round"`
		OpenRound int       `json:"open_round"`
		Deadline  time.Time `json:"deadline"`
		Paused    bool      `json:"paused"`
		Stopped   string    `json:"stopped"`
		// classroom.go's part
		Accuracy      *float64        `json:"accuracy"`
		RoundsOK      int             `json:"rounds_ok"`
		Epsilon       float64         `json:"epsilon"`
		TargetEpsilon float64         `json:"target_epsilon"`
		ModelResets   int             `json:"model_resets"`
		LastAbort     *RoundAbortNote `json:"last_abort"`
		AccuracySrc   string          `json:"accuracy_source"`
		Params        struct {
			Protocol string `json:"protocol"`
		} `json:"params"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, roundLimit)).Decode(&st); err != nil {
		return RoundInfo{}, fmt.Errorf("aggregator status: %w", err)
	}
	return RoundInfo{Reachable: true, Round: st.Round, OpenRound: st.OpenRound, Deadline: st.Deadline,
		Paused: st.Paused, Stopped: st.Stopped, Accuracy: st.Accuracy, RoundsOK: st.RoundsOK, Epsilon: st.Epsilon,
		TargetEpsilon: st.TargetEpsilon, Protocol: st.Params.Protocol, ModelResets: st.ModelResets, LastAbort: st.LastAbort,
		AccuracySource: st.AccuracySrc}, nil
}

// handleKey serves the aggregator's public key (JSON of envelope.PublicKey)
// as last fetched, or 503 until the relay has fetched it.
func (s *Server) handleKey(w http.ResponseWriter, _ *http.Request) {
	b, _ := s.currentKey()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	if b == nil {
		w.Header().Set("Retry-After", "5")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":"the relay has not fetched the aggregator's key yet"}`+"\n")
		return
	}
	w.Write(b)
}

// sampleFile serves one embedded sample file exactly as stored (gzipped
// IDX; application/octet-stream, no Content-Encoding: the browser gunzips
// it itself), with its SHA-256 as ETag and a long max-age.
func sampleFile(open func() *bytes.Reader) http.Handler {
	h := sha256.New()
	open().WriteTo(h) // a bytes.Reader writing to a hash cannot fail
	etag := `"` + hex.EncodeToString(h.Sum(nil)) + `"`
	cc := fmt.Sprintf("public, max-age=%d", int(sampleMaxAge.Seconds()))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Cache-Control", cc)
		w.Header().Set("ETag", etag)
		http.ServeContent(w, r, "", time.Time{}, open())
	})
}

// fetchKeys keeps the aggregator's public key current for GET /api/key
// and the join page: it fetches base/api/key at once, retries failures
// with backoff (RetryMin doubling to RetryMax, at most KeyRefresh), and
// refetches every KeyRefresh after a success. A key that differs from the
// one served so far replaces it and is logged with both fingerprints: the
// volunteers compare the fingerprint with the teacher's screen, so the
// page must show what the aggregator says now. Returns when ctx is done.
func (s *Server) fetchKeys(ctx context.Context) {
	wait := s.cfg.RetryMin
	for {
		err := s.fetchKey(ctx)
		next := s.cfg.KeyRefresh
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.log.Warn("cannot fetch the aggregator's key", "err", err, "retry", wait)
			next = min(wait, s.cfg.KeyRefresh)
			wait = min(2*wait, s.cfg.RetryMax)
		} else {
			wait = s.cfg.RetryMin
		}
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// fetchKey fetches and installs the key once. The key is public: no
// token is sent.
func (s *Server) fetchKey(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.SendTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(s.cfg.Aggregator, "/")+"/api/key", nil)
	if err != nil {
		return fmt.Errorf("key request: %w", err)
	}
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return fmt.Errorf("key request: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, keyLimit))
		return fmt.Errorf("key request: HTTP %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, keyLimit+1))
	if err != nil {
		return fmt.Errorf("key request: %w", err)
	}
	if len(body) > keyLimit {
		return fmt.Errorf("key answer above %d bytes", keyLimit)
	}
	var k envelope.PublicKey
	if err := json.Unmarshal(body, &k); err != nil { // checks the fingerprint field against the keys
		return fmt.Errorf("aggregator key: %w", err)
	}
	b, err := json.Marshal(k)
	if err != nil {
		return fmt.Errorf("aggregator key: %w", err)
	}
	s.web.mu.Lock()
	old, had := s.web.key, s.web.keyJSON != nil
	s.web.key, s.web.keyJSON = k, append(b, '\n')
	s.web.mu.Unlock()
	switch {
	case !had:
		s.log.Info("aggregator key fetched", "fingerprint", k.Fingerprint())
	case !old.Equal(k):
		s.log.Warn("the aggregator's key changed", "was", old.Fingerprint(), "now", k.Fingerprint())
	}
	return nil
}
