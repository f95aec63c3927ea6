package rounds

import (
	"testing"

	"github.com/blanket-fl/blanket/aggregator/internal/outcome"
)

// TestRoundStatesFollowTheRound drives a secure-summation round through
// the machine on a real datastore and reads its typed state after each
// step: announced, collecting (after a chunk), closed (prepared before the
// charge), applied; a second round abandoned. The records are written in
// the same transactions as the steps, so they survive a restart, and a
// record never moves back.
func TestRoundStatesFollowTheRound(t *testing.T) {
	dir := t.TempDir()
	var db *DBStore
	r := newRigIn(t, dir, secaggParams(), func(dir string) Store { db = NewDBStore(openDB(t, dir, nil)); return db })
	stateOf := func(round int) RoundStatus {
		t.Helper()
		all, err := db.RoundStates()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range all {
			if s.Round == round {
				return s
			}
		}
		return RoundStatus{}
	}
	want := func(round int, s RoundState) {
		t.Helper()
		if got := stateOf(round); got.State != s {
			t.Fatalf("round %d is %q, want %q", round, got.State, s)
		}
	}
	round := r.announce()
	want(round, StateAnnounced)
	h := r.helperSide(round)
	reps := r.reports(round, 4)
	for lo := 0; lo < 4; lo += 2 {
		ans, err := r.m.SecAggChunkIntake(h.chunk(reps[lo : lo+2]))
		if err != nil || ans.Outcome != outcome.Accepted {
			t.Fatalf("chunk: %+v %v", ans.Answer, err)
		}
		h.verdicts(ans.Frame)
		want(round, StateCollecting)
	}
	if ans, err := r.m.SecAggCloseIntake(h.close()); err != nil || ans.Outcome != outcome.Accepted {
		t.Fatalf("close: %+v %v", ans.Answer, err)
	}
	want(round, StateClosed)
	r.open() // a restart keeps the record; the charged round resumes
	want(round, StateClosed)
	if ans := r.m.SecAggAggregateIntake(h.aggregate()); ans.Outcome != outcome.Accepted {
		t.Fatalf("aggregate: %+v", ans)
	}
	want(round, StateApplied)

	second := r.announce()
	want(second, StateAnnounced)
	r.m.Abandon(second, "test: nothing arrived")
	want(second, StateAbandoned)
	if s := stateOf(second); s.Reason == "" {
		t.Fatalf("the abandoned round's record carries no reason: %+v", s)
	}
	want(round, StateApplied) // untouched by later saves
}
