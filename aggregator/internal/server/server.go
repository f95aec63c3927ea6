// Package server is Blanket's aggregator (analyzer) service
// (docs/protocol.md): it announces signed rounds to the relay, receives
// each round's padded and shuffled batch, charges the privacy ledger
// durably before decrypting anything, opens the sealed values in parallel,
// debiases them with the FLAME analyzer, updates and evaluates the model,
// checkpoints atomically, and serves a JSON API.
//
// # Round life cycle
//
// For round r the server checks that the would-be release (Config.ExpectedN
// reports at the announced n_p) fits the privacy budget (ledger.CanCharge),
// records the round as open in the checkpoint, and POSTs the signed
// Announcement (model theta^{r-1}) to the relay. The round ends with one of:
//
//   - a batch (POST /v1/batch): parsed and checked against the round's
//     parameters (wire.ParseBatch), its release charged to the ledger
//     (fsynced) and only then opened, estimated (n = Batch.Reports) and
//     applied; status ok. A refused charge answers "refused", decrypts
//     nothing and stops the announcements.
//   - an abort (POST /v1/abort): nothing charged; the next round follows.
//   - nothing by deadline + BatchGrace: abandoned, nothing charged.
//
// A secure-summation round (docs/secagg.md; secagg.go) ends instead with
// the relay's SecAggBatch (POST /v1/secagg/batch: prepared, charged before
// the leader's 'M' is answered, refused or invalid without it) followed by
// its noised aggregate share (POST /v1/secagg/aggregate: unsharded and
// applied); a round charged but not applied (no aggregate within
// BatchGrace, a relay abort, a restart in between) is lost.
//
// Every batch and abort gets a definitive outcome (Intake): accepted,
// duplicate (an identical re-send, same SHA-256: the stored reply again),
// obsolete (the round is closed here another way, or not open: a second,
// different batch, an abort after the round was abandoned) or invalid.
//
// # Crash safety
//
// The ledger is the source of truth for charged rounds. On start, a round
// the ledger charged but the checkpoint does not hold (a crash between
// charge and checkpoint) is recorded as lost: its budget stays spent, the
// model does not include it, and the next round is numbered after it, so
// the ledger never under-counts. An announced round still open in the
// checkpoint is waited for again until its deadline + BatchGrace.
package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/ledger"
	"github.com/blanket-fl/blanket/aggregator/internal/sealkey"
	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/wire"
)

// File names inside Config.StateDir.
const (
	KeyFile        = "key.bin"
	LedgerFile     = "ledger.jsonl"
	CheckpointFile = "state.json"
)

// Server is the aggregator. Create it with New, run the round loop with
// Run, serve Handler over HTTP, and Close it after Run returned.
type Server struct {
	cfg       Config
	log       *slog.Logger
	key       *sealkey.PrivateKey
	pub       envelope.PublicKey
	fp        string
	ledger    *ledger.Ledger
	acct      *accounting
	proto     *protocolSetup
	statePath string
	tokenSum  [32]byte

	// procMu serializes every state transition (batch, abort, announce,
	// abandon); mu guards st and stopped for the API's readers.
	procMu  sync.Mutex
	mu      sync.RWMutex
	st      checkpoint
	stopped string // why the round loop stopped announcing ("" while running)
	// Operator controls (operator.go), guarded by mu; pendingCfg and
	// pendingReset are also only set and applied under procMu.
	paused       bool
	pendingCfg   *pendingConfig
	pendingReset bool

	events *broker // the /events streams

	wake chan struct{} // a round finished

	opened atomic.Int64 // messages opened since start (tests and metrics)

	sa secaggState // secure summation (secagg.go)
}

