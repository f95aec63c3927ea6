// Package server is the relay (shuffler) of Blanket's protocol
// (docs/protocol.md): a websocket endpoint for clients, the round
// lifecycle driven by the aggregator's announcements, and the forwarding of
// padded, shuffled batches. The round rules themselves (what a frame is
// worth, when a round closes, what it owes the aggregator) are the pure
// state machine of relay/internal/round; this package is their transport.
//
// Trust: the relay sees which connection sent which message and the
// plaintext indices, never values (sealed to the aggregator), and never
// holds the aggregator's private key. It never logs payloads: log records
// carry counts, round numbers and reasons only.
//
// Client connections (GET /ws):
//   - Origin policy: requests without an Origin header (native clients),
//     with an Origin whose host equals the request's Host, or with an
//     Origin listed in Config.Origins are accepted; others get 403.
//   - Binary frames only: a text frame closes with 1003. The read limit is
//     the open round's exact Report frame size, or its Shares frame size in
//     secure summation (1009 above it). Compression is never negotiated.
//   - Every CheckIn and Report frame is answered by exactly one Ack, or by
//     a close code for frames that are not protocol frames at all.
//   - A client checks in (CheckIn) and then sends its M Report frames in
//     order seq = 0..M-1, or, in secure summation (docs/secagg.md), exactly
//     one Shares frame. A second check-in, a replayed frame or a second
//     report is rejected with Ack 3 and closes with 1008, and so is a
//     Report whose sealed content (its HPKE encapsulated key) the relay
//     already admitted this round or the last (ReasonReplay); a malformed frame
//     gets Ack 4 and closes with 1007. Either way the client's partial
//     report for the round is discarded, as it is when the client drops
//     mid-upload or the round closes first.
//   - Keep-alive: the relay pings every PingInterval; a connection that
//     sends nothing (no frame, no pong) for PongWait, or takes longer than
//     FrameTimeout (plus the frame size at UploadRate) to deliver a frame
//     it started, is cut.
//
// Secure summation (docs/secagg.md): the relay is the Prio3 helper. Its
// helper key (Config.HelperKey) opens helper shares only, never a value
// nor a leader share; GET /v1/helper-key serves its public half to the
// aggregator, and an announcement naming another key is refused. The close
// of such a round is in secagg.go.
package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/blanket-fl/blanket/relay/internal/acklog"
	"github.com/blanket-fl/blanket/relay/internal/aggclient"
	"github.com/blanket-fl/blanket/relay/internal/anchor"
	"github.com/blanket-fl/blanket/relay/internal/edge"
	"github.com/blanket-fl/blanket/relay/internal/helperkey"
	"github.com/blanket-fl/blanket/relay/internal/intake"
	"github.com/blanket-fl/blanket/relay/internal/metrics"
	"github.com/blanket-fl/blanket/relay/internal/outbox"
	"github.com/blanket-fl/blanket/relay/internal/round"
	"github.com/blanket-fl/blanket/relay/internal/shuffler"
	"github.com/blanket-fl/blanket/relay/internal/sumrelay"
	"github.com/blanket-fl/blanket/relay/internal/wsconn"
	"github.com/blanket-fl/blanket/shared/datastore"
	"github.com/blanket-fl/blanket/shared/ledger"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/readiness"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/secagg"
	"github.com/blanket-fl/blanket/shared/wire"
	"github.com/blanket-fl/blanket/web"
)

