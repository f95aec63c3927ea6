package server

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"github.com/blanket-fl/blanket/aggregator/internal/rounds"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/api"
	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/aggregator/internal/events"
	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/wire"
)

// noRedirect is a client that returns redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Timeout: 2 * time.Minute} // generous: the first GET /operator calibrates σ with the accountant, seconds on two loaded cores

func get(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := noRedirect.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// opPost posts form to /operator/<action> with the given headers (Origin
// defaults to the server's own origin and X-Operator-Token to the
// operator password; "-" removes either).
func (h *harness) opPost(action string, form url.Values, hdr map[string]string) (int, string) {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.http.URL+"/operator/"+action, strings.NewReader(form.Encode()))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", h.http.URL)
	req.Header.Set("X-Operator-Token", h.srv.OperatorToken())
	for k, v := range hdr {
		if v == "-" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusSeeOther && resp.Header.Get("Location") != "/operator?done="+action {
		h.t.Errorf("redirect to %q", resp.Header.Get("Location"))
	}
	return resp.StatusCode, string(b)
}

// finishRound sends a valid batch of 4 reports for round r.
func (h *harness) finishRound(r uint64) {
	h.t.Helper()
	frame := makeBatch(h.t, h.srv.PublicKey(), testParams(), batchSpec{round: r, reports: 4, value: constValue(0.6)})
	if rep := h.sendBatch(frame); rep.Status != wire.BatchStatusOK {
		h.t.Fatalf("round %d: reply %+v", r, rep)
	}
}

func TestDashboardServed(t *testing.T) {
	h := newHarness(t, t.TempDir(), newFakeRelay(t), func(c *Config) { c.Web.JoinURL = "http://10.0.0.5:8081/" })
	h.relay.next(t)
	h.finishRound(1)
	code, page := get(t, h.http.URL+"/")
	if code != http.StatusOK {
		t.Fatalf("GET /: %d", code)
	}
	for _, want := range []string{`id="round" data-value="1"`, `id="chart-accuracy"`, `id="chart-epsilon"`, `id="chart-participants"`,
		`id="heatmaps"`, `id="config"`, `id="fingerprint" data-value="` + h.srv.Fingerprint() + `"`, `id="wasm-sha256" data-value=""`,
		`id="join-url" href="http://10.0.0.5:8081/#fp=` + h.srv.Fingerprint() + `"`, `id="target" data-value="100"`, `id="epsilon" data-value="1"`} {
		if !strings.Contains(page, want) {
			t.Errorf("dashboard lacks %q", want)
		}
	}
	// One accuracy point (one ok round); heatmaps of the test model's 2
	// classes x 3 features.
	// (the accuracy chart is drawn twice: wide, and narrow for phones)
	if n := strings.Count(page, `class="pt s0" data-series="accuracy"`); n != 2 {
		t.Errorf("%d accuracy points, want 1 in each of the 2 accuracy charts", n)
	}
	if n := strings.Count(page, `<img class="heatmap"`); n != 2 {
		t.Errorf("%d heatmaps, want 2", n)
	}
	if !strings.Contains(page, `id="join-qr"`) || !strings.Contains(page, `data-url="http://10.0.0.5:8081/api/round"`) {
		t.Error("dashboard lacks the join QR code or the relay's round URL")
	}
	code, frag := get(t, h.http.URL+"/fragments/charts")
	if code != http.StatusOK || !strings.HasPrefix(frag, `<div id="charts"`) || strings.Contains(frag, "<html") {
		t.Errorf("fragment: %d %.80q", code, frag)
	}
	code, frag = get(t, h.http.URL+"/fragments/privacy")
	if code != http.StatusOK || !strings.HasPrefix(frag, `<div id="privacy"`) || !strings.Contains(frag, `id="chart-epsilon"`) {
		t.Errorf("privacy fragment: %d %.80q", code, frag)
	}
	// The heatmaps are small PNGs of the current model; cacheable only
	// under the current version.
	for _, tc := range []struct {
		path, cache string
		code        int
	}{{"/heatmaps/1.png?v=1.0", "public, max-age=3600", 200}, {"/heatmaps/0.png?v=0.0", "no-store", 200},
		{"/heatmaps/2.png", "", 404}, {"/heatmaps/x.png", "", 404}, {"/heatmaps/1.gif", "", 404}} {
		resp, err := http.Get(h.http.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || (tc.code == 200 && (resp.Header.Get("Content-Type") != "image/png" ||
			resp.Header.Get("Cache-Control") != tc.cache || !bytes.HasPrefix(b, []byte("\x89PNG")))) {
			t.Errorf("%s: HTTP %d %s %q", tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"))
		}
	}
	if code, _ := get(t, h.http.URL+"/static/style.css"); code != http.StatusOK {
		t.Errorf("static: %d", code)
	}
	// No module configured: both wasm paths say so.
	if code, _ := get(t, h.http.URL+"/api/wasm"); code != http.StatusNotFound {
		t.Errorf("/api/wasm without a module: %d", code)
	}
	if code, _ := get(t, h.http.URL+"/blanket.wasm"); code != http.StatusNotFound {
		t.Errorf("/blanket.wasm without a module: %d", code)
	}
	code, op := get(t, h.http.URL+"/operator")
	if code != http.StatusOK || !strings.Contains(op, `id="join-qr"`) || !strings.Contains(op, `name="password"`) {
		t.Errorf("operator page: %d", code)
	}
}

type sse struct{ name, data string }

// subscribe opens /events and returns its events; the stream is closed at
// the end of the test (before the harness stops).
func (h *harness) subscribe() <-chan sse {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.http.URL+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		h.t.Fatalf("/events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	ch := make(chan sse, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(ch)
		r := bufio.NewReader(resp.Body)
		var ev sse
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimRight(line, "\n")
			switch {
			case line == "":
				if ev.name != "" {
					ch <- ev
				}
				ev = sse{}
			case strings.HasPrefix(line, "event: "):
				ev.name = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[len("data: "):]
			}
		}
	}()
	h.t.Cleanup(func() {
		cancel()
		resp.Body.Close()
		<-done
	})
	return ch
}

// nextEvent returns the next event named name, skipping others.
func nextEvent(t *testing.T, ch <-chan sse, name string) sse {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("stream ended before a %q event", name)
			}
			if ev.name == name {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %q event within 10 s", name)
		}
	}
}