// New validates cfg, creates the state directory, loads or creates the
// key, opens the ledger and the checkpoint, and reconciles them (see the
// package documentation, "Crash safety").
func New(cfg Config) (*Server, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	proto, err := setupProtocol(c.Params)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(c.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("server: state directory: %w", err)
	}
	key, created, err := sealkey.LoadOrCreateKey(filepath.Join(c.StateDir, KeyFile))
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg: c, log: c.Logger, key: key, pub: key.Public(), proto: proto,
		acct:      newAccounting(c.Accountant),
		statePath: filepath.Join(c.StateDir, CheckpointFile),
		tokenSum:  sha256.Sum256([]byte(c.Token)),
		wake:      make(chan struct{}, 1),
		events:    newBroker(c.Web.MaxSubscribers),
		paused:    c.Web.StartPaused,
	}
	s.fp = s.pub.Fingerprint()
	if err := s.cfg.Web.pinJoinURL(s.fp); err != nil {
		return nil, err
	}
	if created {
		s.log.Info("generated a new aggregator key", "fingerprint", s.fp)
	}
	if err := proto.releaseFor(1, c.ExpectedN, int(c.Params.NP)).Validate(); err != nil {
		return nil, fmt.Errorf("server: expected n = %d does not fit the padding n_p = %d: %w", c.ExpectedN, c.Params.NP, err)
	}
	ck, err := loadCheckpoint(s.statePath)
	if err != nil {
		return nil, err
	}
	if ck == nil {
		ck = &checkpoint{Version: checkpointVersion, Model: make([]float64, c.Params.D)}
	}
	if len(ck.Model) != int(c.Params.D) {
		return nil, fmt.Errorf("server: checkpoint model has %d parameters, the configuration d = %d", len(ck.Model), c.Params.D)
	}
	ck.Params = toParamsJSON(c.Params)
	lo, err := s.acct.ledgerOptions(c.TargetEpsilon, c.TargetDelta)
	if err != nil {
		return nil, err
	}
	lo.Logger = c.Logger
	l, err := ledger.Open(filepath.Join(c.StateDir, LedgerFile), lo)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if err := ck.verifyLedger(l); err != nil {
		l.Close()
		return nil, err
	}
	s.ledger = l
	s.st = *ck
	if err := s.reconcile(); err != nil {
		l.Close()
		return nil, err
	}
	s.log.Info("aggregator ready", "fingerprint", s.fp, "last_round", s.st.Round, "rounds_ok", s.roundsOK(),
		"ledger_rounds", len(l.Releases()), "protocol", c.Params.Protocol, "d", c.Params.D, "k", c.Params.K,
		"l", c.Params.L, "n_p", c.Params.NP, "eps_l", c.Params.EpsL, "sigma", c.Params.Sigma, "bits", c.Params.Bits)
	return s, nil
}

// reconcile makes the checkpoint agree with the ledger: every charged
// round the checkpoint does not know is recorded as lost.
func (s *Server) reconcile() error {
	last := s.ledger.LastRound()
	s.st.LedgerRecords, s.st.LedgerHead = ledgerHead(s.ledger)
	if last <= s.st.Round {
		// A batch recorded for charging whose charge never reached the
		// ledger was not charged (and not decrypted): forget it.
		s.st.Charging = nil
		return s.st.save(s.statePath)
	}
	for _, rel := range s.ledger.Releases() {
		if rel.Round <= s.st.Round {
			continue
		}
		s.log.Warn("round charged in the ledger but missing from the checkpoint (stopped between charge and checkpoint); its budget stays spent and the model does not include it",
			"round", rel.Round)
		rec := RoundRecord{Round: rel.Round, Status: StatusLost, N: rel.N, NP: rel.NP,
			Detail: "charged in the ledger, not applied: the aggregator stopped between charge and checkpoint"}
		if c := s.st.Charging; c != nil && c.Round == rel.Round && c.SecAgg {
			rec.Detail += "; secure summation: the leader's preparation state was in memory only"
		} else if c != nil && c.Round == rel.Round {
			// The batch being charged is known: its identical re-send
			// will be applied without a second charge (reapply).
			rec.Digest = c.Digest
			rec.Detail += "; an identical re-sent batch will be applied without charging again"
		}
		s.st.History = append(s.st.History, rec)
	}
	s.st.Charging = nil
	// The status reads the spent epsilon from the last record that has
	// one: the lost rounds stay charged.
	if eps, _, method := s.ledger.Spent(); len(s.st.History) > 0 {
		h := &s.st.History[len(s.st.History)-1]
		h.EpsilonTightest, h.Method = finitePtr(eps), method
	}
	s.st.Round = last
	if s.st.Open != nil && s.st.Open.Round <= last {
		s.st.Open = nil
	}
	return s.st.save(s.statePath)
}

// Fingerprint returns the aggregator key's fingerprint (clients pin it).
func (s *Server) Fingerprint() string { return s.fp }

// PublicKey returns the aggregator's public key.
func (s *Server) PublicKey() envelope.PublicKey { return s.pub }

// Close closes the ledger. Call it after Run returned and the HTTP server
// stopped.
func (s *Server) Close() error { return s.ledger.Close() }

func (s *Server) roundsOK() int {
	n := 0
	for _, r := range s.st.History {
		if r.Status == StatusOK {
			n++
		}
	}
	return n
}

