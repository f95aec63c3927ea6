package outbox

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// scripted is an aggregator that answers each entry from a script (the
// last answer repeats) and records every attempt.
type scripted struct {
	mu       sync.Mutex
	script   map[Entry][]Outcome
	attempts map[Entry][]time.Duration // times since start
	bodies   map[Entry][][]byte
	start    time.Time
	order    []Entry // definitive outcomes, in order
}

func (a *scripted) deliver(_ context.Context, e Entry, b []byte) (Outcome, string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := len(a.attempts[e])
	a.attempts[e] = append(a.attempts[e], time.Since(a.start))
	a.bodies[e] = append(a.bodies[e], bytes.Clone(b))
	s := a.script[e]
	return s[min(n, len(s)-1)], "scripted"
}

// TestSenderOutcomes: each frame is delivered on its own: a frame the
// aggregator keeps failing never delays a later round's (no head-of-line
// blocking); every attempt resends the identical stored bytes with an
// exponential backoff; duplicate, obsolete and invalid are final like
// accepted: the frame leaves the outbox, is counted and never sent again.
func TestSenderOutcomes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ob, err := Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		abort3, batch5, batch6, batch7, batch8 := Entry{3, Abort}, Entry{5, Batch}, Entry{6, Batch}, Entry{7, Batch}, Entry{8, Batch}
		agg := &scripted{start: time.Now(), attempts: map[Entry][]time.Duration{}, bodies: map[Entry][][]byte{},
			script: map[Entry][]Outcome{
				abort3: {Retry, Retry, Retry, Retry, Retry, Obsolete},
				batch5: {Accepted},
				batch6: {Retry, Duplicate},
				batch7: {Invalid},
				batch8: {Retry},
			}}
		var finals []Entry
		var fmu sync.Mutex
		s, err := NewSender(ob, SenderConfig{Deliver: agg.deliver, Logger: slog.New(slog.DiscardHandler),
			RetryMin: 100 * time.Millisecond, RetryMax: time.Second,
			OnFinal: func(e Entry, o Outcome, _ string) {
				fmu.Lock()
				finals = append(finals, e)
				fmu.Unlock()
			}})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range []Entry{abort3, batch5, batch6, batch7, batch8} {
			if err := ob.Put(e.Round, e.Kind, []byte{byte(e.Round), 0xee}); err != nil {
				t.Fatal(err)
			}
		}
		s.Enqueue(abort3) // queued before Run, like a recovered frame
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { s.Run(ctx); close(done) }()
		s.Enqueue(abort3) // already being delivered: not twice
		for _, e := range []Entry{batch5, batch6, batch7, batch8} {
			s.Enqueue(e)
		}
		synctest.Wait()
		// Round 5 is delivered at once although round 3 is still failing.
		fmu.Lock()
		got := slices.Clone(finals)
		fmu.Unlock()
		if !slices.Contains(got, batch5) || !slices.Contains(got, batch7) || slices.Contains(got, abort3) {
			t.Fatalf("finals at start %v: round 5 waited for round 3", got)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		st := s.Stats()
		want := map[string]uint64{"accepted": 1, "duplicate": 1, "obsolete": 1, "invalid": 1}
		for k, v := range want {
			if st.Outcomes[k] != v {
				t.Fatalf("outcomes %v, want %v", st.Outcomes, want)
			}
		}
		if st.Pending != 1 {
			t.Fatalf("pending %d, want 1 (round 8 still retrying)", st.Pending)
		}
		// Backoff of round 3: 100, 200, 400, 800 ms, then capped at 1 s.
		wantAt := []time.Duration{0, 100, 300, 700, 1500, 2500}
		for i := range wantAt {
			wantAt[i] *= time.Millisecond
		}
		agg.mu.Lock()
		if !slices.Equal(agg.attempts[abort3], wantAt) {
			t.Fatalf("round 3 attempts at %v, want %v", agg.attempts[abort3], wantAt)
		}
		for e, bs := range agg.bodies {
			for _, b := range bs {
				if !bytes.Equal(b, []byte{byte(e.Round), 0xee}) {
					t.Fatalf("%v: attempt sent other bytes %x", e, b)
				}
			}
		}
		n3 := len(agg.attempts[abort3])
		agg.mu.Unlock()
		// Final frames left the outbox; the retrying one stays.
		if l, _ := ob.List(); !slices.Equal(l, []Entry{batch8}) {
			t.Fatalf("outbox %v, want only round 8", l)
		}
		// Never sent again after a definitive outcome.
		time.Sleep(time.Minute)
		synctest.Wait()
		agg.mu.Lock()
		if len(agg.attempts[abort3]) != n3 || len(agg.attempts[batch5]) != 1 {
			t.Fatalf("a final frame was resent: %d, %d", len(agg.attempts[abort3]), len(agg.attempts[batch5]))
		}
		agg.mu.Unlock()
		cancel()
		<-done
		// Round 8 stays for the next start; Enqueue after Run is a no-op.
		s.Enqueue(Entry{9, Batch})
		if l, _ := ob.List(); !slices.Equal(l, []Entry{batch8}) {
			t.Fatalf("outbox after stop %v", l)
		}
	})
}

func TestSenderConfig(t *testing.T) {
	ob, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d := func(context.Context, Entry, []byte) (Outcome, string) { return Accepted, "" }
	log := slog.New(slog.DiscardHandler)
	for name, cfg := range map[string]SenderConfig{
		"no deliver": {Logger: log, RetryMin: 1, RetryMax: 1},
		"no logger":  {Deliver: d, RetryMin: 1, RetryMax: 1},
		"zero min":   {Deliver: d, Logger: log, RetryMax: 1},
		"max < min":  {Deliver: d, Logger: log, RetryMin: 2, RetryMax: 1},
	} {
		if _, err := NewSender(ob, cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := NewSender(nil, SenderConfig{Deliver: d, Logger: log, RetryMin: 1, RetryMax: 1}); err == nil {
		t.Error("nil outbox accepted")
	}
	for o, name := range map[Outcome]string{Retry: "retry", Accepted: "accepted", Duplicate: "duplicate", Obsolete: "obsolete", Invalid: "invalid"} {
		if o.String() != name || o.Final() == (o == Retry) {
			t.Errorf("%d: %q final %v", o, o.String(), o.Final())
		}
	}
}