// Config configures a Server. Zero durations take the defaults documented
// on each field.
type Config struct {
	// Aggregator is the aggregator's base URL, e.g. http://127.0.0.1:8080.
	Aggregator string
	// Token is the bearer token shared with the aggregator (both ways).
	Token string
	// Outbox persists batches and aborts before they are sent.
	Outbox outbox.Store
	// StoreStats, if set, reports the state store's counters on /metrics
	// (datastore.Stats: commits, fsyncs, bytes written).
	StoreStats func() datastore.Stats
	// Ready are the main's conditions for GET /readyz besides the
	// server's own (ready.go): the datastore's (readiness.Store).
	Ready []readiness.Check
	// Reports, if set, keeps every accepted check-in and Report frame of a
	// shuffle round durably before it is acknowledged, and a restart
	// rebuilds the round it interrupted from them (relay/internal/acklog);
	// nil: an interrupted round is aborted.
	Reports acklog.Log
	// Origins lists extra allowed websocket origins (scheme://host[:port]).
	Origins []string
	// Logger receives counts, rounds and reasons; never payloads.
	Logger *slog.Logger
	// NewSource returns the randomness for padding and shuffling; nil
	// means noise.Secure (the only production choice).
	NewSource func() noise.Source
	// HTTPClient posts to the aggregator (default: a client without its own
	// timeout; every request is bounded by SendTimeout or SecAggTimeout).
	HTTPClient *http.Client
	// SendTimeout bounds one attempt to deliver a batch or an abort, or to
	// fetch the aggregator's key (default 30 s).
	SendTimeout time.Duration
	// SecAggTimeout bounds one attempt of a secure-summation request
	// (POST /v1/secagg/chunk, /v1/secagg/close and /v1/secagg/aggregate;
	// default 10 min): the aggregator answers a chunk only after preparing
	// its reports (about 30 ms per report on 2 cores), a close only after
	// charging its ledger.
	SecAggTimeout time.Duration
	// HelperKey is the relay's secure-summation key (docs/secagg.md): it
	// opens the helper shares of the volunteers' reports and nothing else;
	// its public half is served at GET /v1/helper-key and must be the one
	// a secure-summation announcement names. Required
	// (helperkey.LoadOrCreate keeps it in the state directory).
	HelperKey *helperkey.Key
	// PrepareApart (-prep-jobs; PostgreSQL only) has the helper's
	// preparation of each batch of reports done by the relay's replicas
	// (relay/internal/prepjob, sumrelay.Config.PrepareApart); nil: here.
	PrepareApart func(ctx context.Context, r sumrelay.Apart, sealed [][]byte) ([]*secagg.Prep, error)
	// PrepJobsDone, with PrepareApart, is how many jobs this relay
	// completed itself (its pgstore.JobWorker's Done), for /metrics.
	PrepJobsDone func() int64
	// PingInterval (default 20 s), PongWait (default 60 s; > PingInterval),
	// FrameTimeout (default 10 s) and WriteWait (default 10 s) bound
	// connections.
	PingInterval, PongWait, FrameTimeout, WriteWait time.Duration
	// UploadRate is the slowest upload, in bytes per second, at which a
	// frame still arrives in time (default 32 KiB/s): a client has
	// FrameTimeout plus the round's frame size at this rate to deliver a
	// frame it started (a secure-summation Shares frame is about 1 MB at
	// d = 7850: 43 s with the defaults; a shuffle Report frame adds
	// milliseconds).
	UploadRate int
	// LargeFrames is how many frames larger than intake.SmallFrame (Shares
	// frames) the relay reads or holds before the round's stream takes
	// them (default 16: ~18 MB at d = 7850); a volunteer's frame past
	// them waits, unread, and is acknowledged later (relay/internal/intake).
	LargeFrames int
	// RetryMin and RetryMax bound the exponential backoff of sends to the
	// aggregator (defaults 250 ms and 15 s).
	RetryMin, RetryMax time.Duration
	// SealWorkers seal dummies in parallel (<= 0: GOMAXPROCS).
	SealWorkers int
	// Wasm is the client module served at /blanket.wasm (nil: none; the
	// join page says so). See web.go for the volunteers' routes.
	Wasm *web.WasmModule
	// Warmup is how long after a restart that found the outbox non-empty
	// (a round interrupted, or frames not yet delivered) the relay refuses
	// announcements (503; the aggregator retries them), so that volunteers
	// cut off by the restart reconnect before the next round fixes its
	// population (only connections present when a round opens may report
	// in it). 0: none. A first start, or one after a clean stop between
	// rounds, does not wait.
	Warmup time.Duration
	// KeyRefresh is how often the aggregator's public key is refetched
	// for GET /api/key and the join page; 0 means the relay never fetches
	// it (GET /api/key answers 503).
	KeyRefresh time.Duration
	// NoiseLedger is the relay's ledger of the noise it adds in secure
	// summation (anchor.go; nil: none, and no anchor exchange).
	NoiseLedger *ledger.Ledger
	// Floor is the relay's own condition for releasing a round, fixed at
	// its start from the task and never lowered by an announcement
	// (roundspec.Floor): a round with fewer complete (shuffle) or accepted
	// (secure summation) reports than the larger of Floor.MinBatch and the
	// announced minimum batch is aborted, and so is a secure-summation
	// round in which more than Floor.MaxRejectedShare of the reports
	// failed the aggregator's verification. Zero: a minimum batch of 1 (the
	// announced one rules) and roundspec.DefaultMaxRejectedShare.
	Floor roundspec.Floor
	// TargetEpsilon and TargetDelta are the privacy target the relay agreed
	// to (its noise ledger's): a secure-summation announcement whose
	// target (wire.TargetEpsilonHeader, wire.TargetDeltaHeader) differs is
	// refused, so that both ledgers compose at the same δ. Zero: not
	// checked (tests of other parts).
	TargetEpsilon, TargetDelta float64
}

