package server

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/blanket-fl/blanket/aggregator/internal/operator"
)

// TestOperatorLoginRateLimited: POST /operator/login from one address
// takes operator.LoginBurst wrong passwords, then answers 429 with
// Retry-After and a login page that says "Too many attempts from this
// address: try again in N s." (N the Retry-After, at most 10; even to the right password, which is not
// checked there); the X-Operator-Token header on the controls is limited
// the same way; another address logs in. (An earlier build took 406
// wrong passwords a second without a limit.)
func TestOperatorLoginRateLimited(t *testing.T) {
	const tok = "operator-token-0123456789"
	h := newHarness(t, t.TempDir(), newFakeRelay(t), func(c *Config) { c.Web.OperatorToken = tok })
	handler := h.srv.Handler()
	do := func(addr, path string, form url.Values, hdr map[string]string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "http://agg.example"+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.RemoteAddr = addr + ":50000"
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, req)
		return w
	}
	// One wrong password on the form, the others in the header (cheap
	// answers: the attempts are spent well within one refill period,
	// LoginEvery, however slowly the pages render).
	if w := do("198.51.100.7", "/operator/login", url.Values{"password": {"guess"}}, nil); w.Code != http.StatusForbidden ||
		!strings.Contains(w.Body.String(), "Wrong password") {
		t.Fatalf("wrong password: HTTP %d", w.Code)
	}
	for i := 1; i < operator.LoginBurst; i++ {
		if w := do("198.51.100.7", "/operator/pause", nil, map[string]string{"X-Operator-Token": "guess"}); w.Code != http.StatusForbidden {
			t.Fatalf("wrong password %d: HTTP %d", i+1, w.Code)
		}
	}
	for _, pw := range []string{"guess", tok} {
		w := do("198.51.100.7", "/operator/login", url.Values{"password": {pw}}, nil)
		ra := w.Header().Get("Retry-After")
		n, err := strconv.Atoi(ra)
		if w.Code != http.StatusTooManyRequests || err != nil || n < 1 || n > int(operator.LoginEvery.Seconds()) || len(w.Result().Cookies()) != 0 {
			t.Fatalf("password %q past the limit: HTTP %d, Retry-After %q, cookies %v", pw, w.Code, ra, w.Result().Cookies())
		}
		if body := w.Body.String(); !strings.Contains(body, "Too many attempts from this address: try again in "+ra+" s.") ||
			!strings.Contains(body, `name="password"`) {
			t.Fatalf("password %q past the limit: the login page does not say when to try again", pw)
		}
	}
	if w := do("198.51.100.7", "/operator/pause", nil, map[string]string{"X-Operator-Token": tok}); w.Code != http.StatusTooManyRequests ||
		w.Header().Get("Retry-After") == "" || h.srv.Paused() {
		t.Fatalf("X-Operator-Token past the limit: HTTP %d, paused %v", w.Code, h.srv.Paused())
	}
	w := do("198.51.100.8", "/operator/login", url.Values{"password": {tok}}, nil)
	if w.Code != http.StatusSeeOther || len(w.Result().Cookies()) != 1 {
		t.Fatalf("login from another address: HTTP %d", w.Code)
	}
}
