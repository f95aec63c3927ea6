package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/ledger"
	"github.com/blanket-fl/blanket/shared/mechanism"
	"github.com/blanket-fl/blanket/shared/wire"
	"github.com/blanket-fl/blanket/web/console"
)

// ErrStopped is returned by Resume once the round loop has stopped for
// good (privacy budget exhausted, or Config.Rounds completed).
var ErrStopped = errors.New("server: the round loop has stopped")

// maxOperatorForm bounds an operator POST body.
const maxOperatorForm = 16 << 10

// maxRoundTimeout bounds the round timeout an operator may set.
const maxRoundTimeout = 24 * time.Hour

// pendingConfig is a validated configuration waiting for the open round
// to finish.
type pendingConfig struct {
	params  wire.Params
	proto   *protocolSetup
	lr      float64
	timeout time.Duration
}

// Pause stops announcing new rounds; the open round (if any) still
// finishes. Resume undoes it.
func (s *Server) Pause() {
	s.mu.Lock()
	s.paused = true
	s.mu.Unlock()
	s.log.Info("operator: paused (no new round will be announced)")
	s.publishStatus()
}

// Resume lets the round loop announce rounds again. It returns ErrStopped
// (wrapped with the reason) if the loop has stopped for good.
func (s *Server) Resume() error {
	s.mu.Lock()
	stopped := s.stopped
	if stopped == "" {
		s.paused = false
	}
	s.mu.Unlock()
	if stopped != "" {
		return fmt.Errorf("%w: %s", ErrStopped, stopped)
	}
	s.log.Info("operator: resumed")
	s.notify()
	s.publishStatus()
	return nil
}

// Paused reports whether the operator paused the round loop.
func (s *Server) Paused() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.paused
}

// ResetModel sets the model back to zero before the next round (at once if
// no round is open; otherwise when the open round finishes, whose update
// still applies to the old model first).
//
// Privacy: the ledger is NOT reset. The volunteers of the new model are
// the same people whose reports were already charged; a fresh budget would
// let an observer of both models learn about them at the sum of both
// epsilons while the page claimed one. Every release stays charged against
// the same target.
func (s *Server) ResetModel() error {
	s.procMu.Lock()
	defer s.procMu.Unlock()
	s.mu.Lock()
	s.pendingReset = true
	open := s.st.Open != nil
	s.mu.Unlock()
	s.log.Info("operator: model reset requested (the privacy ledger is kept)", "waits_for_open_round", open)
	if !open {
		return s.applyPending()
	}
	s.publishStatus()
	return nil
}

// ConfigChange is an operator's new round configuration. Zero fields keep
// the current value, except K, Beta and ServerLR, whose zero means the
// default (k = d/50; server learning rate d/k for ss-topk, 1 otherwise).
type ConfigChange struct {
	Protocol     string  // ss-simple, ss-double, ss-topk or secagg
	EpsL         float64 // local budget of one report
	Clip         float64 // clipping bound C
	K            int     // coordinates per client (ss-double, ss-topk)
	Beta         float64 // k/d, used when K is 0
	NPRatio      float64 // n/n_p: n_p = ceil(ExpectedN/NPRatio) made feasible (0: DefaultNPRatio)
	CheckInP     float64
	RoundTimeout time.Duration
	MinBatch     int
	ServerLR     float64
}

// Sane ranges of the operator's values: a value outside them either
// stops training (a local budget whose first round exceeds the target),
// removes the protection it is there for (a batch of one or two reports
// hides nobody), or leaves a classroom waiting (a day-long round).
const (
	maxOperatorEpsL     = 1000
	maxOperatorClip     = 1
	minOperatorMinBatch = 3
	minOperatorTimeout  = 5 * time.Second
	maxOperatorTimeout  = time.Hour
	maxOperatorServerLR = 1000
	minOperatorNPRatio  = 0.25
	maxOperatorNPRatio  = 100
)

