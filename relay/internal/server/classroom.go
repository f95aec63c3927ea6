package server

// What the relay serves a classroom besides the join page (docs/web.md):
// the short join code (GET /{code}), the page icon, a volunteer's receipt
// for its own secure-summation report (GET /api/receipt), and the public
// model ready to try on a drawing (GET /api/predictor).

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/blanket-fl/blanket/shared/dataset"
	"github.com/blanket-fl/blanket/shared/dataset/sample"
	"github.com/blanket-fl/blanket/shared/task"
	"github.com/blanket-fl/blanket/web"
)

// handleCode answers the short join code a student types after the
// relay's address (the first characters of the aggregator key's
// fingerprint, console.JoinCode): the join page, told to check that the
// key it is given starts with the code (#code=…; a short pin, the whole
// fingerprint is on the projector to compare). Any other code is a page
// that says so.
func (s *Server) handleCode(w http.ResponseWriter, r *http.Request) {
	code := strings.ToLower(r.PathValue("code"))
	_, fp := s.currentKey()
	if len(code) != web.JoinCodeLen || fp == "" || code != web.JoinCodeOf(fp) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusNotFound)
		if fp == "" {
			io.WriteString(w, "The class server is still starting: try again in a moment.\n")
			return
		}
		fmt.Fprintf(w, "No class with the code %q here: check the code under the QR code on the teacher's screen.\n", r.PathValue("code"))
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, "/#code="+code, http.StatusSeeOther)
}

// handleReceipt is GET /api/receipt?round=R&report=HEX: whether the
// secure-summation report whose receipt (wire.ReportReceipt, 64 hex
// digits) is HEX went into round R's sum. Only the volunteer that sent the
// report knows its receipt (the relay knows who sent what anyway), so the
// answer tells a volunteer about its own report and nobody about anyone
// else's: {"round", "state": pending|included|excluded|unknown, "why"}.
func (s *Server) handleReceipt(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	num, err := strconv.ParseUint(q.Get("round"), 10, 64)
	raw, herr := hex.DecodeString(q.Get("report"))
	if err != nil || num == 0 || herr != nil || len(raw) != 32 {
		http.Error(w, "want ?round=N&report=<64 hex digits>", http.StatusBadRequest)
		return
	}
	var id [32]byte
	copy(id[:], raw)
	state, why := s.sa.Receipts.Lookup(num, id, s.rounds.LastRound())
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(struct {
		Round uint64 `json:"round"`
		State string `json:"state"`
		Why   string `json:"why,omitempty"`
	}{num, state, why})
}

// predictorCache holds the last GET /api/predictor answer, made again when
// the aggregator's model changes (a finished round or a reset).
type predictorCache struct {
	mu      sync.Mutex
	version string
	body    []byte // JSON
	gz      []byte // the same, gzipped
}

// predictorStats is the standardization of the features t's model reads
// (its feature map's outputs, or the pixels), fitted on the embedded
// digits' public training part as the aggregator fits it (task.FitPrep:
// with a feature map, the embedded statistics identified by the training
// part's hash, so nothing is mapped here), one per map name.
var predictorStats = struct {
	mu sync.Mutex
	z  map[string]*dataset.Standardizer
}{z: map[string]*dataset.Standardizer{}}

// statsFor returns predictorStats of t (nil: the pixels, as before tasks
// had feature maps) and its map's name.
func statsFor(t *task.Task) (*dataset.Standardizer, string, error) {
	name := "identity"
	if t != nil && t.Recipe().FeatureMap != "" {
		name = t.Recipe().FeatureMap
	}
	if t == nil {
		t, _ = task.ImageTask(task.Recipe{FeatureMap: name})
	}
	if t == nil || t.Source != task.SourceBuiltin || t.Inputs() != web.Pixels {
		return nil, "", errors.New("the task is not a drawing of a digit")
	}
	predictorStats.mu.Lock()
	defer predictorStats.mu.Unlock()
	if z := predictorStats.z[name]; z != nil {
		return z, name, nil
	}
	train, _, err := sample.TrainTest()
	if err != nil {
		return nil, "", err
	}
	p, err := t.FitPrep(train)
	if err != nil {
		return nil, "", err
	}
	predictorStats.z[name] = p.Z
	return p.Z, name, nil
}

