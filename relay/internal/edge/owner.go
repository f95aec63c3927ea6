// Package edge lets the relay's organization spread the volunteers'
// websockets over several processes (docs/deploy.md, "Relay edges"): an
// edge relay (Edge, `relay -edge-of URL`) holds its volunteers'
// connections and runs the round rules for them with a round.Machine of
// its own, and hands every Shares frame its machine accepted, as it
// arrives, to the relay that owns the round (Owner, inside the ordinary
// relay): the one that prepares the reports as the PINE helper, holds the
// helper key, the noise ledger and the outbox, and talks to the
// aggregator. An edge holds no key and no state: a killed edge loses only
// the frames it had not yet handed over (their volunteers reconnect,
// through the load balancer, to another edge or to the owner), and the
// round goes on.
//
// Secure summation only: an edge offers its volunteers the owner's
// secure-summation rounds (the default protocol); the shuffle protocols'
// rounds are the owner's connections' alone.
//
// Trust: the edges are the relay's own processes (the same bearer token);
// they see what the relay sees (connections, sealed frames), never a
// value. The owner applies its own replay rule and quota to every frame an
// edge hands over (round.Machine.EdgeShares) and waits for the edges'
// counts to complete a round (round.Machine.EdgeClosed).
//
// The owner's routes (bearer token):
//
//	GET  /v1/edge/round?after=N  the open secure-summation round's announcement, as the
//	                             aggregator sent it, once its number is above N (waits up to
//	                             PollWait; 204: none)
//	POST /v1/edge/opened?round=N an edge opened round N for its connections (409: not open)
//	POST /v1/edge/shares?round=N one accepted Shares frame; the answer is the owner's Verdict,
//	                             once the report's chunk is answered by the aggregator
//	POST /v1/edge/closed?round=N the edge's counts (round.EdgeCounts, JSON) when its round closed
package edge

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/blanket-fl/blanket/relay/internal/round"
	"github.com/blanket-fl/blanket/shared/wire"
)

// Routes of the owner.
const (
	RoundPath  = "/v1/edge/round"
	OpenedPath = "/v1/edge/opened"
	SharesPath = "/v1/edge/shares"
	ClosedPath = "/v1/edge/closed"
)

// PollWait is how long GET /v1/edge/round waits for a round by default
// (OwnerConfig.PollWait): an edge's connections are counted at each poll.
const PollWait = 5 * time.Second

// Answer is the owner's verdict on a frame an edge handed over
// (POST /v1/edge/shares).
type Answer struct {
	Accepted bool   `json:"accepted"`
	Reason   string `json:"reason,omitempty"`
	Status   uint8  `json:"status"`
	End      uint8  `json:"end"`
}

// OwnerConfig connects an Owner to its relay; every field is required.
type OwnerConfig struct {
	Rounds *round.Machine
	// Verdict counts a judged frame in the relay's metrics (accepted or
	// rejected with its reason) and hands an accepted report to its
	// stream, as the relay does for its own connections' frames; it
	// returns the report's fate (sumrelay.Relay.Report; nil: none to wait
	// for), which the edge's answer waits for.
	Verdict func(v round.Verdict) <-chan bool
	// Closed hands a round closed by an edge's frame or counts to the
	// relay's forwarder.
	Closed     func(*round.Closed)
	Authorized func(*http.Request) bool
	Logger     *slog.Logger
	// PollWait is how long GET /v1/edge/round waits (0: PollWait).
	PollWait time.Duration
}

// Owner serves the edges of a relay.
type Owner struct {
	cfg OwnerConfig

	mu      sync.Mutex // guards ann, num, wake, maxBody and seen
	ann     []byte     // the open secure-summation round's announcement (nil: none)
	num     uint64
	wake    chan struct{} // closed when a round opens
	maxBody int64         // the largest frame an edge may hand over (0: no round yet)
	seen    map[string]edgeSeen
}

// edgeSeen is an edge's last poll: when, and its connections then.
type edgeSeen struct {
	at    time.Time
	conns int
}

// ConnsHeader carries an edge's count of connections on its polls.
const ConnsHeader = "Blanket-Edge-Connections"

// Connections is the volunteers connected to the edges that polled in the
// last 2 × OwnerConfig.PollWait (the relay adds them to its own on /api/round).
func (o *Owner) Connections() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for name, e := range o.seen {
		if time.Since(e.at) > 2*o.cfg.PollWait {
			delete(o.seen, name)
			continue
		}
		n += e.conns
	}
	return n
}

