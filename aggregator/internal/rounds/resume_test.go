package rounds

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/aggregator/internal/outcome"
	"github.com/blanket-fl/blanket/shared/wire"
)

// resumeFrame is the SecAggResume frame of chunk seq of round.
func resumeFrame(t *testing.T, round int, seq uint32) []byte {
	t.Helper()
	f, err := (&wire.SecAggResume{Round: uint64(round), Seq: seq}).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// resumed requires the resume of chunk seq answered accepted with want,
// byte for byte.
func (r *rig) resumed(round int, seq uint32, want []byte) {
	r.t.Helper()
	a, err := r.m.SecAggResumeIntake(resumeFrame(r.t, round, seq))
	if err != nil || a.Outcome != outcome.Accepted || !bytes.Equal(a.Frame, want) {
		r.t.Fatalf("resume of chunk %d: %+v %x %v, want accepted with %x", seq, a.Answer, a.Frame, err, want)
	}
}

// notFolded requires the resume of chunk seq answered accepted with a
// SecAggPrep of status invalid and no verdicts.
func (r *rig) notFolded(round int, seq uint32) {
	r.t.Helper()
	a, err := r.m.SecAggResumeIntake(resumeFrame(r.t, round, seq))
	requirePrep(r.t, a, err, outcome.Accepted, round, wire.BatchStatusInvalid)
}

// requirePrep requires answer a to be outcome in with a SecAggPrep of
// round and status st, without verdicts unless ok.
func requirePrep(t *testing.T, a outcome.SecAggAnswer, err error, in outcome.Intake, round int, st uint8) {
	t.Helper()
	p, perr := wire.ParseSecAggPrep(a.Frame)
	if err != nil || perr != nil || a.Outcome != in || p.Round != uint64(round) || p.Status != st ||
		(st != wire.BatchStatusOK && len(p.Msg) != 0) {
		t.Fatalf("answer %+v %+v (%v, %v), want %s with status %d for round %d", a.Answer, p, err, perr, in, st, round)
	}
}

// folded returns the open round's next chunk expected, the reports folded
// and the seal (0: none).
func (r *rig) folded() (next uint32, reports int, sealed uint32) {
	r.m.procMu.Lock()
	defer r.m.procMu.Unlock()
	c := r.m.sa.collect
	if c == nil {
		r.t.Fatal("no chunk of the open round here")
	}
	return c.next, c.leader.Reports(), c.sealed
}

// chunksOf streams reps in chunks of per, one at a time, and returns the
// helper and each chunk's answer frame.
func (r *rig) chunksOf(round int, reps []report, per int) (*helperSide, [][]byte) {
	r.t.Helper()
	h := r.helperSide(round)
	var answers [][]byte
	for lo := 0; lo < len(reps); lo += per {
		a, err := r.m.SecAggChunkIntake(h.chunk(reps[lo:min(lo+per, len(reps))]))
		if err != nil || a.Outcome != outcome.Accepted {
			r.t.Fatalf("chunk %d: %+v %v", h.chunks, a.Answer, err)
		}
		h.verdicts(a.Frame)
		answers = append(answers, a.Frame)
	}
	return h, answers
}

// zombie builds chunks seq first, first+1, ... of reps, one report each,
// as the killed owner's pipeline would still post them.
func (r *rig) zombie(round int, first uint32, reps []report) [][]byte {
	r.t.Helper()
	z := r.helperSide(round)
	z.chunks = int(first) - 1
	var out [][]byte
	for i := range reps {
		out = append(out, z.chunk(reps[i:i+1]))
	}
	return out
}

// TestResumeAnswersFoldedChunksAndSeals: chunks 1..3 are folded; a
// relay's resume of chunk 2 (and 3, 1) gets the very frame first answered
// for it; a resume of chunk 6 and then 4 (not folded) is answered status
// invalid and seals the round at 4 (lowered, never raised by a later
// resume of 7), durably. The killed owner's chunk 5, which was waiting
// for chunk 4, and its chunk 4 posted then, are answered obsolete and
// folded nothing, and the round is not closed; the relay's close of the 3
// chunks charges them and the round applies.
func TestResumeAnswersFoldedChunksAndSeals(t *testing.T) {
	store := &memStore{}
	r := newRig(t, store)
	round := r.announce()
	reps := r.reports(round, 8)
	h, answers := r.chunksOf(round, reps[:6], 2)
	zc := r.zombie(round, 4, reps[6:8]) // chunks 4 and 5
	w5 := r.post(zc[1])
	r.waitAhead(1)

	r.resumed(round, 2, answers[1])
	r.notFolded(round, 6)
	if _, _, sealed := r.folded(); sealed != 6 || store.collect.Sealed != 6 {
		t.Fatalf("seal %d, stored %d after the resume of chunk 6: want 6", sealed, store.collect.Sealed)
	}
	r.notFolded(round, 4)
	var g5 intakeResult
	select { // woken by the seal (the deadline only ends a broken test: chunkWaitBound is 2 minutes)
	case g5 = <-w5:
	case <-time.After(time.Minute):
		t.Fatal("chunk 5 still waits for chunk 4 after the round was sealed at 4")
	}
	requirePrep(t, g5.ans, g5.err, outcome.Obsolete, round, wire.BatchStatusInvalid)
	r.notFolded(round, 7)
	if _, _, sealed := r.folded(); sealed != 4 || store.collect.Sealed != 4 || store.sealSaves != 2 {
		t.Fatalf("seal %d, stored %d in %d writes: want 4, lowered once and never raised", sealed, store.collect.Sealed, store.sealSaves)
	}
	a4, err := r.m.SecAggChunkIntake(zc[0])
	requirePrep(t, a4, err, outcome.Obsolete, round, wire.BatchStatusInvalid)
	r.resumed(round, 3, answers[2])
	r.resumed(round, 1, answers[0])
	if next, n, _ := r.folded(); next != 4 || n != 6 {
		t.Fatalf("next chunk %d, %d reports folded after the resumes and the late chunks: want 4, 6", next, n)
	}
	if hist := r.state().History; len(hist) != 0 {
		t.Fatalf("the round was closed: %+v", hist)
	}
	r.finish(h, 6)
	if n := len(r.ledger.Releases()); n != 1 {
		t.Fatalf("%d releases, want 1", n)
	}
}

// TestResumeCheckpointsItsGroup: a resume of a chunk folded but not yet
// checkpointed (its answer held) writes the checkpoint first and answers
// the frame the chunk's own post then gets; a resume past it seals the
// round in that same checkpoint. If the write fails, the round is closed
// invalid, nothing charged, and no verdicts leave.
func TestResumeCheckpointsItsGroup(t *testing.T) {
	for _, tc := range []struct {
		name string
		seq  uint32
	}{{"folded", 1}, {"past", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			store := &memStore{}
			r := newRig(t, store)
			r.m.flow.linger = time.Hour // the group waits: only the resume settles it
			round := r.announce()
			reps := r.reports(round, 4)
			h := r.helperSide(round)
			w1 := r.post(h.chunk(reps[:2]))
			r.waitFolded(2)
			if store.collectSaves != 0 {
				t.Fatalf("%d checkpoints before the resume", store.collectSaves)
			}
			a, err := r.m.SecAggResumeIntake(resumeFrame(t, round, tc.seq))
			g1 := <-w1
			if g1.err != nil || g1.ans.Outcome != outcome.Accepted || store.collectSaves != 1 {
				t.Fatalf("chunk 1: %+v %v after %d checkpoints", g1.ans.Answer, g1.err, store.collectSaves)
			}
			if tc.seq == 1 {
				if err != nil || a.Outcome != outcome.Accepted || !bytes.Equal(a.Frame, g1.ans.Frame) {
					t.Fatalf("resume of chunk 1: %+v %x %v, want %x", a.Answer, a.Frame, err, g1.ans.Frame)
				}
			} else {
				requirePrep(t, a, err, outcome.Accepted, round, wire.BatchStatusInvalid)
				if store.collect.Sealed != 2 || store.sealSaves != 0 {
					t.Fatalf("stored seal %d (%d seal writes): want 2, in the group's checkpoint", store.collect.Sealed, store.sealSaves)
				}
			}
			h.verdicts(g1.ans.Frame)
			if tc.seq == 1 {
				r.m.procMu.Lock()
				r.m.flow.linger = -1 // chunk 2's group settles at once
				r.m.procMu.Unlock()
				a2, err := r.m.SecAggChunkIntake(h.chunk(reps[2:]))
				if err != nil || a2.Outcome != outcome.Accepted {
					t.Fatalf("chunk 2: %+v %v", a2.Answer, err)
				}
				h.verdicts(a2.Frame)
				r.finish(h, 4)
			}
		})
	}
	t.Run("failing", func(t *testing.T) {
		store := &memStore{}
		r := newRig(t, store)
		r.m.flow.linger = time.Hour
		round := r.announce()
		h := r.helperSide(round)
		w1 := r.post(h.chunk(r.reports(round, 2)))
		r.waitFolded(2)
		store.failCollect = true
		a, err := r.m.SecAggResumeIntake(resumeFrame(t, round, 1))
		requirePrep(t, a, err, outcome.Invalid, round, wire.BatchStatusInvalid)
		g1 := <-w1
		requirePrep(t, g1.ans, g1.err, outcome.Invalid, round, wire.BatchStatusInvalid)
		if rec := r.lastRecord(); rec.Status != checkpoint.StatusInvalid || rec.Round != round {
			t.Fatalf("record %+v", rec)
		}
		if n := len(r.ledger.Releases()); n != 0 {
			t.Fatalf("%d releases", n)
		}
	})
	t.Run("seal not written", func(t *testing.T) {
		store := &memStore{}
		r := newRig(t, store)
		round := r.announce()
		reps := r.reports(round, 4)
		h, _ := r.chunksOf(round, reps[:2], 2)
		store.failCollect = true
		if a, err := r.m.SecAggResumeIntake(resumeFrame(t, round, 2)); err == nil {
			t.Fatalf("a seal not written answered %+v", a.Answer)
		}
		store.failCollect = false
		if _, _, sealed := r.folded(); sealed != 0 {
			t.Fatalf("seal %d in memory though not written", sealed)
		}
		a2, err := r.m.SecAggChunkIntake(h.chunk(reps[2:]))
		if err != nil || a2.Outcome != outcome.Accepted {
			t.Fatalf("chunk 2 after a failed resume: %+v %v", a2.Answer, err)
		}
		h.verdicts(a2.Frame)
		r.finish(h, 4)
	})
}

