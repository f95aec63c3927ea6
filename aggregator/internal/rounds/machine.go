// Package rounds is the aggregator's round state machine, apart from HTTP
// and from storage: the checkpointed state (model, history, open round),
// the transitions of a round (opened, announced, closed by a batch, an
// abort or a secure-summation close, charged, applied, abandoned, lost),
// the intake decisions for the relay's frames (BatchIntake, AbortIntake,
// SecAggChunkIntake, SecAggCloseIntake, SecAggAggregateIntake) and the
// driver's decisions (NextRound, Retime, Abandon, Expiry), each a method
// over the Machine's explicit state. Nothing here imports net/http: the
// server (aggregator/internal/server) does the HTTP and the timers and
// calls these steps; every durable write goes through a Store
// (store.go), in the order the steps document (docs/secagg.md, "Crash
// safety"): collect, then pending, then the Charging marker, then the
// ledger's charge, then the answer; the aggregate applies and clears the
// pending round.
//
// Locks: procMu serializes every transition (each exported step takes
// it); mu guards the state for readers (View). The ledger is the source
// of truth for charged rounds (reconcile).
//
// # Round life cycle
//
// For round r the server checks that the would-be release (Config.ExpectedN
// reports at the announced n_p) fits the privacy budget (ledger.CanCharge: NextRound),
// records the round as open in the checkpoint, and POSTs the signed
// Announcement (model theta^{r-1}) to the relay. The round ends with one of:
//
//   - a batch (POST /v1/batch): parsed and checked against the round's
//     parameters (wire.ParseBatch), its release charged to the ledger
//     (fsynced) and only then opened, estimated (n = Batch.Reports) and
//     applied; status ok. A refused charge answers "refused", decrypts
//     nothing and stops the announcements.
//   - an abort (POST /v1/abort): nothing charged; the next round follows.
//   - nothing by deadline + BatchGrace (counted while the relay answers
//     /healthz: Expire): abandoned, nothing charged.
//
// A secure-summation round (docs/secagg.md; secagg.go, stream.go)
// ends instead with the relay's chunks (POST /v1/secagg/chunk: prepared as
// they arrive, each answered with its verdicts 'M'), its close (POST
// /v1/secagg/close: charged before the count is answered, refused or
// invalid without it) and its noised aggregate share (POST
// /v1/secagg/aggregate: unsharded and applied); a round charged but not applied (no aggregate within
// BatchGrace while the relay answers /healthz, or a relay abort) is lost;
// a restart of either server resumes it (Expire, restorePending).
//
// Every batch and abort gets a definitive outcome (outcome.Intake): accepted,
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
package rounds

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/accounting"
	"github.com/blanket-fl/blanket/aggregator/internal/analysis"
	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/aggregator/internal/prepjob"
	"github.com/blanket-fl/blanket/aggregator/internal/sealkey"
	"github.com/blanket-fl/blanket/shared/ledger"
	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/task"
	"github.com/blanket-fl/blanket/shared/wire"
)

// RoundConfig is the configuration of the rounds announced from now on:
// the announced parameters, what they determine (the spec, the analyzer,
// the release the ledger charges: analysis.Protocol), and the two values
// the operator may change with them (the server learning rate and the
// round timeout). It is never modified once built: a new configuration is
// a new RoundConfig, swapped in atomically between rounds (no round open,
// under procMu: ApplyPending), so a batch is always parsed, charged and
// estimated with the configuration its round was announced with.
type RoundConfig struct {
	Params   wire.Params
	Proto    *analysis.Protocol
	ServerLR float64
	Timeout  time.Duration
}

// NewRoundConfig derives a round configuration from validated parameters
// (analysis.NewProtocol: roundspec.New refuses layouts without a privacy
// proof).
func NewRoundConfig(p wire.Params, serverLR float64, timeout time.Duration) (*RoundConfig, error) {
	ps, err := analysis.NewProtocol(p)
	if err != nil {
		return nil, err
	}
	return &RoundConfig{Params: p, Proto: ps, ServerLR: serverLR, Timeout: timeout}, nil
}

