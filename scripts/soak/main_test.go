package main

import (
	"context"
	"errors"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/scripts/internal/localrun"
	"github.com/blanket-fl/blanket/shared/wire"
)

func ms(v ...int) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x) * time.Millisecond
	}
	return out
}

// TestPercentile: nearest rank, on unsorted input, which it leaves alone.
func TestPercentile(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(100-i) * time.Millisecond // 100 ms .. 1 ms
	}
	for _, c := range []struct {
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{nil, 99, 0},
		{ms(7), 50, 7 * time.Millisecond},
		{ms(7), 99, 7 * time.Millisecond},
		{ms(30, 10, 20, 40), 50, 20 * time.Millisecond},  // rank ceil(2) = 2
		{ms(30, 10, 20, 40), 51, 30 * time.Millisecond},  // rank ceil(2.04) = 3
		{ms(30, 10, 20, 40), 100, 40 * time.Millisecond}, // the maximum
		{hundred, 99, 99 * time.Millisecond},
		{hundred, 50, 50 * time.Millisecond},
		{hundred, 1, time.Millisecond},
	} {
		orig := slices.Clone(c.in)
		if got := percentile(c.in, c.p); got != c.want {
			t.Errorf("percentile(%v, %v) = %v, want %v", c.in, c.p, got, c.want)
		}
		if !slices.Equal(orig, c.in) {
			t.Errorf("percentile reordered its input: %v", c.in)
		}
	}
}

// TestSlope: a line is recovered exactly; a flat series has slope 0.
func TestSlope(t *testing.T) {
	var line, flat []memSample
	for i := range 10 {
		at := time.Duration(i) * 30 * time.Second
		line = append(line, memSample{at, 100<<20 + int64(i)*(1<<20)}) // +1 MiB per 30 s
		flat = append(flat, memSample{at, 50 << 20})
	}
	if got := slope(line) / (1 << 20); math.Abs(got-2) > 1e-9 {
		t.Errorf("slope %v MiB/min, want 2", got)
	}
	if got := slope(flat); got != 0 {
		t.Errorf("flat slope %v", got)
	}
	if got := slope(line[:1]); got != 0 {
		t.Errorf("one sample: slope %v", got)
	}
}

// TestStalls: the bound runs from each completion and each restart (the
// first bound from the start) to the next completion or the end.
func TestStalls(t *testing.T) {
	s := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Second
		}
		return out
	}
	const first, bound = 80 * time.Second, 60 * time.Second
	for _, c := range []struct {
		name                  string
		completions, restarts []time.Duration
		end                   time.Duration
		want                  int
	}{
		{"steady", s(30, 80, 130, 170), nil, 200 * time.Second, 0},
		{"first round within its own bound", s(75, 100), nil, 120 * time.Second, 0},
		{"slow first round", s(90, 100), nil, 120 * time.Second, 1},
		{"gap between rounds", s(30, 100), nil, 120 * time.Second, 1},
		{"gap at the end", s(30, 60), nil, 130 * time.Second, 1},
		{"restart resets the clock", s(30, 140), s(90), 150 * time.Second, 0},
		{"no round after a restart", s(30), s(50), 120 * time.Second, 1},
		{"unsorted input", s(170, 30, 130, 80), nil, 200 * time.Second, 0},
		{"nothing at all", nil, nil, 81 * time.Second, 1},
		{"nothing yet", nil, nil, 79 * time.Second, 0},
	} {
		if got := stalls(c.completions, c.restarts, c.end, first, bound); len(got) != c.want {
			t.Errorf("%s: %d stalls %q, want %d", c.name, len(got), got, c.want)
		}
	}
}

// TestAckedLost: more acknowledged reports than an ok round aggregated is
// a loss; fewer is a volunteer that missed its ack; acks of rounds that
// did not complete are counted apart.
func TestAckedLost(t *testing.T) {
	rs := []localrun.Round{
		{Round: 1, Status: "ok", N: 200},
		{Round: 2, Status: "aborted", N: 0},
		{Round: 3, Status: "ok", N: 198},
		{Round: 4, Status: "ok", N: 200},
	}
	v, dropped := ackedLost(rs, map[int]int{1: 200, 2: 150, 3: 197, 4: 201, 5: 7})
	if len(v) != 1 || !strings.Contains(v[0], "round 4") {
		t.Errorf("violations %q, want round 4's alone", v)
	}
	if dropped != 157 {
		t.Errorf("dropped %d, want 150 + 7", dropped)
	}
}

