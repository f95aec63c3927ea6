package outbox

import (
	"slices"
	"testing"
)

// TestRecover: a restart aborts exactly the rounds left open without an
// outcome, removes every marker, resends batches and aborts, resumes
// secure-summation closes and aggregate shares, and never resumes a close
// whose noised share is already persisted (that would noise the round a
// second time).
func TestRecover(t *testing.T) {
	ents := []Entry{
		{1, Batch}, {1, OpenRound}, // outcome persisted, marker left behind
		{2, OpenRound},                   // interrupted
		{3, Abort},                       // owed
		{4, SecAggClose}, {4, OpenRound}, // close persisted
		{5, SecAggAggregate}, {5, SecAggClose}, // released, close not yet removed
		{7, OpenRound}, // interrupted
	}
	r := Recover(ents)
	if r.Last != 7 {
		t.Errorf("last %d, want 7", r.Last)
	}
	if !slices.Equal(r.Interrupted, []uint64{2, 7}) {
		t.Errorf("interrupted %v, want [2 7]", r.Interrupted)
	}
	if !slices.Equal(r.Markers, []uint64{1, 2, 4, 7}) {
		t.Errorf("markers %v, want [1 2 4 7]", r.Markers)
	}
	if !slices.Equal(r.Resend, []Entry{{1, Batch}, {3, Abort}}) {
		t.Errorf("resend %v", r.Resend)
	}
	if !slices.Equal(r.Resume, []Entry{{4, SecAggClose}, {5, SecAggAggregate}}) {
		t.Errorf("resume %v", r.Resume)
	}
	if !slices.Equal(r.Released, []uint64{5}) {
		t.Errorf("released %v, want [5]", r.Released)
	}
	if z := Recover(nil); z.Last != 0 || z.Interrupted != nil || z.Resend != nil || z.Resume != nil {
		t.Errorf("empty outbox: %+v", z)
	}
}