// Options are what the steps need besides the state.
type Options struct {
	Key    *sealkey.PrivateKey
	Ledger *ledger.Ledger
	Acct   *accounting.Accounting
	Store  Store
	Round  *RoundConfig // the first rounds' configuration
	// Optimizer is the server's optimiser of secure summation's noisy
	// mean (zero value: sgd); OptimizerOf gives a task's.
	Optimizer Optimizer
	// Test is the held-out set the model is evaluated on (no examples:
	// nothing is evaluated).
	Test logreg.Dataset
	// Consent is task.ConsentHash of the study's task: secure summation's
	// leader shares open only under it (envelope.ShareInfo), so a report
	// sealed under another consent text is rejected as unopened.
	Consent [32]byte
	// Token derives the secure-summation verify key of each round.
	Token      string
	Workers    int // decryption goroutines (0: GOMAXPROCS)
	BatchGrace time.Duration
	ExpectedN  int
	Rounds     int // stop after this many ok rounds (0: never)
	// TargetEpsilon and TargetDelta are the ledger's budget (messages,
	// the accounting rows).
	TargetEpsilon, TargetDelta float64
	Paused                     bool
	Logger                     *slog.Logger
	// Noise is the aggregator's secure-summation noise in tests; nil, the
	// production value, draws from noise.Secure().
	Noise noise.Source
	Hooks Hooks
	// PrepareApart, if set, prepares each secure-summation chunk apart
	// from the round's running state before it is folded
	// (prepjob.Offload.Prepare: the aggregator's replicas lease the
	// chunks as jobs); the machine folds the result in the relay's order
	// (analysis.SecAggLeader.FoldPrepared) and prepares the chunk itself
	// when it failed or a nonce was accepted before (stream.go).
	PrepareApart func(ctx context.Context, r prepjob.Round, sealed [][]byte, prep []byte) ([]byte, error)
}

// Hooks are the server's reactions to the machine's changes (each may be
// nil). None is called with mu held; PublishChange and PublishStatus may
// be called with procMu held.
type Hooks struct {
	// PublishChange is called after each committed change with the
	// rounds it finished.
	PublishChange func(finished []checkpoint.RoundRecord)
	// PublishStatus is called when the status changed without a commit.
	PublishStatus func()
	// RoundOpened is called when round r is opened with rc.
	RoundOpened func(r int, rc *RoundConfig)
	// ProtocolChanged is called when the rounds from r on use another
	// protocol.
	ProtocolChanged func(r int, protocol string)
}

// Control is what the operator controls and the intake counted, as View
// shows it.
type Control struct {
	Stopped      string // why no further round is announced ("" while running)
	Paused       bool
	Rejected     map[string]int // batches rejected as invalid, by reason (read-only)
	PendingCfg   *RoundConfig   // scheduled for the next round (nil: none)
	PendingReset bool
}

// Machine is the aggregator's round state and its transitions.
type Machine struct {
	opt    Options
	log    *slog.Logger
	key    *sealkey.PrivateKey
	ledger *ledger.Ledger
	acct   *accounting.Accounting
	store  Store
	round  atomic.Pointer[RoundConfig]

	procMu sync.Mutex
	mu     sync.RWMutex
	st     checkpoint.State
	ctl    Control
	wake   chan struct{}
	opened atomic.Int64
	sa     secaggState
	flow   chunkFlow // concurrent secure-summation chunks (stream.go)
}

// Open builds the machine from the checkpointed state st (its ledger
// already verified against it) and resumes what the store holds: a charged
// secure-summation round awaiting its aggregate share (restorePending),
// the ledger's charges the checkpoint does not hold (reconcile, see
// "Crash safety" in package server), then the open round's chunks
// (restoreCollect).
func Open(opt Options, st checkpoint.State) (*Machine, error) {
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if err := opt.Optimizer.validate(); err != nil {
		return nil, err
	}
	if opt.Optimizer.Kind == "" {
		opt.Optimizer.Kind = OptimizerSGD
	}
	m := &Machine{opt: opt, log: opt.Logger, key: opt.Key, ledger: opt.Ledger, acct: opt.Acct, store: opt.Store,
		st: st, wake: make(chan struct{}, 1)}
	m.ctl.Paused = opt.Paused
	m.round.Store(opt.Round)
	m.restorePending()
	if err := m.reconcile(); err != nil {
		return nil, err
	}
	m.restoreCollect()
	return m, nil
}

