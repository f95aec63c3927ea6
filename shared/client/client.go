// Package client is the core of a Blanket volunteer: it receives the
// aggregator's signed round announcements through the relay, flips its own
// check-in coin, trains logistic regression on its local data, encodes the
// update with the announced FLAME protocol (clip, normalize, randomize),
// seals every message's values to the aggregator and sends a fixed-size
// report (docs/protocol.md, "Client rules").
//
// The package is pure Go and builds for GOOS=js GOARCH=wasm: the browser
// client and the native load generator share it. The network is behind
// Transport (a websocket in practice; see scripts/internal/wsclient natively).
//
// # Guarantees
//
//   - An announcement is acted upon only if its Ed25519 signature verifies
//     against the pinned aggregator key and it names the pinned HPKE key
//     (wire.Announcement.Verify); an altered or unsigned one is rejected with
//     an EventRejected and nothing is sent.
//   - At most one report per round: a round is marked decided before
//     anything is sent, rounds must increase, and the state survives
//     reconnects (the same Client is reused by RunWithReconnect).
//   - A volunteer whose coin says yes sends its CheckIn at once, before
//     training, so that the relay knows whose report to wait for
//     (docs/protocol.md, "Closing a round"); its report follows as exactly
//     Params.Messages() Report frames of Params.ReportFrameSize() bytes
//     (one Shares frame in secure summation), or nothing: all of a
//     report's frames are built and sealed before the first is sent.
//   - A round's work is dropped as soon as the announcement of a later
//     round arrives (the aggregator announces round r+1 only once the relay
//     closed round r, so a report for r could only be refused as too late):
//     the volunteer moves on to the new round instead of finishing the old
//     one late (EventFailed with ErrSuperseded; nothing more is sent).
//   - Config.Pool bounds how many volunteers of one process train at once
//     (a simulated cohort): they then finish one by one instead of all
//     late together.
//   - Check-in is the client's own Bernoulli(CheckInP) coin from its own
//     noise.Source (shuffled check-in, Liu et al., Algorithm 1).
//   - Each report is (EpsL, DeltaL)-LDP on the values (FLAME Lemma 2; see
//     FLAMEConfig); the client composes its own guarantee over the rounds it
//     reported in (Client.Privacy).
package client

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blanket-fl/blanket/shared/counts"
	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/wire"
)

// Transport carries whole protocol frames (websocket binary messages) to
// and from the relay. Send and Recv may be called from different
// goroutines; Close unblocks both. Implementations return an error wrapping
// ctx.Err() when ctx ends first.
type Transport interface {
	Send(ctx context.Context, frame []byte) error
	Recv(ctx context.Context) ([]byte, error)
	Close() error
}

// Errors reported in events (check with errors.Is).
var (
	// ErrStale: an announcement for a round below the last round this
	// client decided on whose deadline is not after every deadline it
	// acted on (a replay). It is ignored, as is the current round sent
	// again (the relay re-sending it after a reconnect).
	ErrStale = errors.New("client: announcement for an old round")
	// ErrParams: the announced parameters are unusable by this client
	// (e.g. another model dimension).
	ErrParams = errors.New("client: unusable round parameters")
	// ErrAck: the relay did not accept a frame (see Event.AckStatus).
	ErrAck = errors.New("client: report not accepted")
	// ErrBusy: Run was called while another Run of the same Client is
	// active.
	ErrBusy = errors.New("client: already running")
	// ErrSuperseded: the announcement of a later round arrived while this
	// round's report was being prepared; the round was dropped.
	ErrSuperseded = errors.New("client: a later round was announced")
)

// Pool bounds how many clients of one process prepare a report at once
// (train, encode, shard and seal: the CPU- and memory-heavy part of a
// round). A simulated cohort shares one Pool among its volunteers so that,
// on a machine with fewer cores than volunteers, reports are finished one
// by one at the machine's pace rather than all at the end of the round,
// and only the pool's size of rounds hold their transient buffers at a
// time. The zero value is not usable; nil in Config means no bound.
type Pool struct{ slots chan struct{} }

