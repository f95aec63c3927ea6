package main

import (
	"context"
	"sync"
	"time"

	"github.com/blanket-fl/blanket/shared/client"
	"github.com/blanket-fl/blanket/shared/wire"
)

// acks records, at the volunteers, how long the relay takes to acknowledge
// a report: from the moment a volunteer hands the report's first frame
// (its CheckIn) to its transport until it reads the accepted Ack of the
// report's last frame (the last Report frame, or the Shares frame in
// secure summation). That includes the upload, the relay's judging and the
// volunteer's own scheduling on a loaded machine. It also counts the
// reports acknowledged per round, for the check that none of them is lost.
type acks struct {
	mu      sync.Mutex
	window  []time.Duration // since the last takeWindow
	all     []time.Duration
	perRnd  map[int]int // round -> reports acknowledged (every frame accepted)
	refused int         // reports with a frame the relay did not accept
}

func newAcks() *acks { return &acks{perRnd: map[int]int{}} }

func (a *acks) record(round uint64, d time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.window = append(a.window, d)
	a.all = append(a.all, d)
	a.perRnd[int(round)]++
}

func (a *acks) refuse() {
	a.mu.Lock()
	a.refused++
	a.mu.Unlock()
}

// takeWindow returns the latencies recorded since its last call.
func (a *acks) takeWindow() []time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	w := a.window
	a.window = nil
	return w
}

// snapshot returns every latency, the acknowledged reports per round and
// the refused reports.
func (a *acks) snapshot() ([]time.Duration, map[int]int, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	per := make(map[int]int, len(a.perRnd))
	for r, n := range a.perRnd {
		per[r] = n
	}
	return append([]time.Duration(nil), a.all...), per, a.refused
}

// dial wraps dial so that every transport it opens reports to a.
func (a *acks) dial(dial func(ctx context.Context, url, origin string) (client.Transport, error)) func(ctx context.Context, url, origin string) (client.Transport, error) {
	return func(ctx context.Context, url, origin string) (client.Transport, error) {
		t, err := dial(ctx, url, origin)
		if err != nil {
			return nil, err
		}
		return &ackTransport{Transport: t, acks: a, now: time.Now}, nil
	}
}

// ackTransport times one volunteer's reports on one connection. The client
// sends a report's frames and only then goes back to Recv (client.Run is
// one loop), so every Ack of a report is read after its last frame was
// handed over: the report is acknowledged when as many accepted Acks of
// its round as frames sent have been read.
type ackTransport struct {
	client.Transport
	acks *acks
	now  func() time.Time

	mu      sync.Mutex
	round   uint64 // the report being acknowledged (0: none)
	start   time.Time
	sent    int
	ok      int
	settled bool // acknowledged or refused
}

func (t *ackTransport) Send(ctx context.Context, frame []byte) error {
	t.mu.Lock()
	if typ, err := wire.PeekType(frame); err == nil && typ == wire.TypeCheckIn {
		round := uint64(0)
		if c, err := wire.ParseCheckIn(frame); err == nil {
			round = c.Round
		}
		t.round, t.start, t.sent, t.ok, t.settled = round, t.now(), 0, 0, false
	}
	if t.round != 0 {
		t.sent++
	}
	t.mu.Unlock()
	return t.Transport.Send(ctx, frame)
}

func (t *ackTransport) Recv(ctx context.Context) ([]byte, error) {
	frame, err := t.Transport.Recv(ctx)
	if err != nil {
		return frame, err
	}
	if typ, err := wire.PeekType(frame); err != nil || typ != wire.TypeAck {
		return frame, nil
	}
	a, err := wire.ParseAck(frame)
	if err != nil {
		return frame, nil
	}
	at := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.round == 0 || a.Round != t.round || t.settled {
		return frame, nil
	}
	if a.Status != wire.AckAccepted {
		t.settled = true
		t.acks.refuse()
		return frame, nil
	}
	t.ok++
	if t.ok == t.sent {
		t.settled = true
		t.acks.record(t.round, at.Sub(t.start))
	}
	return frame, nil
}
