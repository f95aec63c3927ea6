package server

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"errors"
	"fmt"
	"github.com/blanket-fl/blanket/aggregator/internal/classtask"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/a-h/templ"

	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/aggregator/internal/dashboard"
	"github.com/blanket-fl/blanket/aggregator/internal/liveaudit"
	"github.com/blanket-fl/blanket/aggregator/internal/rounds"
	"github.com/blanket-fl/blanket/web"
	"github.com/blanket-fl/blanket/web/console"
)

// DefaultJoinURL is the relay's default public URL (its default listen
// address), shown on the dashboard and as a QR code on the operator page.
const DefaultJoinURL = "http://127.0.0.1:8081/"

// Defaults of WebOptions.
const (
	DefaultHeartbeat      = 15 * time.Second
	DefaultMaxSubscribers = 64
)

// WebOptions configure the teacher's pages (docs/web.md): the dashboard at
// GET /, its live updates at GET /events, and the operator controls at
// /operator. Zero values take the defaults.
type WebOptions struct {
	// JoinURL is the relay's public URL that volunteers open (default
	// DefaultJoinURL); it must be an http(s) URL.
	JoinURL string
	// OperatorToken is the operator password: every operator POST needs
	// it (the session cookie the login form sets, form field "token" or
	// header X-Operator-Token; compared in constant time), and a foreign
	// Origin is refused regardless. Empty: validate makes up a random one
	// (Server.OperatorToken), so the controls are never open to anyone
	// who can reach the dashboard.
	OperatorToken string
	// NewClass offers "New class" on the operator page: the aggregator
	// pauses and reports new_class_requested in /api/status, for a
	// supervisor (make run) to restart it with a fresh state directory, so
	// the new class gets its own ledger and the old one stays on disk.
	NewClass bool
	// Simulated is how many volunteers are simulated (make run's native
	// cohort); the dashboard subtracts them from the relay's count to show
	// the real ones.
	Simulated int
	// StartPaused makes the round loop wait for /operator/start before
	// announcing the first round.
	StartPaused bool
	// Wasm is the client module served at /blanket.wasm and /api/wasm
	// (the same bytes and hash as the relay's); nil serves 404s.
	Wasm *web.WasmModule
	// Heartbeat separates the SSE keep-alive comments (default 15 s);
	// MaxSubscribers bounds concurrent /events streams (default 64).
	Heartbeat      time.Duration
	MaxSubscribers int

	qr console.QR // the join URL's QR code
}

// liveState is what the pages show that the checkpoint does not keep:
// protocol changes (chart markers) and a pending new class.
type liveState struct {
	mu       sync.Mutex
	markers  []console.Marker
	newClass bool
}

// mark adds a chart marker at round r (a protocol change).
func (l *liveState) mark(r int, label string) {
	l.mu.Lock()
	l.markers = append(l.markers, console.Marker{Round: r, Label: label})
	l.mu.Unlock()
}

// validate sets the defaults and checks the options.
func (o *WebOptions) validate() error {
	if o.JoinURL == "" {
		o.JoinURL = DefaultJoinURL
	}
	u, err := url.Parse(o.JoinURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("server: join URL %q must be an http(s) URL", o.JoinURL)
	}
	if o.OperatorToken == "" {
		o.OperatorToken = rand.Text()
	}
	if len(o.OperatorToken) < minTokenLen {
		return fmt.Errorf("server: the operator token must have at least %d bytes", minTokenLen)
	}
	if o.Heartbeat < 0 || o.MaxSubscribers < 0 || o.Simulated < 0 {
		return errors.New("server: heartbeat, max subscribers and simulated volunteers must be >= 0")
	}
	if o.Heartbeat == 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.MaxSubscribers == 0 {
		o.MaxSubscribers = DefaultMaxSubscribers
	}
	q, err := console.NewQR(o.JoinURL)
	if err != nil {
		return fmt.Errorf("server: join URL: %w", err)
	}
	o.qr = q
	return nil
}

