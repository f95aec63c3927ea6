package helper

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/secagg"
)

// open is a floor that leaves the announced minimum batch in charge and
// allows any share of rejections but all (the tests of the floor itself
// set their own).
var open = roundspec.Floor{MinBatch: 1, MaxRejectedShare: 0.99}

var vk = bytes.Repeat([]byte{4}, secagg.VerifyKeySize)

// identity "opens" a share that has the right length (the helper key's
// sealing is tested in relay/internal/helperkey).
func identity(_ uint64, b []byte, want int) ([]byte, error) {
	if len(b) != want {
		return nil, fmt.Errorf("%d bytes, want %d", len(b), want)
	}
	return b, nil
}

type fixture struct {
	r      *secagg.Round
	le, he secagg.Engine
	lead   *secagg.Aggregate
	seen   map[[16]byte]bool // nonces the leader accepted
	dedupe bool              // the leader rejects a nonce accepted before
	leads  [][]byte
	helps  [][]byte
}

func newFixture(t *testing.T, n int) *fixture {
	t.Helper()
	p, err := secagg.NewPineParams(6, 1, 2, 16)
	if err != nil {
		t.Fatal(err)
	}
	r, err := secagg.NewRound(p, 3)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{r: r, seen: map[[16]byte]bool{}, dedupe: true}
	f.le, _ = secagg.NewEngine(r, true, vk)
	f.he, _ = secagg.NewEngine(r, false, vk)
	f.lead = f.le.NewAggregate()
	for i := range n {
		l, h, err := r.Shard([]float64{0.2, -0.1, 0, 0.3, -0.3, 0.1}, noise.NewSeeded(uint64(i+1)))
		if err != nil {
			t.Fatal(err)
		}
		f.leads, f.helps = append(f.leads, l), append(f.helps, h)
	}
	return f
}

// leader decides reports lo..hi with the helper's 'P' entries through
// their encoding, folds the accepted ones, and returns the 'M' entries
// through theirs.
func (f *fixture) leader(t *testing.T, lo int, ps []secagg.Entry) []secagg.Entry {
	t.Helper()
	pm, err := f.r.MarshalPrep(ps)
	if err != nil {
		t.Fatal(err)
	}
	pe, err := f.r.ParsePrep(pm)
	if err != nil {
		t.Fatal(err)
	}
	var ms []secagg.Entry
	for i, e := range pe {
		m, out := f.le.Decide(f.le.PrepInit(f.leads[lo+i]), e)
		if out != nil && f.dedupe && f.seen[m.Nonce] {
			m, out = secagg.Entry{Nonce: m.Nonce, Reason: secagg.RejectDuplicateNonce}, nil
		}
		if out != nil {
			f.seen[m.Nonce] = true
			if err := f.lead.Fold(out); err != nil {
				t.Fatal(err)
			}
		}
		ms = append(ms, m)
	}
	mm, err := f.r.MarshalVerdicts(ms)
	if err != nil {
		t.Fatal(err)
	}
	back, err := f.r.ParseVerdicts(mm)
	if err != nil {
		t.Fatal(err)
	}
	return back
}

