package liveaudit

import (
	"testing"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/audit"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/wire"
)

// smallSpec is the audit CLI's CI-scale replica (d 24, k 4, l 2, n 30,
// n_p 10, ε_l 4) of an announceable configuration.
func smallSpec(t *testing.T, proto wire.Protocol) (*roundspec.Spec, int) {
	t.Helper()
	const d, n = 24, 30
	o := roundspec.Options{Protocol: proto, Randomizer: wire.RandomizerLaplace, K: 4, L: 2, NP: 10, EpsL: 4, Clip: 0.5, MinBatch: 1}
	if proto == wire.ProtocolSSSimple {
		o.NP = n
	}
	p, _, err := roundspec.Build(d, n, o)
	if err != nil {
		t.Fatal(err)
	}
	s, err := roundspec.New(p)
	if err != nil {
		t.Fatal(err)
	}
	return s, n
}

func waitDone(t *testing.T, m *Monitor, p wire.Params, n int) Status {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		st := m.Status(p, n)
		if st.State == StateDone || st.State == StateFailed {
			return st
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("audit of %v did not finish", p.Protocol)
	return Status{}
}

// TestMonitorAuditsBelowCharge: the monitor audits an announced SS-Double
// configuration in the background and reports a bound, with the charge it
// was compared with, that does not exceed the charge (audit.LowerBound's
// guarantee: with probability >= 0.95 the bound is valid; at this scale
// the audit tier measures bounds of 0 against a charge of 3.4, so a false
// failure needs the bound to be off by the whole charge).
func TestMonitorAuditsBelowCharge(t *testing.T) {
	m, err := New(nil, 20)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	spec, n := smallSpec(t, wire.ProtocolSSDouble)
	if st := m.Status(spec.Params(), n); st.State != StateNotAudited {
		t.Fatalf("before Watch: %+v", st)
	}
	m.Watch(spec, n)
	m.Watch(spec, n) // idempotent
	st := waitDone(t, m, spec.Params(), n)
	if st.State != StateDone || st.Bound == nil {
		t.Fatalf("status %+v", st)
	}
	if !(st.Bound.Charged > 0) || st.Bound.Trials != 20 || st.Bound.Confidence != 0.95 {
		t.Fatalf("bound %+v", *st.Bound)
	}
	t.Logf("ss-double at d 24, n %d: audited lower bound %.3f (%s), charged %.3f, n_p %d", n, st.Bound.Lower, st.Bound.Attack, st.Bound.Charged, st.Bound.NP)
	if st.Exceeds || st.Bound.Lower > st.Bound.Charged {
		t.Fatalf("audited lower bound %v exceeds the charge %v", st.Bound.Lower, st.Bound.Charged)
	}
}

// TestMonitorSupersedes: a newer configuration cancels the audit of an
// older one that has not finished; the older one is forgotten (watching it
// again starts over), the newer one completes.
func TestMonitorSupersedes(t *testing.T) {
	m, err := New(nil, 400) // long enough that the first is still running
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	first, n := smallSpec(t, wire.ProtocolSSSimple)
	m.Watch(first, n)
	m.mu.Lock()
	m.trials = 10
	m.mu.Unlock()
	second, n2 := smallSpec(t, wire.ProtocolSSDouble)
	m.Watch(second, n2)
	if st := waitDone(t, m, second.Params(), n2); st.State != StateDone {
		t.Fatalf("second: %+v", st)
	}
	if st := m.Status(first.Params(), n); st.State != StateNotAudited {
		t.Fatalf("first after being superseded: %+v", st)
	}
}

// TestMonitorStates: a monitor with 0 trials is off and watches nothing
// (secure summation included), and fewer than 10 trials is refused.
func TestMonitorStates(t *testing.T) {
	off, err := New(nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	spec, n := smallSpec(t, wire.ProtocolSSDouble)
	off.Watch(spec, n)
	if st := off.Status(spec.Params(), n); st.State != StateOff {
		t.Fatalf("off: %+v", st)
	}
	sa := secAggSpec(t)
	off.Watch(sa, n)
	if st := off.Status(sa.Params(), n); st.State != StateOff {
		t.Fatalf("secagg, off: %+v", st)
	}
	if _, err := New(nil, 5); err == nil {
		t.Fatal("5 trials accepted")
	}
}

// secAggSpec is a secure-summation (PINE) configuration at d 64, σ 115,000
// fixed-point units (the clip 0.3 is 39,322 units).
func secAggSpec(t *testing.T) *roundspec.Spec {
	t.Helper()
	p, _, err := roundspec.Build(64, 30, roundspec.Options{Protocol: wire.ProtocolSecAgg, Sigma: 115000, CheckInP: 1})
	if err != nil {
		t.Fatal(err)
	}
	s, err := roundspec.New(p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestMonitorAuditsSecAgg: a secure-summation configuration is audited
// (no longer "not applicable"): the relay's noise against the replace-one
// canary, 5,000 trials per hypothesis and phase here (the monitor's
// default is audit.SecAggTrials), a bound at most the per-round charge
// (audit.LowerBoundSecAgg: a correct charge is exceeded with probability
// at most 5%; fixed seed), with what the run could have caught: a charge
// below the ceiling, and a detectable under-charge factor above 1.
func TestMonitorAuditsSecAgg(t *testing.T) {
	m, err := New(nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.secAggTrials = 5000
	spec := secAggSpec(t)
	m.Watch(spec, 30)
	st := waitDone(t, m, spec.Params(), 30)
	if st.State != StateDone || st.Bound == nil {
		t.Fatalf("status %+v", st)
	}
	b := *st.Bound
	t.Logf("secagg at d 64, sigma 115000: %+v", b)
	if b.Neighbours != audit.NeighboursReplaceOne || b.Trials != 5000 || !(b.Charged > 0) || b.Mechanism == "" || !(b.Ceiling > b.Charged) || !(b.DetectableFactor > 1) {
		t.Fatalf("bound %+v", b)
	}
	if st.Exceeds || b.Lower > b.Charged || b.Lower == 0 {
		t.Fatalf("audited lower bound %v against the charge %v", b.Lower, b.Charged)
	}
}