func TestEventsDeliverRoundAfterBatch(t *testing.T) {
	h := newHarness(t, t.TempDir(), newFakeRelay(t), nil)
	h.relay.next(t)
	ch := h.subscribe()
	var st api.Status
	if err := json.Unmarshal([]byte(nextEvent(t, ch, "status").data), &st); err != nil || st.Fingerprint != h.srv.Fingerprint() {
		t.Fatalf("first status event: %+v %v", st, err)
	}
	h.finishRound(1)
	ev := nextEvent(t, ch, "round")
	var rec checkpoint.RoundRecord
	if err := json.Unmarshal([]byte(ev.data), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Round != 1 || rec.Status != checkpoint.StatusOK || rec.N != 4 || rec.Accuracy == nil || rec.EpsilonTightest == nil {
		t.Fatalf("round event %+v", rec)
	}
	// A status event follows with the new round.
	for {
		if err := json.Unmarshal([]byte(nextEvent(t, ch, "status").data), &st); err != nil {
			t.Fatal(err)
		}
		if st.Round == 1 {
			break
		}
	}
	if st.Epsilon != 1 || st.RoundsOK != 1 {
		t.Errorf("status after round 1: %+v", st)
	}
}

func TestEventsBounded(t *testing.T) {
	h := newHarness(t, t.TempDir(), newFakeRelay(t), func(c *Config) { c.Web.MaxSubscribers = 1 })
	h.subscribe()
	if code, _ := get(t, h.http.URL+"/events"); code != http.StatusServiceUnavailable {
		t.Errorf("second stream: HTTP %d, want 503", code)
	}
	// The anonymous streams are used up; the operator still gets one.
	req, _ := http.NewRequest(http.MethodGet, h.http.URL+"/events", nil)
	req.Header.Set("X-Operator-Token", h.srv.OperatorToken())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("operator stream while anonymous streams are full: HTTP %d, want 200", resp.StatusCode)
	}
}