// notify wakes the round loop.
func (s *Server) notify() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// commit applies fn to the state under the API lock and saves the
// checkpoint. Caller holds procMu.
func (s *Server) commit(fn func(st *checkpoint)) error {
	s.mu.Lock()
	before := len(s.st.History)
	fn(&s.st)
	s.st.LedgerRecords, s.st.LedgerHead = ledgerHead(s.ledger)
	var finished []RoundRecord
	if len(s.st.History) > before {
		finished = slices.Clone(s.st.History[before:])
	}
	err := s.st.save(s.statePath)
	s.mu.Unlock()
	if err != nil {
		s.log.Error("checkpoint failed", "err", err)
	}
	s.publishChange(finished)
	return err
}

// Run is the round loop: it announces rounds and waits for each to finish,
// until Config.Rounds ok rounds were run, the budget refuses the next
// round, or ctx is cancelled (all of which return nil; the HTTP API keeps
// answering until the caller shuts it down). It returns an error only for
// a configuration the ledger rejects outright.
func (s *Server) Run(ctx context.Context) error {
	for {
		if ctx.Err() != nil {
			return nil
		}
		open, err := s.nextRound()
		if err != nil {
			return err
		}
		if open == nil {
			if s.waitResume(ctx) {
				continue // the operator resumed
			}
			return nil // stopped; reason logged and in the status
		}
		if !open.Announced {
			if !s.announce(ctx, *open) {
				continue // abandoned or cancelled
			}
		}
		s.waitRound(ctx, open.Round, open.Deadline)
	}
}

// nextRound returns the open round, opening a new one if none is open, or
// nil if the loop must stop.
func (s *Server) nextRound() (*openRound, error) {
	s.procMu.Lock()
	defer s.procMu.Unlock()
	if s.st.Open != nil {
		o := *s.st.Open
		return &o, nil
	}
	// Between rounds: the operator's configuration or model reset.
	if err := s.applyPending(); err != nil {
		return nil, err
	}
	if s.stoppedReason() != "" || s.Paused() {
		return nil, nil
	}
	if s.cfg.Rounds > 0 && s.roundsOK() >= s.cfg.Rounds {
		s.stop(fmt.Sprintf("completed %d rounds", s.cfg.Rounds))
		return nil, nil
	}
	r := s.st.Round + 1
	rel := s.proto.releaseFor(r, s.cfg.ExpectedN, int(s.cfg.Params.NP))
	if eps, err := s.ledger.CanCharge(rel); err != nil {
		if errors.Is(err, ledger.ErrBudgetExhausted) {
			s.stop(fmt.Sprintf("privacy budget: round %d would bring epsilon to %.4g, target %g", r, eps, s.cfg.TargetEpsilon))
			return nil, nil
		}
		return nil, fmt.Errorf("server: budget check for round %d: %w", r, err)
	}
	now := time.Now()
	o := openRound{Round: r, AnnouncedAt: now, Deadline: now.Add(s.cfg.RoundTimeout).Truncate(time.Millisecond)}
	if err := s.commit(func(st *checkpoint) { st.Open = &o }); err != nil {
		return nil, err
	}
	return &o, nil
}

func (s *Server) stoppedReason() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.stopped
}

// stop records why no further round is announced.
func (s *Server) stop(why string) {
	s.mu.Lock()
	if s.stopped == "" {
		s.stopped = why
	}
	s.mu.Unlock()
	s.log.Info("no further rounds", "reason", why)
	s.notify()
	s.publishStatus()
}

// announcement builds the signed Announcement frame of an open round; a
// secure-summation round carries the relay's helper key (relayKey), whose
// fetch failing is errRelayKey.
func (s *Server) announcement(ctx context.Context, o openRound) ([]byte, error) {
	s.mu.RLock()
	model := slices.Clone(s.st.Model)
	params := s.cfg.Params
	s.mu.RUnlock()
	a := wire.Announcement{Round: uint64(o.Round), Deadline: o.Deadline, Params: params, HPKEPub: s.pub.HPKE, Model: model}
	if params.Protocol == wire.ProtocolSecAgg {
		k, err := s.relayKey(ctx)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errRelayKey, err)
		}
		a.RelayPub = k
	}
	if err := a.Sign(s.key); err != nil {
		return nil, fmt.Errorf("server: signing announcement: %w", err)
	}
	return a.MarshalBinary()
}

