package operator

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestLimiter: an address has LoginBurst attempts, then one per
// LoginEvery (the wait it is told is exact); other addresses are not
// affected and Reset forgets an address.
func TestLimiter(t *testing.T) {
	now := time.Unix(1000, 0)
	l := NewLimiter(LoginBurst, LoginEvery)
	l.now = func() time.Time { return now }
	for i := range LoginBurst {
		if ok, _ := l.Take("a"); !ok {
			t.Fatalf("attempt %d refused", i+1)
		}
	}
	if ok, wait := l.Take("a"); ok || wait != LoginEvery {
		t.Fatalf("attempt %d: ok %v, wait %v, want a refusal for %v", LoginBurst+1, ok, wait, LoginEvery)
	}
	if ok, _ := l.Take("b"); !ok {
		t.Fatal("another address refused")
	}
	now = now.Add(LoginEvery / 2)
	if ok, wait := l.Take("a"); ok || wait != LoginEvery/2 {
		t.Fatalf("half a period later: ok %v, wait %v", ok, wait)
	}
	now = now.Add(LoginEvery / 2)
	if ok, _ := l.Take("a"); !ok {
		t.Fatal("refused after a full period")
	}
	if ok, _ := l.Take("a"); ok {
		t.Fatal("two attempts after one period")
	}
	// 406 attempts in one second (the attack's rate) get nothing more.
	for range 406 {
		if ok, _ := l.Take("a"); ok {
			t.Fatal("an attempt beyond the rate went through")
		}
	}
	l.Reset("a")
	if ok, _ := l.Take("a"); !ok {
		t.Fatal("refused after Reset")
	}
}

// TestAuthLimited: after LoginBurst wrong passwords from an address, even
// the right one is not checked there (the login form, the header and the
// form field alike) and the refusal says when to try again; the session
// cookie and other addresses still work, and a right password resets the
// address.
func TestAuthLimited(t *testing.T) {
	const pw = "correct horse battery staple"
	a := NewAuth(pw)
	req := func(addr, hdr, form, cookie string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "http://agg.example/operator/pause", strings.NewReader("token="+form))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.RemoteAddr = addr + ":4242"
		if hdr != "" {
			r.Header.Set("X-Operator-Token", hdr)
		}
		if cookie != "" {
			r.AddCookie(&http.Cookie{Name: CookieName, Value: cookie})
		}
		return r
	}
	for i := range LoginBurst {
		if ok, wait := a.Guess(req("192.0.2.1", "", "", ""), "guess"); ok || wait != 0 {
			t.Fatalf("wrong password %d: ok %v, wait %v", i+1, ok, wait)
		}
	}
	if ok, wait := a.Guess(req("192.0.2.1", "", "", ""), pw); ok || wait <= 0 {
		t.Fatalf("right password past the limit: ok %v, wait %v", ok, wait)
	}
	if a.Session(req("192.0.2.1", pw, "", "")) {
		t.Error("X-Operator-Token checked past the limit")
	}
	ok, why, wait := a.AllowedWait(req("192.0.2.1", "", "correct+horse+battery+staple", ""))
	if ok || wait <= 0 || why != "Too many attempts from this address: try again in 10 s." {
		t.Errorf("form token past the limit: %v %q %v", ok, why, wait)
	}
	if ok, why := a.Allowed(req("192.0.2.1", "", "", a.SessionValue())); !ok {
		t.Errorf("session cookie refused while the address is limited: %s", why)
	}
	if ok, _ := a.Guess(req("192.0.2.2", "", "", ""), pw); !ok {
		t.Error("another address refused")
	}
	for range LoginBurst - 1 {
		a.Guess(req("192.0.2.2", "", "", ""), "guess")
	}
	if ok, _ := a.Guess(req("192.0.2.2", "", "", ""), pw); !ok {
		t.Error("a right password did not reset the address's attempts")
	}
}