// TestStreamedRoundSums: reports added one at a time, verdicts arriving
// in chunks of 3, a tampered helper share and a replayed nonce rejected;
// the released 'A' unshards with the leader's aggregate over exactly the
// accepted reports, and nothing waits at the end.
func TestStreamedRoundSums(t *testing.T) {
	f := newFixture(t, 7)
	f.helps[2] = append([]byte(nil), f.helps[2]...)
	f.helps[2][len(f.helps[2])-1] ^= 1 // PINE: the helper's verification blind: its proofs no longer verify
	f.leads = append(f.leads, f.leads[4])
	f.helps = append(f.helps, f.helps[4]) // a replay the round rules missed
	h, err := New(f.r, f.he, identity, 2, open)
	if err != nil {
		t.Fatal(err)
	}
	var chunk []secagg.Entry
	lo := 0
	for i, s := range f.helps {
		p, ok := h.Prepare(s)
		if !ok {
			t.Fatalf("report %d did not open", i)
		}
		e, err := h.Add(p)
		if err != nil {
			t.Fatal(err)
		}
		chunk = append(chunk, e)
		if len(chunk) == 3 || i == len(f.helps)-1 {
			if err := h.Verdicts(f.leader(t, lo, chunk)); err != nil {
				t.Fatal(err)
			}
			lo += len(chunk)
			chunk = nil
		}
	}
	if h.Awaiting() != 0 || h.Added() != 8 || h.Accepted() != 6 || f.lead.Count() != 6 {
		t.Fatalf("awaiting %d added %d accepted %d/%d", h.Awaiting(), h.Added(), h.Accepted(), f.lead.Count())
	}
	rej := h.Rejected()
	if rej[secagg.RejectInvalidProof] != 1 || rej[secagg.RejectDuplicateNonce] != 1 {
		t.Fatalf("rejected %v", rej)
	}
	a, err := h.Release(6, noise.NewSeeded(9))
	if err != nil {
		t.Fatal(err)
	}
	own, _ := f.lead.Share()
	if err := own.AddNoise(noise.NewSeeded(10)); err != nil {
		t.Fatal(err)
	}
	res, err := f.r.Unshard(own, a)
	if err != nil || res.Count != 6 {
		t.Fatalf("unshard: %+v %v", res, err)
	}
	if _, err := h.Release(6, noise.NewSeeded(9)); !errors.Is(err, secagg.ErrProtocol) {
		t.Fatalf("second release: %v", err)
	}
}

