package rounds

// The driver's steps: opening, announcing, retiming and abandoning a
// round, and the operator's controls, which apply between rounds. The
// server's round loop (server.Run) calls them and does the waiting and the
// HTTP.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/shared/ledger"
)

// ErrStopped is returned by Resume once the round loop has stopped for
// good (privacy budget exhausted, or Options.Rounds completed).
var ErrStopped = errors.New("server: the round loop has stopped")

// NextRound returns the open round, opening a new one if none is open
// (applying the operator's pending configuration or model reset first,
// checking that the would-be release at ExpectedN reports fits the
// budget: ledger.CanCharge), or nil if the loop must stop (stopped,
// paused, Options.Rounds reached, budget exhausted).
func (m *Machine) NextRound(now time.Time) (*checkpoint.Open, error) {
	m.procMu.Lock()
	defer m.procMu.Unlock()
	if m.st.Open != nil {
		o := *m.st.Open
		return &o, nil
	}
	// Between rounds: the operator's configuration or model reset.
	if err := m.applyPending(); err != nil {
		return nil, err
	}
	if m.StoppedReason() != "" || m.Paused() {
		return nil, nil
	}
	if m.opt.Rounds > 0 && m.roundsOK() >= m.opt.Rounds {
		m.Stop(fmt.Sprintf("completed %d rounds", m.opt.Rounds))
		return nil, nil
	}
	r := m.st.Round + 1
	rc := m.Current()
	rel := rc.Proto.Release(r, m.opt.ExpectedN, int(rc.Params.NP))
	if eps, err := m.ledger.CanCharge(rel); err != nil {
		if errors.Is(err, ledger.ErrBudgetExhausted) {
			m.Stop(fmt.Sprintf("privacy budget: round %d would bring epsilon to %.4g, target %g", r, eps, m.opt.TargetEpsilon))
			return nil, nil
		}
		return nil, fmt.Errorf("server: budget check for round %d: %w", r, err)
	}
	timeout := StretchTimeout(rc.Timeout, m.st.History)
	if timeout != rc.Timeout {
		m.log.Info("round timeout stretched: the last rounds ran out of time with reports missing", "round", r,
			"timeout", timeout, "configured", rc.Timeout)
	}
	o := checkpoint.Open{Round: r, AnnouncedAt: now, Deadline: LaterDeadline(now.Add(timeout), m.st.History)}
	if err := m.commit(func(st *checkpoint.State) { st.Open = &o }); err != nil {
		return nil, err
	}
	opt, lr := m.ServerStep(rc)
	m.log.Info("round opened", "round", r, "protocol", rc.Params.Protocol, "d", rc.Params.D, "clip", rc.Params.Clip,
		"server_optimizer", opt.String(), "server_lr", lr, "deadline", o.Deadline)
	if f := m.opt.Hooks.RoundOpened; f != nil {
		f(r, rc)
	}
	return &o, nil
}

// LaterDeadline returns d (at the wire's millisecond precision), or a
// millisecond after the last round's deadline in history if that is not
// earlier: each round's signed deadline is strictly after the one before,
// even when the operator shortens the round timeout, which volunteers rely
// on to tell a replayed announcement from a new one (shared/client,
// handleAnnouncement: an announcement is acted on only with a later
// deadline than every one before).
func LaterDeadline(d time.Time, history []checkpoint.RoundRecord) time.Time {
	d = d.Truncate(time.Millisecond)
	if n := len(history); n > 0 {
		if floor := history[n-1].Deadline.Truncate(time.Millisecond).Add(time.Millisecond); d.Before(floor) {
			return floor
		}
	}
	return d
}

// Round timeouts adapt to slow volunteers (docs/protocol.md, "Closing a
// round"): the relay closes a round as soon as every volunteer who checked
// in has reported, so a round that finished after its deadline with the
// reports of checked-in volunteers missing ran out of time while they
// were still at work. Each such round in a row stretches the next round's
// timeout by stretchFactor, up to stretchMax times the configured one; a
// round with no more than missingTolerance of them missing ends the run of
// late rounds. Only the deadline changes: what the round releases and
// what the ledger charges do not depend on it.
const (
	stretchFactor    = 1.5
	stretchMax       = 4.0
	missingTolerance = 0.05
)