// announce delivers the announcement to the relay, retrying until the
// deadline. It reports whether the round was announced; if the deadline
// passes first the round is abandoned.
func (s *Server) announce(ctx context.Context, o openRound) bool {
	var frame []byte
	for attempt := 1; ; attempt++ {
		var err error
		if frame == nil {
			// (Re)built when the relay's helper key had to be fetched again.
			frame, err = s.announcement(ctx, o)
			if err != nil && !errors.Is(err, errRelayKey) {
				s.log.Error("cannot build announcement", "round", o.Round, "err", err)
				s.abandon(o.Round, err.Error())
				return false
			}
		}
		if err == nil {
			err = s.post(ctx, "/v1/rounds", frame)
			if isHelperKeyMismatch(err) {
				s.forgetRelayKey()
				frame = nil
			}
		}
		if err == nil {
			s.procMu.Lock()
			if s.st.Open != nil && s.st.Open.Round == o.Round {
				s.commit(func(st *checkpoint) { st.Open.Announced = true })
			}
			s.procMu.Unlock()
			s.log.Info("round announced", "round", o.Round, "deadline", o.Deadline, "bytes", len(frame))
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		s.log.Warn("announcement not delivered", "round", o.Round, "attempt", attempt, "err", err)
		wait := s.cfg.RetryInterval
		if time.Now().Add(wait).After(o.Deadline) {
			s.abandon(o.Round, "announcement not delivered before the deadline: "+err.Error())
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		case <-s.wake:
			// A batch or abort may have closed the round meanwhile.
			if !s.isOpen(o.Round) {
				return false
			}
		}
	}
}

func (s *Server) isOpen(round int) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.st.Open != nil && s.st.Open.Round == round
}

// errRelayKey marks an announcement that could not be built because the
// relay's helper key could not be fetched (retried like a delivery).
var errRelayKey = errors.New("server: relay helper key unavailable")

// relayError is the relay's non-2xx answer to a POST.
type relayError struct {
	status string
	body   string
}

func (e *relayError) Error() string { return fmt.Sprintf("relay answered %s: %s", e.status, e.body) }

// post sends body to the relay with the bearer token.
func (s *Server) post(ctx context.Context, path string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(s.cfg.RelayURL, "/")+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+s.cfg.Token)
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return &relayError{status: resp.Status, body: strings.TrimSpace(string(msg))}
	}
	return nil
}

// waitRound waits until the round is closed (batch or abort), or abandons
// it at deadline + BatchGrace.
func (s *Server) waitRound(ctx context.Context, round int, deadline time.Time) {
	timer := time.NewTimer(time.Until(deadline.Add(s.cfg.BatchGrace)))
	defer timer.Stop()
	for s.isOpen(round) {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-timer.C:
			// A charged secure-summation round waits BatchGrace for its
			// aggregate from when its batch was answered.
			if until := s.secaggPendingUntil(round); time.Now().Before(until) {
				timer.Reset(time.Until(until))
				continue
			}
			s.abandon(round, fmt.Sprintf("no batch or abort within %v after the deadline", s.cfg.BatchGrace))
			return
		}
	}
}

// abandon closes an open round without charging anything.
func (s *Server) abandon(round int, why string) {
	s.procMu.Lock()
	defer s.procMu.Unlock()
	if s.st.Open == nil || s.st.Open.Round != round {
		return
	}
	if s.loseSecAggIfPending(round, fmt.Sprintf("charged, not applied: no aggregate share within %v after the batch", s.cfg.BatchGrace)) {
		return
	}
	o := *s.st.Open
	s.log.Warn("round abandoned", "round", round, "reason", why)
	s.commit(func(st *checkpoint) {
		st.History = append(st.History, RoundRecord{Round: round, Status: StatusAbandoned, Detail: why,
			AnnouncedAt: o.AnnouncedAt, Deadline: o.Deadline, FinishedAt: time.Now()})
		st.Round, st.Open = round, nil
	})
}

// record returns the history record of a round, or nil.
func (s *Server) record(round int) *RoundRecord {
	for i := len(s.st.History) - 1; i >= 0; i-- {
		if s.st.History[i].Round == round {
			return &s.st.History[i]
		}
	}
	return nil
}

// authorized checks the bearer token in constant time (of the digests, so
// the token's length does not leak either).
func (s *Server) authorized(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		return false
	}
	sum := sha256.Sum256([]byte(tok))
	return subtle.ConstantTimeCompare(sum[:], s.tokenSum[:]) == 1
}