// NewPool returns a pool of n >= 1 slots.
func NewPool(n int) *Pool { return &Pool{slots: make(chan struct{}, max(n, 1))} }

// Size returns the number of slots.
func (p *Pool) Size() int { return cap(p.slots) }

func (p *Pool) acquire(ctx context.Context) error {
	select {
	case p.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (p *Pool) release() { <-p.slots }

// Config configures a Client. New validates it.
type Config struct {
	// Pinned is the aggregator key the volunteer trusts (pinned by its
	// fingerprint). Required.
	Pinned envelope.PublicKey
	// Data is the volunteer's local examples, already standardized (see
	// StandardizeSplit). Required.
	Data logreg.Dataset
	// Train is the local training configuration (logreg.FLAMEConfig gives
	// the papers' setting).
	Train logreg.TrainConfig
	// Source supplies all randomness: the check-in coin, training order,
	// coordinate sampling and privacy noise, and reconnect jitter. nil
	// means noise.Secure(); tests pass noise.NewSeeded. It is used only by
	// the goroutine running Run or RunWithReconnect.
	Source noise.Source
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
	// OnEvent, if set, is called synchronously with progress events from
	// the goroutine running Run; it must not block for long.
	OnEvent func(Event)
	// Limits bound decoded announcements (zero value: wire.DefaultLimits).
	Limits wire.Limits
	// PersonalFraction is the volunteer's own privacy level, as the
	// fraction of the announced local budget EpsL it is willing to spend
	// per report. 0 or 1 means the announced budget; a value in (0, 1)
	// applies through roundspec.Spec.Encoder (the FLAME protocols: blanket
	// substitution; APES and S-APES: the volunteer's own Clip-Laplace
	// budget PersonalFraction·EpsL, announced in the budget column), and
	// EventAnnouncement's LocalEps says the budget in use.
	PersonalFraction float64
	// Pool, if set, is shared with the other clients of the process: a
	// report is prepared only while holding one of its slots (nil: no
	// bound).
	Pool *Pool
	// Consent is task.ConsentHash of the study's task whose consent text
	// the volunteer agreed to: secure summation's leader share is sealed
	// under it (envelope.ShareInfo), and the aggregator opens only shares
	// sealed under its own task's hash. The browser sets it only once the
	// volunteer ticked the consent box; zero is no text (the aggregator of
	// a real study rejects such shares).
	Consent [32]byte
	// Answers are the volunteer's survey answers for a round's question
	// blocks (secure summation with count blocks, counts.go): the 0-based
	// option of each announced question, in order. nil when the volunteer
	// answered no survey: a round with question blocks then fails.
	Answers []int
}

// Client is one volunteer. Run (or RunWithReconnect) may be active at most
// once at a time; Privacy and LastRound are safe to call concurrently.
type Client struct {
	pinned   envelope.PublicKey
	data     logreg.Dataset
	train    logreg.TrainConfig
	trainer  *logreg.Trainer
	perEpoch bool // trainer runs one epoch per call (progress events)
	src      noise.Source
	log      *slog.Logger
	onEvent  func(Event)
	limits   wire.Limits
	personal float64
	pool     *Pool
	consent  [32]byte
	answers  []int

	running atomic.Bool
	// frames counts frames received (RunWithReconnect resets its backoff
	// when a connection delivered at least one).
	frames atomic.Uint64

	setup *roundSetup // cache for the last announced parameters

	// work is the round being prepared and how to drop it (a later
	// round's announcement arrived).
	workMu   sync.Mutex
	working  uint64
	dropWork context.CancelCauseFunc

	mu        sync.Mutex
	lastRound uint64
	// lastDeadline is the latest deadline of the announcements this
	// client decided on (see handleAnnouncement).
	lastDeadline time.Time
	releases     []privacy.Release
	eps, dlt     float64
}

// New validates cfg and returns a Client.
func New(cfg Config) (*Client, error) {
	if f := cfg.PersonalFraction; math.IsNaN(f) || f < 0 || f > 1 {
		return nil, fmt.Errorf("client: personal privacy level %v: want a fraction of the announced budget in [0, 1]", f)
	}
	if err := cfg.Pinned.Validate(); err != nil {
		return nil, fmt.Errorf("client: pinned key: %w", err)
	}
	if cfg.Data.Len() < 1 {
		return nil, errors.New("client: no local data")
	}
	if err := cfg.Train.Validate(); err != nil {
		return nil, fmt.Errorf("client: training: %w", err)
	}
	// Without a proximal term, E epochs from w equal E successive single
	// epochs from w with the same source stream (each epoch only reads
	// the current weights and draws one shuffle), so training can report
	// progress per epoch. With FedProx the proximal anchor must stay the
	// round's global model, so all epochs run in one call.
	tc := cfg.Train
	perEpoch := tc.ProxMu == 0 && tc.Epochs > 1
	if perEpoch {
		tc.Epochs = 1
	}
	tr, err := logreg.NewTrainer(cfg.Data.Shape(), tc)
	if err != nil {
		return nil, fmt.Errorf("client: trainer: %w", err)
	}
	c := &Client{
		pinned:   cfg.Pinned,
		data:     cfg.Data,
		train:    cfg.Train,
		trainer:  tr,
		perEpoch: perEpoch,
		src:      cfg.Source,
		log:      cfg.Logger,
		onEvent:  cfg.OnEvent,
		limits:   cfg.Limits,
		personal: cfg.PersonalFraction,
		pool:     cfg.Pool,
		consent:  cfg.Consent,
		answers:  append([]int(nil), cfg.Answers...),
	}
	if c.src == nil {
		c.src = noise.Secure()
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.limits == (wire.Limits{}) {
		c.limits = wire.DefaultLimits()
	}
	return c, nil
}

// LastRound returns the highest round the client has decided on (reported
// in, sat out, or failed), 0 before the first.
func (c *Client) LastRound() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastRound
}

// Privacy returns the client's own (ε, δ) over the rounds it reported in,
// and the number of those rounds.
//
// Guarantee: each report is (ε_l, δ_l)-LDP on the values (FLAME Lemma 2,
// the announced EpsL and DeltaL), so any post-processing of the rounds
// composes by basic composition (Dwork and Roth 2014, Theorem 3.16) to
// (Σ ε_l, Σ δ_l), computed by privacy.Account's local-model accountant.
// This bound trusts neither the relay nor the aggregator; the shuffle
// amplification the aggregator's ledger reports needs the realized batch
// size and padding, which only the aggregator knows, and costs seconds per
// call (too slow for every volunteer and every round). A round counts as
// soon as the client starts sending it.
func (c *Client) Privacy() (eps, delta float64, rounds int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.eps, c.dlt, len(c.releases)
}

// account appends one release and recomputes the client's own guarantee:
// the local model for the shuffle protocols' reports (privacy.AccountLocal:
// basic composition of each report's (ε_l, δ_l)), plus, for secure
// summation, every round the volunteer was eligible for at its check-in
// rate (secAggEpsilon: one server's discrete Gaussian, Poisson check-in,
// replacing one volunteer's data, RDP composition over identical rounds;
// identical rounds grouped, groups composed by basic composition at
// ownDelta each, Dwork and Roth 2014 Theorem 3.16), summed.
func (c *Client) account(r privacy.Release) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.releases = append(c.releases, r)
	var local []privacy.Release
	type group struct{ sigma, sens, q float64 }
	counts := map[group]int{}
	var order []group
	for _, x := range c.releases {
		if x.Protocol == privacy.ProtocolSecAgg {
			g := group{x.SecAggSigma, x.SecAggSensitivity, x.CheckInRate}
			if counts[g] == 0 {
				order = append(order, g)
			}
			counts[g]++
			continue
		}
		local = append(local, x)
	}
	eps, delta := 0.0, 0.0
	if len(local) > 0 {
		var sumDelta float64
		for _, x := range local {
			sumDelta += float64(x.K) * x.Delta0
		}
		if !(sumDelta < 1) {
			c.eps, c.dlt = math.Inf(1), 1
			return nil
		}
		// The local model's accountant: no amplification is counted, so
		// this is an upper bound on what the aggregator's accounting
		// charges.
		b, err := privacy.AccountLocal(local)
		if err != nil {
			return fmt.Errorf("account: %w", err)
		}
		if !b.Valid {
			return fmt.Errorf("account: no valid local bound: %s", b.Reason)
		}
		eps, delta = b.Epsilon, b.Delta
	}
	for _, g := range order {
		e, err := secAggEpsilon(g.sigma, g.sens, g.q, counts[g], ownDelta)
		if err != nil {
			return fmt.Errorf("account: secure summation: %w", err)
		}
		eps, delta = eps+e, delta+ownDelta
	}
	c.eps, c.dlt = eps, delta
	return nil
}

// ownDelta is the δ at which a volunteer's own secure-summation guarantee
// is stated (per group of identical rounds).
const ownDelta = 1e-5

// ownCache is this process's secure-summation accounting for its
// volunteers (make run's hundreds of simulated volunteers share a
// process, and every volunteer of a round asks with the same arguments):
// one privacy.SecAggOwnCurve per distinct round (σ, Δ, q), built once
// (Zhu-Wang's curve at every integer order), and the ε each was asked
// for, keyed by (σ, Δ, q, rounds, δ), so the second volunteer at the same
// round, and every round for a group whose count did not change, costs a
// map lookup. Both are pure functions of their keys. Bounded: each map is
// cleared when it holds ownCurvesMax or ownEpsMax entries (a volunteer
// sees few distinct round specifications).
var ownCache struct {
	sync.Mutex
	curves map[ownGroup]*privacy.SecAggOwnCurve
	eps    map[ownKey]float64
}

// ownGroup is one round specification's (σ, Δ, q).
type ownGroup struct{ sigma, sens, q float64 }

type ownKey struct {
	ownGroup
	rounds int
	delta  float64
}

const (
	ownCurvesMax = 64
	ownEpsMax    = 4096
)

// secAggEpsilon is the volunteer's own secure-summation guarantee for
// `rounds` identical rounds: ε at δ = delta for replacing the volunteer's
// data (participation unchanged), one server's discrete Gaussian noise σ,
// L2 sensitivity Δ = sens, Poisson check-in at rate q, rounds composed by
// adding RDP curves (Mironov 2017, Proposition 1). At q = 1 the exact
// Gaussian dominating pair row alone (privacy.SecAggPairReplaceOneEpsilon:
// a proven bound, microseconds, the row the ledger charges whenever it is
// the tightest; Zhu-Dong-Wang 2022 Thm 10, Dong-Roth-Su 2022 Cor. 2),
// else the smaller of it and the replace-one RDP row
// (privacy.SecAggOwnCurve.Epsilon: exactly privacy.SecAggReplaceOneEpsilon,
// from the group's per-round curves built once; CKS'20 Prop. 5, Zhu-Wang
// ICML'19 Thm 6, Balle et al. AISTATS'20 Thm 21 / Asoodeh et al. 2021
// conversion), remembered per process (ownCache).
func secAggEpsilon(sigma, sens, q float64, rounds int, delta float64) (float64, error) {
	if q == 1 {
		return privacy.SecAggPairReplaceOneEpsilon(sigma, sens, rounds, delta)
	}
	g := ownGroup{sigma, sens, q}
	k := ownKey{g, rounds, delta}
	ownCache.Lock()
	e, ok := ownCache.eps[k]
	cv := ownCache.curves[g]
	ownCache.Unlock()
	if ok {
		return e, nil
	}
	if cv == nil {
		var err error
		if cv, err = privacy.NewSecAggReplaceOne(sigma, sens, q); err != nil {
			return 0, err
		}
		ownCache.Lock()
		if ownCache.curves == nil || len(ownCache.curves) >= ownCurvesMax {
			ownCache.curves = make(map[ownGroup]*privacy.SecAggOwnCurve)
		}
		ownCache.curves[g] = cv
		ownCache.Unlock()
	}
	e, err := cv.Epsilon(rounds, delta)
	if err != nil {
		return 0, err
	}
	ownCache.Lock()
	if ownCache.eps == nil || len(ownCache.eps) >= ownEpsMax {
		ownCache.eps = make(map[ownKey]float64)
	}
	ownCache.eps[k] = e
	ownCache.Unlock()
	return e, nil
}

func (c *Client) emit(e Event) {
	if c.onEvent != nil {
		c.onEvent(e)
	}
}

// Run serves one transport until ctx ends or the transport fails: it
// receives frames, acts on announcements (see the package documentation)
// and reports acks. It returns ctx's error on cancellation and a wrapped
// transport error otherwise (the caller reconnects; RunWithReconnect does).
// Per-round problems (a rejected announcement, diverged training, a refused
// report) are reported as events and do not end Run. Run does not close t.
func (c *Client) Run(ctx context.Context, t Transport) error {
	if t == nil {
		return errors.New("client: nil transport")
	}
	if !c.running.CompareAndSwap(false, true) {
		return ErrBusy
	}
	defer c.running.Store(false)
	// A reader goroutine receives while a round is being prepared, so
	// that the announcement of a later round drops the stale work at once
	// (superseded); frames are still handled in order, by this goroutine.
	rctx, stop := context.WithCancel(ctx)
	type recv struct {
		frame []byte
		err   error
	}
	in := make(chan recv, 16)
	done := make(chan struct{})
	defer func() { stop(); <-done }()
	go func() {
		defer close(done)
		for {
			f, err := t.Recv(rctx)
			if err == nil {
				c.frames.Add(1)
				if typ, r, perr := wire.PeekRound(f); perr == nil && typ == wire.TypeAnnouncement {
					c.supersede(r)
				}
			}
			select {
			case in <- recv{f, err}:
			case <-rctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	for {
		var m recv
		select {
		case m = <-in:
		case <-ctx.Done():
			return ctx.Err()
		}
		frame, err := m.frame, m.err
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("client: receive: %w", err)
		}
		typ, err := wire.PeekType(frame)
		if err != nil {
			c.log.Warn("malformed frame from relay", "err", err, "bytes", len(frame))
			continue
		}
		switch typ {
		case wire.TypeAnnouncement:
			if err := c.handleAnnouncement(ctx, t, frame); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return err
			}
		case wire.TypeAck:
			c.handleAck(frame)
		default:
			c.log.Warn("unexpected frame type from relay", "type", typ)
		}
	}
}

// supersede drops the round being prepared if round is later. The frame
// is not verified yet: a relay that forges one can make a volunteer drop a
// round, which it could anyway by not forwarding the report.
func (c *Client) supersede(round uint64) {
	c.workMu.Lock()
	defer c.workMu.Unlock()
	if c.dropWork != nil && round > c.working {
		c.dropWork(ErrSuperseded)
	}
}

// startWork registers the round being prepared and returns its context.
func (c *Client) startWork(ctx context.Context, round uint64) (context.Context, func()) {
	wctx, cancel := context.WithCancelCause(ctx)
	c.workMu.Lock()
	c.working, c.dropWork = round, cancel
	c.workMu.Unlock()
	return wctx, func() {
		c.workMu.Lock()
		c.dropWork = nil
		c.workMu.Unlock()
		cancel(nil)
	}
}

// handleAck reports an Ack frame.
func (c *Client) handleAck(frame []byte) {
	a, err := wire.ParseAck(frame)
	if err != nil {
		c.log.Warn("malformed ack", "err", err)
		return
	}
	e := Event{Kind: EventAck, Round: a.Round, AckStatus: a.Status, Received: int(a.Received)}
	if a.Status != wire.AckAccepted {
		e.Err = fmt.Errorf("%w: round %d: %s", ErrAck, a.Round, ackReason(a.Status))
		c.log.Warn("relay refused report frame", "round", a.Round, "status", ackReason(a.Status), "received", a.Received)
	}
	c.emit(e)
}

func ackReason(s uint8) string {
	switch s {
	case wire.AckAccepted:
		return "accepted"
	case wire.AckNoRound:
		return "no open round"
	case wire.AckWrongRound:
		return "wrong round"
	case wire.AckDuplicate:
		return "duplicate report"
	case wire.AckMalformed:
		return "malformed"
	case wire.AckTooLate:
		return "too late"
	default:
		return fmt.Sprintf("status %d", s)
	}
}

// reject reports a rejected announcement.
func (c *Client) reject(round uint64, err error) {
	c.log.Warn("announcement rejected", "round", round, "err", err)
	c.emit(Event{Kind: EventRejected, Round: round, Err: err})
}

// An announcement is acted on once, and only if it is newer than every one
// the client acted on: another round than the last (the current round sent
// again, after a reconnect or re-timed with a later deadline, is ignored),
// with a later deadline, which the aggregator signs (ErrStale otherwise).
// The aggregator's deadlines strictly increase from round to round
// (aggregator/internal/server nextRound), so a replayed older announcement,
// whatever its round number, has an earlier deadline, and no round is ever
// reported twice: a relay cannot forge a later deadline. A round number
// below the last one with a later deadline is a new class of the same
// aggregator (its key kept, its rounds numbered from 1 again: New class on
// the operator page), which the client joins without a reload.

// handleAnnouncement verifies an announcement and, if the coin says so,
// trains, encodes and sends the round's report. Only transport (send)
// errors are returned.
func (c *Client) handleAnnouncement(ctx context.Context, t Transport, frame []byte) error {
	a, err := wire.ParseAnnouncement(frame, c.limits)
	if err != nil {
		c.reject(0, err)
		return nil
	}
	// Authenticate before looking at anything else: an unsigned or altered
	// announcement is never acted upon.
	if err := a.Verify(c.pinned); err != nil {
		c.reject(a.Round, err)
		return nil
	}
	c.mu.Lock()
	last, lastDeadline := c.lastRound, c.lastDeadline
	c.mu.Unlock()
	if a.Round == last {
		c.log.Debug("announcement for the current round again", "round", a.Round)
		return nil
	}
	if !a.Deadline.After(lastDeadline) {
		c.reject(a.Round, fmt.Errorf("%w: round %d after round %d", ErrStale, a.Round, last))
		return nil
	}
	if a.Round < last {
		c.log.Info("a new class: the aggregator numbers its rounds from the start again", "round", a.Round, "last", last)
	}
	setup := c.setup
	if setup == nil || setup.params != a.Params {
		if setup, err = setupRound(a.Params, c.data.Shape().NumParams(), c.personal); err != nil {
			c.reject(a.Round, fmt.Errorf("%w: %w", ErrParams, err))
			return nil
		}
		c.setup = setup
	}
	// The round is decided from here on, whatever happens next: at most
	// one report per round, even if sending fails half way.
	c.mu.Lock()
	c.lastRound = a.Round
	if a.Deadline.After(c.lastDeadline) {
		c.lastDeadline = a.Deadline
	}
	c.mu.Unlock()
	localEps := 0.0 // secure summation adds no local noise
	if setup.enc != nil {
		localEps = setup.enc.Epsilon()
	}
	c.emit(Event{Kind: EventAnnouncement, Round: a.Round, Params: a.Params, LocalEps: localEps})

	if !setup.checkIn.Decide(c.src) {
		c.log.Debug("sitting out", "round", a.Round)
		if setup.enc == nil {
			// Secure summation's guarantee is amplified by the secret
			// check-in coin: every round the volunteer could have
			// joined counts, at rate q (privacy.SecAggEpsilon).
			rel := setup.release
			rel.Round = int(min(a.Round, math.MaxInt32))
			if err := c.account(rel); err != nil {
				c.log.Error("privacy accounting failed", "err", err)
			}
		}
		c.emit(Event{Kind: EventSatOut, Round: a.Round})
		return nil
	}
	c.emit(Event{Kind: EventCheckedIn, Round: a.Round})
	// The check-in goes out at once: the relay waits for the reports of
	// the volunteers who checked in (docs/protocol.md, "Closing a round").
	ci, err := (&wire.CheckIn{Round: a.Round}).MarshalBinary()
	if err != nil {
		c.emit(Event{Kind: EventFailed, Round: a.Round, Err: fmt.Errorf("check-in frame: %w", err)})
		return nil
	}
	if err := t.Send(ctx, ci); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("client: send check-in for round %d: %w", a.Round, err)
	}

	wctx, endWork := c.startWork(ctx, a.Round)
	frames, work, err := c.prepare(wctx, a, setup)
	if err == nil && wctx.Err() != nil {
		err = context.Cause(wctx) // superseded while sealing: too late to send
	}
	endWork()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, ErrSuperseded) {
			c.log.Info("round dropped: a later round was announced", "round", a.Round)
		} else {
			c.log.Warn("round failed", "round", a.Round, "err", err)
		}
		c.emit(Event{Kind: EventFailed, Round: a.Round, Err: err})
		return nil
	}

	// Count the round before the first byte leaves: a partial upload may
	// still reach the relay.
	rel := setup.release
	rel.Round = int(min(a.Round, math.MaxInt32))
	start := time.Now()
	if err := c.account(rel); err != nil {
		c.log.Error("privacy accounting failed", "err", err)
	}
	work.Account = time.Since(start)
	for i, f := range frames {
		if err := t.Send(ctx, f); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("client: send frame %d of %d for round %d: %w", i+1, len(frames), a.Round, err)
		}
	}
	m := len(frames)
	c.log.Info("report sent", "round", a.Round, "messages", m, "bytes", len(frames[0]), "protocol", a.Params.Protocol)
	c.emit(Event{Kind: EventSent, Round: a.Round, Messages: m, FrameBytes: len(frames[0]), NoiseStd: setup.noiseStd, Work: work})
	eps, delta, rounds := c.Privacy()
	c.emit(Event{Kind: EventPrivacy, Round: a.Round, Epsilon: eps, Delta: delta, Rounds: rounds})
	return nil
}

