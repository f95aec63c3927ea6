package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/blanket-fl/blanket/relay/internal/intake"
	"github.com/blanket-fl/blanket/relay/internal/round"
	"github.com/blanket-fl/blanket/relay/internal/wsconn"
	"github.com/blanket-fl/blanket/shared/wire"
)

// Config configures an Edge. Zero durations take the relay's defaults.
type Config struct {
	Owner  string // the owning relay's base URL (its internal address, or the relays' load balancer)
	Token  string // the relay's bearer token
	Name   string // this edge's name in the owner's logs
	Logger *slog.Logger
	HTTP   *http.Client
	// Origins lists extra allowed websocket origins, as the relay's.
	Origins []string
	// PingInterval (20 s), PongWait (60 s), FrameTimeout (10 s),
	// WriteWait (10 s), UploadRate (32 KiB/s) and LargeFrames (16) bound
	// connections as the relay's do (relay/internal/server.Config).
	PingInterval, PongWait, FrameTimeout, WriteWait time.Duration
	UploadRate, LargeFrames                         int
}

// Edge is an edge relay: Handler serves /ws itself and passes every other
// request to the owner; Run follows the owner's rounds.
type Edge struct {
	cfg    Config
	owner  *url.URL
	proxy  *httputil.ReverseProxy
	up     websocket.Upgrader
	rounds *round.Machine
	frames *intake.Budget
	// forwards bounds the Shares frames handed to the owner and not yet
	// answered (forwardsPerFrame × LargeFrames): each holds its frame
	// until the owner's answer, which waits for the report's chunk to be
	// answered by the aggregator.
	forwards chan struct{}
	log      *slog.Logger

	mu    sync.Mutex // guards conns, open, and stopping
	conns map[*conn]struct{}
	open  *edgeRound
	stop  context.Context

	// Counters (GET /api/edge): every volunteer frame received is counted
	// once, accepted or rejected with its reason.
	received, accepted, forwardFailed atomic.Uint64
	rmu                               sync.Mutex // guards rejected
	rejected                          map[string]uint64
}

// reject counts a rejected frame by reason.
func (e *Edge) reject(reason string) {
	e.rmu.Lock()
	if e.rejected == nil {
		e.rejected = make(map[string]uint64)
	}
	e.rejected[reason]++
	e.rmu.Unlock()
}

// edgeRound is a round this edge opened: the frames in flight to the
// owner, and the reports the owner accepted from it.
type edgeRound struct {
	rd       *round.Round
	accepted atomic.Uint32
	timer    *time.Timer

	mu       sync.Mutex // guards inFlight and closing
	idle     *sync.Cond // signalled when inFlight falls to 0
	inFlight int        // frames posted to the owner, not yet answered
	closing  bool       // the round closed here: no frame is posted any more
}

// begin counts a frame posted to the owner, unless the round is closing.
func (er *edgeRound) begin() bool {
	er.mu.Lock()
	defer er.mu.Unlock()
	if er.closing {
		return false
	}
	er.inFlight++
	return true
}

func (er *edgeRound) end() {
	er.mu.Lock()
	if er.inFlight--; er.inFlight == 0 {
		er.idle.Broadcast()
	}
	er.mu.Unlock()
}

// drain marks the round closing and waits for the frames in flight.
func (er *edgeRound) drain() {
	er.mu.Lock()
	er.closing = true
	for er.inFlight > 0 {
		er.idle.Wait()
	}
	er.mu.Unlock()
}

type conn struct {
	*wsconn.Conn
	p *round.Participant
}

// New returns an edge for cfg.
func New(cfg Config) (*Edge, error) {
	u, err := url.Parse(cfg.Owner)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("edge: owner URL %q must be http(s)://host[:port]", cfg.Owner)
	}
	if cfg.Token == "" || cfg.Logger == nil {
		return nil, errors.New("edge: a token and a logger are required")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.PingInterval, 20*time.Second)
	def(&cfg.PongWait, 60*time.Second)
	def(&cfg.FrameTimeout, 10*time.Second)
	def(&cfg.WriteWait, 10*time.Second)
	if cfg.UploadRate <= 0 {
		cfg.UploadRate = 32 << 10
	}
	if cfg.LargeFrames <= 0 {
		cfg.LargeFrames = 16
	}
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{}
	}
	e := &Edge{cfg: cfg, owner: u, log: cfg.Logger.With("edge", cfg.Name), rounds: round.New(0),
		conns: make(map[*conn]struct{}), stop: context.Background()}
	e.rounds.SetStreamShares(true)
	if e.frames, err = intake.NewBudget(cfg.LargeFrames); err != nil {
		return nil, fmt.Errorf("edge: %w", err)
	}
	e.forwards = make(chan struct{}, forwardsPerFrame*cfg.LargeFrames)
	e.proxy = httputil.NewSingleHostReverseProxy(u)
	e.up = websocket.Upgrader{HandshakeTimeout: 10 * time.Second, ReadBufferSize: 512, WriteBufferSize: 512,
		WriteBufferPool: &sync.Pool{}, CheckOrigin: e.checkOrigin}
	return e, nil
}

