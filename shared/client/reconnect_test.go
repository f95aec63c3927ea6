package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/shared/noise"
)

// TestRunWithReconnect: the first connection dies after round 1 (a relay
// restart), one dial fails outright, and the third connection re-sends
// round 1 (ignored: already reported) and opens round 2 (answered). Cancel
// then ends RunWithReconnect with ctx's error, and every transport is closed.
func TestRunWithReconnect(t *testing.T) {
	k := testKey(t, 1)
	c, log := newTestClient(t, k, 9, 10)
	p := testParams(1)
	relays := make(chan *fakeRelay, 4)
	var dialed []*memTransport
	dials := 0
	dial := func(ctx context.Context) (Transport, error) {
		dials++
		if dials == 2 {
			return nil, errors.New("connection refused")
		}
		cl, rl := newPipe(64)
		dialed = append(dialed, cl)
		relays <- &fakeRelay{t: t, tr: rl}
		return cl, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		errc <- c.RunWithReconnect(ctx, dial, Backoff{Initial: time.Millisecond, Max: 4 * time.Millisecond})
	}()

	r1 := <-relays
	a1 := announce(t, k, 1, p)
	r1.send(a1)
	r1.expectReport(1, p)
	r1.tr.Close() // relay restart

	var r2 *fakeRelay
	select {
	case r2 = <-relays:
	case <-time.After(time.Minute):
		t.Fatal("no reconnect")
	}
	r2.send(a1)
	r2.send(announce(t, k, 2, p))
	r2.expectReport(2, p) // the first frame after the resend is round 2's check-in
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("RunWithReconnect returned %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("RunWithReconnect ignored cancellation")
	}
	if dials != 3 {
		t.Fatalf("%d dials, want 3", dials)
	}
	if n := log.count(EventDisconnected); n != 2 {
		t.Fatalf("%d disconnect events, want 2", n)
	}
	if n := log.count(EventConnected); n != 2 {
		t.Fatalf("%d connect events, want 2", n)
	}
	for i, tr := range dialed {
		select {
		case <-tr.done:
		default:
			t.Errorf("transport %d not closed", i)
		}
	}
	if _, _, n := c.Privacy(); n != 2 {
		t.Fatalf("%d rounds reported, want 2", n)
	}
}

func TestBackoff(t *testing.T) {
	b := Backoff{Initial: 100 * time.Millisecond, Max: time.Second}
	src := noise.NewSeeded(1)
	for n := range 20 {
		d := min(b.Initial<<min(n, 10), b.Max)
		for range 50 {
			w := b.delay(n, src)
			if w < d/2 || w > d {
				t.Fatalf("attempt %d waits %v, want within [%v, %v]", n, w, d/2, d)
			}
		}
	}
	huge := Backoff{Initial: time.Second, Max: time.Duration(1<<63 - 1)}
	if w := huge.delay(200, src); w <= 0 {
		t.Fatalf("overflowed to %v", w)
	}
	for _, bad := range []Backoff{{}, {Initial: -1, Max: 1}, {Initial: 2, Max: 1}} {
		if bad.Validate() == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if err := DefaultBackoff().Validate(); err != nil {
		t.Fatal(err)
	}
	c, _ := newTestClient(t, testKey(t, 1), 1, 3)
	if err := c.RunWithReconnect(context.Background(), nil, DefaultBackoff()); err == nil {
		t.Fatal("nil dial accepted")
	}
}