// NewOwner returns the owner side of a relay.
func NewOwner(cfg OwnerConfig) *Owner {
	if cfg.PollWait <= 0 {
		cfg.PollWait = PollWait
	}
	return &Owner{cfg: cfg, wake: make(chan struct{})}
}

// Opened offers round rd, just opened, to the edges (secure summation
// only).
func (o *Owner) Opened(rd *round.Round) {
	if rd.SecAgg == nil {
		return
	}
	o.mu.Lock()
	o.ann, o.num, o.maxBody = rd.Ann, rd.Num, int64(rd.FrameSize)
	close(o.wake)
	o.wake = make(chan struct{})
	o.mu.Unlock()
}

// Routes returns the owner's routes (pattern, handler).
func (o *Owner) Routes() map[string]http.Handler {
	return map[string]http.Handler{
		"GET " + RoundPath:   o.auth(o.handleRound),
		"POST " + OpenedPath: o.auth(o.handleOpened),
		"POST " + SharesPath: o.auth(o.handleShares),
		"POST " + ClosedPath: o.auth(o.handleClosed),
	}
}

func (o *Owner) auth(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !o.cfg.Authorized(r) {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h(w, r)
	})
}

func roundParam(w http.ResponseWriter, r *http.Request, name string) (uint64, bool) {
	n, err := strconv.ParseUint(r.URL.Query().Get(name), 10, 64)
	if err != nil {
		http.Error(w, "bad "+name, http.StatusBadRequest)
		return 0, false
	}
	return n, true
}

func (o *Owner) handleRound(w http.ResponseWriter, r *http.Request) {
	after, ok := roundParam(w, r, "after")
	if !ok {
		return
	}
	if n, err := strconv.Atoi(r.Header.Get(ConnsHeader)); err == nil && n >= 0 {
		o.mu.Lock()
		if o.seen == nil {
			o.seen = make(map[string]edgeSeen)
		}
		o.seen[r.Header.Get("Blanket-Edge")] = edgeSeen{at: time.Now(), conns: n}
		o.mu.Unlock()
	}
	t := time.NewTimer(o.cfg.PollWait)
	defer t.Stop()
	for {
		o.mu.Lock()
		ann, num, wake := o.ann, o.num, o.wake
		o.mu.Unlock()
		if ann != nil && num > after && o.cfg.Rounds.LastRound() == num {
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write(ann)
			return
		}
		select {
		case <-wake:
		case <-t.C:
			w.WriteHeader(http.StatusNoContent)
			return
		case <-r.Context().Done():
			return
		}
	}
}

func (o *Owner) handleOpened(w http.ResponseWriter, r *http.Request) {
	num, ok := roundParam(w, r, "round")
	if !ok {
		return
	}
	if err := o.cfg.Rounds.EdgeOpened(num); err != nil {
		http.Error(w, err.Error(), http.StatusConflict)
		return
	}
	o.cfg.Logger.Info("an edge opened the round", "round", num, "edge", r.Header.Get("Blanket-Edge"))
}

func (o *Owner) handleShares(w http.ResponseWriter, r *http.Request) {
	num, ok := roundParam(w, r, "round")
	if !ok {
		return
	}
	o.mu.Lock()
	limit := o.maxBody
	o.mu.Unlock()
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max(limit, int64(wire.CheckInSize))))
	if err != nil {
		http.Error(w, "frame too large or cut short", http.StatusRequestEntityTooLarge)
		return
	}
	v := o.cfg.Rounds.EdgeShares(num, b)
	fate := o.cfg.Verdict(v)
	o.cfg.Closed(v.Closed)
	v.Shares, b = nil, nil // the stream's alone while the answer waits
	if fate != nil {
		// Accepted once its chunk is answered (an acknowledged report is
		// never lost with this relay); too late if the round ended first.
		select {
		case kept := <-fate:
			if !kept {
				v = round.TooLate(v)
			}
		case <-r.Context().Done():
			return // the edge gave up: it answers its volunteer too late
		}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(Answer{Accepted: v.Accepted == round.Shares, Reason: v.Reason, Status: v.Status, End: uint8(v.End)})
}

func (o *Owner) handleClosed(w http.ResponseWriter, r *http.Request) {
	num, ok := roundParam(w, r, "round")
	if !ok {
		return
	}
	var c round.EdgeCounts
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<10)).Decode(&c); err != nil {
		http.Error(w, "bad counts", http.StatusBadRequest)
		return
	}
	o.cfg.Logger.Info("an edge closed the round", "round", num, "edge", r.Header.Get("Blanket-Edge"),
		"population", c.Population, "checked_in", c.CheckedIn, "failed", c.Failed)
	o.cfg.Closed(o.cfg.Rounds.EdgeClosed(num, c))
}
