package rounds

import (
	"bytes"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/checkpoint"
	"github.com/blanket-fl/blanket/aggregator/internal/outcome"
	"github.com/blanket-fl/blanket/shared/wire"
)

// verdictsAt folds the answer to the chunk whose reports start at the
// helper's prep index first (chunks built ahead of their answers).
func (h *helperSide) verdictsAt(frame []byte, first int) {
	t := h.r.t
	t.Helper()
	p, err := wire.ParseSecAggPrep(frame)
	if err != nil || p.Status != wire.BatchStatusOK {
		t.Fatalf("chunk answer %+v %v", p, err)
	}
	ms, err := h.sr.ParseVerdicts(p.Msg)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range ms {
		out, err := h.eng.Next(h.preps[first+i], m)
		if err != nil {
			t.Fatal(err)
		}
		if out != nil {
			h.agg.Fold(out)
		}
	}
}

// finish closes the round and applies the helper's aggregate share,
// requiring both accepted, and returns the model.
func (r *rig) finish(h *helperSide, accepted int) []float64 {
	r.t.Helper()
	ans, err := r.m.SecAggCloseIntake(h.close())
	ch, perr := wire.ParseSecAggCharged(ans.Frame)
	if err != nil || perr != nil || ans.Outcome != outcome.Accepted || ch.Status != wire.BatchStatusOK || int(ch.Accepted) != accepted {
		r.t.Fatalf("close: %+v %+v %v %v", ans.Answer, ch, err, perr)
	}
	if a := r.m.SecAggAggregateIntake(h.aggregate()); a.Outcome != outcome.Accepted {
		r.t.Fatalf("aggregate: %+v", a)
	}
	if rec := r.lastRecord(); rec.Status != checkpoint.StatusOK || rec.Accepted != accepted {
		r.t.Fatalf("record %+v", rec)
	}
	return r.state().Model
}

// sequentialModel is the model after the round's reports are streamed
// one chunk at a time, in order, in chunks of per (the reference).
func sequentialModel(t *testing.T, n, per int) []float64 {
	r := newRig(t, &memStore{})
	round := r.announce()
	h := r.streamed(round, r.reports(round, n), per)
	return r.finish(h, n)
}

type intakeResult struct {
	ans outcome.SecAggAnswer
	err error
}

// post sends frame to the machine on its own goroutine (an HTTP request).
func (r *rig) post(frame []byte) <-chan intakeResult {
	c := make(chan intakeResult, 1)
	go func() {
		a, err := r.m.SecAggChunkIntake(frame)
		c <- intakeResult{a, err}
	}()
	return c
}