// Handler serves the volunteers' websockets and the edge's health; every
// other route (the join page, the module, the receipts...) is the
// owner's, passed through.
func (e *Edge) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ws", e.handleWS)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /api/edge", e.handleCounts)
	mux.Handle("/", e.proxy)
	return mux
}

// handleCounts is GET /api/edge: the edge's connections and frame counts.
func (e *Edge) handleCounts(w http.ResponseWriter, _ *http.Request) {
	e.mu.Lock()
	n := len(e.conns)
	e.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	e.rmu.Lock()
	rej := make(map[string]uint64, len(e.rejected))
	for k, v := range e.rejected {
		rej[k] = v
	}
	e.rmu.Unlock()
	json.NewEncoder(w).Encode(map[string]any{"connections": n, "received": e.received.Load(), "accepted": e.accepted.Load(),
		"rejected": rej, "forward_failed": e.forwardFailed.Load()})
}

func (e *Edge) checkOrigin(r *http.Request) bool { return wsconn.OriginAllowed(r, e.cfg.Origins) }

// Run follows the owner's rounds and pings the connections until ctx
// ends, then closes every connection (1001).
func (e *Edge) Run(ctx context.Context) error {
	e.mu.Lock()
	e.stop = ctx
	e.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() { e.follow(ctx) })
	wg.Go(func() { e.pinger(ctx) })
	<-ctx.Done()
	e.rounds.Halt()
	wsconn.GoingAway(e.wsConns(), "edge shutting down")
	wg.Wait()
	return nil
}

// post sends a request to the owner with the token; ok is a 2xx answer.
func (e *Edge) post(ctx context.Context, method, path string, q url.Values, body []byte) (*http.Response, error) {
	u := *e.owner
	u.Path = strings.TrimSuffix(u.Path, "/") + path
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+e.cfg.Token)
	req.Header.Set("Blanket-Edge", e.cfg.Name)
	e.mu.Lock()
	req.Header.Set(ConnsHeader, strconv.Itoa(len(e.conns)))
	e.mu.Unlock()
	return e.cfg.HTTP.Do(req)
}