// pinJoinURL puts the aggregator key's fingerprint in the join link the
// dashboard shows and its QR code, as the URL fragment "#fp=…": a fragment
// never reaches the server, so the relay that serves the join page cannot
// change it, and the page pins the key it names (a relay that hands out
// another key is refused before anything is sent). Teachers project this
// link; volunteers who type the relay's address without it fall back to
// the key the relay serves, shown for comparison.
func (o *WebOptions) pinJoinURL(fingerprint string) error {
	u, err := url.Parse(o.JoinURL)
	if err != nil {
		return fmt.Errorf("server: join URL: %w", err)
	}
	u.Fragment = "fp=" + fingerprint
	o.JoinURL = u.String()
	q, err := console.NewQR(o.JoinURL)
	if err != nil {
		return fmt.Errorf("server: join URL: %w", err)
	}
	o.qr = q
	return nil
}

// registerWeb adds the pages, the event stream, the operator controls and
// the browser assets to mux.
func (s *Server) registerWeb(mux *http.ServeMux) {
	mux.HandleFunc("GET /{$}", s.serveDashboard)
	mux.HandleFunc("GET /fragments/charts", s.serveCharts)
	mux.HandleFunc("GET /fragments/privacy", s.servePrivacy)
	mux.HandleFunc("GET /heatmaps/{file}", s.serveHeatmap)
	mux.HandleFunc("GET /events", s.serveEvents)
	mux.HandleFunc("GET /operator", s.serveOperator)
	mux.HandleFunc("POST /operator/{action}", s.serveOperatorAction) // start, pause, reset, config, newclass, login
	mux.Handle("GET /static/", web.Static())
	mux.Handle("GET /favicon.ico", web.Icon())
	mux.Handle("GET /blanket.wasm", s.cfg.Web.Wasm)
	mux.Handle("GET /api/wasm", s.cfg.Web.Wasm.InfoHandler())
}