func (c *Config) validate() error {
	u, err := url.Parse(c.Aggregator)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("server: aggregator URL %q must be http(s)://host[:port]", c.Aggregator)
	}
	if c.Token == "" {
		return errors.New("server: empty token")
	}
	if c.Outbox == nil {
		return errors.New("server: nil outbox")
	}
	if c.Logger == nil {
		return errors.New("server: nil logger")
	}
	if c.HelperKey == nil {
		return errors.New("server: nil helper key")
	}
	for _, o := range c.Origins {
		u, err := url.Parse(o)
		if err != nil || u.Scheme == "" || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return fmt.Errorf("server: origin %q must be scheme://host[:port]", o)
		}
	}
	for _, d := range []*time.Duration{&c.PingInterval, &c.PongWait, &c.FrameTimeout, &c.WriteWait, &c.RetryMin, &c.RetryMax, &c.KeyRefresh, &c.Warmup, &c.SendTimeout, &c.SecAggTimeout} {
		if *d < 0 {
			return errors.New("server: negative duration")
		}
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.PingInterval, 20*time.Second)
	def(&c.PongWait, 60*time.Second)
	def(&c.FrameTimeout, 10*time.Second)
	def(&c.WriteWait, 10*time.Second)
	def(&c.RetryMin, 250*time.Millisecond)
	def(&c.RetryMax, 15*time.Second)
	def(&c.SendTimeout, 30*time.Second)
	def(&c.SecAggTimeout, 10*time.Minute)
	if c.PongWait <= c.PingInterval {
		return fmt.Errorf("server: PongWait %v must exceed PingInterval %v", c.PongWait, c.PingInterval)
	}
	if c.RetryMax < c.RetryMin {
		return errors.New("server: RetryMax below RetryMin")
	}
	switch {
	case c.UploadRate < 0:
		return errors.New("server: negative upload rate")
	case c.UploadRate == 0:
		c.UploadRate = 32 << 10
	}
	if c.LargeFrames < 0 {
		return errors.New("server: negative large-frame budget")
	} else if c.LargeFrames == 0 {
		c.LargeFrames = 16
	}
	if c.NewSource == nil {
		c.NewSource = noise.Secure
	}
	if c.Floor == (roundspec.Floor{}) {
		c.Floor = roundspec.Floor{MinBatch: 1, MaxRejectedShare: roundspec.DefaultMaxRejectedShare}
	}
	if err := c.Floor.Validate(); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	if c.TargetEpsilon < 0 || !(c.TargetDelta >= 0 && c.TargetDelta < 1) {
		return fmt.Errorf("server: target epsilon %v, delta %v", c.TargetEpsilon, c.TargetDelta)
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{}
	}
	return nil
}

// Server is the relay. Create it with New, serve Handler, and call Run.
type Server struct {
	cfg Config
	// anchor checks the noise ledger against the aggregator's copy of
	// its head and charges it (relay/internal/anchor).
	anchor *anchor.Anchor
	agg    *aggclient.Client // posts to the aggregator
	log    *slog.Logger
	up     websocket.Upgrader
	token  [32]byte // SHA-256 of "Bearer " + token
	m      *metrics.Metrics
	web    webState // the aggregator's key as fetched (web.go)
	rounds *round.Machine
	sender *outbox.Sender
	// preseal holds the dummies sealed in the background while a round
	// is open, until its batch is built.
	preseal shuffler.Presealer

	mu      sync.Mutex
	conns   map[*client]struct{}
	timer   *time.Timer // the open round's deadline
	timerOf uint64      // the round timer belongs to
	closing bool
	warm    time.Time // announcements are refused before (Config.Warmup)

	frames *intake.Budget // Config.LargeFrames
	// stopping ends the waits for a frame slot when Run stops.
	stopping context.Context
	stop     context.CancelFunc

	sa    *sumrelay.Relay // secure summation's streams and steps
	edges *edge.Owner     // the relay's edges' routes (relay/internal/edge)
	// shuffleRound is the open shuffle round whose frames are logged
	// (acklog); connSeq numbers connections.
	shuffleRound, connSeq atomic.Uint64
	resume                []outbox.Entry     // its steps found at start (Run resumes them)
	rebuildSum            []rebuildSum       // secure-summation rounds lost mid-way, found at start (Run finishes them)
	jobs                  chan *round.Closed // closed rounds to pad and forward (or abort)
	wg                    sync.WaitGroup     // broadcasts and timers
}

// client is one websocket connection.
type client struct {
	id uint64 // its frames' records (acklog)
	*wsconn.Conn
	p *round.Participant
}

// announcementLimit bounds POST /v1/rounds bodies.
var announcementLimit = int64(wire.MaxAnnouncementSize)