// follow polls the owner for its rounds and opens each for this edge's
// connections.
func (e *Edge) follow(ctx context.Context) {
	var after uint64
	backoff := 250 * time.Millisecond
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 2*PollWait+10*time.Second) // the owner's wait, generously
		resp, err := e.post(pctx, http.MethodGet, RoundPath, url.Values{"after": {strconv.FormatUint(after, 10)}}, nil)
		var body []byte
		if err == nil {
			body, err = io.ReadAll(io.LimitReader(resp.Body, int64(wire.MaxAnnouncementSize)+1))
			resp.Body.Close()
			if err == nil && resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNoContent {
				err = fmt.Errorf("owner answered %s", resp.Status)
			}
		}
		cancel()
		if err != nil {
			e.log.Warn("cannot reach the owning relay; retrying", "err", err, "retry", backoff)
			sleep(ctx, backoff)
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 250 * time.Millisecond
		if resp.StatusCode == http.StatusNoContent {
			continue
		}
		a, err := wire.ParseAnnouncement(body, wire.DefaultLimits())
		if err != nil {
			e.log.Error("the owner's announcement does not parse", "err", err)
			sleep(ctx, time.Second)
			continue
		}
		after = a.Round
		e.openRound(ctx, a, body)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// openRound opens round a here once the owner has counted this edge in.
func (e *Edge) openRound(ctx context.Context, a *wire.Announcement, body []byte) {
	// A round still open here that the owner has moved past (it restarted,
	// or a standby took over, and aborted it) ends now, so that its
	// volunteers take part in the new one.
	e.mu.Lock()
	old := e.open
	e.mu.Unlock()
	if old != nil && old.rd.Num < a.Round {
		e.closed(e.rounds.Close(old.rd, "superseded"))
	}
	now := time.Now()
	if err := e.rounds.CanOpen(a, now); err != nil {
		e.log.Warn("cannot open the owner's round", "round", a.Round, "err", err)
		return
	}
	resp, err := e.post(ctx, http.MethodPost, OpenedPath, url.Values{"round": {strconv.FormatUint(a.Round, 10)}}, nil)
	if err != nil {
		e.log.Warn("cannot tell the owner this edge opens the round", "round", a.Round, "err", err)
		return
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		e.log.Info("the owner's round is no longer open", "round", a.Round, "status", resp.Status)
		return
	}
	e.mu.Lock()
	rd, err := e.rounds.Open(a, body, now)
	if err != nil {
		e.mu.Unlock()
		e.log.Warn("cannot open the owner's round", "round", a.Round, "err", err)
		e.sendCounts(ctx, a.Round, round.EdgeCounts{})
		return
	}
	er := &edgeRound{rd: rd}
	er.idle = sync.NewCond(&er.mu)
	e.open = er
	targets := make([]*conn, 0, len(e.conns))
	for c := range e.conns {
		targets = append(targets, c)
	}
	er.timer = time.AfterFunc(time.Until(e.rounds.NextTick(rd, now)), func() { e.tick(er) })
	e.mu.Unlock()
	e.log.Info("round opened", "round", rd.Num, "population", rd.Population, "deadline", rd.Deadline)
	for _, c := range targets {
		if err := c.Write(rd.Ann, e.cfg.WriteWait); err != nil {
			c.WS.Close()
		}
	}
}

func (e *Edge) tick(er *edgeRound) {
	now := time.Now()
	if c := e.rounds.Tick(er.rd, now); c != nil {
		e.closed(c)
		return
	}
	if next := e.rounds.NextTick(er.rd, now); !next.IsZero() {
		er.timer.Reset(time.Until(next))
	}
}

// closed sends the owner this edge's counts of round c once its frames in
// flight are answered.
func (e *Edge) closed(c *round.Closed) {
	if c == nil {
		return
	}
	e.mu.Lock()
	er := e.open
	ctx := e.stop
	e.mu.Unlock()
	if er == nil || er.rd.Num != c.Num {
		return
	}
	er.timer.Stop()
	go func() {
		er.drain()
		acc := er.accepted.Load()
		counts := round.EdgeCounts{Population: c.Population, CheckedIn: c.CheckedIn,
			Failed: c.CheckedIn - min(acc, c.CheckedIn), Absent: c.Population - min(c.CheckedIn, c.Population)}
		e.log.Info("round closed", "round", c.Num, "why", c.Why, "population", c.Population, "checked_in", c.CheckedIn, "reports", acc)
		e.sendCounts(ctx, c.Num, counts)
	}()
}

// sendCounts posts counts, retrying for a while (the owner's round waits
// for them at most round.EdgeWait past its deadline, then goes on).
func (e *Edge) sendCounts(ctx context.Context, num uint64, c round.EdgeCounts) {
	body, _ := json.Marshal(c)
	for i := 0; i < 5 && ctx.Err() == nil; i++ {
		resp, err := e.post(ctx, http.MethodPost, ClosedPath, url.Values{"round": {strconv.FormatUint(num, 10)}}, body)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		sleep(ctx, 500*time.Millisecond)
	}
	e.log.Warn("could not send the round's counts to the owner", "round", num)
}

func (e *Edge) pinger(ctx context.Context) {
	wsconn.Ping(ctx, e.cfg.PingInterval, e.cfg.WriteWait, e.wsConns)
}

// wsConns returns the open connections.
func (e *Edge) wsConns() []*wsconn.Conn {
	e.mu.Lock()
	defer e.mu.Unlock()
	conns := make([]*wsconn.Conn, 0, len(e.conns))
	for c := range e.conns {
		conns = append(conns, c.Conn)
	}
	return conns
}

func (e *Edge) handleWS(w http.ResponseWriter, r *http.Request) {
	ws, err := e.up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &conn{Conn: &wsconn.Conn{WS: ws}}
	e.mu.Lock()
	e.conns[c] = struct{}{}
	c.p = e.rounds.Join()
	e.mu.Unlock()
	go func() {
		defer func() {
			ws.Close()
			e.mu.Lock()
			delete(e.conns, c)
			e.rounds.Leave(c.p)
			e.mu.Unlock()
		}()
		e.readPump(c)
	}()
}

// readPump reads a connection's frames, as the relay's does.
func (e *Edge) readPump(c *conn) {
	e.mu.Lock()
	stop := e.stop
	e.mu.Unlock()
	wsconn.Read(c.Conn, wsconn.Reader{
		Limits: wsconn.Limits{PongWait: e.cfg.PongWait, FrameTimeout: e.cfg.FrameTimeout, WriteWait: e.cfg.WriteWait, UploadRate: e.cfg.UploadRate},
		Limit:  e.rounds.ReadLimit, Budget: e.frames, Stop: stop,
		Frame: func(b []byte) bool {
			e.received.Add(1)
			return e.handleFrame(c, b)
		},
		Text: func() {
			e.received.Add(1)
			e.reject("text")
		},
		Failed: func(err error) {
			if wsconn.Oversized(err) {
				e.received.Add(1)
				e.reject("oversized")
			}
		},
	})
}

// forwardsPerFrame × LargeFrames Shares frames wait at most for the
// owner's answer at once (Edge.forwards): the owner answers once the
// report's chunk is answered (a few hundred milliseconds), so the intake
// budget's frames are freed meanwhile, at about 1 MB each at d = 7850.
const forwardsPerFrame = 4

// handleFrame judges a frame with the edge's machine, hands an accepted
// Shares frame to the owner (whose verdict then answers it, off the read
// loop: the frame's intake slot is free while the owner's answer waits
// for the report's chunk), and acks.
func (e *Edge) handleFrame(c *conn, b []byte) bool {
	v := e.rounds.Frame(c.p, b)
	if v.Accepted == round.Shares {
		e.forwards <- struct{}{} // waits while forwardsPerFrame × LargeFrames wait for the owner
		go func() {
			defer func() { <-e.forwards }()
			if !e.answer(c, e.forward(v, b)) {
				c.WS.Close()
			}
		}()
		return true
	}
	return e.answer(c, v)
}

// answer counts the verdict on a frame, hands on a round it closed, and
// acks.
func (e *Edge) answer(c *conn, v round.Verdict) bool {
	if v.Accepted == round.Rejected {
		e.reject(v.Reason)
	} else {
		e.accepted.Add(1)
	}
	e.closed(v.Closed)
	return wsconn.Answer(c.Conn, v, e.cfg.WriteWait)
}

// forward hands an accepted Shares frame to the owner and returns the
// verdict the volunteer gets: the owner's (a replay seen at another edge,
// the quota reached, the round closed there), or too late if the owner
// cannot be reached.
func (e *Edge) forward(v round.Verdict, b []byte) round.Verdict {
	e.mu.Lock()
	er, ctx := e.open, e.stop
	e.mu.Unlock()
	if er == nil || er.rd.Num != v.Round || !er.begin() {
		return round.Verdict{Reason: round.ReasonTooLate, Status: wire.AckTooLate, Round: v.Round, Closed: v.Closed}
	}
	defer er.end()
	// The owner answers once the report's chunk is answered: generous,
	// for an aggregator taking over meanwhile.
	fctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var ans Answer
	resp, err := e.post(fctx, http.MethodPost, SharesPath, url.Values{"round": {strconv.FormatUint(v.Round, 10)}}, b)
	if err == nil {
		err = json.NewDecoder(io.LimitReader(resp.Body, 1<<10)).Decode(&ans)
		resp.Body.Close()
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("owner answered %s", resp.Status)
		}
	}
	if err != nil {
		e.forwardFailed.Add(1)
		e.log.Warn("cannot hand a report to the owner", "round", v.Round, "err", err)
		return round.Verdict{Reason: round.ReasonTooLate, Status: wire.AckTooLate, Round: v.Round, Closed: v.Closed}
	}
	if !ans.Accepted {
		return round.Verdict{Reason: ans.Reason, Status: ans.Status, Round: v.Round, End: round.End(ans.End), Closed: v.Closed}
	}
	er.accepted.Add(1)
	return v
}