// ServerStep names the server's step of rounds of configuration rc, as
// announced with the round: the optimiser (momentum applies to secure
// summation only, OptimizerOf) and the server learning rate.
func (m *Machine) ServerStep(rc *RoundConfig) (Optimizer, float64) {
	if rc.Params.Protocol != wire.ProtocolSecAgg {
		return Optimizer{Kind: OptimizerSGD}, rc.ServerLR
	}
	return m.opt.Optimizer, rc.ServerLR
}

// Current returns the configuration of the open or next round (lock-free).
func (m *Machine) Current() *RoundConfig { return m.round.Load() }

// Wake is signalled (capacity 1) when a round finished or the loop should
// look again.
func (m *Machine) Wake() <-chan struct{} { return m.wake }

// Opened is the number of messages opened since start.
func (m *Machine) Opened() int64 { return m.opened.Load() }

// View calls fn with the state under the readers' lock; fn must not
// modify or keep st or c.Rejected.
func (m *Machine) View(fn func(st *checkpoint.State, c Control)) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	fn(&m.st, m.ctl)
}

// reconcile makes the checkpoint agree with the ledger: every charged
// round the checkpoint does not know is recorded as lost.
func (m *Machine) reconcile() error {
	last := m.ledger.LastRound()
	m.st.LedgerRecords, m.st.LedgerHead = checkpoint.LedgerHead(m.ledger)
	if last <= m.st.Round {
		// A batch recorded for charging whose charge never reached the
		// ledger was not charged (and not decrypted): forget it.
		m.st.Charging = nil
		return m.store.SaveState(&m.st)
	}
	resumed := m.resumedRound()
	lost := 0
	for _, rel := range m.ledger.Releases() {
		if rel.Round <= m.st.Round || rel.Round == resumed {
			continue
		}
		m.log.Warn("round charged in the ledger but missing from the checkpoint (stopped between charge and checkpoint); its budget stays spent and the model does not include it",
			"round", rel.Round)
		rec := checkpoint.RoundRecord{Round: rel.Round, Status: checkpoint.StatusLost, N: rel.N, NP: rel.NP,
			Detail: "charged in the ledger, not applied: the aggregator stopped between charge and checkpoint"}
		if c := m.st.Charging; c != nil && c.Round == rel.Round && c.SecAgg {
			rec.Detail += "; secure summation: the leader's preparation state was in memory only"
		} else if c != nil && c.Round == rel.Round {
			// The batch being charged is known: its identical re-send
			// will be applied without a second charge (reapply).
			rec.Digest = c.Digest
			rec.Detail += "; an identical re-sent batch will be applied without charging again"
		}
		m.st.History = append(m.st.History, rec)
		lost++
	}
	m.st.Charging = nil
	// The status reads the spent epsilon from the last record that has
	// one: the lost rounds stay charged. (Only a lost record added here:
	// the round resumed is charged too, and its own record, when its
	// aggregate share is applied, carries the spent epsilon; the round
	// before it keeps its own.)
	if eps, _, method := m.ledger.Spent(); lost > 0 {
		h := &m.st.History[len(m.st.History)-1]
		h.EpsilonTightest, h.Method = accounting.FinitePtr(eps), method
	}
	if resumed > 0 {
		// The resumed round is the ledger's last (nothing is announced
		// after an open round); it stays open until its aggregate share.
		return m.store.SaveState(&m.st)
	}
	m.st.Round = last
	if m.st.Open != nil && m.st.Open.Round <= last {
		m.st.Open = nil
	}
	return m.store.SaveState(&m.st)
}

// RoundsOK is the number of rounds that updated the model.
func (m *Machine) RoundsOK() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.roundsOK()
}

func (m *Machine) roundsOK() int {
	n := 0
	for _, r := range m.st.History {
		if r.Status == checkpoint.StatusOK {
			n++
		}
	}
	return n
}