// New validates cfg and recovers the outbox: a round the relay had open
// when it stopped becomes an Abort (reason relay restart); persisted
// batches and aborts are queued to be resent byte for byte by Run.
func New(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Server{
		cfg:   cfg,
		log:   cfg.Logger,
		m:     newMetrics(),
		conns: make(map[*client]struct{}),
		jobs:  make(chan *round.Closed, 64),
	}
	s.stopping, s.stop = context.WithCancel(context.Background())
	var err error
	if s.frames, err = intake.NewBudget(cfg.LargeFrames); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s.m.PrepJobs = cfg.PrepJobsDone
	s.token = sha256.Sum256([]byte("Bearer " + cfg.Token))
	s.agg = &aggclient.Client{Aggregator: cfg.Aggregator, Token: cfg.Token, HTTP: cfg.HTTPClient,
		SendTimeout: cfg.SendTimeout, SecAggTimeout: cfg.SecAggTimeout, RetryMin: cfg.RetryMin, RetryMax: cfg.RetryMax,
		Logger: cfg.Logger, LastRound: func() uint64 { return s.rounds.LastRound() },
		Attempts: &s.m.SecAggAttempts, Failures: &s.m.SecAggFailures}
	s.anchor = anchor.New(cfg.NoiseLedger, s.agg.Anchor, cfg.Logger, cfg.RetryMin, cfg.RetryMax) // suspended until Run checks it
	s.up = websocket.Upgrader{
		HandshakeTimeout:  10 * time.Second,
		ReadBufferSize:    512,
		WriteBufferSize:   512,
		WriteBufferPool:   &sync.Pool{},
		EnableCompression: false,
		CheckOrigin:       s.checkOrigin,
		Error: func(w http.ResponseWriter, _ *http.Request, status int, reason error) {
			http.Error(w, http.StatusText(status), status)
		},
	}
	sender, err := outbox.NewSender(cfg.Outbox, outbox.SenderConfig{
		Deliver: s.agg.Frame, Logger: cfg.Logger, RetryMin: cfg.RetryMin, RetryMax: cfg.RetryMax, OnFinal: s.delivered,
	})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s.sender, s.m.Sender = sender, sender
	s.sa = sumrelay.New(sumrelay.Config{Store: cfg.Outbox, Post: s.agg, Charge: s.anchor.Charge, Abort: s.abortRound,
		Enqueue: s.sender.Enqueue, Metrics: s.m, Token: cfg.Token, Open: cfg.HelperKey.OpenHelperShare, Floor: cfg.Floor, PrepareApart: cfg.PrepareApart,
		Chunks: cfg.Reports, CheckedIn: func(num uint64) uint32 { return s.rounds.CheckedIn(num) },
		NewSource: cfg.NewSource, Logger: cfg.Logger, Class: s.classCode})
	last, interrupted, err := s.recover()
	if err != nil {
		return nil, err
	}
	s.rounds = round.New(last)
	s.edges = edge.NewOwner(edge.OwnerConfig{Rounds: s.rounds, Closed: s.closed, Authorized: s.authorized, Logger: cfg.Logger,
		Verdict: func(v round.Verdict) <-chan bool { // an edge's frame: counted and streamed as one of this relay's own
			s.m.Received.Add(1)
			if v.Accepted != round.Shares {
				s.m.Reject(v.Reason)
				return nil
			}
			s.m.AcceptedShares.Add(1)
			return s.sa.Report(v.Round, v.Shares)
		}})
	s.rounds.SetStreamShares(true) // secure summation's reports go to their stream as they arrive (secagg.go)
	s.rounds.SetMinBatchFloor(uint32(cfg.Floor.MinBatch))
	if interrupted {
		s.warm = time.Now().Add(cfg.Warmup)
	}
	return s, nil
}

// recover queues the outbox's frames for delivery, turns the marker of a
// round left open by a stop or a crash into an Abort (relay restart), and
// returns the highest round number the outbox knows and whether it held
// anything (outbox.Recover plans it).
func (s *Server) recover() (uint64, bool, error) {
	ob := s.cfg.Outbox
	ents, err := ob.List()
	if err != nil {
		return 0, false, err
	}
	plan := outbox.Recover(ents)
	for _, num := range plan.Released {
		if err := ob.Remove(num, outbox.SecAggClose); err != nil {
			return 0, false, err
		}
	}
	s.resume = plan.Resume // Run resumes them (sumrelay.Relay.Start)
	rebuilt := make(map[uint64]bool)
	sums := 0 // of rebuilt, the secure-summation rounds (Run's, not s.jobs')
	for _, num := range plan.Interrupted {
		// A secure-summation round with chunks persisted: Run finishes it
		// with those the aggregator folded (sumrelay.Relay.Rebuild).
		if marker, err := ob.Get(num, outbox.OpenRound); err == nil && s.sa.Resumable(num, marker) {
			rebuilt[num] = true
			sums++
			s.rebuildSum = append(s.rebuildSum, rebuildSum{num: num, marker: marker})
			continue
		}
		if c := s.rebuild(num); c != nil && len(rebuilt)-sums < cap(s.jobs) {
			rebuilt[num] = true
			s.jobs <- c // forward closes it: a batch of the reports acknowledged, or an abort
			continue
		}
		b, err := (&wire.Abort{Round: num, Reason: wire.AbortRelayRestart}).MarshalBinary()
		if err != nil {
			return 0, false, fmt.Errorf("server: %w", err)
		}
		if err := ob.Put(num, outbox.Abort, b); err != nil {
			return 0, false, err
		}
		s.m.RoundsAborted.Add(1)
		s.roundLog(num).Warn("round interrupted by a relay restart; aborting it")
		s.sender.Enqueue(outbox.Entry{Round: num, Kind: outbox.Abort})
	}
	for _, num := range plan.Markers {
		if rebuilt[num] {
			continue // removed once its batch or abort is persisted
		}
		if err := ob.Remove(num, outbox.OpenRound); err != nil {
			return 0, false, err
		}
	}
	if l := s.cfg.Reports; l != nil { // the records of rounds not rebuilt: nothing is owed for them
		nums, err := l.Rounds()
		if err != nil {
			return 0, false, err
		}
		for _, num := range nums {
			if !rebuilt[num] {
				s.dropAcked(num)
			}
		}
	}
	for _, e := range plan.Resend {
		s.roundLog(e.Round).Info("resending persisted frame", "kind", string(e.Kind))
		s.sender.Enqueue(e)
	}
	return plan.Last, len(ents) > 0, nil
}

