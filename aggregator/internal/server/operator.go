package server

import (
	"errors"
	"fmt"
	"math"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/aggregator/internal/dashboard"
	"github.com/blanket-fl/blanket/aggregator/internal/operator"
	"github.com/blanket-fl/blanket/aggregator/internal/rounds"
	"github.com/blanket-fl/blanket/shared/ledger"
	"github.com/blanket-fl/blanket/shared/task"
	"github.com/blanket-fl/blanket/web/console"
)

// ErrStopped is returned by Resume once the round loop has stopped for
// good (privacy budget exhausted, or Config.Rounds completed).
var ErrStopped = rounds.ErrStopped

// maxOperatorForm bounds an operator POST body.
const maxOperatorForm = 16 << 10

// Reconfigure validates a new configuration and schedules it for the next
// announced round (at once if no round is open): the open round's batch is
// still parsed and estimated with the parameters it was announced with.
// The parameters are rebuilt like the command-line flags (operator.Plan:
// params.Build for a model of d parameters and Config.ExpectedN reports,
// l by FLAME Theorem 5 from n and n_p) and must pass wire.Params.Validate, the
// server's configuration validation, the analyzer's construction and the
// budget check's release validation. The ledger, its target and the
// accounting are unchanged: the next rounds are charged against what was
// already spent.
func (s *Server) Reconfigure(c operator.ConfigChange) error {
	return s.Machine.Reconfigure(func(rc *rounds.RoundConfig, nextRound int) (*rounds.RoundConfig, error) {
		cur := s.cfg
		te, td := s.ledger.Target()
		n := cur.ExpectedN
		np, lr, timeout, err := operator.Plan(c, operator.Current{Params: rc.Params, ServerLR: rc.ServerLR, Timeout: rc.Timeout,
			ExpectedN: n, Rounds: cur.Rounds, TargetEpsilon: te, TargetDelta: td,
			OfferedSigma: func() (float64, error) { return s.operatorSigma(rc) }})
		if err != nil {
			return nil, err
		}
		cand := cur // a copy: validated as a whole, never stored
		cand.Params, cand.ServerLR, cand.RoundTimeout = np, lr, timeout
		if _, err := cand.withDefaults(); err != nil {
			return nil, err
		}
		next, err := rounds.NewRoundConfig(np, lr, timeout)
		if err != nil {
			return nil, err
		}
		ps := next.Proto
		if err := ps.Release(1, n, int(np.NP)).Validate(); err != nil {
			return nil, fmt.Errorf("server: expected n = %d does not fit the padding n_p = %d: %w", n, np.NP, err)
		}
		// A configuration whose next round would not fit the privacy
		// budget would stop training for good at that round: refuse it
		// now, while the current configuration can still go on.
		if eps, err := s.ledger.CanCharge(ps.Release(nextRound, n, int(np.NP))); err != nil {
			if errors.Is(err, ledger.ErrBudgetExhausted) {
				return nil, fmt.Errorf("server: with this configuration round %d would bring ε to %.4g, above the target %g, and training would stop: choose a smaller ε_l", nextRound, eps, te)
			}
			return nil, fmt.Errorf("server: budget check: %w", err)
		}
		return next, nil
	})
}

// OperatorToken is the operator password (given, or made up at start).
func (s *Server) OperatorToken() string { return s.cfg.Web.OperatorToken }

// serveLogin is POST /operator/login: the password form. A right password
// sets the session cookie and returns to the operator page.
func (s *Server) serveLogin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxOperatorForm)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form: "+err.Error(), http.StatusBadRequest)
		return
	}
	if present, same := operator.OriginCheck(r); present && !same {
		http.Error(w, "cross-origin request refused", http.StatusForbidden)
		return
	}
	// Limited per client address (operator.Limiter): an address out of
	// attempts gets 429 and the page says when to try again.
	if ok, wait := s.auth.Guess(r, strings.TrimSpace(r.PostFormValue("password"))); !ok {
		d := s.OperatorData(false)
		code := http.StatusForbidden
		if wait > 0 {
			s.log.Warn("operator login refused: too many attempts", "remote", r.RemoteAddr, "retry_after", wait)
			d.Error = operator.TooManyAttempts(wait)
			code = http.StatusTooManyRequests
			w.Header().Set("Retry-After", retryAfter(wait))
		} else {
			s.log.Warn("operator login refused", "remote", r.RemoteAddr)
			d.Error = "Wrong password. It was printed where the demo was started (make run)."
		}
		operatorHeaders(w)
		renderPage(w, r, code, console.Operator(d))
		return
	}
	http.SetCookie(w, &http.Cookie{Name: operator.CookieName, Value: s.auth.SessionValue(), Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, "/operator?done=login", http.StatusSeeOther)
}

