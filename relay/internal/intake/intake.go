// Package intake reads the volunteers' frames under a memory budget: a
// frame larger than SmallFrame (a secure-summation Shares frame, about 1 MB
// at d = 7850) is read only while it holds one of a fixed number of
// slots, and keeps the slot until the relay has handed it on (the round's
// stream takes it, or it is rejected). The relay's memory for frames is
// then at most slots × the frame size whatever the number of volunteers,
// and a relay that cannot keep pace slows the volunteers down instead of
// buffering their reports: a volunteer whose frame waits for a slot is
// acknowledged later (its bytes wait in the kernel's socket buffers and in
// its own), and no frame is dropped for it.
package intake

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// SmallFrame is ReadFrame's first buffer: every CheckIn and the shuffle
// protocols' Report frames fit; a larger frame grows it once to the read
// limit, after taking a slot.
const SmallFrame = 4096

// ErrTooLarge is a frame longer than the read limit. (The websocket
// reader enforces the limit itself; this is the frame one byte past it.)
var ErrTooLarge = errors.New("intake: frame exceeds the read limit")

// Budget is a fixed number of slots for large frames. The zero value is
// unusable: use NewBudget.
type Budget struct {
	slots chan struct{}

	waits    atomic.Uint64 // takes that had to wait (counted as they start)
	waitedNs atomic.Int64  // their total wait
	held     atomic.Int64  // slots held now
	maxHeld  atomic.Int64  // the most ever held at once
}

// NewBudget returns a budget of n slots (n >= 1).
func NewBudget(n int) (*Budget, error) {
	if n < 1 {
		return nil, errors.New("intake: a budget needs at least one slot")
	}
	return &Budget{slots: make(chan struct{}, n)}, nil
}

// Slot is one taken slot: Release gives it back (once; later calls do
// nothing). The zero Slot holds nothing.
type Slot struct {
	b    *Budget
	once *sync.Once
}

// Release gives the slot back.
func (s Slot) Release() {
	if s.b == nil {
		return
	}
	s.once.Do(func() {
		s.b.held.Add(-1)
		<-s.b.slots
	})
}

// Take waits for a slot until ctx is done (then it returns ctx's error).
func (b *Budget) Take(ctx context.Context) (Slot, error) {
	select {
	case b.slots <- struct{}{}:
	default:
		b.waits.Add(1) // counted as it starts: a wait in progress shows
		start := time.Now()
		defer func() { b.waitedNs.Add(int64(time.Since(start))) }()
		select {
		case b.slots <- struct{}{}:
		case <-ctx.Done():
			return Slot{}, ctx.Err()
		}
	}
	h := b.held.Add(1)
	for {
		m := b.maxHeld.Load()
		if h <= m || b.maxHeld.CompareAndSwap(m, h) {
			break
		}
	}
	return Slot{b: b, once: new(sync.Once)}, nil
}

// Stats is what a budget did: its slots, how many takes waited and for
// how long in all, and the most slots held at once.
type Stats struct {
	Slots       int     `json:"slots"`
	Waits       uint64  `json:"waits"`
	WaitSeconds float64 `json:"wait_seconds"`
	MaxHeld     int64   `json:"max_held"`
}

// Stats returns the budget's counters.
func (b *Budget) Stats() Stats {
	return Stats{Slots: cap(b.slots), Waits: b.waits.Load(), WaitSeconds: time.Duration(b.waitedNs.Load()).Seconds(),
		MaxHeld: b.maxHeld.Load()}
}

// ReadFrame reads one message of at most limit bytes into a buffer of
// SmallFrame bytes; a message that needs more first takes a slot of b
// (waiting until ctx is done; nil b: no budget), then grows the buffer
// once to limit. It returns the frame and the slot, which the caller
// releases once it has handed the frame on (a zero Slot when none was
// taken). before, if not nil, is called after the slot is taken and
// before the rest of the frame is read (the caller restarts the frame's
// read deadline there: the wait for a slot is the relay's, not the
// volunteer's).
func ReadFrame(ctx context.Context, r io.Reader, limit int, b *Budget, before func()) ([]byte, Slot, error) {
	buf := make([]byte, min(limit, SmallFrame))
	var slot Slot
	fail := func(err error) ([]byte, Slot, error) {
		slot.Release()
		return nil, Slot{}, err
	}
	n := 0
	for {
		if n == len(buf) {
			// Full: only a message that goes on needs more (or, at the
			// limit, is one byte too long).
			var one [1]byte
			m, err := r.Read(one[:])
			if m == 0 && err == io.EOF {
				return buf, slot, nil
			}
			if m == 0 && err != nil {
				return fail(err)
			}
			if m == 0 {
				continue
			}
			if len(buf) == limit {
				return fail(ErrTooLarge)
			}
			if b != nil {
				if slot, err = b.Take(ctx); err != nil {
					return fail(err)
				}
			}
			if before != nil {
				before()
			}
			nb := make([]byte, limit)
			copy(nb, buf)
			nb[n] = one[0]
			buf, n = nb, n+1
			if err == io.EOF {
				return buf[:n], slot, nil
			}
			if err != nil {
				return fail(err)
			}
			continue
		}
		m, err := r.Read(buf[n:])
		n += m
		if err == io.EOF {
			return buf[:n], slot, nil
		}
		if err != nil {
			return fail(err)
		}
	}
}
