package intake

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"
)

// countingReader serves data and records how many bytes were read.
type countingReader struct {
	mu   sync.Mutex
	r    io.Reader
	read int
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, err := c.r.Read(p)
	c.read += n
	return n, err
}

func (c *countingReader) n() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.read
}

func frame(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i * 7)
	}
	return b
}

// A small frame takes no slot; a large one takes one, which Release gives
// back (twice is once).
func TestSlotsOnlyForLargeFrames(t *testing.T) {
	b, err := NewBudget(1)
	if err != nil {
		t.Fatal(err)
	}
	small := frame(SmallFrame)
	got, slot, err := ReadFrame(context.Background(), bytes.NewReader(small), 1<<20, b, nil)
	if err != nil || !bytes.Equal(got, small) || slot.b != nil {
		t.Fatalf("small frame: %v, slot %v, equal %v", err, slot.b != nil, bytes.Equal(got, small))
	}
	large := frame(SmallFrame + 1)
	calls := 0
	got, slot, err = ReadFrame(context.Background(), bytes.NewReader(large), 1<<20, b, func() { calls++ })
	if err != nil || !bytes.Equal(got, large) || calls != 1 {
		t.Fatalf("large frame: %v, equal %v, before called %d times", err, bytes.Equal(got, large), calls)
	}
	if st := b.Stats(); st.MaxHeld != 1 || st.Slots != 1 {
		t.Fatalf("stats %+v", st)
	}
	slot.Release()
	slot.Release()
	if _, s2, err := ReadFrame(context.Background(), bytes.NewReader(large), 1<<20, b, nil); err != nil {
		t.Fatalf("slot not given back: %v", err)
	} else {
		s2.Release()
	}
	if b.held.Load() != 0 {
		t.Fatalf("%d slots held after release", b.held.Load())
	}
}

// With every slot held, a large frame is read no further than its first
// SmallFrame bytes (and the one byte that shows it goes on) until a slot is released (the volunteer's bytes wait
// unread: back-pressure), and then completely; a cancelled wait returns
// the context's error and reads nothing more.
func TestLargeFrameWaitsForASlot(t *testing.T) {
	b, _ := NewBudget(1)
	held, err := b.Take(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	large := frame(3 * SmallFrame)
	r := &countingReader{r: bytes.NewReader(large)}
	type result struct {
		b    []byte
		slot Slot
		err  error
	}
	done := make(chan result, 1)
	go func() {
		f, s, err := ReadFrame(context.Background(), r, 1<<20, b, nil)
		done <- result{f, s, err}
	}()
	// The reader blocks on the slot after its first buffer. (No
	// deadline on speed: it is polled until it has read that much, and
	// then must not read more while the slot is held.)
	for r.n() < SmallFrame+1 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	if n := r.n(); n != SmallFrame+1 {
		t.Fatalf("read %d bytes while every slot was held, want %d", n, SmallFrame+1)
	}
	select {
	case res := <-done:
		t.Fatalf("frame read without a slot: %v", res.err)
	default:
	}
	held.Release()
	res := <-done
	if res.err != nil || !bytes.Equal(res.b, large) {
		t.Fatalf("after release: %v, equal %v", res.err, bytes.Equal(res.b, large))
	}
	if st := b.Stats(); st.Waits != 1 {
		t.Fatalf("waits %d, want 1", st.Waits)
	}
	// Cancelled while waiting: the context's error, nothing more read.
	ctx, cancel := context.WithCancel(context.Background())
	r2 := &countingReader{r: bytes.NewReader(large)}
	go func() {
		f, s, err := ReadFrame(ctx, r2, 1<<20, b, nil)
		done <- result{f, s, err}
	}()
	for r2.n() < SmallFrame+1 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	res2 := <-done
	if !errors.Is(res2.err, context.Canceled) || r2.n() != SmallFrame+1 || res2.slot.b != nil {
		t.Fatalf("cancelled: %v, read %d", res2.err, r2.n())
	}
	res.slot.Release()
	if b.held.Load() != 0 {
		t.Fatalf("%d slots held", b.held.Load())
	}
}

// A frame one byte over the limit is refused, and its slot given back.
func TestOverLimitReleasesItsSlot(t *testing.T) {
	b, _ := NewBudget(1)
	limit := 2 * SmallFrame
	_, _, err := ReadFrame(context.Background(), bytes.NewReader(frame(limit+1)), limit, b, nil)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over the limit: %v", err)
	}
	if b.held.Load() != 0 {
		t.Fatal("slot kept after a refused frame")
	}
	got, s, err := ReadFrame(context.Background(), bytes.NewReader(frame(limit)), limit, b, nil)
	if err != nil || len(got) != limit {
		t.Fatalf("at the limit: %v, %d bytes", err, len(got))
	}
	s.Release()
	if _, err := NewBudget(0); err == nil {
		t.Fatal("a budget of 0 slots accepted")
	}
}