// TestReleaseRefusals: no 'A' while reports await verdicts, for a count
// that is not the helper's, or for a round the aggregator answers with
// fewer accepted reports than the announced minimum (a deviating
// aggregator that would learn a sum of too few reports).
func TestReleaseRefusals(t *testing.T) {
	f := newFixture(t, 3)
	h, _ := New(f.r, f.he, identity, 4, open) // minimum batch 4, only 3 reports
	var ps []secagg.Entry
	for _, s := range f.helps {
		p, _ := h.Prepare(s)
		e, _ := h.Add(p)
		ps = append(ps, e)
	}
	if _, err := h.Release(0, noise.NewSeeded(1)); !errors.Is(err, secagg.ErrProtocol) {
		t.Fatalf("release while awaiting: %v", err)
	}
	if err := h.Verdicts(f.leader(t, 0, ps)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Release(2, noise.NewSeeded(1)); !errors.Is(err, ErrCountMismatch) {
		t.Fatalf("another count: %v", err)
	}
	if _, err := h.Release(3, noise.NewSeeded(1)); !errors.Is(err, ErrBelowMinBatch) {
		t.Fatalf("below the minimum: %v", err)
	}
	// Persisted and restored, the same refusal; with the minimum met, one
	// release.
	b, err := h.MarshalAggregate()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Restore(f.r, f.he, identity, 3, open, b, 3)
	if err != nil || back.Accepted() != 3 {
		t.Fatalf("restore: %v", err)
	}
	if _, err := back.Release(3, noise.NewSeeded(1)); err != nil {
		t.Fatalf("restored release: %v", err)
	}
}

// TestVerdictsContradictionAppliesNothing: a verdict message with more
// entries than reports, or accepting a report the helper rejected, is a
// protocol violation and folds nothing.
func TestVerdictsContradictionAppliesNothing(t *testing.T) {
	f := newFixture(t, 2)
	h, _ := New(f.r, f.he, identity, 1, open)
	var ps []secagg.Entry
	for _, s := range f.helps {
		p, _ := h.Prepare(s)
		e, _ := h.Add(p)
		ps = append(ps, e)
	}
	ms := f.leader(t, 0, ps)
	if err := h.Verdicts(append(ms, ms[0])); !errors.Is(err, secagg.ErrProtocol) {
		t.Fatalf("extra verdict: %v", err)
	}
	swapped := []secagg.Entry{ms[1], ms[0]}
	if err := h.Verdicts(swapped); !errors.Is(err, secagg.ErrProtocol) {
		t.Fatalf("swapped verdicts: %v", err)
	}
	if h.Accepted() != 0 || h.Awaiting() != 2 {
		t.Fatalf("a refused message applied: accepted %d awaiting %d", h.Accepted(), h.Awaiting())
	}
	// A leader that accepts the same report twice (a replay it should
	// have rejected as a duplicate nonce).
	g := newFixture(t, 1)
	g.dedupe = false
	g.leads, g.helps = append(g.leads, g.leads[0]), append(g.helps, g.helps[0])
	hg, _ := New(g.r, g.he, identity, 1, open)
	var gs []secagg.Entry
	for _, sh := range g.helps {
		p, _ := hg.Prepare(sh)
		e, _ := hg.Add(p)
		gs = append(gs, e)
	}
	if err := hg.Verdicts(g.leader(t, 0, gs)); !errors.Is(err, secagg.ErrProtocol) || hg.Accepted() != 0 {
		t.Fatalf("a nonce accepted twice: %v, %d folded", err, hg.Accepted())
	}
	if _, ok := h.Prepare(f.helps[0][:5]); ok {
		t.Fatal("a share that does not open was prepared")
	}
}

// TestFloorRefusesTheNMinusOneAttack (issue 23): a leader that marks every
// report but one invalid, for a round announced with a minimum batch of
// 1, gets no release: the relay's own minimum batch (3 here) is not
// lowered by the announcement, and with its own minimum met, more than
// half of the reports "failing" is refused as well. The floor holds after
// a restart from the persisted aggregate and count. An honest round of
// the same reports is released.
func TestFloorRefusesTheNMinusOneAttack(t *testing.T) {
	const n = 8
	run := func(floor roundspec.Floor, keep int) (*Helper, error) {
		f := newFixture(t, n)
		h, err := New(f.r, f.he, identity, 1, floor)
		if err != nil {
			t.Fatal(err)
		}
		var ps []secagg.Entry
		for _, s := range f.helps {
			p, ok := h.Prepare(s)
			if !ok {
				t.Fatal("a share did not open")
			}
			e, _ := h.Add(p)
			ps = append(ps, e)
		}
		ms := f.leader(t, 0, ps)
		for i := keep; i < len(ms); i++ { // the deviating leader's verdicts
			ms[i] = secagg.Entry{Nonce: ms[i].Nonce, Reason: secagg.RejectInvalidProof}
		}
		if err := h.Verdicts(ms); err != nil {
			t.Fatal(err)
		}
		if h.Accepted() != keep {
			t.Fatalf("%d accepted, want %d", h.Accepted(), keep)
		}
		_, err = h.Release(keep, noise.NewSeeded(1))
		return h, err
	}
	if _, err := run(roundspec.Floor{MinBatch: 3, MaxRejectedShare: 0.5}, 1); !errors.Is(err, ErrBelowMinBatch) {
		t.Fatalf("one report kept, relay floor 3: %v", err)
	}
	h, err := run(roundspec.Floor{MinBatch: 1, MaxRejectedShare: 0.5}, 3)
	if !errors.Is(err, ErrTooManyRejected) {
		t.Fatalf("3 of 8 kept: %v", err)
	}
	// Restored from what the relay persists with its close (the aggregate
	// and the count of reports sent), the same refusal.
	b, err := h.MarshalAggregate()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Restore(h.r, h.eng, identity, 1, roundspec.Floor{MinBatch: 1, MaxRejectedShare: 0.5}, b, n)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := back.Release(3, noise.NewSeeded(1)); !errors.Is(err, ErrTooManyRejected) {
		t.Fatalf("restored, 3 of 8 kept: %v", err)
	}
	if _, err := Restore(h.r, h.eng, identity, 1, open, b, 2); err == nil {
		t.Fatal("a count below the aggregate's restored")
	}
	if _, err := run(roundspec.Floor{MinBatch: 3, MaxRejectedShare: 0.5}, n); err != nil {
		t.Fatalf("honest round refused: %v", err)
	}
	if _, err := New(h.r, h.eng, identity, 1, roundspec.Floor{}); err == nil {
		t.Fatal("a zero floor accepted")
	}
}