// waitAhead waits until n chunks wait for their predecessors (a state of
// the machine, not a duration: the deadline only ends a broken test).
func (r *rig) waitAhead(n int) {
	r.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		r.m.procMu.Lock()
		got := 0
		for _, k := range r.m.flow.ahead {
			got += k
		}
		r.m.procMu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%d chunks waiting for predecessors, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// outOfOrder posts chunks 3 and 2 (6 reports in chunks of 2), waits
// until both wait for chunk 1, then posts chunk 1; it returns the helper
// and the three answers in seq order.
func (r *rig) outOfOrder(round int) (*helperSide, [3]intakeResult) {
	h, got, _ := r.outOfOrderFrames(round)
	return h, got
}

// outOfOrderFrames is outOfOrder with the three chunk frames.
func (r *rig) outOfOrderFrames(round int) (*helperSide, [3]intakeResult, [3][]byte) {
	r.t.Helper()
	reps := r.reports(round, 6)
	h := r.helperSide(round)
	c1, c2, c3 := h.chunk(reps[0:2]), h.chunk(reps[2:4]), h.chunk(reps[4:6])
	w3 := r.post(c3)
	r.waitAhead(1)
	w2 := r.post(c2)
	r.waitAhead(2)
	w1 := r.post(c1)
	return h, [3]intakeResult{<-w1, <-w2, <-w3}, [3][]byte{c1, c2, c3}
}

// TestChunksOutOfOrderAreFolded: chunks 3 and 2 arrive before chunk 1
// (the relay posts a few at once): they wait for it instead of closing
// the round, all three are folded in order and answered accepted after
// one checkpoint (the last of the burst commits for all), and the round
// ends with exactly the model of the same chunks sent one at a time.
func TestChunksOutOfOrderAreFolded(t *testing.T) {
	want := sequentialModel(t, 6, 2)
	store := &memStore{}
	r := newRig(t, store)
	round := r.announce()
	h, got := r.outOfOrder(round)
	for i, g := range got {
		if g.err != nil || g.ans.Outcome != outcome.Accepted {
			t.Fatalf("chunk %d: %+v %v", i+1, g.ans.Answer, g.err)
		}
		h.verdictsAt(g.ans.Frame, 2*i)
	}
	if store.collectSaves != 1 {
		t.Errorf("%d checkpoints for one burst of 3 chunks, want 1", store.collectSaves)
	}
	if model := r.finish(h, 6); !slices.Equal(model, want) {
		t.Fatalf("model %v after chunks out of order, %v in order", model, want)
	}
}

// TestChunkAheadWaitIsBounded: a chunk whose predecessor never arrives is
// answered with a retryable error (500: the relay resends it) after the
// wait bound, never invalid; the round goes on when the predecessor comes.
func TestChunkAheadWaitIsBounded(t *testing.T) {
	r := newRig(t, &memStore{})
	r.m.flow.wait = 20 * time.Millisecond
	round := r.announce()
	reps := r.reports(round, 4)
	h := r.helperSide(round)
	c1, c2 := h.chunk(reps[:2]), h.chunk(reps[2:])
	if a, err := r.m.SecAggChunkIntake(c1); err != nil || a.Outcome != outcome.Accepted {
		t.Fatalf("chunk 1: %+v %v", a.Answer, err)
	} else {
		h.verdictsAt(a.Frame, 0)
	}
	c3 := func() []byte { // chunk 3 built by a second helper state: only its frame matters here
		hs := r.helperSide(round)
		hs.chunks = 2
		return hs.chunk(reps[:1])
	}()
	if a, err := r.m.SecAggChunkIntake(c3); !errors.Is(err, errChunkAhead) {
		t.Fatalf("chunk 3 without chunk 2: %+v %v, want a retryable error", a.Answer, err)
	}
	if h := r.state().History; len(h) != 0 {
		t.Fatalf("the round was closed: %+v", h)
	}
	a, err := r.m.SecAggChunkIntake(c2)
	if err != nil || a.Outcome != outcome.Accepted {
		t.Fatalf("chunk 2: %+v %v", a.Answer, err)
	}
	h.verdictsAt(a.Frame, 2)
	r.finish(h, 4)
}

// gateStore blocks SaveCollect until released and logs, in order, when a
// save starts and returns.
type gateStore struct {
	*memStore
	started chan struct{}
	release chan struct{}
	mu      sync.Mutex
	log     []string
}

func (g *gateStore) event(s string) {
	g.mu.Lock()
	g.log = append(g.log, s)
	g.mu.Unlock()
}

func (g *gateStore) SaveCollect(c *Collect) error {
	g.event("save started")
	g.started <- struct{}{}
	<-g.release
	err := g.memStore.SaveCollect(c)
	g.event("save returned")
	return err
}

// TestAnswersWaitForTheCheckpoint: a chunk's answer leaves only after the
// checkpoint covering it returned; a checkpoint whose write fails answers
// none of its group (no verdicts) and closes the round invalid, nothing
// charged.
func TestAnswersWaitForTheCheckpoint(t *testing.T) {
	t.Run("held", func(t *testing.T) {
		g := &gateStore{memStore: &memStore{}, started: make(chan struct{}), release: make(chan struct{})}
		r := newRig(t, g)
		round := r.announce()
		h := r.helperSide(round)
		w := r.post(h.chunk(r.reports(round, 2)))
		<-g.started
		select {
		case got := <-w:
			t.Fatalf("answered %+v while its checkpoint is being written", got.ans.Answer)
		default:
		}
		close(g.release)
		got := <-w
		g.event("answered")
		if got.err != nil || got.ans.Outcome != outcome.Accepted {
			t.Fatalf("chunk: %+v %v", got.ans.Answer, got.err)
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		if !slices.Equal(g.log, []string{"save started", "save returned", "answered"}) {
			t.Fatalf("events %v", g.log)
		}
	})
	t.Run("failing", func(t *testing.T) {
		store := &memStore{}
		r := newRig(t, store)
		round := r.announce()
		store.failCollect = true
		_, got := r.outOfOrder(round)
		for i, g := range got {
			if g.err != nil || g.ans.Outcome != outcome.Invalid {
				t.Fatalf("chunk %d of a group whose checkpoint failed: %+v %v, want invalid", i+1, g.ans.Answer, g.err)
			}
			if p, err := wire.ParseSecAggPrep(g.ans.Frame); err != nil || p.Status != wire.BatchStatusInvalid || len(p.Msg) != 0 {
				t.Fatalf("chunk %d's answer %+v %v carries verdicts", i+1, p, err)
			}
		}
		if rec := r.lastRecord(); rec.Status != checkpoint.StatusInvalid || rec.Round != round {
			t.Fatalf("record %+v", rec)
		}
		if n := len(r.ledger.Releases()); n != 0 {
			t.Fatalf("%d releases", n)
		}
	})
}

// crashStore is a store that dies at its first SaveCollect once armed:
// that save and every later write are lost (the process was killed
// during the write); reads still see what was durable before.
type crashStore struct {
	Store
	armed, crashed atomic.Bool
}

var errCrashed = errors.New("injected: the process died during the write")

func (c *crashStore) SaveCollect(col *Collect) error {
	if c.armed.Load() {
		c.crashed.Store(true)
	}
	if c.crashed.Load() {
		return errCrashed
	}
	return c.Store.SaveCollect(col)
}

func (c *crashStore) SaveState(st *checkpoint.State) error {
	if c.crashed.Load() {
		return errCrashed
	}
	return c.Store.SaveState(st)
}

func (c *crashStore) RemoveCollect() error {
	if c.crashed.Load() {
		return errCrashed
	}
	return c.Store.RemoveCollect()
}

// TestRestartBetweenCheckpoints: chunk 1 is checkpointed and answered;
// chunks 3 and 2 are folded but the aggregator dies while writing their
// checkpoint, so neither is answered. A machine reopened on the datastore
// resumes from chunk 1's checkpoint; the relay's re-sends of chunks 2 and
// 3 (the identical bytes, as its Post retries) are folded again, and the
// round ends with exactly the model of a round without the crash. Every
// chunk of the last checkpoint is then answered again, identically, when
// re-sent (before and after another restart).
func TestRestartBetweenCheckpoints(t *testing.T) {
	want := sequentialModel(t, 6, 2)
	cs := &crashStore{}
	r := newRigIn(t, t.TempDir(), secaggParams(), func(dir string) Store {
		cs.Store = NewDBStore(openDB(t, dir, nil))
		return cs
	})
	round := r.announce()
	reps := r.reports(round, 6)
	h := r.helperSide(round)
	c1, c2, c3 := h.chunk(reps[0:2]), h.chunk(reps[2:4]), h.chunk(reps[4:6])
	a1, err := r.m.SecAggChunkIntake(c1)
	if err != nil || a1.Outcome != outcome.Accepted {
		t.Fatalf("chunk 1: %+v %v", a1.Answer, err)
	}
	h.verdictsAt(a1.Frame, 0)

	cs.armed.Store(true)
	w3 := r.post(c3)
	r.waitAhead(1)
	if a2, err := r.m.SecAggChunkIntake(c2); err == nil && a2.Outcome == outcome.Accepted {
		t.Fatal("chunk 2 answered accepted although its checkpoint was lost")
	}
	<-w3 // the dead process's answers never reach the relay

	r.store = cs.Store // the restarted aggregator, on the same datastore
	r.open()
	again, err := r.m.SecAggChunkIntake(c1)
	if err != nil || again.Outcome != outcome.Duplicate || !bytes.Equal(again.Frame, a1.Frame) {
		t.Fatalf("chunk 1 re-sent after the restart: %+v %v", again.Answer, err)
	}
	// The relay re-sends chunks 2 and 3, a few at once.
	w3 = r.post(c3)
	r.waitAhead(1)
	w2 := r.post(c2)
	g2, g3 := <-w2, <-w3
	for i, g := range []intakeResult{g2, g3} {
		if g.err != nil || g.ans.Outcome != outcome.Accepted {
			t.Fatalf("chunk %d re-sent after the restart: %+v %v", i+2, g.ans.Answer, g.err)
		}
		h.verdictsAt(g.ans.Frame, 2*(i+1))
	}
	for pass := range 2 {
		for i, c := range [][]byte{c1, c2, c3} {
			a, err := r.m.SecAggChunkIntake(c)
			want := []outcome.SecAggAnswer{a1, g2.ans, g3.ans}[i]
			if err != nil || a.Outcome != outcome.Duplicate || !bytes.Equal(a.Frame, want.Frame) {
				t.Fatalf("pass %d: chunk %d re-sent: %+v %v, want its answer again", pass, i+1, a.Answer, err)
			}
		}
		if pass == 0 {
			r.open()
		}
	}
	if model := r.finish(h, 6); !slices.Equal(model, want) {
		t.Fatalf("model %v after a restart between checkpoints, %v without", model, want)
	}
}

// TestLastGroupDuplicatesAfterRestart: with the file-like store (each
// checkpoint rewritten whole), the collect record keeps the digest and
// reply of every chunk of the last checkpoint, not only the last chunk's:
// after a restart, the re-send of any of them gets its identical answer.
func TestLastGroupDuplicatesAfterRestart(t *testing.T) {
	store := &memStore{}
	r := newRig(t, store)
	round := r.announce()
	h, got, frames := r.outOfOrderFrames(round)
	if store.collectSaves != 1 || len(store.collect.Chunks) != 3 {
		t.Fatalf("%d checkpoints, the last covering %d chunks: want 1 covering 3", store.collectSaves, len(store.collect.Chunks))
	}
	r.open()
	for i, g := range got {
		h.verdictsAt(g.ans.Frame, 2*i)
	}
	for i, c := range store.collect.Chunks {
		a, err := r.m.SecAggChunkIntake(frames[i])
		if err != nil || a.Outcome != outcome.Duplicate || !bytes.Equal(a.Frame, got[i].ans.Frame) || !bytes.Equal(a.Frame, c.Reply) {
			t.Fatalf("chunk %d re-sent after the restart: %+v %v", i+1, a.Answer, err)
		}
	}
	r.finish(h, 6)
}

// TestGroupLinger: with no other chunk on its way, a group waits
// groupLinger for the relay's next chunk before its checkpoint: chunk 2,
// posted while chunk 1's answer is held, joins chunk 1's checkpoint, and
// neither answer leaves before it.
func TestGroupLinger(t *testing.T) {
	store := &memStore{}
	r := newRig(t, store)
	r.m.flow.linger = time.Hour // the group waits until the test settles it
	round := r.announce()
	reps := r.reports(round, 4)
	h := r.helperSide(round)
	w1 := r.post(h.chunk(reps[:2]))
	r.waitFolded(2)
	w2 := r.post(h.chunk(reps[2:]))
	r.waitFolded(3)
	select {
	case g := <-w1:
		t.Fatalf("chunk 1 answered %+v before a checkpoint", g.ans.Answer)
	case g := <-w2:
		t.Fatalf("chunk 2 answered %+v before a checkpoint", g.ans.Answer)
	default:
	}
	r.m.procMu.Lock()
	saves := store.collectSaves
	r.m.flow.linger = -1
	r.m.settle() // as the timer does once the linger passed
	r.m.procMu.Unlock()
	if saves != 0 {
		t.Fatalf("%d checkpoints while the group lingered", saves)
	}
	for i, w := range []<-chan intakeResult{w1, w2} {
		g := <-w
		if g.err != nil || g.ans.Outcome != outcome.Accepted {
			t.Fatalf("chunk %d: %+v %v", i+1, g.ans.Answer, g.err)
		}
		h.verdictsAt(g.ans.Frame, 2*i)
	}
	if store.collectSaves != 1 || len(store.collect.Chunks) != 2 {
		t.Fatalf("%d checkpoints, the last covering %d chunks: want 1 covering both", store.collectSaves, len(store.collect.Chunks))
	}
	r.finish(h, 4)
}

// waitFolded waits until the open round's next chunk is next (a state of
// the machine; the deadline only ends a broken test).
func (r *rig) waitFolded(next uint32) {
	r.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		r.m.procMu.Lock()
		c := r.m.sa.collect
		ok := c != nil && c.next == next
		r.m.procMu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("chunk %d not folded", next-1)
		}
		time.Sleep(time.Millisecond)
	}
}