// rebuildSum is a secure-summation round lost mid-way, with its
// open-round marker.
type rebuildSum struct {
	num    uint64
	marker []byte
}

// rebuild returns shuffle round num, interrupted by a restart, as the
// records of its acknowledged frames describe it (acklog.Rebuild), or nil
// when there are none: the round is then aborted.
func (s *Server) rebuild(num uint64) *round.Closed {
	l := s.cfg.Reports
	if l == nil {
		return nil
	}
	frames, err := l.Frames(num)
	if err != nil || len(frames) == 0 {
		return nil
	}
	marker, err := s.cfg.Outbox.Get(num, outbox.OpenRound)
	if err != nil {
		return nil
	}
	c, err := acklog.Rebuild(num, marker, frames, uint32(s.cfg.Floor.MinBatch))
	if err != nil {
		s.roundLog(num).Warn("cannot rebuild the round interrupted by a restart; aborting it", "err", err)
		return nil
	}
	s.roundLog(num).Warn("round interrupted by a relay restart; closing it with the reports acknowledged", "reports", c.Reports, "checked_in", c.CheckedIn, "population", c.Population)
	return c
}

// dropAcked removes round num's frame records once nothing is owed for
// them.
func (s *Server) dropAcked(num uint64) {
	if l := s.cfg.Reports; l != nil {
		if err := l.Drop(num); err != nil {
			s.roundLog(num).Error("cannot remove the round's frame records", "err", err)
		}
	}
}

// Handler returns the relay's HTTP routes.
func (s *Server) Handler() http.Handler {
	return s.mux() // web.go: every route, in one table
}

// Run forwards closed rounds, delivers the outbox and pings clients until
// ctx is done, then closes every client connection (1001) and returns.
// Persisted frames without a definitive answer stay in the outbox for the
// next start; a round still open stays open there (its marker makes it an
// abort at the next start).
func (s *Server) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	s.sa.Start(ctx, s.resume)
	s.resume = nil
	for _, r := range s.rebuildSum {
		s.sa.StartRebuild(ctx, r.num, r.marker)
	}
	s.rebuildSum = nil
	wg.Go(func() { s.forward(ctx) })
	wg.Go(func() { s.sender.Run(ctx) })
	wg.Go(func() { s.pinger(ctx) })
	wg.Go(func() { s.anchor.Loop(ctx) })
	if s.cfg.KeyRefresh > 0 {
		wg.Go(func() { s.fetchKeys(ctx) })
	}
	<-ctx.Done()
	s.stop()
	s.mu.Lock()
	s.closing = true
	s.rounds.Halt()
	if s.timer != nil {
		s.timer.Stop()
	}
	conns := s.wsConnsLocked()
	s.mu.Unlock()
	wsconn.GoingAway(conns, "relay shutting down")
	wg.Wait()
	s.wg.Wait()
	s.sa.Wait()
	return nil
}

// Metrics returns the current counters.
func (s *Server) Metrics() Snapshot {
	snap := s.m.Snapshot()
	snap.LargeFrames = s.frames.Stats()
	return snap
}

func (s *Server) checkOrigin(r *http.Request) bool {
	if wsconn.OriginAllowed(r, s.cfg.Origins) {
		return true
	}
	s.m.OriginRejected.Add(1)
	return false
}

func (s *Server) authorized(r *http.Request) bool {
	got := sha256.Sum256([]byte(r.Header.Get("Authorization")))
	return subtle.ConstantTimeCompare(got[:], s.token[:]) == 1
}