func TestOperatorRefusesCrossOrigin(t *testing.T) {
	h := newHarness(t, t.TempDir(), newFakeRelay(t), nil)
	h.relay.next(t)
	for name, hdr := range map[string]map[string]string{
		"other origin":     {"Origin": "http://evil.example"},
		"null origin":      {"Origin": "null"},
		"other referer":    {"Origin": "-", "Referer": "http://evil.example/operator"},
		"cross-site fetch": {"Sec-Fetch-Site": "cross-site"},
	} {
		if code, _ := h.opPost("pause", nil, hdr); code != http.StatusForbidden {
			t.Errorf("%s: HTTP %d, want 403", name, code)
		}
	}
	if h.srv.Paused() {
		t.Fatal("a refused request paused the server")
	}
	if code, _ := h.opPost("pause", nil, map[string]string{"Origin": "-", "Referer": h.http.URL + "/operator"}); code != http.StatusSeeOther {
		t.Fatalf("same-origin referer: HTTP %d", code)
	}
	if !h.srv.Paused() {
		t.Fatal("not paused")
	}
	if code, _ := h.opPost("bogus", nil, nil); code != http.StatusNotFound {
		t.Errorf("unknown action: HTTP %d", code)
	}
}

// TestOperatorPasswordByDefault: an aggregator given no operator token
// makes one up, and the controls need it: a program that copies the
// aggregator's own Origin proves nothing.
func TestOperatorPasswordByDefault(t *testing.T) {
	h := newHarness(t, t.TempDir(), newFakeRelay(t), func(c *Config) { c.Web.NewClass = true })
	h.relay.next(t)
	if len(h.srv.OperatorToken()) < minTokenLen {
		t.Fatalf("made-up operator password %q is too short", h.srv.OperatorToken())
	}
	for _, action := range []string{"pause", "reset", "config", "newclass"} {
		if code, _ := h.opPost(action, url.Values{"eps_l": {"3"}}, map[string]string{"X-Operator-Token": "-"}); code != http.StatusForbidden {
			t.Errorf("%s with the server's own Origin and no password: HTTP %d, want 403", action, code)
		}
	}
	if st := h.srv.Status(); st.Paused || st.NewClassRequested {
		t.Fatalf("refused requests changed the state: %+v", st)
	}
	var pending bool
	h.srv.View(func(_ *checkpoint.State, c rounds.Control) { pending = c.PendingCfg != nil || c.PendingReset })
	if pending {
		t.Fatal("a refused request left a change pending")
	}
	if _, page := get(t, h.http.URL+"/operator"); !strings.Contains(page, `name="password"`) || strings.Contains(page, `action="/operator/pause"`) {
		t.Error("the operator page without a session should show the password form and no controls")
	}
}