// retryAfter is a Retry-After value: wait in whole seconds, rounded up.
func retryAfter(wait time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(wait.Seconds()))))
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
	"task":  "Task chosen for the next class: it starts with New class. This class keeps its task, model and ledger.",
}

func (s *Server) serveOperator(w http.ResponseWriter, r *http.Request) {
	d := s.OperatorData(s.auth.Session(r))
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
	if _, ok := operatorMessages[action]; !ok || ((action == "newclass" || action == "task") && !s.cfg.Web.NewClass) {
		http.NotFound(w, r)
		return
	}
	limit := int64(maxOperatorForm)
	if action == "task" {
		limit = maxTaskUpload
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	err := r.ParseForm()
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); err == nil && action == "task" && mt == "multipart/form-data" {
		err = r.ParseMultipartForm(maxTaskUpload)
	}
	if err != nil {
		if mb := (*http.MaxBytesError)(nil); errors.As(err, &mb) {
			http.Error(w, fmt.Sprintf("request larger than %d bytes (a task definition is at most %d)", limit, task.MaxFileBytes), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "bad form: "+err.Error(), http.StatusBadRequest)
		return
	}
	if ok, why, wait := s.auth.AllowedWait(r); !ok {
		s.log.Warn("operator request refused", "action", action, "reason", why, "remote", r.RemoteAddr,
			"origin", r.Header.Get("Origin"), "referer", r.Header.Get("Referer"))
		code := http.StatusForbidden
		if wait > 0 {
			code = http.StatusTooManyRequests
			w.Header().Set("Retry-After", retryAfter(wait))
		}
		http.Error(w, why, code)
		return
	}
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
		var c operator.ConfigChange
		if c, err = operator.ParseForm(r.PostForm); err == nil {
			err = s.Reconfigure(c)
		}
	case "newclass":
		s.RequestNewClass()
	case "task":
		_, err = s.chooseTaskRequest(r)
		if mb := (*http.MaxBytesError)(nil); errors.As(err, &mb) {
			code = http.StatusRequestEntityTooLarge
		}
	}
	if err != nil {
		d := s.OperatorData(true)
		d.Error = err.Error()
		if action == "config" {
			d.Form = dashboard.FormFromPost(r.PostForm, d.Form.D)
		}
		operatorHeaders(w)
		renderPage(w, r, code, console.Operator(d))
		return
	}
	http.Redirect(w, r, "/operator?done="+action, http.StatusSeeOther)
}

// RequestNewClass pauses the round loop and asks the supervisor (make run)
// for a new class: /api/status reports new_class_requested, and the
// supervisor restarts the aggregator with a fresh state directory. This
// aggregator's ledger is never reset.
func (s *Server) RequestNewClass() {
	live := s.live
	live.mu.Lock()
	live.newClass = true
	live.mu.Unlock()
	s.log.Info("operator: new class requested (this class's ledger stays on disk)")
	s.Pause()
}

// newClassRequested reports whether the operator asked for a new class.
func (s *Server) newClassRequested() bool {
	live := s.live
	live.mu.Lock()
	defer live.mu.Unlock()
	return live.newClass
}

// markers returns the chart markers (protocol changes).
func (s *Server) markers() []console.Marker {
	live := s.live
	live.mu.Lock()
	defer live.mu.Unlock()
	return slices.Clone(live.markers)
}

// OperatorData collects what the operator page shows; loggedIn shows the
// controls, otherwise the password form.
func (s *Server) OperatorData(loggedIn bool) console.OperatorData {
	cfg := s.cfg
	var d console.OperatorData
	s.View(func(st *checkpoint.State, c rounds.Control) {
		d = console.OperatorData{State: dashboard.State(c.Stopped, c.Paused), Stopped: c.Stopped, Round: st.Round,
			ModelResets: len(st.ModelResets), Fingerprint: s.fp, JoinURL: cfg.Web.JoinURL, QR: cfg.Web.qr,
			LoggedIn: loggedIn, NewClass: cfg.Web.NewClass}
		if st.Open != nil {
			d.Deadline, d.OpenRound = st.Open.Deadline, st.Open.Round
		}
		if pc := c.PendingCfg; pc != nil {
			d.Pending = append(d.Pending, dashboard.Pending(pc.Params, pc.Timeout))
		}
		if c.PendingReset {
			d.Pending = append(d.Pending, "model reset to zero")
		}
	})
	if cfg.Task != nil {
		d.TaskName, d.TaskTitle = cfg.Task.Name, cfg.Task.Title
	}
	if loggedIn && cfg.Web.NewClass {
		s.operatorTasks(&d)
	}
	rc := s.Current()
	d.Form = dashboard.Form(s.settings(), func() (float64, error) { return s.operatorSigma(rc) })
	return d
}