// handleRounds opens a round on the aggregator's announcement. The relay
// does not verify the signature (clients do, against their pinned key); it
// parses the announcement to learn the parameters, deadline and key, and
// forwards the bytes unchanged.
func (s *Server) handleRounds(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, announcementLimit))
	if err != nil {
		http.Error(w, "announcement too large", http.StatusRequestEntityTooLarge)
		return
	}
	a, err := wire.ParseAnnouncement(body, wire.DefaultLimits())
	if err != nil {
		s.log.Warn("announcement rejected", "reason", "malformed")
		http.Error(w, "malformed announcement: "+err.Error(), http.StatusBadRequest)
		return
	}
	if a.Params.Protocol == wire.ProtocolSecAgg {
		// The volunteers seal helper shares to the key the aggregator
		// signed into the announcement: a key other than this relay's would
		// make every report unopenable here (the aggregator fetches
		// GET /v1/helper-key again).
		if a.RelayPub != s.cfg.HelperKey.Public() {
			s.roundLog(a.Round).Warn("announcement rejected", "reason", "helper key mismatch")
			writeOutcome(w, http.StatusConflict, a.Round, "invalid", "helper key mismatch")
			return
		}
		if err := s.checkTarget(r.Header); err != nil {
			s.roundLog(a.Round).Warn("announcement rejected", "reason", "privacy target", "err", err)
			writeOutcome(w, http.StatusConflict, a.Round, "invalid", err.Error())
			return
		}
		if err := s.anchor.Admit(a); err != nil { // the relay's own budget and schedule
			s.roundLog(a.Round).Warn("announcement rejected", "reason", "noise ledger", "err", err)
			if errors.Is(err, anchor.ErrUnchecked) { // not yet checked: the aggregator retries
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			// Refused (the aggregator stops announcing and says the relay's
			// budget is spent) only for the budget; another refusal of the
			// noise ledger (a schedule it has already noised past, a ledger
			// broken by a failed write) is invalid, in its own words.
			outcome := "invalid"
			if errors.Is(err, ledger.ErrBudgetExhausted) {
				outcome = "refused"
			}
			writeOutcome(w, http.StatusConflict, a.Round, outcome, err.Error())
			return
		}
		if _, err := secagg.DeriveVerifyKey([]byte(s.cfg.Token), a.Round); err != nil {
			s.roundLog(a.Round).Error("announcement rejected: cannot derive the round's verify key", "err", err)
			http.Error(w, "the relay's token cannot key secure summation (16 bytes at least)", http.StatusInternalServerError)
			return
		}
	}
	if !a.Deadline.After(time.Now()) {
		http.Error(w, "deadline already passed", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		http.Error(w, "relay shutting down", http.StatusServiceUnavailable)
		return
	}
	now := time.Now()
	if err := s.rounds.CanOpen(a, now); err != nil {
		http.Error(w, err.Error(), openStatus(err))
		return
	}
	if now.Before(s.warm) {
		w.Header().Set("Retry-After", fmt.Sprint(int(s.warm.Sub(now).Seconds())+1))
		http.Error(w, "relay warming up: volunteers are reconnecting", http.StatusServiceUnavailable)
		return
	}
	// The marker makes a crash during the round an explicit abort, or for
	// a shuffle round a close of the reports acknowledged (acklog).
	marker, err := acklog.MarshalMarker(acklog.Marker{Ann: body, Population: uint32(len(s.conns))})
	if err == nil {
		err = s.cfg.Outbox.Put(a.Round, outbox.OpenRound, marker)
	}
	if err != nil {
		s.roundLog(a.Round).Error("cannot persist round marker", "err", err)
		http.Error(w, "state directory not writable", http.StatusInternalServerError)
		return
	}
	// Under s.mu no connection joins or leaves: the machine's participants
	// are exactly s.conns.
	rd, err := s.rounds.Open(a, body, now)
	if err != nil {
		s.cfg.Outbox.Remove(a.Round, outbox.OpenRound)
		if errors.Is(err, round.ErrParams) {
			s.roundLog(a.Round).Warn("announcement rejected", "reason", "parameters", "err", err)
			writeOutcome(w, http.StatusBadRequest, a.Round, "invalid", err.Error())
			return
		}
		http.Error(w, err.Error(), openStatus(err))
		return
	}
	targets := make([]*client, 0, len(s.conns))
	for c := range s.conns {
		targets = append(targets, c)
	}
	// Seal the round's dummies in the background while it is open; the
	// batch is still built once, at close (shuffler.Presealer). Secure
	// summation has no dummies.
	if rd.SecAgg != nil {
		s.sa.OpenStream(rd) // each report prepared and forwarded as it arrives
		s.edges.Opened(rd)  // and offered to the edges
	}
	if rd.SecAgg == nil {
		s.shuffleRound.Store(rd.Num)
		if err := s.preseal.Start(shuffler.Round{Round: rd.Num, Params: rd.Params, HPKEPub: rd.HPKEPub,
			Population: rd.Population}, s.cfg.NewSource()); err != nil {
			s.roundLog(rd.Num).Warn("cannot pre-seal dummies; sealing them all at close", "err", err)
		}
	}
	s.m.RoundsOpened.Add(1)
	s.timer, s.timerOf = time.AfterFunc(time.Until(s.rounds.NextTick(rd, now)), func() { s.tickRound(rd) }), rd.Num
	s.roundLog(rd.Num).Info("round opened", "population", rd.Population, "messages_per_client", rd.Msgs,
		"min_batch", rd.Params.MinBatch, "quota", rd.Params.Quota, "deadline", rd.Deadline)
	s.wg.Go(func() { s.broadcast(rd, targets) })
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"round": rd.Num, "population": rd.Population})
}