// notify wakes the round loop.
func (m *Machine) notify() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

func (m *Machine) publishStatus() {
	if f := m.opt.Hooks.PublishStatus; f != nil {
		f()
	}
}

// commit applies fn to the state under the readers' lock and saves the
// checkpoint. Caller holds procMu.
func (m *Machine) commit(fn func(st *checkpoint.State)) error {
	m.mu.Lock()
	before := len(m.st.History)
	fn(&m.st)
	m.st.LedgerRecords, m.st.LedgerHead = checkpoint.LedgerHead(m.ledger)
	var finished []checkpoint.RoundRecord
	if len(m.st.History) > before {
		finished = slices.Clone(m.st.History[before:])
	}
	err := m.store.SaveState(&m.st)
	m.mu.Unlock()
	m.wakeChunks() // chunks waiting for a predecessor look at the open round again
	if err != nil {
		m.log.Error("checkpoint failed", "err", err)
	}
	if f := m.opt.Hooks.PublishChange; f != nil {
		f(finished)
	}
	return err
}

// chargeInTx reports whether a charge can be one transaction with the
// machine's state: the store is a DBStore and the ledger's records are in
// the same datastore (ledger.OpenStore).
func (m *Machine) chargeInTx() bool {
	d, ok := m.store.(*DBStore)
	return ok && m.ledger.Store() != nil && m.ledger.Store() == d.DB()
}

// chargeTx charges rel with the prepared round p and the checkpoint,
// marked charging, in the ledger's transaction (ledger.ChargeWith,
// DBStore.ChargeTx): on success the marker is the machine's state; on any
// error nothing of it was written and the state is as before.
func (m *Machine) chargeTx(rel privacy.Release, p *Pending, marker *checkpoint.Charging) error {
	d := m.store.(*DBStore)
	m.mu.Lock()
	prev := m.st.Charging
	m.st.Charging = marker
	m.st.LedgerRecords, m.st.LedgerHead = checkpoint.LedgerHead(m.ledger)
	also, err := d.ChargeTx(p, &m.st)
	m.st.Charging = prev
	m.mu.Unlock()
	if err != nil {
		return fmt.Errorf("%w: %w", errPersist, err)
	}
	if err := m.ledger.ChargeWith(rel, also); err != nil {
		return err
	}
	m.mu.Lock()
	m.st.Charging = marker
	m.st.LedgerRecords, m.st.LedgerHead = checkpoint.LedgerHead(m.ledger)
	m.mu.Unlock()
	return nil
}

// record returns the history record of a round, or nil.
func (m *Machine) record(round int) *checkpoint.RoundRecord {
	for i := len(m.st.History) - 1; i >= 0; i-- {
		if m.st.History[i].Round == round {
			return &m.st.History[i]
		}
	}
	return nil
}

func (m *Machine) workers() int {
	if m.opt.Workers > 0 {
		return m.opt.Workers
	}
	return runtime.GOMAXPROCS(0)
}

// Optimizer is the server's optimiser of the noisy mean: OptimizerSGD
// ("" too) moves the model by ServerLR times the mean; OptimizerMomentum is
// FedAvgM (Hsu et al. 2019): m = Beta m + mean, x += ServerLR m, with m
// checkpointed with the model (checkpoint.State.Momentum), so that a
// restart resumes with the same momentum. Either is post-processing of the
// released mean: it costs no privacy.
type Optimizer struct {
	Kind string  // task.OptimizerSGD or task.OptimizerMomentum
	Beta float64 // momentum β in (0, 1)
}

// ConsentOf is Options.Consent for the study's task t: task.ConsentHash(t),
// the one derivation the clients seal their leader shares under.
func ConsentOf(t *task.Task) [32]byte { return task.ConsentHash(t) }

// Optimizer kinds (task.OptimizerSGD, task.OptimizerMomentum).
const (
	OptimizerSGD      = task.OptimizerSGD
	OptimizerMomentum = task.OptimizerMomentum
)

