package operator

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/shared/wire"
)

// TestAuth: the password, its session cookie and the header are
// accepted; a wrong or empty one, a forged cookie and a foreign origin
// (even with the password) are not.
func TestAuth(t *testing.T) {
	a := NewAuth("correct horse battery staple")
	req := func(hdr map[string]string, cookie string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "http://agg.example/operator/pause", strings.NewReader("token=correct+horse+battery+staple"))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range hdr {
			r.Header.Set(k, v)
		}
		if cookie != "" {
			r.AddCookie(&http.Cookie{Name: CookieName, Value: cookie})
		}
		return r
	}
	if !a.CheckToken("correct horse battery staple") || a.CheckToken("correct horse") || a.CheckToken("") {
		t.Fatal("CheckToken")
	}
	if ok, why := a.Allowed(req(nil, "")); !ok {
		t.Errorf("password in the form refused: %s", why)
	}
	if !a.Session(req(nil, a.SessionValue())) || a.Session(req(nil, "forged")) {
		t.Error("session cookie")
	}
	if !a.Session(req(map[string]string{"X-Operator-Token": "correct horse battery staple"}, "")) {
		t.Error("X-Operator-Token refused")
	}
	if NewAuth("another password").SessionValue() == a.SessionValue() {
		t.Error("the cookie does not depend on the password")
	}
	for _, hdr := range []map[string]string{{"Origin": "http://evil.example"}, {"Referer": "http://evil.example/x"},
		{"Origin": "null"}, {"Sec-Fetch-Site": "cross-site"}} {
		if ok, _ := a.Allowed(req(hdr, a.SessionValue())); ok {
			t.Errorf("foreign origin %v allowed", hdr)
		}
	}
	if ok, _ := a.Allowed(req(map[string]string{"Origin": "http://agg.example"}, "")); !ok {
		t.Error("same origin with the password refused")
	}
}

// TestParseForm: empty fields are zero, numbers are parsed, and every
// malformed field is named.
func TestParseForm(t *testing.T) {
	c, err := ParseForm(url.Values{"protocol": {" ss-double "}, "eps_l": {"2.5"}, "k": {"10"}, "round_timeout": {"30"}})
	if err != nil || c.Protocol != "ss-double" || c.EpsL != 2.5 || c.K != 10 || c.RoundTimeout != 30*time.Second || c.Clip != 0 {
		t.Fatalf("%+v, %v", c, err)
	}
	_, err = ParseForm(url.Values{"eps_l": {"NaN"}, "k": {"1.5"}, "round_timeout": {"-1"}})
	for _, name := range []string{"eps_l", "k:", "round_timeout"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("error %v does not name %s", err, name)
		}
	}
}

// TestPlan: a change keeps what it does not name, a protocol switch starts
// from the new protocol's defaults, and values outside the sane ranges are
// refused.
func TestPlan(t *testing.T) {
	cur := Current{Params: wire.Params{Protocol: wire.ProtocolSSTopk, Randomizer: wire.RandomizerLaplace, D: 7850, K: 157, L: 5,
		Width: 1, NP: 20, MinBatch: 20, EpsL: 78.5, Clip: 0.01, CheckInP: 1}, ServerLR: 50, Timeout: time.Minute, ExpectedN: 200,
		TargetEpsilon: 750, TargetDelta: 1e-5}
	p, lr, timeout, err := Plan(ConfigChange{EpsL: 40}, cur)
	if err != nil || p.Protocol != wire.ProtocolSSTopk || p.EpsL != 40 || p.K != 157 || p.NP != 20 || p.Clip != 0.01 || timeout != time.Minute || lr != 50 {
		t.Fatalf("eps_l change: %+v lr %v timeout %v, %v", p, lr, timeout, err)
	}
	p, lr, _, err = Plan(ConfigChange{Protocol: "ss-double", ServerLR: 50, K: 157}, cur)
	if err != nil || p.Protocol != wire.ProtocolSSDouble || p.K != 157 || lr != 1 {
		t.Fatalf("switch to ss-double: %+v lr %v, %v", p, lr, err)
	}
	for name, c := range map[string]ConfigChange{
		"eps_l": {EpsL: 5000}, "clip": {Clip: 2}, "k": {K: 7850}, "min batch": {MinBatch: 2}, "timeout": {RoundTimeout: time.Second},
		"negative": {EpsL: -1}, "protocol": {Protocol: "ss-none"},
	} {
		if _, _, _, err := Plan(c, cur); err == nil {
			t.Errorf("%s: %+v accepted", name, c)
		}
	}
}