// checkRanges refuses values outside the sane ranges (zero keeps the
// current value or the default) for a model of d parameters and n
// expected reports per round.
func (c ConfigChange) checkRanges(d, n int) error {
	var errs []error
	out := func(name string, v any, lo, hi any) {
		errs = append(errs, fmt.Errorf("%s = %v is outside [%v, %v]", name, v, lo, hi))
	}
	if c.EpsL != 0 && c.EpsL > maxOperatorEpsL {
		out("local budget ε_l", c.EpsL, "> 0", maxOperatorEpsL)
	}
	if c.Clip != 0 && c.Clip > maxOperatorClip {
		out("clipping bound C", c.Clip, "> 0", maxOperatorClip)
	}
	if c.K != 0 && (c.K < 1 || c.K > d/2) {
		out("k", c.K, 1, d/2)
	}
	if c.Beta != 0 && c.Beta > 0.5 {
		out("β = k/d", c.Beta, "> 0", 0.5)
	}
	if c.NPRatio != 0 && (c.NPRatio < minOperatorNPRatio || c.NPRatio > maxOperatorNPRatio) {
		out("n / n_p", c.NPRatio, minOperatorNPRatio, maxOperatorNPRatio)
	}
	if c.CheckInP > 1 {
		out("check-in probability p", c.CheckInP, "> 0", 1)
	}
	if c.RoundTimeout != 0 && (c.RoundTimeout < minOperatorTimeout || c.RoundTimeout > maxOperatorTimeout) {
		out("round timeout", c.RoundTimeout, minOperatorTimeout, maxOperatorTimeout)
	}
	if c.MinBatch != 0 && (c.MinBatch < minOperatorMinBatch || c.MinBatch > max(n, minOperatorMinBatch)) {
		out("minimum batch", c.MinBatch, minOperatorMinBatch, max(n, minOperatorMinBatch))
	}
	if c.ServerLR > maxOperatorServerLR {
		out("server learning rate", c.ServerLR, "> 0", maxOperatorServerLR)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	return nil
}

// Reconfigure validates a new configuration and schedules it for the next
// announced round (at once if no round is open): the open round's batch is
// still parsed and estimated with the parameters it was announced with.
// The parameters are rebuilt like the command-line flags (buildParams for
// a model of d parameters and Config.ExpectedN reports: width k, l by
// FLAME Theorem 5 from n and n_p) and must pass wire.Params.Validate, the
// server's configuration validation, the analyzer's construction and the
// budget check's release validation. The ledger, its target and the
// accounting are unchanged: the next rounds are charged against what was
// already spent.
func (s *Server) Reconfigure(c ConfigChange) error {
	s.procMu.Lock()
	defer s.procMu.Unlock()
	cur := s.cfg // writers hold procMu: reading it here is safe
	p := cur.Params
	for _, v := range []struct {
		name string
		v    float64
	}{{"eps_l", c.EpsL}, {"clip", c.Clip}, {"beta", c.Beta}, {"np_ratio", c.NPRatio}, {"check_in_p", c.CheckInP}, {"server_lr", c.ServerLR}} {
		if math.IsNaN(v.v) || math.IsInf(v.v, 0) || v.v < 0 {
			return fmt.Errorf("server: %s must be a finite number >= 0, got %v", v.name, v.v)
		}
	}
	if c.K < 0 || c.MinBatch < 0 || c.RoundTimeout < 0 || c.RoundTimeout > maxRoundTimeout {
		return fmt.Errorf("server: k, min batch and round timeout must be >= 0 (timeout at most %v)", maxRoundTimeout)
	}
	d := int(p.D)
	n := cur.ExpectedN
	if err := c.checkRanges(d, n); err != nil {
		return err
	}
	proto := p.Protocol
	if c.Protocol != "" {
		var err error
		if proto, err = wire.ParseProtocol(c.Protocol); err != nil {
			return fmt.Errorf("server: %w", err)
		}
	}
	if proto != p.Protocol {
		// A new protocol starts from its own defaults: values the form
		// still shows from the old protocol (server learning rate d/k of
		// ss-topk, its k and padding) are not carried over.
		if c.ServerLR == cur.ServerLR {
			c.ServerLR = 0
		}
		if c.K == int(p.K) {
			c.K = 0
		}
		if p.NP > 0 && math.Abs(c.NPRatio-float64(n)/float64(p.NP)) < 1e-6 {
			c.NPRatio = 0
		}
		// Secure summation's clip is an L2 norm, the shuffle protocols' a
		// per-coordinate bound: a switch between them starts from the
		// new one's default.
		if (proto == wire.ProtocolSecAgg) != (p.Protocol == wire.ProtocolSecAgg) && c.Clip == p.Clip {
			c.Clip = 0
		}
	}
	f := paramFlags{protocol: proto.String(), randomizer: p.Randomizer.String(), buckets: int(p.Buckets),
		minBatch: int(p.MinBatch), epsL: p.EpsL, deltaL: p.DeltaL, clip: p.Clip, checkIn: p.CheckInP, serverLR: c.ServerLR}
	if (proto == wire.ProtocolSecAgg) != (p.Protocol == wire.ProtocolSecAgg) {
		f.clip = 0 // the other kind of clip: the new protocol's default
	}
	if p.Protocol == wire.ProtocolSecAgg && proto != wire.ProtocolSecAgg {
		f.randomizer = wire.RandomizerLaplace.String()
	}
	if proto.IsAPES() != p.Protocol.IsAPES() && proto != wire.ProtocolSecAgg {
		// APES and S-APES use clip-laplace, the others never.
		f.randomizer = wire.RandomizerLaplace.String()
		if proto.IsAPES() {
			f.randomizer = wire.RandomizerClipLaplace.String()
		}
	}
	if proto == p.Protocol && proto != wire.ProtocolSSSimple {
		f.quota = int(p.Quota)
	}
	if c.EpsL > 0 {
		f.epsL = c.EpsL
	}
	if c.Clip > 0 {
		f.clip = c.Clip
	}
	if c.CheckInP > 0 {
		f.checkIn = c.CheckInP
	}
	if c.MinBatch > 0 {
		f.minBatch = c.MinBatch
	}
	k := c.K
	if k == 0 && c.Beta > 0 {
		k = max(1, min(d-1, int(math.Round(c.Beta*float64(d)))))
	}
	f.k = k
	if proto == wire.ProtocolSecAgg {
		f.k, f.bits, f.sigma = 0, int(p.Bits), p.Sigma
		if p.Protocol != wire.ProtocolSecAgg {
			// Calibrated to the ledger's target over the configured
			// rounds at the new check-in rate (the budget check below
			// still refuses a round that would not fit).
			rounds := cur.Rounds
			if rounds == 0 {
				rounds = DefaultSecAggRounds
			}
			te, td := s.ledger.Target()
			var sigma float64
			var err error
			if f.checkIn == p.CheckInP {
				// What the page offered (σ in grid units does not depend
				// on the clip: the scale is 2^(bits-1)-1 over it).
				sigma, err = s.operatorSigma(cur)
			} else {
				sigma, err = secaggSigma(d, n, f, rounds, te, td)
			}
			if err != nil {
				return fmt.Errorf("server: %w", err)
			}
			f.sigma = sigma
		}
	} else if proto != wire.ProtocolSSSimple {
		// Width is k (one message per group), so n_p must make d*n_p a
		// multiple of k: mechanism.FeasibleNP.
		width := k
		if width == 0 {
			width = max(1, int(math.Round(float64(d)/DefaultBetaInv)))
			if width >= d {
				width = d - 1
			}
		}
		ratio := c.NPRatio
		if ratio == 0 {
			ratio = DefaultNPRatio
		}
		// A small tolerance so that the ratio the form shows (n / n_p,
		// printed in full) gives back the same n_p.
		f.np = mechanism.FeasibleNP(d, width, int(math.Ceil(float64(n)/ratio-1e-9)))
	}
	if f.quota > 0 && f.quota < f.minBatch {
		f.quota = 0
	}
	np, lr, err := buildParams(d, n, f)
	if err != nil {
		return fmt.Errorf("server: configuration: %w", err)
	}
	timeout := cur.RoundTimeout
	if c.RoundTimeout > 0 {
		timeout = c.RoundTimeout
	}
	cand := cur
	cand.Params, cand.ServerLR, cand.RoundTimeout = np, lr, timeout
	if _, err := cand.withDefaults(); err != nil {
		return err
	}
	ps, err := setupProtocol(np)
	if err != nil {
		return err
	}
	if err := ps.releaseFor(1, n, int(np.NP)).Validate(); err != nil {
		return fmt.Errorf("server: expected n = %d does not fit the padding n_p = %d: %w", n, np.NP, err)
	}
	// A configuration whose next round would not fit the privacy budget
	// would stop training for good at that round: refuse it now, while
	// the current configuration can still go on.
	s.mu.RLock()
	next := s.st.Round + 1
	if s.st.Open != nil {
		next = s.st.Open.Round + 1
	}
	s.mu.RUnlock()
	if eps, err := s.ledger.CanCharge(ps.releaseFor(next, n, int(np.NP))); err != nil {
		if errors.Is(err, ledger.ErrBudgetExhausted) {
			te, _ := s.ledger.Target()
			return fmt.Errorf("server: with this configuration round %d would bring ε to %.4g, above the target %g, and training would stop: choose a smaller ε_l", next, eps, te)
		}
		return fmt.Errorf("server: budget check: %w", err)
	}
	s.mu.Lock()
	s.pendingCfg = &pendingConfig{params: np, proto: ps, lr: lr, timeout: timeout}
	open := s.st.Open != nil
	s.mu.Unlock()
	s.log.Info("operator: new configuration", "protocol", np.Protocol, "k", np.K, "l", np.L, "n_p", np.NP, "eps_l", np.EpsL,
		"clip", np.Clip, "check_in_p", np.CheckInP, "min_batch", np.MinBatch, "round_timeout", timeout, "server_lr", lr,
		"waits_for_open_round", open)
	if !open {
		return s.applyPending()
	}
	s.publishStatus()
	return nil
}

// applyPending applies a pending configuration and model reset. The
// caller holds procMu and no round is open, so no announcement or batch
// uses the parameters being replaced.
func (s *Server) applyPending() error {
	s.mu.RLock()
	pc, reset := s.pendingCfg, s.pendingReset
	s.mu.RUnlock()
	if pc == nil && !reset {
		return nil
	}
	if pc != nil && pc.params.Protocol != s.cfg.Params.Protocol {
		live := s.cfg.Web.live
		live.mu.Lock()
		live.markers = append(live.markers, console.Marker{Round: s.st.Round + 1, Label: pc.params.Protocol.String()})
		live.mu.Unlock()
	}
	err := s.commit(func(st *checkpoint) {
		if pc != nil {
			s.cfg.Params, s.cfg.ServerLR, s.cfg.RoundTimeout, s.proto = pc.params, pc.lr, pc.timeout, pc.proto
			st.Params = toParamsJSON(pc.params)
		}
		if reset {
			st.Model = make([]float64, len(st.Model))
			st.ModelResets = append(st.ModelResets, st.Round)
		}
		s.pendingCfg, s.pendingReset = nil, false
	})
	if pc != nil {
		s.log.Info("operator: configuration applied", "next_round", s.st.Round+1)
	}
	if reset {
		s.log.Info("operator: model reset to zero; the privacy ledger is kept", "next_round", s.st.Round+1)
	}
	return err
}

// waitResume blocks while the operator has paused the loop. It reports
// false if the loop must stop instead (stopped for good, or ctx done).
func (s *Server) waitResume(ctx context.Context) bool {
	for {
		s.mu.RLock()
		stopped, paused := s.stopped, s.paused
		s.mu.RUnlock()
		if stopped != "" || ctx.Err() != nil {
			return false
		}
		if !paused {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-s.wake:
		}
	}
}

func sha256Sum(s string) [32]byte { return sha256.Sum256([]byte(s)) }

// originCheck reports whether the request names its origin (Origin, else
// Referer) and whether that origin's host is the request's Host. A
// browser's Sec-Fetch-Site other than same-origin or none (typed by the
// user) counts as a mismatch.
func originCheck(r *http.Request) (present, same bool) {
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

// operatorCookie names the operator's session cookie, set by the login
// form: HttpOnly, SameSite=Strict, valid while the password is.
const operatorCookie = "blanket_operator"

// sessionValue is the session cookie's value: an HMAC of a fixed label
// keyed by the password's hash, so the cookie proves the password was
// typed without holding it.
func (s *Server) sessionValue() string {
	m := hmac.New(sha256.New, s.cfg.Web.tokenSum[:])
	m.Write([]byte("blanket operator session v1"))
	return hex.EncodeToString(m.Sum(nil))
}

// operatorSession reports whether r carries the operator's session cookie
// or the X-Operator-Token header.
func (s *Server) operatorSession(r *http.Request) bool {
	if c, err := r.Cookie(operatorCookie); err == nil && hmac.Equal([]byte(c.Value), []byte(s.sessionValue())) {
		return true
	}
	return s.checkToken(r.Header.Get("X-Operator-Token"))
}

// checkToken compares tok with the operator password in constant time.
func (s *Server) checkToken(tok string) bool {
	if tok == "" {
		return false
	}
	sum, want := sha256Sum(tok), s.cfg.Web.tokenSum
	return subtle.ConstantTimeCompare(sum[:], want[:]) == 1
}

// OperatorToken is the operator password (given, or made up at start).
func (s *Server) OperatorToken() string { return s.cfg.Web.OperatorToken }

// clientAddr is the request's client IP address, for per-client limits.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// operatorAllowed refuses a request naming another origin, then requires
// the operator password: the session cookie, the X-Operator-Token header
// or the form field "token". A same-origin Origin header proves nothing
// (any program can send one), so it never stands in for the password.
func (s *Server) operatorAllowed(r *http.Request) (bool, string) {
	if present, same := originCheck(r); present && !same {
		return false, "cross-origin request refused"
	}
	if s.operatorSession(r) || s.checkToken(r.PostFormValue("token")) {
		return true, ""
	}
	return false, "operator password required: log in on the operator page (or send the X-Operator-Token header)"
}

// serveLogin is POST /operator/login: the password form. A right password
// sets the session cookie and returns to the operator page.
func (s *Server) serveLogin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxOperatorForm)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form: "+err.Error(), http.StatusBadRequest)
		return
	}
	if present, same := originCheck(r); present && !same {
		http.Error(w, "cross-origin request refused", http.StatusForbidden)
		return
	}
	if !s.checkToken(strings.TrimSpace(r.PostFormValue("password"))) {
		s.log.Warn("operator login refused", "remote", r.RemoteAddr)
		d := s.OperatorData(false)
		d.Error = "Wrong password. It was printed where the demo was started (make run)."
		operatorHeaders(w)
		renderPage(w, r, http.StatusForbidden, console.Operator(d))
		return
	}
	http.SetCookie(w, &http.Cookie{Name: operatorCookie, Value: s.sessionValue(), Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, "/operator?done=login", http.StatusSeeOther)
}