// handlePredictor serves web.Predictor (any origin may read it: the model is
// public after every round, and the teacher's dashboard shows it too).
func (s *Server) handlePredictor(w http.ResponseWriter, r *http.Request) {
	info := s.roundInfo(r.Context())
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Cache-Control", "no-cache") // revalidate: 304 while the model is the same
	if !info.Reachable {
		http.Error(w, "the aggregator is not reachable", http.StatusServiceUnavailable)
		return
	}
	body, gz, version, err := s.predictor(r.Context(), info)
	if err != nil {
		s.log.Debug("no predictor", "err", err)
		http.Error(w, "the model is not available", http.StatusServiceUnavailable)
		return
	}
	h.Set("Vary", "Accept-Encoding")
	etag := `"` + version + `"`
	h.Set("ETag", etag)
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", "application/json")
	if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		h.Set("Content-Encoding", "gzip")
		w.Write(gz)
		return
	}
	w.Write(body)
}

// predictor returns the cached Predictor JSON for the aggregator's model
// as info describes it, fetching the model when it changed.
func (s *Server) predictor(ctx context.Context, info RoundInfo) (body, gz []byte, version string, err error) {
	pc := &s.web.predictor
	pc.mu.Lock()
	defer pc.mu.Unlock()
	version = fmt.Sprintf("%d.%d.%d", info.Round, info.ModelResets, info.RoundsOK)
	if pc.version == version && pc.body != nil {
		return pc.body, pc.gz, version, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(s.cfg.Aggregator, "/")+"/api/model", nil)
	if err != nil {
		return nil, nil, "", fmt.Errorf("model request: %w", err)
	}
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, nil, "", fmt.Errorf("model request: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, "", fmt.Errorf("model request: HTTP %s", resp.Status)
	}
	var m struct {
		Round    int       `json:"round"`
		Features int       `json:"features"`
		Classes  int       `json:"classes"`
		Params   []float64 `json:"params"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(&m); err != nil {
		return nil, nil, "", fmt.Errorf("model: %w", err)
	}
	var t *task.Task // nil: an aggregator without /api/task, whose model reads the pixels
	if b, err := s.taskJSON(ctx); err == nil {
		t, _ = task.Parse(b)
	}
	z, name, err := statsFor(t)
	if err != nil {
		return nil, nil, "", fmt.Errorf("standardizer: %w", err)
	}
	p, err := web.NewPredictor(m.Params, m.Features, m.Classes, name, z)
	if err != nil {
		return nil, nil, "", err
	}
	p.Round, p.RoundsOK, p.Accuracy = m.Round, info.RoundsOK, info.Accuracy
	if body, err = json.Marshal(p); err != nil {
		return nil, nil, "", fmt.Errorf("predictor: %w", err)
	}
	var zb bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&zb, gzip.BestSpeed) // a valid level: no error
	zw.Write(body)
	zw.Close()
	pc.version, pc.body, pc.gz = version, body, zb.Bytes()
	return body, pc.gz, version, nil
}

// taskTTL is how long the relay reuses the aggregator's task definition
// for GET /api/task (it is fixed when the aggregator starts; a new class
// may bring another).
const taskTTL = 10 * time.Second

// taskCache holds the last GET /api/task answer.
type taskCache struct {
	mu   sync.Mutex
	body []byte
	at   time.Time
}

// handleTask serves the aggregator's public task definition (its GET
// /api/task: title, consent text, features with their declared ranges or
// categories, label classes, source), so that the join page can show the
// study and build its survey form or check a volunteer's CSV. The relay
// checks it is a valid definition (task.Parse) and serves it re-encoded,
// nothing else; any origin may read it, as the aggregator's own copy is
// public. 503 while the aggregator is unreachable or has no task.
func (s *Server) handleTask(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Cache-Control", "no-cache")
	body, err := s.taskJSON(r.Context())
	if err != nil {
		s.log.Debug("no task definition", "err", err)
		http.Error(w, "the study's definition is not available", http.StatusServiceUnavailable)
		return
	}
	h.Set("Content-Type", "application/json")
	w.Write(body)
}

// taskJSON returns the task definition, fetched at most once per taskTTL.
func (s *Server) taskJSON(ctx context.Context) ([]byte, error) {
	tc := &s.web.task
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if tc.body != nil && time.Since(tc.at) < taskTTL {
		return tc.body, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(s.cfg.Aggregator, "/")+"/api/task", nil)
	if err != nil {
		return nil, fmt.Errorf("task request: %w", err)
	}
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("task request: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("task request: HTTP %s", resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, task.MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("task: %w", err)
	}
	t, err := task.Parse(b)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("task: %w", err)
	}
	tc.body, tc.at = append(body, '\n'), time.Now()
	return tc.body, nil
}