// fakeTransport replays acks after frames are sent.
type fakeTransport struct {
	in [][]byte
}

func (f *fakeTransport) Send(context.Context, []byte) error { return nil }
func (f *fakeTransport) Recv(context.Context) ([]byte, error) {
	if len(f.in) == 0 {
		return nil, io.EOF
	}
	b := f.in[0]
	f.in = f.in[1:]
	return b, nil
}
func (f *fakeTransport) Close() error { return nil }

func frame(t *testing.T, m interface{ MarshalBinary() ([]byte, error) }) []byte {
	t.Helper()
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAckTransport: a report counts as acknowledged when every frame sent
// for it has an accepted ack, timed from its check-in; a refused frame
// settles it as refused; acks of another round are ignored.
func TestAckTransport(t *testing.T) {
	a := newAcks()
	clock := time.Unix(0, 0)
	ft := &fakeTransport{}
	tr := &ackTransport{Transport: ft, acks: a, now: func() time.Time { return clock }}
	ctx := context.Background()
	ack := func(round uint64, status uint8) []byte {
		return frame(t, &wire.Ack{Round: round, Status: status})
	}
	report := make([]byte, wire.HeaderSize)
	report[0], report[1] = wire.Version, byte(wire.TypeReport)

	// Round 5: check-in + 2 report frames, three accepted acks, plus an
	// ack of round 4 in between.
	tr.Send(ctx, frame(t, &wire.CheckIn{Round: 5}))
	clock = clock.Add(300 * time.Millisecond)
	tr.Send(ctx, report)
	tr.Send(ctx, report)
	ft.in = [][]byte{ack(5, wire.AckAccepted), ack(4, wire.AckAccepted), ack(5, wire.AckAccepted), ack(5, wire.AckAccepted)}
	for range 3 {
		tr.Recv(ctx)
	}
	if all, per, _ := a.snapshot(); len(all) != 0 || per[5] != 0 {
		t.Fatalf("acknowledged before the last frame's ack: %v %v", all, per)
	}
	clock = clock.Add(200 * time.Millisecond)
	tr.Recv(ctx)
	all, per, refused := a.snapshot()
	if !slices.Equal(all, ms(500)) || per[5] != 1 || per[4] != 0 || refused != 0 {
		t.Errorf("after round 5: latencies %v, per round %v, refused %d; want [500ms], {5: 1}, 0", all, per, refused)
	}
	if w := a.takeWindow(); len(w) != 1 || len(a.takeWindow()) != 0 {
		t.Errorf("window %v not taken once", w)
	}

	// Round 6: the report frame is refused (too late).
	tr.Send(ctx, frame(t, &wire.CheckIn{Round: 6}))
	tr.Send(ctx, report)
	ft.in = [][]byte{ack(6, wire.AckAccepted), ack(6, wire.AckTooLate)}
	tr.Recv(ctx)
	tr.Recv(ctx)
	all, per, refused = a.snapshot()
	if len(all) != 1 || per[6] != 0 || refused != 1 {
		t.Errorf("after round 6: latencies %v, per round %v, refused %d; want one, none for 6, 1", all, per, refused)
	}
	if _, err := tr.Recv(ctx); !errors.Is(err, io.EOF) {
		t.Errorf("transport error not passed on: %v", err)
	}
}

// TestAggregatorArgs: the protocols the soak knows, sized for the cohort.
func TestAggregatorArgs(t *testing.T) {
	o, err := parseFlags([]string{"-volunteers", "20", "-protocol", "ss-double"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Join(o.aggregatorArgs(), " ")
	for _, want := range []string{"-protocol ss-double", "-expected-n 20", "-quota 20", "-round-timeout 20s", "-min-batch 10"} {
		if !strings.Contains(args, want) {
			t.Errorf("args %q lack %q", args, want)
		}
	}
	if o.bound() != 2*20*time.Second+15*time.Second+warmup {
		t.Errorf("bound %v", o.bound())
	}
	if _, err := parseFlags([]string{"-protocol", "ss-simple"}, io.Discard); err == nil {
		t.Error("ss-simple accepted")
	}
	if _, err := parseFlags([]string{"-volunteers", "9000"}, io.Discard); err == nil {
		t.Error("9000 volunteers accepted")
	}
}