// operatorMessages are the outcomes named by /operator?done=...
var operatorMessages = map[string]string{
	"start":  "Training started (or resumed).",
	"pause":  "Paused: no new round will be announced; the open round still finishes.",
	"reset":  "The model is reset to zero for the next round. Privacy already spent is kept in the ledger.",
	"config": "Configuration accepted: it applies from the next announced round.",
	"newclass": "A new class is starting: a fresh model and privacy ledger; the previous class's ledger stays on disk. " +
		"Press Start when the students are ready.",
	"login": "Logged in.",
}

func (s *Server) serveOperator(w http.ResponseWriter, r *http.Request) {
	d := s.OperatorData(s.operatorSession(r))
	d.Message = operatorMessages[r.URL.Query().Get("done")]
	operatorHeaders(w)
	renderPage(w, r, http.StatusOK, console.Operator(d))
}

// operatorHeaders keeps the operator page out of frames (clickjacking).
func operatorHeaders(w http.ResponseWriter) {
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Content-Security-Policy", "frame-ancestors 'none'")
	w.Header().Set("Referrer-Policy", "same-origin")
}

// serveOperatorAction is POST /operator/{start,pause,reset,config}.
func (s *Server) serveOperatorAction(w http.ResponseWriter, r *http.Request) {
	action := r.PathValue("action")
	if action == "login" {
		s.serveLogin(w, r)
		return
	}
	if _, ok := operatorMessages[action]; !ok || (action == "newclass" && !s.cfg.Web.NewClass) {
		http.NotFound(w, r)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxOperatorForm)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form: "+err.Error(), http.StatusBadRequest)
		return
	}
	if ok, why := s.operatorAllowed(r); !ok {
		s.log.Warn("operator request refused", "action", action, "reason", why, "remote", r.RemoteAddr,
			"origin", r.Header.Get("Origin"), "referer", r.Header.Get("Referer"))
		http.Error(w, why, http.StatusForbidden)
		return
	}
	var err error
	code := http.StatusBadRequest
	switch action {
	case "start":
		err = s.Resume()
		code = http.StatusConflict
	case "pause":
		s.Pause()
	case "reset":
		if err = s.ResetModel(); err != nil {
			code = http.StatusInternalServerError
		}
	case "config":
		var c ConfigChange
		if c, err = parseConfigForm(r.PostForm); err == nil {
			err = s.Reconfigure(c)
		}
	case "newclass":
		s.RequestNewClass()
	}
	if err != nil {
		d := s.OperatorData(true)
		d.Error = err.Error()
		if action == "config" {
			d.Form = formFromPost(r.PostForm, d.Form.D)
		}
		operatorHeaders(w)
		renderPage(w, r, code, console.Operator(d))
		return
	}
	http.Redirect(w, r, "/operator?done="+action, http.StatusSeeOther)
}