// Intake is the definitive outcome of a batch or an abort the relay posts
// (docs/protocol.md, "Relay-aggregator outcomes"). The relay removes a
// frame from its outbox on any of them and never sends it again; only an
// internal failure (HTTP 500) or no answer makes it resend the same bytes.
type Intake string

const (
	// IntakeAccepted: processed now (a batch's reply status says how:
	// ok, refused by the budget, or invalid after its charge).
	IntakeAccepted Intake = "accepted"
	// IntakeDuplicate: this frame was already processed (a resend whose
	// answer was lost); a batch gets its stored reply again.
	IntakeDuplicate Intake = "duplicate"
	// IntakeObsolete: the round is closed here another way (abandoned,
	// aborted, lost, another batch) or is not the open round.
	IntakeObsolete Intake = "obsolete"
	// IntakeInvalid: the bytes can never be processed (not a frame of the
	// kind, malformed, disagreeing with the round's parameters).
	IntakeInvalid Intake = "invalid"
)

// HTTPStatus is the status code that carries the outcome: 200 accepted,
// 208 duplicate, 409 obsolete, 400 invalid.
func (i Intake) HTTPStatus() int {
	switch i {
	case IntakeAccepted:
		return http.StatusOK
	case IntakeDuplicate:
		return http.StatusAlreadyReported
	case IntakeObsolete:
		return http.StatusConflict
	}
	return http.StatusBadRequest
}

// IntakeAnswer is the JSON body of an answer to POST /v1/abort.
type IntakeAnswer struct {
	Round   uint64 `json:"round"`
	Outcome Intake `json:"outcome"`
	Detail  string `json:"detail,omitempty"`
}

// HandleBatch processes one Batch frame and returns the reply (see
// BatchIntake, which also returns the outcome).
func (s *Server) HandleBatch(frame []byte) (wire.BatchReply, error) {
	reply, _, err := s.BatchIntake(frame)
	return reply, err
}