// TestResumeAfterRestart: after a restart, the resume of a folded chunk
// gets the same bytes as before it, and the seal holds: on the datastore
// (DBStore, the aggregator's store) for every chunk; on the former file
// store, which keeps the last checkpoint's answers only, for the chunks of
// the last checkpoint, the others being answered invalid (the round is
// left as it was).
func TestResumeAfterRestart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(t *testing.T, dir string) Store
		kept  uint32 // the first chunk whose answer a restart keeps
	}{
		{"datastore", func(t *testing.T, dir string) Store { return NewDBStore(openDB(t, dir, nil)) }, 1},
		{"file", func(t *testing.T, dir string) Store { return FileStore{Dir: dir} }, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			r := newRigIn(t, dir, secaggParams(), func(dir string) Store { return tc.store(t, dir) })
			round := r.announce()
			reps := r.reports(round, 7)
			h, answers := r.chunksOf(round, reps[:6], 2)
			r.resumed(round, 2, answers[1])
			r.notFolded(round, 4)
			restart := func() {
				if d, ok := r.store.(*DBStore); ok {
					d.DB().Close()
				}
				r.store = tc.store(t, dir)
				r.open()
			}
			restart()
			if next, n, sealed := r.folded(); next != 4 || n != 6 || sealed != 4 {
				t.Fatalf("after the restart: next chunk %d, %d reports, seal %d; want 4, 6, 4", next, n, sealed)
			}
			for seq := uint32(1); seq <= 3; seq++ {
				if seq >= tc.kept {
					r.resumed(round, seq, answers[seq-1])
					continue
				}
				a, err := r.m.SecAggResumeIntake(resumeFrame(t, round, seq))
				requirePrep(t, a, err, outcome.Invalid, round, wire.BatchStatusInvalid)
			}
			r.notFolded(round, 5)
			a4, err := r.m.SecAggChunkIntake(r.zombie(round, 4, reps[6:7])[0])
			requirePrep(t, a4, err, outcome.Obsolete, round, wire.BatchStatusInvalid)
			restart()
			if _, _, sealed := r.folded(); sealed != 4 {
				t.Fatalf("seal %d after a second restart, want 4", sealed)
			}
			r.finish(h, 6)
		})
	}
}