// OptimizerOf is the server optimiser of a task's recipe for rounds of
// protocol p: the recipe's (task.Task.Recipe) for secure summation, whose
// recipe it is; plain SGD for the shuffle protocols and without a task.
func OptimizerOf(t *task.Task, p wire.Params) Optimizer {
	if t == nil || p.Protocol != wire.ProtocolSecAgg {
		return Optimizer{Kind: OptimizerSGD}
	}
	r := t.Recipe()
	return Optimizer{Kind: r.ServerOptimizer, Beta: r.ServerMomentum}
}

func (o Optimizer) validate() error {
	switch o.Kind {
	case "", OptimizerSGD:
		return nil
	case OptimizerMomentum:
		if !(o.Beta > 0 && o.Beta < 1) {
			return fmt.Errorf("rounds: server momentum %v, want in (0, 1)", o.Beta)
		}
		return nil
	}
	return fmt.Errorf("rounds: server optimiser %q, want %q or %q", o.Kind, OptimizerSGD, OptimizerMomentum)
}

// String names the optimiser ("sgd", "momentum 0.9").
func (o Optimizer) String() string {
	if o.Kind == OptimizerMomentum {
		return fmt.Sprintf("momentum %g", o.Beta)
	}
	return OptimizerSGD
}

// moved is a model update not yet stored: the new model and the server
// optimiser's new momentum (nil for sgd).
type moved struct {
	model, momentum []float64
}

// store writes mv into the checkpoint state.
func (mv *moved) store(c *checkpoint.State) {
	c.Model, c.Momentum = mv.model, mv.momentum
}

// moveModel returns the current model moved by the server optimiser's step
// for the round's noisy mean (Options.Optimizer, at ServerLR; not yet
// stored), or an error if the result is not finite. The momentum is the
// checkpointed one (zero at the start and after a model reset), and only
// secure-summation rounds use it (OptimizerOf).
func (m *Machine) moveModel(mean []float64) (*moved, error) {
	model := slices.Clone(m.st.Model)
	if len(mean) != len(model) {
		return nil, fmt.Errorf("rounds: the update has %d coordinates, the model %d", len(mean), len(model))
	}
	lr := m.Current().ServerLR
	step := mean
	var mom []float64
	if o := m.opt.Optimizer; o.Kind == OptimizerMomentum && m.Current().Params.Protocol == wire.ProtocolSecAgg {
		mom = make([]float64, len(mean))
		if len(m.st.Momentum) == len(mean) {
			copy(mom, m.st.Momentum)
		}
		for j, v := range mean {
			mom[j] = o.Beta*mom[j] + v
		}
		step = mom
	}
	for j, v := range step {
		model[j] += lr * v
	}
	for j, v := range model {
		if !finite(v) || (mom != nil && !finite(mom[j])) {
			return nil, errors.New("model update is not finite")
		}
	}
	return &moved{model: model, momentum: mom}, nil
}

// evaluate fills rec's accuracy and loss of model on the test set (no
// examples: nothing).
func (m *Machine) evaluate(rec *checkpoint.RoundRecord, model []float64) {
	if m.opt.Test.Len() == 0 {
		return
	}
	acc, aerr := logreg.Accuracy(model, m.opt.Test)
	loss, lerr := logreg.Loss(model, m.opt.Test, 0)
	if aerr == nil && lerr == nil {
		rec.Accuracy, rec.Loss = accounting.FinitePtr(acc), accounting.FinitePtr(loss)
	} else {
		m.log.Error("evaluation failed", "round", rec.Round, "err", errors.Join(aerr, lerr))
	}
}

// finishLog logs a finished round's record.
func (m *Machine) finishLog(rec *checkpoint.RoundRecord, extra ...any) {
	args := append([]any{"round", rec.Round, "status", rec.Status, "n", rec.N}, extra...)
	args = append(args, "seconds", rec.Seconds)
	if rec.Accuracy != nil {
		args = append(args, "accuracy", *rec.Accuracy, "loss", *rec.Loss)
	}
	if rec.EpsilonTightest != nil {
		args = append(args, "epsilon", *rec.EpsilonTightest, "method", rec.Method)
	}
	m.log.Info("round finished", args...)
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