// StretchTimeout returns the timeout of the next round after history,
// from the configured one (see stretchFactor).
func StretchTimeout(configured time.Duration, history []checkpoint.RoundRecord) time.Duration {
	f := 1.0
	for i := len(history) - 1; i >= 0; i-- {
		r := history[i]
		if r.Status != checkpoint.StatusOK && r.Status != checkpoint.StatusAborted {
			continue // abandoned, refused, lost: says nothing about the volunteers' speed
		}
		reports := max(r.N, r.Reports)
		if r.FinishedAt.Before(r.Deadline) || r.CheckedIn == 0 ||
			float64(r.CheckedIn-reports) <= missingTolerance*float64(r.CheckedIn) {
			break
		}
		f *= stretchFactor
		if f >= stretchMax {
			f = stretchMax
			break
		}
	}
	return time.Duration(float64(configured) * f).Round(time.Millisecond)
}

// StoppedReason is why no further round is announced ("" while running).
func (m *Machine) StoppedReason() string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.ctl.Stopped
}

// Stop records why no further round is announced (the first reason
// stays).
func (m *Machine) Stop(why string) {
	m.mu.Lock()
	if m.ctl.Stopped == "" {
		m.ctl.Stopped = why
	}
	m.mu.Unlock()
	m.log.Info("no further rounds", "reason", why)
	m.notify()
	m.publishStatus()
}

// MarkAnnounced records that the relay took round's announcement (a
// no-op if the round is no longer open).
func (m *Machine) MarkAnnounced(round int) {
	m.procMu.Lock()
	defer m.procMu.Unlock()
	if m.st.Open != nil && m.st.Open.Round == round {
		m.commit(func(st *checkpoint.State) { st.Open.Announced = true })
	}
}

// Retime gives the open round o, not yet announced, its full time again
// from now (a new deadline, persisted); false if it is no longer open or
// was announced.
func (m *Machine) Retime(o *checkpoint.Open, now time.Time) bool {
	m.procMu.Lock()
	defer m.procMu.Unlock()
	if m.st.Open == nil || m.st.Open.Round != o.Round || m.st.Open.Announced {
		return false
	}
	o.Deadline = now.Add(o.Deadline.Sub(o.AnnouncedAt)).Truncate(time.Millisecond)
	o.AnnouncedAt = now
	return m.commit(func(st *checkpoint.State) { st.Open.Deadline, st.Open.AnnouncedAt = o.Deadline, o.AnnouncedAt }) == nil
}

// IsOpen reports whether round is the open round.
func (m *Machine) IsOpen(round int) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.st.Open != nil && m.st.Open.Round == round
}

// Abandon closes the open round without charging anything (a charged
// secure-summation round awaiting its aggregate share is recorded lost
// instead: its charge stays). A round no longer open is left alone.
func (m *Machine) Abandon(round int, why string) {
	m.procMu.Lock()
	defer m.procMu.Unlock()
	if m.st.Open == nil || m.st.Open.Round != round {
		return
	}
	if m.loseSecAggIfPending(round, fmt.Sprintf("charged, not applied: no aggregate share within %v after the batch", m.opt.BatchGrace)) {
		return
	}
	o := *m.st.Open
	m.log.Warn("round abandoned", "round", round, "reason", why)
	m.commit(func(st *checkpoint.State) {
		st.History = append(st.History, checkpoint.RoundRecord{Round: round, Status: checkpoint.StatusAbandoned, Detail: why,
			AnnouncedAt: o.AnnouncedAt, Deadline: o.Deadline, FinishedAt: time.Now()})
		st.Round, st.Open = round, nil
	})
}

// Expiry is what the round loop does when round's timer fires at now
// (Machine.Expire).
type Expiry int

const (
	// ExpiryWait: wait until Until (a charged round's grace, or the
	// relay's close cap plus the grace).
	ExpiryWait Expiry = iota
	// ExpiryProbe: the relay does not answer: probe it again.
	ExpiryProbe
	// ExpiryRegrace: the relay is back: the round gets the whole grace
	// again (a charged round's expiry moved with it).
	ExpiryRegrace
	// ExpiryAbandon: the relay is up and silent for the grace: abandon
	// the round (or record a charged one lost).
	ExpiryAbandon
)

// Expire decides what happens when the waiting for round's close expires
// at now (docs/secagg.md, "Crash safety"): a charged round waits until
// its pending aggregate expires; a round not yet closed by the relay
// waits while the relay may keep it open (closeCap plus the grace); the
// grace counts only while the relay answers (relayUp, asked only when
// needed), and starts again when it is back (relayWasDown). until is when
// to look again for ExpiryWait.
func (m *Machine) Expire(round int, now, closeCap time.Time, relayWasDown bool, relayUp func() bool) (e Expiry, until time.Time) {
	until = m.PendingUntil(round)
	if now.Before(until) {
		return ExpiryWait, until
	}
	if capped := closeCap.Add(m.opt.BatchGrace); until.IsZero() && now.Before(capped) && relayUp() {
		return ExpiryWait, capped
	}
	if !relayUp() {
		return ExpiryProbe, time.Time{}
	}
	if relayWasDown {
		m.extendPending(round, now.Add(m.opt.BatchGrace))
		return ExpiryRegrace, now.Add(m.opt.BatchGrace)
	}
	return ExpiryAbandon, time.Time{}
}

