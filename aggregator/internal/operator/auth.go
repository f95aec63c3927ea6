package operator

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Auth checks the operator password: every operator POST needs it (the
// session cookie the login form sets, the X-Operator-Token header or the
// form field "token"), and a foreign origin is refused regardless.
type Auth struct {
	tokenSum [32]byte // SHA-256 of the password
}

// NewAuth returns the check of password.
func NewAuth(password string) Auth { return Auth{tokenSum: sha256.Sum256([]byte(password))} }

// OriginCheck reports whether the request names its origin (Origin, else
// Referer) and whether that origin's host is the request's Host. A
// browser's Sec-Fetch-Site other than same-origin or none (typed by the
// user) counts as a mismatch.
func OriginCheck(r *http.Request) (present, same bool) {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return true, false
	}
	for _, h := range []string{"Origin", "Referer"} {
		v := r.Header.Get(h)
		if v == "" {
			continue
		}
		u, err := url.Parse(v)
		if err != nil || u.Host == "" {
			return true, false // includes Origin: null
		}
		return true, strings.EqualFold(u.Host, r.Host)
	}
	return false, false
}

// CookieName names the operator's session cookie, set by the login
// form: HttpOnly, SameSite=Strict, valid while the password is.
const CookieName = "blanket_operator"

// SessionValue is the session cookie's value: an HMAC of a fixed label
// keyed by the password's hash, so the cookie proves the password was
// typed without holding it.
func (a Auth) SessionValue() string {
	m := hmac.New(sha256.New, a.tokenSum[:])
	m.Write([]byte("blanket operator session v1"))
	return hex.EncodeToString(m.Sum(nil))
}

// Session reports whether r carries the operator's session cookie or the
// X-Operator-Token header.
func (a Auth) Session(r *http.Request) bool {
	if c, err := r.Cookie(CookieName); err == nil && hmac.Equal([]byte(c.Value), []byte(a.SessionValue())) {
		return true
	}
	return a.CheckToken(r.Header.Get("X-Operator-Token"))
}

// CheckToken compares tok with the operator password in constant time (of
// the digests, so the password's length does not leak either).
func (a Auth) CheckToken(tok string) bool {
	if tok == "" {
		return false
	}
	sum, want := sha256.Sum256([]byte(tok)), a.tokenSum
	return subtle.ConstantTimeCompare(sum[:], want[:]) == 1
}

// ClientAddr is the request's client IP address, for per-client limits.
func ClientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// Allowed refuses a request naming another origin, then requires
// the operator password: the session cookie, the X-Operator-Token header
// or the form field "token". A same-origin Origin header proves nothing
// (any program can send one), so it never stands in for the password.
func (a Auth) Allowed(r *http.Request) (bool, string) {
	if present, same := OriginCheck(r); present && !same {
		return false, "cross-origin request refused"
	}
	if a.Session(r) || a.CheckToken(r.PostFormValue("token")) {
		return true, ""
	}
	return false, "operator password required: log in on the operator page (or send the X-Operator-Token header)"
}