// parseConfigForm reads the operator form; empty fields are zero.
func parseConfigForm(f url.Values) (ConfigChange, error) {
	var c ConfigChange
	var errs []error
	fl := func(name string) float64 {
		v := strings.TrimSpace(f.Get(name))
		if v == "" {
			return 0
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			errs = append(errs, fmt.Errorf("%s: %q is not a finite number", name, v))
		}
		return x
	}
	in := func(name string) int {
		v := strings.TrimSpace(f.Get(name))
		if v == "" {
			return 0
		}
		x, err := strconv.Atoi(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %q is not an integer", name, v))
		}
		return x
	}
	c.Protocol = strings.TrimSpace(f.Get("protocol"))
	c.EpsL, c.Clip, c.K, c.Beta = fl("eps_l"), fl("clip"), in("k"), fl("beta")
	c.NPRatio, c.CheckInP, c.MinBatch, c.ServerLR = fl("np_ratio"), fl("check_in_p"), in("min_batch"), fl("server_lr")
	if secs := fl("round_timeout"); secs < 0 || secs > maxRoundTimeout.Seconds() {
		errs = append(errs, fmt.Errorf("round_timeout: %v s is outside (0, %v]", secs, maxRoundTimeout.Seconds()))
	} else {
		c.RoundTimeout = time.Duration(secs * float64(time.Second))
	}
	return c, errors.Join(errs...)
}

