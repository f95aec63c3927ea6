// Package liveaudit runs Blanket's privacy audit (package audit) in the
// background for the round configurations the aggregator announces, so
// that /api/rounds and the dashboard can show, next to the ε the ledger
// charges for a round, the largest ε an attack on that very configuration
// could prove.
//
// What it shows is audit.LowerBound's result for the shuffle protocols
// and audit.LowerBoundSecAgg's for secure summation (the relay's discrete
// Gaussian noise, the noise the ledger credits, through its real AddNoise
// path, against the replace-one canary pair): an empirical lower bound on
// one round's ε, valid at audit.BoundConfidence for the attacks the audit
// implements, at the configuration's announced parameters and the expected
// number of reports, with what the run could have caught (Bound.Ceiling,
// Bound.Detectable). It is evidence, never a proof: a lower bound below
// the charge says these attacks found no violation. A bound above the
// charge would mean the round leaks more than the ledger records (or bad
// luck, with probability at most 1 − confidence); the monitor logs it as
// an error.
package liveaudit

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"

	"github.com/blanket-fl/blanket/aggregator/internal/audit"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/wire"
)

// States of a configuration's audit.
const (
	StateOff        = "off"     // the monitor is disabled (trials 0)
	StatePending    = "pending" // waiting for the running audit of another configuration
	StateRunning    = "running"
	StateDone       = "done"
	StateFailed     = "failed"
	StateNotAudited = "not_audited" // never watched, or forgotten (more than keep configurations since)
)