// TestResumeRefused: a resume of another round than the open one, of a
// round already closed, or a malformed frame, gets no verdicts and changes
// nothing.
func TestResumeRefused(t *testing.T) {
	r := newRig(t, &memStore{})
	round := r.announce()
	h, answers := r.chunksOf(round, r.reports(round, 4), 2)
	a, err := r.m.SecAggResumeIntake(resumeFrame(t, round+1, 1))
	requirePrep(t, a, err, outcome.Obsolete, round+1, wire.BatchStatusInvalid)
	good := resumeFrame(t, round, 1)
	for name, f := range map[string][]byte{
		"short":    good[:wire.SecAggResumeSize-1],
		"long":     append(append([]byte(nil), good...), 0),
		"seq 0":    append(append([]byte(nil), good[:10]...), 0, 0, 0, 0),
		"a chunk":  h.close(),
		"no frame": {1},
	} {
		a, err := r.m.SecAggResumeIntake(f)
		if err != nil || a.Outcome != outcome.Invalid {
			t.Fatalf("%s: %+v %v, want invalid", name, a.Answer, err)
		}
		if p, perr := wire.ParseSecAggPrep(a.Frame); a.Frame != nil && (perr != nil || p.Status != wire.BatchStatusInvalid || len(p.Msg) != 0) {
			t.Fatalf("%s: answered %+v %v", name, p, perr)
		}
	}
	if next, n, sealed := r.folded(); next != 3 || n != 4 || sealed != 0 {
		t.Fatalf("next chunk %d, %d reports, seal %d after refused resumes", next, n, sealed)
	}
	r.resumed(round, 2, answers[1])
	r.finish(h, 4)
	a, err = r.m.SecAggResumeIntake(resumeFrame(t, round, 1))
	requirePrep(t, a, err, outcome.Obsolete, round, wire.BatchStatusInvalid)
}

// TestCloseRetriedAfterASuspendedLedger: the relay's close arrives while
// the ledger's charges are suspended (an aggregator that just took over,
// before its start check against the relay's anchor: seen in
// TestReplicasFailover when both actives were killed at once). The close
// is answered with an error, nothing charged, and the round's chunks stay:
// the relay's identical close, sent again once the ledger is checked,
// charges the round and it applies.
func TestCloseRetriedAfterASuspendedLedger(t *testing.T) {
	store := &memStore{}
	r := newRig(t, store)
	round := r.announce()
	h, _ := r.chunksOf(round, r.reports(round, 6), 2)
	r.ledger.Suspend(errors.New("not yet checked against the head the relay holds"))
	if a, err := r.m.SecAggCloseIntake(h.close()); err == nil {
		t.Fatalf("close with the ledger suspended: %+v, want an error (resent)", a.Answer)
	}
	if n := len(r.ledger.Releases()); n != 0 {
		t.Fatalf("%d releases charged while suspended", n)
	}
	r.ledger.Resume()
	r.finish(h, 6)
	if n := len(r.ledger.Releases()); n != 1 {
		t.Fatalf("%d releases, want 1", n)
	}
}