// prepare trains, encodes and seals one round's report and returns its
// frames: the Messages() Report frames, all of Params.ReportFrameSize()
// bytes (secure summation: the one Shares frame). With a Pool it holds one
// slot throughout; ctx ending (the round superseded) stops it.
func (c *Client) prepare(ctx context.Context, a *wire.Announcement, setup *roundSetup) ([][]byte, Work, error) {
	var w Work
	if c.pool != nil {
		if err := c.pool.acquire(ctx); err != nil {
			return nil, w, err
		}
		defer c.pool.release()
	}
	// The count blocks' values come first: the evaluation is of the
	// announced model, before local training (counts.go).
	cvals, err := c.countValues(a, setup)
	if err != nil {
		return nil, w, err
	}
	start := time.Now()
	update, err := c.trainUpdate(ctx, a)
	w.Train = time.Since(start)
	if err != nil {
		return nil, w, err
	}
	if setup.enc == nil {
		f, err := c.prepareSecAgg(a, setup, update, cvals, &w)
		return f, w, err
	}
	start = time.Now()
	msgs, err := setup.enc.Encode(update, c.src)
	w.Encode = time.Since(start)
	if err != nil {
		return nil, w, fmt.Errorf("encode: %w", err)
	}
	m := a.Params.Messages()
	if len(msgs) != m {
		return nil, w, fmt.Errorf("encoder made %d messages, the round needs %d", len(msgs), m)
	}
	size := a.Params.ReportFrameSize()
	frames := make([][]byte, 0, m)
	// Width 1 (the only announceable layout, roundspec): every value
	// sealed under its own encapsulation, so no two are linkable.
	vals := make([]float64, len(msgs))
	for i, msg := range msgs {
		if len(msg.Values) != 1 {
			return nil, w, fmt.Errorf("message %d has %d values, want 1", i, len(msg.Values))
		}
		vals[i] = msg.Values[0]
	}
	start = time.Now()
	sealed, err := envelope.SealEach(a.HPKEPub, a.Round, vals)
	w.Seal = time.Since(start)
	if err != nil {
		return nil, w, fmt.Errorf("seal: %w", err)
	}
	for i, msg := range msgs {
		r := wire.Report{Round: a.Round, Seq: uint16(i), Count: uint16(m), Indices: msg.Indices, Sealed: sealed[i]}
		f, err := r.MarshalBinary()
		if err != nil {
			return nil, w, fmt.Errorf("report frame %d: %w", i, err)
		}
		if len(f) != size {
			return nil, w, fmt.Errorf("report frame %d has %d bytes, the round's size is %d", i, len(f), size)
		}
		frames = append(frames, f)
	}
	return frames, w, nil
}