func formFromPost(f url.Values, d int) console.OperatorForm {
	return console.OperatorForm{Protocol: f.Get("protocol"), EpsL: f.Get("eps_l"), Clip: f.Get("clip"), K: f.Get("k"),
		Beta: f.Get("beta"), NPRatio: f.Get("np_ratio"), CheckInP: f.Get("check_in_p"), RoundTimeout: f.Get("round_timeout"),
		MinBatch: f.Get("min_batch"), ServerLR: f.Get("server_lr"), D: d}
}

// RequestNewClass pauses the round loop and asks the supervisor (make run)
// for a new class: /api/status reports new_class_requested, and the
// supervisor restarts the aggregator with a fresh state directory. This
// aggregator's ledger is never reset.
func (s *Server) RequestNewClass() {
	live := s.cfg.Web.live
	live.mu.Lock()
	live.newClass = true
	live.mu.Unlock()
	s.log.Info("operator: new class requested (this class's ledger stays on disk)")
	s.Pause()
}

// newClassRequested reports whether the operator asked for a new class.
func (s *Server) newClassRequested() bool {
	live := s.cfg.Web.live
	live.mu.Lock()
	defer live.mu.Unlock()
	return live.newClass
}

// markers returns the chart markers (protocol changes).
func (s *Server) markers() []console.Marker {
	live := s.cfg.Web.live
	live.mu.Lock()
	defer live.mu.Unlock()
	return slices.Clone(live.markers)
}

