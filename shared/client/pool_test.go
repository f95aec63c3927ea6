package client

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/wire"
)

// TestSupersededRoundDropped: a volunteer checks in at once (before it
// trains), and a later round's announcement arriving while its report
// waits for a pool slot drops the old round: no report frame for it, an
// EventFailed with ErrSuperseded, and the new round is checked in and
// reported.
func TestSupersededRoundDropped(t *testing.T) {
	k := testKey(t, 1)
	pool := NewPool(1)
	log := &eventLog{}
	c, err := New(Config{Pinned: k.Public(), Data: testData(t, 10, noise.NewSeeded(1)), Train: logreg.FLAMEConfig(3, 0.1),
		Source: noise.NewSeeded(2), OnEvent: log.add, Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	relay, _ := startClient(t, c)
	p := testParams(1)
	pool.slots <- struct{}{} // another volunteer holds the only slot
	relay.send(announce(t, k, 1, p))
	f := relay.recv(time.Minute)
	if typ, r, err := wire.PeekRound(f); err != nil || typ != wire.TypeCheckIn || r != 1 {
		t.Fatalf("first frame: type %v round %d (%v), want the check-in of round 1 before training", typ, r, err)
	}
	relay.expectSilence(50*time.Millisecond, "no report while the pool is full")
	relay.send(announce(t, k, 2, p))
	waitFor(t, "round 1 dropped", func() bool { return log.count(EventFailed) == 1 })
	if e := log.of(EventFailed)[0]; e.Round != 1 || !errors.Is(e.Err, ErrSuperseded) {
		t.Fatalf("failed event %+v, want round 1 superseded", e)
	}
	<-pool.slots             // the other volunteer is done
	relay.expectReport(2, p) // the next frame is round 2's check-in: nothing of round 1
	if n := log.count(EventSent); n != 1 {
		t.Fatalf("%d reports sent, want 1 (round 2)", n)
	}
}

// TestPoolBoundsConcurrency: 12 volunteers sharing a pool of 2 never
// prepare more than 2 reports at once, and every one of them reports.
func TestPoolBoundsConcurrency(t *testing.T) {
	const n, slots = 12, 2
	k := testKey(t, 1)
	pool := NewPool(slots)
	var mu sync.Mutex
	active, peak, sent := 0, 0, 0
	onEvent := func(e Event) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case e.Kind == EventTraining && e.Progress == 0:
			active++
			peak = max(peak, active)
		case e.Kind == EventTraining && e.Progress == 1:
			active--
		case e.Kind == EventSent:
			sent++
		}
	}
	p := testParams(1)
	var relays []*fakeRelay
	for i := range n {
		c, err := New(Config{Pinned: k.Public(), Data: testData(t, 10, noise.NewSeeded(uint64(i))),
			Train:  logreg.FLAMEConfig(1, 0.1),
			Source: noise.NewSeeded(uint64(100 + i)), OnEvent: onEvent, Pool: pool})
		if err != nil {
			t.Fatal(err)
		}
		r, _ := startClient(t, c)
		relays = append(relays, r)
	}
	frame := announce(t, k, 1, p)
	for _, r := range relays {
		r.send(frame)
	}
	for _, r := range relays {
		r.expectReport(1, p)
	}
	mu.Lock()
	defer mu.Unlock()
	if sent != n || peak > slots || peak < 1 {
		t.Fatalf("%d of %d sent, at most %d preparing at once (pool of %d)", sent, n, peak, slots)
	}
}

// TestRehearse: a rehearsal prepares a report for the parameters (a
// positive duration), sends nothing and decides no round; parameters of
// another model dimension are refused.
func TestRehearse(t *testing.T) {
	k := testKey(t, 1)
	c, log := newTestClient(t, k, 5, 10)
	p := testParams(1)
	d, err := c.Rehearse(t.Context(), p, make([]float64, p.D))
	if err != nil || d <= 0 {
		t.Fatalf("rehearsal took %v (%v)", d, err)
	}
	if c.LastRound() != 0 || log.count(EventSent) != 0 {
		t.Fatal("a rehearsal decided a round")
	}
	p.D++
	if _, err := c.Rehearse(t.Context(), p, make([]float64, p.D)); !errors.Is(err, ErrParams) {
		t.Fatalf("another dimension: %v", err)
	}
}