// writeOutcome answers the aggregator with the outcome format of
// docs/protocol.md: the Blanket-Outcome header and {"round", "outcome",
// "detail"}.
// checkTarget compares the privacy target an announcement carries
// (wire.TargetEpsilonHeader, wire.TargetDeltaHeader) with the relay's own
// (Config.TargetEpsilon, TargetDelta): a missing or different one is
// refused, in words an operator can act on.
func (s *Server) checkTarget(h http.Header) error {
	for _, t := range []struct {
		header, name, flag string
		own                float64
	}{
		{wire.TargetEpsilonHeader, "epsilon", "-target-epsilon", s.cfg.TargetEpsilon},
		{wire.TargetDeltaHeader, "delta", "-target-delta", s.cfg.TargetDelta},
	} {
		if t.own == 0 {
			continue
		}
		v := h.Get(t.header)
		if v == "" {
			return fmt.Errorf("the announcement carries no target %s; the relay's is %s", t.name, wire.FormatTarget(t.own))
		}
		got, err := wire.ParseTarget(v)
		if err != nil {
			return err
		}
		if got != t.own {
			return fmt.Errorf("the aggregator's target %s %s differs from the relay's %s: start the relay with %s %s, or the aggregator with the relay's",
				t.name, wire.FormatTarget(got), wire.FormatTarget(t.own), t.flag, wire.FormatTarget(got))
		}
	}
	return nil
}

func writeOutcome(w http.ResponseWriter, status int, round uint64, outcome, detail string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set(OutcomeHeader, outcome)
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"round": round, "outcome": outcome, "detail": detail})
}

// handleHelperKey serves the public half of the relay's helper key to the
// aggregator (bearer token; body: the 32 raw bytes).
func (s *Server) handleHelperKey(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	pub := s.cfg.HelperKey.Public()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(pub[:])
}

// openStatus is the HTTP status of an announcement the machine refuses.
func openStatus(err error) int {
	switch {
	case errors.Is(err, round.ErrDeadline):
		return http.StatusBadRequest
	case errors.Is(err, round.ErrHalted):
		return http.StatusServiceUnavailable
	}
	return http.StatusConflict // still open, or not after the last round
}

// broadcast sends the announcement to the round's population with a few
// writers, so one slow client delays the others by at most WriteWait.
func (s *Server) broadcast(rd *round.Round, targets []*client) {
	const writers = 8
	ch := make(chan *client)
	var wg sync.WaitGroup
	for range min(writers, len(targets)) {
		wg.Go(func() {
			for c := range ch {
				if err := c.Write(rd.Ann, s.cfg.WriteWait); err != nil {
					c.WS.Close()
				}
			}
		})
	}
	for _, c := range targets {
		ch <- c
	}
	close(ch)
	wg.Wait()
}

func (s *Server) pinger(ctx context.Context) {
	wsconn.Ping(ctx, s.cfg.PingInterval, s.cfg.WriteWait, func() []*wsconn.Conn {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.wsConnsLocked()
	})
}

// wsConnsLocked returns the open connections. The caller holds s.mu.
func (s *Server) wsConnsLocked() []*wsconn.Conn {
	conns := make([]*wsconn.Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c.Conn)
	}
	return conns
}

// tickRound closes rd at its deadline or once every expected report is
// in (round.Machine.Tick), exactly once (a report may have closed it
// first), else sets the timer for the next check.
func (s *Server) tickRound(rd *round.Round) {
	now := time.Now()
	if c := s.rounds.Tick(rd, now); c != nil {
		s.closed(c)
		return
	}
	next := s.rounds.NextTick(rd, now)
	if next.IsZero() {
		return
	}
	s.mu.Lock()
	if s.timer != nil && s.timerOf == rd.Num {
		s.timer.Reset(time.Until(next))
	}
	s.mu.Unlock()
}

// closed hands a round the machine closed (nil: none) to the forwarder.
func (s *Server) closed(c *round.Closed) {
	if c == nil {
		return
	}
	s.mu.Lock()
	if s.timer != nil && s.timerOf == c.Num {
		s.timer.Stop()
	}
	s.mu.Unlock()
	s.m.PartialDiscarded.Add(uint64(c.Discarded))
	s.roundLog(c.Num).Info("round closed", "why", c.Why, "population", c.Population,
		"checked_in", c.CheckedIn, "reports", c.Reports)
	s.jobs <- c
}