// OperatorData collects what the operator page shows; loggedIn shows the
// controls, otherwise the password form.
func (s *Server) OperatorData(loggedIn bool) console.OperatorData {
	s.mu.RLock()
	cfg := s.cfg
	d := console.OperatorData{State: state(s.stopped, s.paused), Stopped: s.stopped, Round: s.st.Round,
		ModelResets: len(s.st.ModelResets), Fingerprint: s.fp, JoinURL: cfg.Web.JoinURL, QR: cfg.Web.qr,
		LoggedIn: loggedIn, NewClass: cfg.Web.NewClass}
	if s.st.Open != nil {
		d.Deadline = s.st.Open.Deadline
	}
	if s.st.Open != nil {
		d.OpenRound = s.st.Open.Round
	}
	if pc := s.pendingCfg; pc != nil && pc.params.Protocol == wire.ProtocolSecAgg {
		d.Pending = append(d.Pending, fmt.Sprintf("%s, σ = %.4g, %d bits, C = %g (L2), q = %g, min batch %d, quota %d, timeout %v",
			pc.params.Protocol, pc.params.Sigma, pc.params.Bits, pc.params.Clip, pc.params.CheckInP, pc.params.MinBatch,
			pc.params.Quota, pc.timeout))
	} else if pc != nil {
		d.Pending = append(d.Pending, fmt.Sprintf("%s, k = %d, l = %d, n_p = %d, ε_l = %g, C = %g, p = %g, min batch %d, timeout %v",
			pc.params.Protocol, pc.params.K, pc.params.L, pc.params.NP, pc.params.EpsL, pc.params.Clip, pc.params.CheckInP,
			pc.params.MinBatch, pc.timeout))
	}
	if s.pendingReset {
		d.Pending = append(d.Pending, "model reset to zero")
	}
	s.mu.RUnlock()
	p := cfg.Params
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	d.Form = console.OperatorForm{Protocol: p.Protocol.String(), EpsL: g(p.EpsL), Clip: g(p.Clip), CheckInP: g(p.CheckInP),
		RoundTimeout: g(cfg.RoundTimeout.Seconds()), MinBatch: strconv.Itoa(int(p.MinBatch)), ServerLR: g(cfg.ServerLR), D: int(p.D),
		Defaults: s.protocolDefaults(cfg)}
	if p.Protocol != wire.ProtocolSSSimple && p.NP > 0 {
		d.Form.K = strconv.Itoa(int(p.K))
		d.Form.NPRatio = g(float64(cfg.ExpectedN) / float64(p.NP))
	}
	return d
}