// prepareSecAgg shards the update for secure summation (docs/secagg.md step
// 2): clip, quantize and split it into the leader's and the helper's input
// shares (secagg.Round.Shard), seal each to its server for this round
// (envelope.SealShare: the aggregator's key, the leader's share bound to
// the volunteer's consent hash, and the relay's key that the aggregator
// signed into the announcement), and return the one Shares
// frame. It records the shard's and the seals' times in w.
func (c *Client) prepareSecAgg(a *wire.Announcement, setup *roundSetup, update []float64, vals []counts.Value, w *Work) ([][]byte, error) {
	r, err := setup.spec.SecAggRound(a.Round)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	leader, helper, err := shard(r, update, vals, c.src)
	w.Encode = time.Since(start)
	if err != nil {
		return nil, fmt.Errorf("shard: %w", err)
	}
	start = time.Now()
	sl, err := envelope.SealShare(a.HPKEPub, a.Round, envelope.ShareLeader, c.consent, leader)
	if err != nil {
		return nil, fmt.Errorf("seal leader share: %w", err)
	}
	sh, err := envelope.SealShare(a.RelayPub, a.Round, envelope.ShareHelper, [32]byte{}, helper)
	w.Seal = time.Since(start)
	if err != nil {
		return nil, fmt.Errorf("seal helper share: %w", err)
	}
	f, err := (&wire.Shares{Round: a.Round, Leader: sl, Helper: sh}).MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("shares frame: %w", err)
	}
	lead, help, err := setup.spec.SharesSizes()
	if err != nil || len(f) != wire.SharesSize(lead, help) {
		return nil, fmt.Errorf("shares frame of %d bytes, the round's size is %d (%v)", len(f), wire.SharesSize(lead, help), err)
	}
	return [][]byte{f}, nil
}

