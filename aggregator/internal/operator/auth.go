package operator

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Auth checks the operator password: every operator POST needs it (the
// session cookie the login form sets, the X-Operator-Token header or the
// form field "token"), and a foreign origin is refused regardless. Every
// presented password (login form, header, form field) is limited per
// client address (Limiter: LoginBurst, then one per LoginEvery); the
// session cookie is not.
type Auth struct {
	tokenSum [32]byte // SHA-256 of the password
	limit    *Limiter // nil: no limit (the zero Auth)
}

// NewAuth returns the check of password, limited per client address.
func NewAuth(password string) Auth {
	return Auth{tokenSum: sha256.Sum256([]byte(password)), limit: NewLimiter(LoginBurst, LoginEvery)}
}

// Guess checks tok, a password r presents, within r's address's limit: ok
// if it is the password; wait > 0 if the address has no attempt left (tok
// was not checked; the next attempt may come after wait). An empty tok is
// no attempt. A right password resets the address's limit.
func (a Auth) Guess(r *http.Request, tok string) (ok bool, wait time.Duration) {
	if tok == "" {
		return false, 0
	}
	addr := ClientAddr(r)
	if a.limit != nil {
		if allowed, w := a.limit.Take(addr); !allowed {
			return false, w
		}
	}
	if !a.CheckToken(tok) {
		return false, 0
	}
	if a.limit != nil {
		a.limit.Reset(addr)
	}
	return true, 0
}

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
// X-Operator-Token header (a limited Guess).
func (a Auth) Session(r *http.Request) bool {
	if c, err := r.Cookie(CookieName); err == nil && hmac.Equal([]byte(c.Value), []byte(a.SessionValue())) {
		return true
	}
	ok, _ := a.Guess(r, r.Header.Get("X-Operator-Token"))
	return ok
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
	ok, why, _ := a.AllowedWait(r)
	return ok, why
}

// AllowedWait is Allowed, also returning how long r's address must wait
// when it is out of password attempts (0 otherwise).
func (a Auth) AllowedWait(r *http.Request) (bool, string, time.Duration) {
	if present, same := OriginCheck(r); present && !same {
		return false, "cross-origin request refused", 0
	}
	if c, err := r.Cookie(CookieName); err == nil && hmac.Equal([]byte(c.Value), []byte(a.SessionValue())) {
		return true, "", 0
	}
	tok := r.Header.Get("X-Operator-Token")
	if tok == "" {
		tok = r.PostFormValue("token")
	}
	ok, wait := a.Guess(r, tok)
	switch {
	case ok:
		return true, "", 0
	case wait > 0:
		return false, TooManyAttempts(wait), wait
	}
	return false, "operator password required: log in on the operator page (or send the X-Operator-Token header)", 0
}

// TooManyAttempts is the message for an address out of password
// attempts: "Too many attempts from this address: try again in N s." (N
// rounded up, at least 1).
func TooManyAttempts(wait time.Duration) string {
	return fmt.Sprintf("Too many attempts from this address: try again in %d s.", max(1, int(math.Ceil(wait.Seconds()))))
}