// Status is what the API shows for one configuration.
type Status struct {
	State string `json:"state"`
	// Bound is set when State is done.
	Bound *audit.Bound `json:"bound,omitempty"`
	// Exceeds is true when the audit found a leak (audit.Bound.Flagged):
	// the audited lower bound is above the charge, or, for secure
	// summation, the relay's noise is below the announced σ.
	Exceeds bool   `json:"exceeds,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// keep is how many configurations' results the monitor remembers; rounds
// of an older configuration show StateNotAudited.
const keep = 16

type key struct {
	p wire.Params
	n int
}

type entry struct {
	st     Status
	cancel context.CancelFunc
	seq    uint64
}

// Monitor audits round configurations one at a time, in one goroutine (it
// never takes more than one core from the round loop). It is safe for
// concurrent use.
type Monitor struct {
	log    *slog.Logger
	trials int
	// secAggTrials is the trials per hypothesis and phase of a secure
	// summation audit (audit.SecAggTrials: its trials are cheap).
	secAggTrials int

	mu      sync.Mutex
	entries map[key]*entry
	seq     uint64
	wg      sync.WaitGroup
	run     chan struct{} // a one-slot semaphore: one audit at a time
	closed  bool
}

// New returns a monitor that runs audit.LowerBound with the given trials
// per hypothesis and phase (0 disables it; otherwise at least 10, see
// audit.LowerBound), and audit.LowerBoundSecAgg with audit.SecAggTrials
// for secure summation (one coordinate of noise per trial: 200,000 trials
// cost less than 50 shuffle trials). log receives a line per finished
// audit.
func New(log *slog.Logger, trials int) (*Monitor, error) {
	if trials != 0 && trials < 10 {
		return nil, errors.New("liveaudit: trials must be 0 (off) or at least 10")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Monitor{log: log, trials: trials, secAggTrials: audit.SecAggTrials, entries: map[key]*entry{}, run: make(chan struct{}, 1)}, nil
}

// Watch starts auditing spec at n reports per round unless it is already
// audited, running or queued. The newest configuration wins: an audit
// still running for another configuration is cancelled (the operator
// switched; the new one is what rounds will run).
func (m *Monitor) Watch(spec *roundspec.Spec, n int) {
	if m == nil || spec == nil || m.trials == 0 {
		return
	}
	k := key{spec.Params(), max(n, 2)}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	if _, ok := m.entries[k]; ok {
		return
	}
	for _, e := range m.entries {
		if e.cancel != nil && (e.st.State == StateRunning || e.st.State == StatePending) {
			e.cancel()
		}
	}
	m.seq++
	ctx, cancel := context.WithCancel(context.Background())
	e := &entry{st: Status{State: StatePending}, cancel: cancel, seq: m.seq}
	m.entries[k] = e
	m.evictLocked()
	m.wg.Add(1)
	go m.audit(ctx, k, spec, e)
}

func (m *Monitor) audit(ctx context.Context, k key, spec *roundspec.Spec, e *entry) {
	defer m.wg.Done()
	select {
	case m.run <- struct{}{}:
	case <-ctx.Done():
		m.finish(k, e, Status{State: StateFailed, Reason: "superseded by a newer configuration"})
		return
	}
	defer func() { <-m.run }()
	m.set(e, Status{State: StateRunning})
	var b audit.Bound
	var err error
	if spec.IsShuffle() {
		b, err = audit.LowerBound(ctx, spec, k.n, m.trials, seedFor(k))
	} else {
		b, err = audit.LowerBoundSecAgg(ctx, spec, k.n, m.secAggTrials, seedFor(k))
	}
	if err != nil {
		reason := err.Error()
		if ctx.Err() != nil {
			reason = "superseded by a newer configuration"
		}
		m.finish(k, e, Status{State: StateFailed, Reason: reason})
		return
	}
	st := Status{State: StateDone, Bound: &b, Exceeds: b.Flagged()}
	attrs := []any{"protocol", k.p.Protocol.String(), "randomizer", k.p.Randomizer.String(), "n", k.n,
		"trials", b.Trials, "lower", b.Lower, "charged", b.Charged, "attack", b.Attack,
		"ceiling", b.Ceiling, "detectable", b.Detectable, "detectable_factor", b.DetectableFactor}
	if b.Noise.Draws > 0 {
		attrs = append(attrs, "noise_z", b.Noise.Z, "noise_flagged", b.Noise.Flagged, "noise_factor", b.Noise.Factor)
	}
	if st.Exceeds {
		m.log.Error("privacy audit: the audit found a leak (lower bound above the charge, or noise below the announced sigma)", attrs...)
	} else {
		m.log.Info("privacy audit done", attrs...)
	}
	m.finish(k, e, st)
}

func (m *Monitor) set(e *entry, st Status) {
	m.mu.Lock()
	e.st = st
	m.mu.Unlock()
}

func (m *Monitor) finish(k key, e *entry, st Status) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e.st, e.cancel = st, nil
	// A superseded audit is forgotten, so that switching back audits again.
	if st.State == StateFailed && m.entries[k] == e && st.Reason == "superseded by a newer configuration" {
		delete(m.entries, k)
	}
}

// evictLocked drops the oldest finished entries beyond keep.
func (m *Monitor) evictLocked() {
	for len(m.entries) > keep {
		var oldest key
		var seq uint64
		found := false
		for k, e := range m.entries {
			if e.cancel == nil && (!found || e.seq < seq) {
				oldest, seq, found = k, e.seq, true
			}
		}
		if !found {
			return
		}
		delete(m.entries, oldest)
	}
}

// Status returns the audit status of the configuration p at n reports
// per round.
func (m *Monitor) Status(p wire.Params, n int) Status {
	if m == nil || m.trials == 0 {
		return Status{State: StateOff}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.entries[key{p, max(n, 2)}]; ok {
		return e.st
	}
	return Status{State: StateNotAudited, Reason: "this configuration was not audited in this run of the aggregator"}
}

// Close cancels any running audit and waits for it to return.
func (m *Monitor) Close() {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.closed = true
	for _, e := range m.entries {
		if e.cancel != nil {
			e.cancel()
		}
	}
	m.mu.Unlock()
	m.wg.Wait()
}

// seedFor derives the audit's seed from the configuration, so that the
// bound shown is reproducible with `aggregator audit` at the same settings.
func seedFor(k key) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%+v", k.p)
	var n [8]byte
	for i := range n {
		n[i] = byte(k.n >> (8 * i))
	}
	h.Write(n[:])
	return h.Sum64()
}