// trainUpdate runs local training from the announced model and returns the
// update (trained - announced), reporting progress.
func (c *Client) trainUpdate(ctx context.Context, a *wire.Announcement) ([]float64, error) {
	c.emit(Event{Kind: EventTraining, Round: a.Round, Progress: 0})
	if !c.perEpoch {
		u, err := c.trainer.Update(nil, a.Model, c.data, c.src)
		if err != nil {
			return nil, fmt.Errorf("train: %w", err)
		}
		c.emit(Event{Kind: EventTraining, Round: a.Round, Progress: 1})
		return u, nil
	}
	w := make([]float64, len(a.Model))
	copy(w, a.Model)
	for e := range c.train.Epochs {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		if _, err := c.trainer.Train(w, w, c.data, c.src); err != nil {
			return nil, fmt.Errorf("train epoch %d: %w", e+1, err)
		}
		c.emit(Event{Kind: EventTraining, Round: a.Round, Progress: float64(e+1) / float64(c.train.Epochs)})
	}
	for i := range w {
		w[i] -= a.Model[i]
	}
	return w, nil
}

// Rehearse prepares one report for the parameters p from model exactly as
// a round would (train, encode or shard, seal) and returns how long it
// took, without sending anything: sealing is to throwaway X25519 keys
// made here. It measures what one round costs this volunteer on this
// machine now (make run sizes its rounds from it). It must not run
// concurrently with Run; it holds a Pool slot like a round.
func (c *Client) Rehearse(ctx context.Context, p wire.Params, model []float64) (time.Duration, error) {
	setup, err := setupRound(p, c.data.Shape().NumParams(), c.personal)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrParams, err)
	}
	a := &wire.Announcement{Round: 1, Params: p, Model: model}
	for _, k := range []*[32]byte{&a.HPKEPub, &a.RelayPub} {
		priv, err := ecdh.X25519().GenerateKey(rand.Reader)
		if err != nil {
			return 0, fmt.Errorf("client: rehearsal key: %w", err)
		}
		copy(k[:], priv.PublicKey().Bytes())
	}
	start := time.Now()
	if _, _, err := c.prepare(ctx, a, setup); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}