// BatchIntake processes one Batch frame and returns the reply and its
// outcome. It is the body of POST /v1/batch after authentication; err is
// non-nil only for internal failures (the ledger could not record the
// charge; nothing was decrypted), answered 500 so the relay retries. The
// reply's Round is 0 only when the frame is not a batch frame of a round.
func (s *Server) BatchIntake(frame []byte) (wire.BatchReply, Intake, error) {
	digest := sha256.Sum256(frame)
	dig := hex.EncodeToString(digest[:])
	s.procMu.Lock()
	defer s.procMu.Unlock()

	t, round, err := wire.PeekRound(frame)
	if err != nil || t != wire.TypeBatch || round < 1 {
		s.log.Warn("batch rejected: not a batch frame", "bytes", len(frame))
		return wire.BatchReply{Status: wire.BatchStatusInvalid}, IntakeInvalid, nil
	}
	reply := wire.BatchReply{Round: round}
	if round > uint64(s.st.Round+1) || int(round) <= 0 {
		reply.Status = wire.BatchStatusInvalid
		s.log.Warn("batch ignored: a round never announced", "round", round, "last", s.st.Round)
		return reply, IntakeObsolete, nil
	}
	r := int(round)
	if rec := s.record(r); rec != nil {
		if rec.Status == StatusLost && rec.Reply == nil && rec.Digest == dig {
			return s.reapply(frame, round, dig)
		}
		if rec.Digest == dig && rec.Reply != nil {
			s.log.Info("identical batch re-sent; answering with the stored reply", "round", r)
			return wire.BatchReply{Round: round, Accepted: uint32(rec.Accepted), RejectedOpen: uint32(rec.RejectedOpen),
				RejectedValue: uint32(rec.RejectedValue), Status: *rec.Reply}, IntakeDuplicate, nil
		}
		s.log.Warn("batch ignored: the round is already closed", "round", r, "status", rec.Status)
		reply.Status = wire.BatchStatusDuplicate
		return reply, IntakeObsolete, nil
	}
	if s.st.Open == nil || s.st.Open.Round != r {
		// A round below the last finished one with no record cannot
		// happen; a round not open is not accepted.
		reply.Status = wire.BatchStatusInvalid
		s.log.Warn("batch ignored: round not open", "round", r)
		return reply, IntakeObsolete, nil
	}
	if s.proto.secAgg() {
		reply.Status = wire.BatchStatusInvalid
		s.log.Warn("batch rejected: the round is secure summation (POST /v1/secagg/batch)", "round", r)
		return reply, IntakeInvalid, nil
	}
	start := time.Now()
	b, err := wire.ParseBatch(frame, s.cfg.Params)
	if err != nil {
		s.log.Warn("batch rejected: malformed", "round", r, "err", err)
		reply.Status = wire.BatchStatusInvalid
		return reply, IntakeInvalid, nil
	}
	if i, j, dup := duplicateSealed(b); dup {
		// Every honest seal has a fresh encapsulation: the same one twice
		// is a replayed report the relay let through, which would count
		// one volunteer's values twice. Nothing is charged or opened.
		s.log.Warn("batch rejected: a sealed message appears twice", "round", r, "first", i, "again", j)
		reply.Status = wire.BatchStatusInvalid
		return reply, IntakeInvalid, nil
	}
	rec := RoundRecord{
		Round: r, AnnouncedAt: s.st.Open.AnnouncedAt, Deadline: s.st.Open.Deadline, Digest: dig,
		N: int(b.Reports), NP: int(b.NP), CheckedIn: int(b.CheckedIn), Population: int(b.Population), Messages: len(b.Messages),
	}
	if b.Population > 0 {
		rec.CheckInRate = float64(b.CheckedIn) / float64(b.Population)
	}

	// Record which batch is being charged, durably, before charging it: a
	// restart between the charge and the checkpoint below then knows the
	// charged batch's digest, and an identical re-send is applied without
	// charging again (reapply) instead of leaving the round lost.
	if err := s.commit(func(c *checkpoint) { c.Charging = &chargingRound{Round: r, Digest: dig} }); err != nil {
		return wire.BatchReply{}, "", fmt.Errorf("server: recording the batch before its charge, round %d: %w", r, err)
	}
	// Charge before decrypting: nothing of this round is opened, let
	// alone published, unless the ledger has durably recorded it.
	rel := s.proto.releaseFor(r, int(b.Reports), int(b.NP))
	if err := s.ledger.Charge(rel); err != nil {
		switch {
		case errors.Is(err, ledger.ErrBudgetExhausted):
			reply.Status = wire.BatchStatusRefused
			st := reply.Status
			rec.Status, rec.Detail, rec.Reply, rec.FinishedAt = StatusRefused, err.Error(), &st, time.Now()
			s.log.Warn("batch refused: privacy budget", "round", r, "err", err)
			s.commit(func(c *checkpoint) { c.History = append(c.History, rec); c.Round, c.Open = r, nil })
			s.stop("privacy budget: " + err.Error())
			return reply, IntakeAccepted, nil
		case errors.Is(err, ledger.ErrInvalidRelease):
			s.log.Warn("batch rejected: invalid release", "round", r, "err", err)
			reply.Status = wire.BatchStatusInvalid
			return reply, IntakeInvalid, nil
		default:
			s.log.Error("ledger charge failed; nothing decrypted", "round", r, "err", err)
			return wire.BatchReply{}, "", fmt.Errorf("server: charging round %d: %w", r, err)
		}
	}

	model, err := s.decryptAndUpdate(round, b, &reply, &rec)
	if err != nil {
		// Charged but not applied: the budget stays spent.
		reply.Status = wire.BatchStatusInvalid
		rec.Status, rec.Detail = StatusLost, "charged but not applied: "+err.Error()
		s.log.Error("estimate failed after charging", "round", r, "err", err)
	} else {
		reply.Status = wire.BatchStatusOK
		rec.Status = StatusOK
		acc, aerr := logreg.Accuracy(model, s.cfg.Test)
		loss, lerr := logreg.Loss(model, s.cfg.Test, 0)
		if aerr == nil && lerr == nil {
			rec.Accuracy, rec.Loss = finitePtr(acc), finitePtr(loss)
		} else {
			s.log.Error("evaluation failed", "round", r, "err", errors.Join(aerr, lerr))
		}
	}
	s.fillEpsilon(&rec)
	st := reply.Status
	rec.Reply, rec.FinishedAt, rec.Seconds = &st, time.Now(), time.Since(start).Seconds()
	// A failed checkpoint is logged by commit; the reply stands (the
	// charge is durable, and after a restart the round is recorded lost).
	s.commit(func(c *checkpoint) {
		if rec.Status == StatusOK {
			c.Model = model
		}
		c.History = append(c.History, rec)
		c.Round, c.Open, c.Charging = r, nil, nil
	})
	s.notify()
	args := []any{"round", r, "status", rec.Status, "n", rec.N, "n_p", rec.NP, "accepted", rec.Accepted,
		"rejected_open", rec.RejectedOpen, "rejected_value", rec.RejectedValue, "seconds", rec.Seconds}
	if rec.Accuracy != nil {
		args = append(args, "accuracy", *rec.Accuracy, "loss", *rec.Loss)
	}
	if rec.EpsilonTightest != nil {
		args = append(args, "epsilon", *rec.EpsilonTightest, "method", rec.Method)
	}
	s.log.Info("round finished", args...)
	return reply, IntakeAccepted, nil
}