// renderPage renders c to a buffer first, so a failure is a clean 500.
func renderPage(w http.ResponseWriter, r *http.Request, code int, c templ.Component) {
	var b bytes.Buffer
	if err := c.Render(r.Context(), &b); err != nil {
		http.Error(w, "rendering failed", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Vary", "Accept-Encoding")
	// The dashboard's heatmaps are ~7,840 rects (about 0.5 MB of
	// repetitive SVG); gzip shrinks them about tenfold.
	if b.Len() > 1<<12 && strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		h.Set("Content-Encoding", "gzip")
		w.WriteHeader(code)
		zw, _ := gzip.NewWriterLevel(w, gzip.BestSpeed) // a valid level: no error
		zw.Write(b.Bytes())
		zw.Close()
		return
	}
	w.WriteHeader(code)
	w.Write(b.Bytes())
}

func (s *Server) serveDashboard(w http.ResponseWriter, r *http.Request) {
	renderPage(w, r, http.StatusOK, console.Dashboard(s.DashboardData()))
}

func (s *Server) serveCharts(w http.ResponseWriter, r *http.Request) {
	renderPage(w, r, http.StatusOK, console.DashboardCharts(s.DashboardData()))
}

func (s *Server) servePrivacy(w http.ResponseWriter, r *http.Request) {
	renderPage(w, r, http.StatusOK, console.DashboardPrivacy(s.DashboardData()))
}

// serveHeatmap is GET /heatmaps/{class}.png: one class's heatmap of the
// current model, laid out by the task's feature map (console.ServeHeatmap).
func (s *Server) serveHeatmap(w http.ResponseWriter, r *http.Request) {
	var m console.ModelView
	var version string
	s.View(func(st *checkpoint.State, _ rounds.Control) {
		m.Params, version = slices.Clone(st.Model), strconv.Itoa(st.Round)+"."+strconv.Itoa(len(st.ModelResets))
	})
	m.Features, m.Classes = s.cfg.Test.Shape().Features, s.cfg.Test.Shape().Classes
	console.ServeHeatmap(w, r, s.cfg.Task, m, version)
}

// settings is the current round configuration as the pages show it.
func (s *Server) settings() dashboard.Settings {
	rc := s.Current()
	opt, lr := s.ServerStep(rc)
	return dashboard.Settings{Params: rc.Params, ExpectedN: s.cfg.ExpectedN, Timeout: rc.Timeout, ServerLR: lr, ServerOptimizer: opt.Kind,
		ServerMomentum: opt.Beta, TargetEpsilon: s.cfg.TargetEpsilon, TargetDelta: s.cfg.TargetDelta, Rounds: s.cfg.Rounds}
}

// DashboardData collects what the dashboard shows.
func (s *Server) DashboardData() console.DashboardData {
	st := s.Status()
	hist := s.Rounds()
	var model []float64
	var resets []int
	var paused bool
	s.View(func(st *checkpoint.State, c rounds.Control) {
		model, resets, paused = slices.Clone(st.Model), slices.Clone(st.ModelResets), c.Paused
	})
	cfg := s.cfg
	sh := cfg.Test.Shape()
	var note *console.AbortNote
	if a := st.LastAbort; a != nil {
		note = &console.AbortNote{Round: a.Round, Message: a.Message, Advice: a.Advice}
	}
	cf := dashboard.ChanceFacts{Accuracy: st.Accuracy, Classes: sh.Classes,
		Reports: dashboard.MeanReports(hist), TargetEpsilon: st.TargetEpsilon, Simulated: cfg.Web.Simulated}
	chance := dashboard.ExplainStudyChance(cf, cfg.Task, func() (float64, string) { return classtask.MajorityRate(cfg.Test, cfg.Task.Label.Classes) })
	spec := s.Current().Proto.Spec // the update's and the count blocks' noise notes (dashboard.RoundNoise)
	noise, _ := dashboard.RoundNoise(spec, cfg.Task, cf.Reports, cfg.ExpectedN, st.TargetEpsilon)
	return console.DashboardData{
		Round: st.Round, OpenRound: st.OpenRound, RoundsOK: st.RoundsOK, Accuracy: st.Accuracy, Loss: st.Loss,
		Epsilon: st.Epsilon, Method: st.Method, TargetEpsilon: st.TargetEpsilon, TargetDelta: st.TargetDelta,
		State: dashboard.State(st.Stopped, paused), Stopped: st.Stopped,
		Model:       console.ModelView{Features: sh.Features, Classes: sh.Classes, Params: model},
		ModelResets: resets, Markers: s.markers(), Config: dashboard.ConfigItems(s.settings()), Fingerprint: s.fp,
		WasmSHA256: cfg.Web.Wasm.SHA256(), JoinURL: cfg.Web.JoinURL, QR: cfg.Web.qr, Simulated: cfg.Web.Simulated,
		Rounds: dashboard.Rounds(hist), Audit: auditView(st.Audit), LastAbort: note, Chance: chance, Noise: noise,
		Task: s.taskView(), Counts: dashboard.Counts(hist, cfg.Task, spec, cf.Reports, cfg.ExpectedN),
	}
}

// taskView is the study as the pages show it (nil without a task).
func (s *Server) taskView() *console.TaskView {
	if s.cfg.Task == nil {
		return nil
	}
	return &console.TaskView{Def: s.cfg.Task, Inputs: classtask.EncodedInputs(s.cfg.Task), AccuracySource: s.accuracySource()}
}

// auditView is the dashboard's form of a live audit status.
func auditView(st *liveaudit.Status) console.AuditView {
	if st == nil {
		return console.AuditView{}
	}
	v := console.AuditView{State: st.State, Reason: st.Reason, Exceeds: st.Exceeds}
	if b := st.Bound; b != nil {
		v.Lower, v.Charged, v.Confidence, v.Trials, v.Attack = b.Lower, b.Charged, b.Confidence, b.Trials, b.Attack
		v.Caught, v.NoiseFactor = b.DetectableFactor, b.Noise.Factor
		v.NoiseFlagged, v.NoiseRatio, v.NoiseAlpha = b.Noise.Flagged, b.Noise.Ratio, b.Noise.Alpha
	}
	return v
}