// protocolDefaults are the form values each protocol starts from for the
// current model, expected n and local budget (buildParams with the
// protocol's own defaults; secure summation with operatorSigma).
func (s *Server) protocolDefaults(cfg Config) []console.ProtocolDefaults {
	p := cfg.Params
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	var out []console.ProtocolDefaults
	for _, name := range console.Protocols {
		f := paramFlags{protocol: name, randomizer: p.Randomizer.String(), buckets: int(p.Buckets), minBatch: int(p.MinBatch),
			epsL: p.EpsL, deltaL: p.DeltaL, clip: p.Clip, checkIn: p.CheckInP}
		if (name == wire.ProtocolSecAgg.String()) != (p.Protocol == wire.ProtocolSecAgg) {
			f.clip = 0 // the other kind of clip: its default
		}
		if p.Protocol == wire.ProtocolSecAgg {
			f.randomizer, f.epsL = wire.RandomizerLaplace.String(), 0
		}
		if name == wire.ProtocolSecAgg.String() {
			sigma, err := s.operatorSigma(cfg)
			if err != nil {
				continue
			}
			f.sigma, f.bits = sigma, int(p.Bits)
		}
		np, lr, err := buildParams(int(p.D), cfg.ExpectedN, f)
		if err != nil {
			continue
		}
		def := console.ProtocolDefaults{Protocol: name, ServerLR: g(lr)}
		if np.Protocol != wire.ProtocolSSSimple && np.NP > 0 {
			def.K = strconv.Itoa(int(np.K))
			def.NPRatio = g(float64(cfg.ExpectedN) / float64(np.NP))
		}
		out = append(out, def)
	}
	return out
}