func TestOperatorLogin(t *testing.T) {
	const tok = "operator-token-0123456789"
	h := newHarness(t, t.TempDir(), newFakeRelay(t), func(c *Config) { c.Web.OperatorToken = tok })
	login := func(pw, origin string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, h.http.URL+"/operator/login", strings.NewReader(url.Values{"password": {pw}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", origin)
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := login(tok+"x", h.http.URL); resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
		t.Errorf("wrong password: HTTP %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	if resp := login(tok, "http://evil.example"); resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
		t.Errorf("cross-origin login: HTTP %d", resp.StatusCode)
	}
	resp := login(tok, h.http.URL)
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
		t.Fatalf("login: HTTP %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	c := resp.Cookies()[0]
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || strings.Contains(c.Value, tok) {
		t.Errorf("session cookie %+v", c)
	}
	// The cookie alone (what a browser sends) authorizes the controls.
	if code, _ := h.opPost("pause", nil, map[string]string{"X-Operator-Token": "-", "Cookie": c.Name + "=" + c.Value}); code != http.StatusSeeOther || !h.srv.Paused() {
		t.Fatalf("pause with the session cookie: HTTP %d", code)
	}
	if code, _ := h.opPost("start", nil, map[string]string{"X-Operator-Token": "-", "Cookie": c.Name + "=" + c.Value + "x"}); code != http.StatusForbidden {
		t.Errorf("forged cookie: HTTP %d", code)
	}
	req, _ := http.NewRequest(http.MethodGet, h.http.URL+"/operator", nil)
	req.AddCookie(c)
	r2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r2.Body)
	r2.Body.Close()
	if !strings.Contains(string(b), `action="/operator/config"`) {
		t.Error("logged-in operator page lacks the controls")
	}
}

func TestOperatorToken(t *testing.T) {
	const tok = "operator-token-0123456789"
	h := newHarness(t, t.TempDir(), newFakeRelay(t), func(c *Config) { c.Web.OperatorToken = tok })
	if code, _ := h.opPost("pause", nil, map[string]string{"X-Operator-Token": "-"}); code != http.StatusForbidden {
		t.Errorf("no token: HTTP %d", code)
	}
	if code, _ := h.opPost("pause", url.Values{"token": {tok + "x"}}, map[string]string{"X-Operator-Token": "-"}); code != http.StatusForbidden {
		t.Errorf("wrong token: HTTP %d", code)
	}
	// A cross-origin request is refused even with the right token.
	if code, _ := h.opPost("pause", url.Values{"token": {tok}}, map[string]string{"Origin": "http://evil.example"}); code != http.StatusForbidden {
		t.Errorf("cross-origin with token: HTTP %d", code)
	}
	if h.srv.Paused() {
		t.Fatal("paused by a refused request")
	}
	if code, _ := h.opPost("pause", url.Values{"token": {tok}}, map[string]string{"X-Operator-Token": "-"}); code != http.StatusSeeOther || !h.srv.Paused() {
		t.Fatalf("form token: HTTP %d", code)
	}
	// A non-browser client (no Origin) with the header token.
	if code, _ := h.opPost("start", nil, map[string]string{"Origin": "-"}); code != http.StatusSeeOther || h.srv.Paused() {
		t.Fatalf("header token: HTTP %d", code)
	}
}

func TestOperatorNewClass(t *testing.T) {
	h := newHarness(t, t.TempDir(), newFakeRelay(t), nil)
	h.relay.next(t)
	if code, _ := h.opPost("newclass", nil, nil); code != http.StatusNotFound {
		t.Errorf("new class without a supervisor: HTTP %d, want 404", code)
	}
	h2 := newHarness(t, t.TempDir(), newFakeRelay(t), func(c *Config) { c.Web.NewClass = true })
	h2.relay.next(t)
	if code, _ := h2.opPost("newclass", nil, nil); code != http.StatusSeeOther {
		t.Fatalf("new class: HTTP %d", code)
	}
	if st := h2.srv.Status(); !st.NewClassRequested || !st.Paused {
		t.Errorf("status after new class: %+v", st)
	}
}

func TestOperatorPauseStopsAnnouncements(t *testing.T) {
	h := newHarness(t, t.TempDir(), newFakeRelay(t), nil)
	h.relay.next(t)
	h.waitAnnounced(1)
	if code, _ := h.opPost("pause", nil, nil); code != http.StatusSeeOther {
		t.Fatalf("pause: HTTP %d", code)
	}
	// The open round still finishes...
	h.finishRound(1)
	// ...but no new round is announced.
	h.relay.none(t, 300*time.Millisecond)
	if st := h.srv.Status(); !st.Paused || st.OpenRound != 0 || st.Round != 1 {
		t.Fatalf("status while paused: %+v", st)
	}
	if _, page := get(t, h.http.URL+"/"); !strings.Contains(page, `data-state="paused"`) {
		t.Error("dashboard does not show the pause")
	}
	if code, _ := h.opPost("start", nil, nil); code != http.StatusSeeOther {
		t.Fatalf("start: HTTP %d", code)
	}
	if a := h.relay.next(t); a.Round != 2 {
		t.Fatalf("after start: round %d", a.Round)
	}
}

func TestStartPaused(t *testing.T) {
	h := newHarness(t, t.TempDir(), newFakeRelay(t), func(c *Config) { c.Web.StartPaused = true })
	h.relay.none(t, 200*time.Millisecond)
	if err := h.srv.Resume(); err != nil {
		t.Fatal(err)
	}
	if a := h.relay.next(t); a.Round != 1 {
		t.Fatalf("first round %d", a.Round)
	}
}

func TestOperatorConfigAppliesToNextAnnouncement(t *testing.T) {
	h := newHarness(t, t.TempDir(), newFakeRelay(t), nil)
	first := h.relay.next(t)
	h.waitAnnounced(1)
	// Invalid configurations are refused and leave nothing pending.
	for _, bad := range []url.Values{{"eps_l": {"-1"}}, {"protocol": {"ss-bogus"}}, {"clip": {"NaN"}}, {"check_in_p": {"1.5"}},
		{"k": {"9"}}, {"round_timeout": {"1e9"}}, {"beta": {"2"}},
		// Values that pass the protocol's checks but wreck a class: a
		// budget whose first round exceeds the target, a batch of one, a
		// day-long round, a runaway learning rate.
		{"eps_l": {"1e9"}}, {"min_batch": {"1"}}, {"round_timeout": {"86400"}}, {"server_lr": {"1e6"}}, {"clip": {"50"}}} {
		code, page := h.opPost("config", bad, nil)
		if code != http.StatusBadRequest || !strings.Contains(page, `id="op-error"`) {
			t.Errorf("config %v: HTTP %d", bad, code)
		}
	}
	var pending *rounds.RoundConfig
	h.srv.View(func(_ *checkpoint.State, c rounds.Control) { pending = c.PendingCfg })
	if pending != nil {
		t.Fatal("a refused configuration is pending")
	}
	form := url.Values{"protocol": {"ss-topk"}, "eps_l": {"3"}, "clip": {"0.25"}, "k": {"2"}, "np_ratio": {"0.5"},
		"check_in_p": {"0.5"}, "round_timeout": {"7"}, "min_batch": {"3"}}
	if code, page := h.opPost("config", form, nil); code != http.StatusSeeOther {
		t.Fatalf("config: HTTP %d: %s", code, page)
	}
	if _, page := get(t, h.http.URL+"/operator"); !strings.Contains(page, "Pending") {
		t.Error("operator page does not show the pending configuration")
	}
	// The open round's batch is still parsed with the parameters it was
	// announced with.
	h.finishRound(1)
	a := h.relay.next(t)
	want := testParams()
	want.EpsL, want.Clip, want.CheckInP = 3, 0.25, 0.5
	if a.Round != 2 || a.Params.EpsL != 3 || a.Params.Clip != 0.25 || a.Params.CheckInP != 0.5 || a.Params.K != 2 || a.Params.NP != 4 {
		t.Fatalf("round %d params %+v", a.Round, a.Params)
	}
	// The new timeout (7 s; 10.5 s if a loaded machine let round 1 run
	// past its deadline: stretchTimeout), and never before the last
	// round's deadline (the harness's 10 s round): volunteers act only on
	// an announcement with a later deadline (TestDeadlinesIncrease).
	if d := time.Until(a.Deadline); d > 11*time.Second || d < 5*time.Second || !a.Deadline.After(first.Deadline) {
		t.Errorf("deadline in %v (round 1's in %v), want about 7 s and after round 1's", d, time.Until(first.Deadline))
	}
	st := h.srv.Status()
	if st.Params.EpsL != 3 || st.Params.Clip != 0.25 {
		t.Errorf("status params %+v", st.Params)
	}
	// Round 2 is charged with the new per-coordinate budget (eps_l/k).
	p2 := a.Params
	frame := makeBatch(t, h.srv.PublicKey(), p2, batchSpec{round: 2, reports: 4, value: constValue(0.6)})
	if rep := h.sendBatch(frame); rep.Status != wire.BatchStatusOK {
		t.Fatalf("round 2 reply %+v", rep)
	}
	rels := h.srv.ledger.Releases()
	if len(rels) != 2 || rels[0].Eps0 != 1 || rels[1].Eps0 != 1.5 {
		t.Fatalf("ledger releases %+v", rels)
	}
}

func TestOperatorResetKeepsLedger(t *testing.T) {
	h := newHarness(t, t.TempDir(), newFakeRelay(t), nil)
	h.relay.next(t)
	h.finishRound(1)
	h.relay.next(t)
	h.waitAnnounced(2)
	if code, _ := h.opPost("reset", nil, nil); code != http.StatusSeeOther {
		t.Fatalf("reset: HTTP %d", code)
	}
	// Round 2 is open: the reset waits for it; its update still applies.
	h.finishRound(2)
	a := h.relay.next(t)
	if a.Round != 3 || !slices.Equal(a.Model, make([]float64, 8)) {
		t.Fatalf("round %d model %v, want zeros", a.Round, a.Model)
	}
	if m := h.srv.Model(); !slices.Equal(m, make([]float64, 8)) {
		t.Fatalf("model after reset %v", m)
	}
	// The ledger keeps both charged rounds and the spent epsilon.
	st := h.srv.Status()
	if n := len(h.srv.ledger.Releases()); n != 2 || st.Epsilon != 2 || st.ModelResets != 1 {
		t.Fatalf("after reset: %d releases, epsilon %v, resets %d", n, st.Epsilon, st.ModelResets)
	}
	var resets []int
	h.srv.View(func(st *checkpoint.State, _ rounds.Control) { resets = slices.Clone(st.ModelResets) })
	if !slices.Equal(resets, []int{2}) {
		t.Errorf("resets %v, want [2]", resets)
	}
	// The reset survives a restart (it is in the checkpoint).
	h.stop()
	h2 := newHarness(t, h.dir, newFakeRelay(t), nil)
	if st := h2.srv.Status(); st.ModelResets != 1 || st.Epsilon != 2 {
		t.Fatalf("after restart: %+v", st)
	}
}

func TestDashboardGzip(t *testing.T) {
	h := newHarness(t, t.TempDir(), newFakeRelay(t), nil)
	req, _ := http.NewRequest(http.MethodGet, h.http.URL+"/", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := (&http.Client{Transport: &http.Transport{DisableCompression: true}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("Content-Encoding %q", resp.Header.Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil || !strings.Contains(string(b), `id="chart-accuracy"`) {
		t.Fatalf("gzipped dashboard: %v %.100q", err, b)
	}
}

// TestOperatorProtocolSwitchDefaults: switching protocol starts from the
// new protocol's defaults even though the form posts the old protocol's
// values (ss-topk's server learning rate d/k kept on ss-simple destroyed
// the model), and marks the switch on the charts.
func TestOperatorProtocolSwitchDefaults(t *testing.T) {
	h := newHarness(t, t.TempDir(), newFakeRelay(t), nil)
	h.relay.next(t)
	h.waitAnnounced(1)
	shown := h.srv.OperatorData(true).Form
	form := url.Values{"protocol": {"ss-double"}, "eps_l": {shown.EpsL}, "clip": {shown.Clip}, "k": {shown.K},
		"np_ratio": {shown.NPRatio}, "check_in_p": {shown.CheckInP}, "round_timeout": {shown.RoundTimeout},
		"min_batch": {"3"}, "server_lr": {shown.ServerLR}}
	if shown.ServerLR != "2" {
		t.Fatalf("server learning rate shown %q, want the harness's 2", shown.ServerLR)
	}
	if code, page := h.opPost("config", form, nil); code != http.StatusSeeOther {
		t.Fatalf("config: HTTP %d: %s", code, page)
	}
	h.finishRound(1)
	if a := h.relay.next(t); a.Params.Protocol != wire.ProtocolSSDouble {
		t.Fatalf("round 2 protocol %v", a.Params.Protocol)
	}
	if lr := h.srv.OperatorData(true).Form.ServerLR; lr != "1" {
		t.Errorf("server learning rate after switching to ss-double: %s, want its default 1", lr)
	}
	if m := h.srv.DashboardData().Markers; len(m) != 1 || m[0].Round != 2 || m[0].Label != "ss-double" {
		t.Errorf("chart markers %+v, want ss-double from round 2", m)
	}
}

// TestPagesDoNotWaitForTheAccountant: while a charge is composing (the
// accountant blocked inside the ledger's lock), every page, fragment and
// status answer still comes back. The accountant is released only after
// all of them have answered: a handler that waited for it would hang the
// test instead of passing.
func TestPagesDoNotWaitForTheAccountant(t *testing.T) {
	var block atomic.Bool
	entered, release := make(chan struct{}, 1), make(chan struct{})
	acct := func(rels []privacy.Release, delta float64) (privacy.Report, error) {
		if block.Load() {
			select {
			case entered <- struct{}{}:
			default:
			}
			<-release
		}
		return privacy.Account(rels, delta)
	}
	h := newHarness(t, t.TempDir(), newFakeRelay(t), func(c *Config) { c.Accountant = acct })
	h.relay.next(t)
	h.waitAnnounced(1)
	frame := makeBatch(t, h.srv.PublicKey(), testParams(), batchSpec{round: 1, reports: 4, value: constValue(0.6)})
	block.Store(true)
	posted := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, h.http.URL+"/v1/batch", bytes.NewReader(frame))
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		posted <- err
	}()
	<-entered // the round's charge is composing, inside the ledger's lock
	for _, path := range []string{"/", "/api/status", "/api/rounds", "/fragments/charts", "/fragments/privacy", "/operator", "/heatmaps/0.png"} {
		if code, _ := get(t, h.http.URL+path); code != http.StatusOK {
			t.Errorf("GET %s during a charge: HTTP %d", path, code)
		}
	}
	close(release)
	if err := <-posted; err != nil {
		t.Fatal(err)
	}
}

// TestOperatorConfigRefusedOverBudget: a configuration whose next round
// would take the ledger past its target (and so stop training for good)
// is refused with the reason, and nothing is left pending.
func TestOperatorConfigRefusedOverBudget(t *testing.T) {
	h := newHarness(t, t.TempDir(), newFakeRelay(t), func(c *Config) { c.TargetEpsilon = 1.5 })
	h.relay.next(t)
	h.waitAnnounced(1)
	h.finishRound(1) // charged 1 of the 1.5; any second round takes 2
	code, page := h.opPost("config", url.Values{"eps_l": {"3"}}, nil)
	if code != http.StatusBadRequest || !strings.Contains(page, "would bring ε to") || !strings.Contains(page, "training would stop") {
		t.Fatalf("over-budget configuration: HTTP %d", code)
	}
	var pending *rounds.RoundConfig
	h.srv.View(func(_ *checkpoint.State, c rounds.Control) { pending = c.PendingCfg })
	if pending != nil {
		t.Fatal("a refused configuration is pending")
	}
}

// TestThreatModelEventFigure (issue 23): docs/threat-model.md states the
// /events limits the code enforces at the default settings.
func TestThreatModelEventFigure(t *testing.T) {
	b, err := os.ReadFile("../../../docs/threat-model.md")
	if err != nil {
		t.Fatal(err)
	}
	var row string
	for l := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(l, "| event streams exhaust the dashboard |") {
			row = l
		}
	}
	for _, want := range []string{
		fmt.Sprintf("at most %d anonymous streams", DefaultMaxSubscribers),
		fmt.Sprintf("%d per address", events.PerClient(DefaultMaxSubscribers)),
		fmt.Sprintf("%d more reserved for the operator", events.OperatorReserve),
	} {
		if !strings.Contains(row, want) {
			t.Errorf("docs/threat-model.md's row %q does not say %q", row, want)
		}
	}
}