// duplicateSealed reports the first pair of messages of b that share an
// HPKE encapsulated key (the first envelope.EncSize bytes of the sealed
// part), if any.
func duplicateSealed(b *wire.Batch) (first, again int, dup bool) {
	seen := make(map[[envelope.EncSize]byte]int, len(b.Messages))
	for i, m := range b.Messages {
		var k [envelope.EncSize]byte
		copy(k[:], m.Sealed)
		if j, ok := seen[k]; ok {
			return j, i, true
		}
		seen[k] = i
	}
	return 0, 0, false
}

// decryptAndUpdate opens a charged batch (openBatch), fills the counts of
// reply and rec, and returns the model with the round's estimate applied
// (not yet stored), or an error if the estimate is unusable.
func (s *Server) decryptAndUpdate(round uint64, b *wire.Batch, reply *wire.BatchReply, rec *RoundRecord) ([]float64, error) {
	if s.proto.analyzer == nil {
		return nil, errors.New("the current protocol is secure summation: no shuffle analyzer")
	}
	mb, counts := openBatch(s.key, round, b, s.proto.center, s.proto.spec.Admissible, s.cfg.Workers)
	s.opened.Add(int64(len(b.Messages)))
	reply.Accepted, reply.RejectedOpen, reply.RejectedValue = uint32(counts.accepted), uint32(counts.rejectedOpen), uint32(counts.rejectedValue)
	rec.Accepted, rec.RejectedOpen, rec.RejectedValue = counts.accepted, counts.rejectedOpen, counts.rejectedValue
	model := slices.Clone(s.st.Model)
	est, err := s.proto.analyzer.Estimate(mb, int(b.Reports))
	if err != nil {
		return nil, err
	}
	for j, v := range est {
		model[j] += s.cfg.ServerLR * v
	}
	for _, v := range model {
		if !finiteF(v) {
			return nil, errors.New("model update is not finite")
		}
	}
	return model, nil
}

// reapply applies the identical re-send of a batch that was charged before
// a restart but never applied (reconcile recorded the round lost with the
// digest of the batch being charged): the ledger already holds the round's
// release, so nothing is charged again (every decrypted round is charged
// exactly once). The caller holds procMu. The round's model update lands
// on the current model, after any round announced since (an asynchronous
// update, as federated averaging tolerates).
func (s *Server) reapply(frame []byte, round uint64, dig string) (wire.BatchReply, Intake, error) {
	r := int(round)
	reply := wire.BatchReply{Round: round}
	b, err := wire.ParseBatch(frame, s.cfg.Params)
	if err != nil {
		s.log.Warn("re-sent batch of a lost round rejected: malformed", "round", r, "err", err)
		reply.Status = wire.BatchStatusInvalid
		return reply, IntakeInvalid, nil
	}
	start := time.Now()
	rec := *s.record(r)
	model, err := s.decryptAndUpdate(round, b, &reply, &rec)
	if err != nil {
		reply.Status = wire.BatchStatusInvalid
		rec.Detail = "charged, re-sent after a restart, not applied: " + err.Error()
		s.log.Error("estimate of a re-sent charged batch failed", "round", r, "err", err)
	} else {
		reply.Status = wire.BatchStatusOK
		rec.Status, rec.Detail = StatusOK, "charged before a restart; its identical re-sent batch applied without a second charge"
		rec.N, rec.NP, rec.CheckedIn, rec.Population, rec.Messages = int(b.Reports), int(b.NP), int(b.CheckedIn), int(b.Population), len(b.Messages)
		if acc, aerr := logreg.Accuracy(model, s.cfg.Test); aerr == nil {
			rec.Accuracy = finitePtr(acc)
		}
		if loss, lerr := logreg.Loss(model, s.cfg.Test, 0); lerr == nil {
			rec.Loss = finitePtr(loss)
		}
	}
	st := reply.Status
	rec.Digest, rec.Reply, rec.FinishedAt, rec.Seconds = dig, &st, time.Now(), time.Since(start).Seconds()
	s.commit(func(c *checkpoint) {
		if rec.Status == StatusOK {
			c.Model = model
		}
		for i := range c.History {
			if c.History[i].Round == r {
				c.History[i] = rec
			}
		}
	})
	s.notify()
	s.log.Info("re-sent batch of a charged round applied without charging again", "round", r, "status", rec.Status, "accepted", rec.Accepted)
	return reply, IntakeAccepted, nil
}