func (s *Server) handleWS(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing {
		http.Error(w, "relay shutting down", http.StatusServiceUnavailable)
		return
	}
	ws, err := s.up.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader answered
	}
	c := &client{Conn: &wsconn.Conn{WS: ws}, id: s.connSeq.Add(1)}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		ws.Close()
		return
	}
	s.conns[c] = struct{}{}
	c.p = s.rounds.Join()
	s.mu.Unlock()
	s.m.ConnsOpen.Add(1)
	s.m.ConnsTotal.Add(1)
	// The connection's goroutine replaces the handler's, which returns:
	// net/http then drops its per-connection state (4 KiB read and 4 KiB
	// write buffers, the request), which it would otherwise keep for the
	// connection's lifetime; still one goroutine per connection.
	go func() {
		defer func() {
			ws.Close()
			s.mu.Lock()
			delete(s.conns, c)
			if s.rounds.Leave(c.p) {
				s.m.PartialDiscarded.Add(1)
			}
			s.mu.Unlock()
			s.m.ConnsOpen.Add(-1)
		}()
		s.readPump(c)
	}()
}

// readPump is the connection's only goroutine (started by handleWS in place
// of the HTTP handler's, which returns): it reads frames, answers them, and
// returns when the connection must end.
func (s *Server) readPump(c *client) {
	wsconn.Read(c.Conn, wsconn.Reader{
		Limits: wsconn.Limits{PongWait: s.cfg.PongWait, FrameTimeout: s.cfg.FrameTimeout, WriteWait: s.cfg.WriteWait, UploadRate: s.cfg.UploadRate},
		Limit:  s.rounds.ReadLimit, Budget: s.frames, Stop: s.stopping,
		Frame: func(b []byte) bool {
			s.m.Received.Add(1)
			return s.handleFrame(c, b)
		},
		Text: func() {
			s.m.Received.Add(1)
			s.m.Reject(ReasonText)
		},
		Failed: s.readFailed,
	})
}

// readFailed counts why a connection's read ended.
func (s *Server) readFailed(err error) {
	switch {
	case wsconn.Oversized(err):
		s.m.Received.Add(1)
		s.m.Reject(ReasonOversized)
	case wsconn.Timeout(err):
		s.m.Timeouts.Add(1)
	}
}

// handleFrame has the round machine judge one complete binary frame,
// counts it, answers it with an Ack, and reports whether the connection
// stays open.
func (s *Server) handleFrame(c *client, b []byte) bool {
	v := s.rounds.Frame(c.p, b)
	var fate <-chan bool
	switch v.Accepted {
	case round.CheckIn:
		s.m.AcceptedCheck.Add(1)
	case round.Report:
		s.m.AcceptedReport.Add(1)
	case round.Shares:
		s.m.AcceptedShares.Add(1)
		fate = s.sa.Report(v.Round, v.Shares)
	default:
		s.m.Reject(v.Reason)
	}
	if v.Discarded {
		s.m.PartialDiscarded.Add(1)
	}
	if v.Complete {
		s.m.ReportsComplete.Add(1)
	}
	logged := s.logFrame(c, v, b)
	s.closed(v.Closed)
	if !logged {
		return false // no ack: the relay could not keep the frame durably
	}
	if fate != nil {
		// The ack waits for the report's fate (sumrelay.Relay.Report), off
		// the read loop: the frame's intake slot is free meanwhile, and the
		// report's shares are the stream's alone.
		v.Shares = nil
		go func() {
			if !<-fate {
				v = round.TooLate(v)
			}
			if !wsconn.Answer(c.Conn, v, s.cfg.WriteWait) {
				c.WS.Close()
			}
		}()
		return true
	}
	return wsconn.Answer(c.Conn, v, s.cfg.WriteWait)
}

// logFrame keeps an accepted check-in or Report frame of the open shuffle
// round durably (Config.Reports) before it is acknowledged; false: it
// could not, and the frame must not be acknowledged.
func (s *Server) logFrame(c *client, v round.Verdict, b []byte) bool {
	l := s.cfg.Reports
	if l == nil || v.Round == 0 || v.Round != s.shuffleRound.Load() {
		return true
	}
	var key string
	switch v.Accepted {
	case round.CheckIn:
		key = acklog.CheckInKey
	case round.Report:
		key = acklog.ReportKey(int(v.Received) - 1)
	default:
		return true
	}
	if err := l.Append(v.Round, c.id, key, b); err != nil {
		s.roundLog(v.Round).Error("cannot persist an accepted frame; not acknowledging it", "err", err)
		return false
	}
	return true
}