// WaitResume blocks while the operator has paused the loop. It reports
// false if the loop must stop instead (stopped for good, or ctx done).
func (m *Machine) WaitResume(ctx context.Context) bool {
	for {
		stopped, paused := m.StoppedReason(), m.Paused()
		if stopped != "" || ctx.Err() != nil {
			return false
		}
		if !paused {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-m.wake:
		}
	}
}

// Paused reports whether the operator paused the round loop.
func (m *Machine) Paused() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.ctl.Paused
}

// Pause stops announcing new rounds; the open round (if any) still
// finishes. Resume undoes it.
func (m *Machine) Pause() {
	m.mu.Lock()
	m.ctl.Paused = true
	m.mu.Unlock()
	m.log.Info("operator: paused (no new round will be announced)")
	m.publishStatus()
}

// Resume lets the round loop announce rounds again. It returns ErrStopped
// (wrapped with the reason) if the loop has stopped for good.
func (m *Machine) Resume() error {
	m.mu.Lock()
	stopped := m.ctl.Stopped
	if stopped == "" {
		m.ctl.Paused = false
	}
	m.mu.Unlock()
	if stopped != "" {
		return fmt.Errorf("%w: %s", ErrStopped, stopped)
	}
	m.log.Info("operator: resumed")
	m.notify()
	m.publishStatus()
	return nil
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
func (m *Machine) ResetModel() error {
	m.procMu.Lock()
	defer m.procMu.Unlock()
	m.mu.Lock()
	m.ctl.PendingReset = true
	open := m.st.Open != nil
	m.mu.Unlock()
	m.log.Info("operator: model reset requested (the privacy ledger is kept)", "waits_for_open_round", open)
	if !open {
		return m.applyPending()
	}
	m.publishStatus()
	return nil
}

// Reconfigure schedules the configuration build returns for the next
// announced round (at once if no round is open). build gets the current
// configuration and the number of the next round to be announced, and
// runs under procMu (no transition meanwhile); its error refuses the
// change.
func (m *Machine) Reconfigure(build func(cur *RoundConfig, nextRound int) (*RoundConfig, error)) error {
	m.procMu.Lock()
	defer m.procMu.Unlock()
	m.mu.RLock()
	nextRound := m.st.Round + 1
	if m.st.Open != nil {
		nextRound = m.st.Open.Round + 1
	}
	m.mu.RUnlock()
	next, err := build(m.Current(), nextRound)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.ctl.PendingCfg = next
	open := m.st.Open != nil
	m.mu.Unlock()
	p := next.Params
	m.log.Info("operator: new configuration", "protocol", p.Protocol, "k", p.K, "l", p.L, "n_p", p.NP, "eps_l", p.EpsL,
		"clip", p.Clip, "check_in_p", p.CheckInP, "min_batch", p.MinBatch, "round_timeout", next.Timeout, "server_lr", next.ServerLR,
		"waits_for_open_round", open)
	if !open {
		return m.applyPending()
	}
	m.publishStatus()
	return nil
}

// applyPending applies a pending configuration and model reset. The
// caller holds procMu and no round is open, so no announcement or batch
// uses the parameters being replaced.
func (m *Machine) applyPending() error {
	m.mu.RLock()
	pc, reset := m.ctl.PendingCfg, m.ctl.PendingReset
	m.mu.RUnlock()
	if pc == nil && !reset {
		return nil
	}
	if f := m.opt.Hooks.ProtocolChanged; pc != nil && f != nil && pc.Params.Protocol != m.Current().Params.Protocol {
		f(m.st.Round+1, pc.Params.Protocol.String())
	}
	err := m.commit(func(st *checkpoint.State) {
		if pc != nil {
			m.round.Store(pc)
			st.Params = checkpoint.ParamsOf(pc.Params)
		}
		if reset {
			st.Model, st.Momentum = make([]float64, len(st.Model)), nil
			st.ModelResets = append(st.ModelResets, st.Round)
		}
		m.ctl.PendingCfg, m.ctl.PendingReset = nil, false
	})
	if pc != nil {
		m.log.Info("operator: configuration applied", "next_round", m.st.Round+1)
	}
	if reset {
		m.log.Info("operator: model reset to zero; the privacy ledger is kept", "next_round", m.st.Round+1)
	}
	return err
}