// fillEpsilon stores the cumulative guarantee after the round by every
// accounting method (cached from the ledger's own Charge).
func (s *Server) fillEpsilon(rec *RoundRecord) {
	eps, _, method := s.ledger.Spent()
	rec.EpsilonTightest, rec.Method = finitePtr(eps), method
	rels := s.ledger.Releases()
	if len(rels) == 0 {
		return
	}
	rep, err := s.acct.report(s.ledger, s.cfg.TargetDelta)
	if err != nil {
		s.log.Warn("accounting rows unavailable", "round", rec.Round, "err", err)
		return
	}
	rec.Epsilon = rowsOf(rep)
}

// HandleAbort processes an Abort frame (see AbortIntake): it reports
// whether the abort matched the open round or an already aborted one.
func (s *Server) HandleAbort(frame []byte) (bool, error) {
	ans := s.AbortIntake(frame)
	if ans.Outcome == IntakeInvalid {
		return false, errors.New(ans.Detail)
	}
	return ans.Outcome == IntakeAccepted || ans.Outcome == IntakeDuplicate, nil
}

// AbortIntake processes an Abort frame: the open round is closed with
// nothing charged and the next round follows (accepted). An abort of a
// round already aborted is a duplicate; of a round closed another way, or
// not open, obsolete; bytes that are not an Abort frame, invalid.
func (s *Server) AbortIntake(frame []byte) IntakeAnswer {
	a, err := wire.ParseAbort(frame)
	if err != nil {
		_, round, _ := wire.PeekRound(frame)
		return IntakeAnswer{Round: round, Outcome: IntakeInvalid, Detail: "invalid abort: " + err.Error()}
	}
	s.procMu.Lock()
	defer s.procMu.Unlock()
	ans := IntakeAnswer{Round: a.Round}
	r := int(a.Round)
	if r <= 0 {
		ans.Outcome, ans.Detail = IntakeObsolete, "round out of range"
		return ans
	}
	if rec := s.record(r); rec != nil {
		if rec.Status == StatusAborted {
			ans.Outcome, ans.Detail = IntakeDuplicate, fmt.Sprintf("round %d already aborted", r)
		} else {
			ans.Outcome, ans.Detail = IntakeObsolete, fmt.Sprintf("round %d already closed: %s", r, rec.Status)
			s.log.Info("abort ignored: the round is already closed", "round", r, "status", rec.Status)
		}
		return ans
	}
	if s.st.Open == nil || s.st.Open.Round != r {
		ans.Outcome, ans.Detail = IntakeObsolete, fmt.Sprintf("round %d is not open (last %d)", r, s.st.Round)
		s.log.Info("abort ignored: round not open", "round", r, "last", s.st.Round)
		return ans
	}
	if s.loseSecAggIfPending(r, "charged, not applied: aborted by the relay after its batch ("+abortReason(a.Reason)+")") {
		ans.Outcome = IntakeAccepted
		return ans
	}
	o := *s.st.Open
	rec := RoundRecord{Round: r, Status: StatusAborted, Detail: abortReason(a.Reason), AnnouncedAt: o.AnnouncedAt,
		Deadline: o.Deadline, FinishedAt: time.Now(), N: int(a.Reports), CheckedIn: int(a.CheckedIn), Population: int(a.Population)}
	if a.Population > 0 {
		rec.CheckInRate = float64(a.CheckedIn) / float64(a.Population)
	}
	s.log.Info("round aborted by the relay; nothing charged", "round", r, "reason", rec.Detail, "reports", a.Reports,
		"checked_in", a.CheckedIn, "population", a.Population)
	s.commit(func(c *checkpoint) { c.History = append(c.History, rec); c.Round, c.Open = r, nil })
	s.notify()
	ans.Outcome = IntakeAccepted
	return ans
}

func abortReason(r uint8) string {
	switch r {
	case wire.AbortBelowMinBatch:
		return "below min batch"
	case wire.AbortRelayRestart:
		return "relay restart"
	case wire.AbortOverflow:
		return "overflow"
	}
	return fmt.Sprintf("reason %d", r)
}
