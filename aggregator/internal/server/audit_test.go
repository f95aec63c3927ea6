package server

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/audit"
	"github.com/blanket-fl/blanket/aggregator/internal/liveaudit"
)

// TestLiveAuditShown: with AuditTrials set, the announced configuration
// (SS-Topk, Laplace, d 8) is audited in the background, and /api/status and
// the round's audit show an audited lower bound that does not exceed the
// per-round charge (audit.LowerBound: valid with probability >= 0.95; at
// this scale its bounds are near 0 against a charge of several units, so
// a false failure needs the estimate off by the whole charge).
func TestLiveAuditShown(t *testing.T) {
	h := newHarness(t, t.TempDir(), newFakeRelay(t), func(c *Config) { c.AuditTrials, c.ExpectedN = 10, 8 })
	a := h.relay.next(t)
	var st *liveaudit.Status
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if st = h.srv.Audit(int(a.Round)); st != nil && (st.State == liveaudit.StateDone || st.State == liveaudit.StateFailed) {
			break
		}
	}
	if st == nil || st.State != liveaudit.StateDone || st.Bound == nil {
		t.Fatalf("round %d audit: %+v", a.Round, st)
	}
	if st.Exceeds || !(st.Bound.Charged > 0) || st.Bound.Lower > st.Bound.Charged {
		t.Fatalf("audited lower bound %v against a charge of %v", st.Bound.Lower, st.Bound.Charged)
	}
	resp, err := http.Get(h.http.URL + "/api/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var status struct {
		Audit *liveaudit.Status `json:"audit"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&status); err != nil || status.Audit == nil || status.Audit.State != liveaudit.StateDone || status.Audit.Bound.Charged != st.Bound.Charged {
		t.Fatalf("/api/status audit %+v, %v", status.Audit, err)
	}
	if got := h.srv.Audit(int(a.Round) + 1); got != nil {
		t.Errorf("a round never announced has an audit: %+v", got)
	}
}

// TestLiveAuditOffByDefault: without AuditTrials nothing is audited and the
// status says so.
func TestLiveAuditOffByDefault(t *testing.T) {
	h := newHarness(t, t.TempDir(), newFakeRelay(t), nil)
	a := h.relay.next(t)
	if st := h.srv.Audit(int(a.Round)); st == nil || st.State != liveaudit.StateOff {
		t.Fatalf("audit %+v", st)
	}
}

// TestLiveAuditSecAgg: a secure-summation configuration is audited live
// (not "not applicable"): the round's audit and /api/status carry the
// bound on the relay's credited noise against the replace-one canary
// (audit.LowerBoundSecAgg at audit.SecAggTrials, the monitor's default),
// at most the per-round charge (a correct charge is exceeded with
// probability at most 5%; fixed seed), with the run's ceiling.
func TestLiveAuditSecAgg(t *testing.T) {
	relay := newSecAggRelay(t)
	h := newSecAggHarness(t, t.TempDir(), relay, func(c *Config) { c.AuditTrials = 10 })
	a := relay.next(t)
	var st *liveaudit.Status
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if st = h.srv.Audit(int(a.Round)); st != nil && (st.State == liveaudit.StateDone || st.State == liveaudit.StateFailed) {
			break
		}
	}
	if st == nil || st.State != liveaudit.StateDone || st.Bound == nil {
		t.Fatalf("round %d audit: %+v", a.Round, st)
	}
	b := st.Bound
	t.Logf("%+v", *b)
	if st.Exceeds || !(b.Charged > 0) || b.Lower > b.Charged || b.Neighbours != audit.NeighboursReplaceOne || b.Trials != audit.SecAggTrials || !(b.Ceiling > 0) {
		t.Fatalf("audited lower bound %+v", *b)
	}
	resp, err := http.Get(h.http.URL + "/api/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var status struct {
		Audit *liveaudit.Status `json:"audit"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&status); err != nil || status.Audit == nil || status.Audit.State != liveaudit.StateDone || status.Audit.Bound.Lower != b.Lower {
		t.Fatalf("/api/status audit %+v, %v", status.Audit, err)
	}
}
