package client

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/shared/envelope/envelopetest"
	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/wire"
)

// errClosed is what a closed memTransport returns.
var errClosed = errors.New("memory transport closed")

// memTransport is one end of an in-memory, frame-preserving pipe.
type memTransport struct {
	in   <-chan []byte
	out  chan<- []byte
	done chan struct{} // shared by both ends: closing one closes the pipe
	once *sync.Once
}

// newPipe returns the client's end and the relay's end of a pipe whose
// directions buffer up to buf frames each.
func newPipe(buf int) (cl, rl *memTransport) {
	a := make(chan []byte, buf)
	b := make(chan []byte, buf)
	done := make(chan struct{})
	once := new(sync.Once)
	return &memTransport{in: a, out: b, done: done, once: once},
		&memTransport{in: b, out: a, done: done, once: once}
}

func (m *memTransport) Send(ctx context.Context, f []byte) error {
	select {
	case <-m.done:
		return errClosed
	default:
	}
	select {
	case m.out <- append([]byte(nil), f...):
		return nil
	case <-m.done:
		return errClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m *memTransport) Recv(ctx context.Context) ([]byte, error) {
	select {
	case f := <-m.in:
		return f, nil
	case <-m.done:
		return nil, errClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (m *memTransport) Close() error {
	m.once.Do(func() { close(m.done) })
	return nil
}

// testShape is a small model so that tests train in microseconds:
// d = 5*2 + 2 = 12 parameters.
var testShape = logreg.Shape{Features: 5, Classes: 2}

// testKey is the aggregator key of the tests.
func testKey(t testing.TB, seed byte) *envelopetest.Key {
	t.Helper()
	k, err := envelopetest.DeriveKey([32]byte{seed})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// testData returns n examples of testShape with features drawn from src
// and labels by the sign of the first feature (learnable).
func testData(t testing.TB, n int, src noise.Source) logreg.Dataset {
	t.Helper()
	x := make([]float32, n*testShape.Features)
	y := make([]uint8, n)
	for i := range n {
		for j := range testShape.Features {
			x[i*testShape.Features+j] = float32(2*noise.Uniform(src) - 1)
		}
		if x[i*testShape.Features] > 0 {
			y[i] = 1
		}
	}
	d, err := logreg.NewDataset(testShape, x, y)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// testParams is SS-Double with k = 4 of d = 12 coordinates in messages of
// width 1 (M = 4 Report frames), Laplace at eps_l = 1.
func testParams(p float64) wire.Params {
	return wire.Params{
		Protocol:   wire.ProtocolSSDouble,
		Randomizer: wire.RandomizerLaplace,
		D:          uint32(testShape.NumParams()),
		K:          4,
		L:          1,
		Width:      1,
		NP:         10,
		MinBatch:   1,
		EpsL:       1,
		Clip:       1,
		CheckInP:   p,
	}
}

// announce returns a signed Announcement frame for round with params p.
// testDeadline is the last deadline announce gave: each announcement's is a
// millisecond (the wire's precision) after the one before, as the
// aggregator's are (a client acts only on a later deadline).
var (
	testDeadlineMu sync.Mutex
	testDeadline   time.Time
)

func nextDeadline() time.Time {
	testDeadlineMu.Lock()
	defer testDeadlineMu.Unlock()
	testDeadline = later(time.Now().Add(time.Minute).Truncate(time.Millisecond), testDeadline.Add(time.Millisecond))
	return testDeadline
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func announce(t testing.TB, k *envelopetest.Key, round uint64, p wire.Params) []byte {
	t.Helper()
	model := make([]float64, p.D)
	for i := range model {
		model[i] = 0.01 * float64(i%7)
	}
	a := &wire.Announcement{
		Round:    round,
		Deadline: nextDeadline(),
		Params:   p,
		HPKEPub:  k.Public().HPKE,
		Model:    model,
	}
	if err := a.Sign(k); err != nil {
		t.Fatal(err)
	}
	b, err := a.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// eventLog records a client's events; safe for concurrent use.
type eventLog struct {
	mu     sync.Mutex
	events []Event
}

func (l *eventLog) add(e Event) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

func (l *eventLog) count(k EventKind) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.events {
		if e.Kind == k {
			n++
		}
	}
	return n
}

func (l *eventLog) of(k EventKind) []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Event
	for _, e := range l.events {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// newTestClient builds a client pinned to k on n examples, recording its
// events.
func newTestClient(t testing.TB, k *envelopetest.Key, seed uint64, n int) (*Client, *eventLog) {
	t.Helper()
	log := &eventLog{}
	c, err := New(Config{
		Pinned:  k.Public(),
		Data:    testData(t, n, noise.NewSeeded(seed^0x5eed)),
		Train:   logreg.FLAMEConfig(3, 0.1),
		Source:  noise.NewSeeded(seed),
		OnEvent: log.add,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c, log
}

// fakeRelay drives the relay end of a pipe from the test goroutine.
type fakeRelay struct {
	t  testing.TB
	tr *memTransport
}

// send delivers a frame to the client.
func (r *fakeRelay) send(f []byte) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.tr.Send(ctx, f); err != nil {
		r.t.Fatalf("relay send: %v", err)
	}
}

// recv returns the next frame from the client, or nil after wait.
func (r *fakeRelay) recv(wait time.Duration) []byte {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	f, err := r.tr.Recv(ctx)
	if err != nil {
		return nil
	}
	return f
}

// expectReport reads one CheckIn and m Report frames for round and checks
// their types, round, sequence numbers and sizes; it acks every report.
func (r *fakeRelay) expectReport(round uint64, p wire.Params) []*wire.Report {
	r.t.Helper()
	f := r.recv(time.Minute)
	if f == nil {
		r.t.Fatalf("round %d: no check-in", round)
	}
	ci, err := wire.ParseCheckIn(f)
	if err != nil || ci.Round != round {
		r.t.Fatalf("round %d: want check-in, got %x (err %v)", round, f, err)
	}
	m := p.Messages()
	reps := make([]*wire.Report, 0, m)
	for i := range m {
		f := r.recv(time.Minute)
		if f == nil {
			r.t.Fatalf("round %d: report %d of %d missing", round, i, m)
		}
		if len(f) != p.ReportFrameSize() {
			r.t.Fatalf("round %d: report frame of %d bytes, want %d", round, len(f), p.ReportFrameSize())
		}
		rep, err := wire.ParseReport(f, p)
		if err != nil {
			r.t.Fatalf("round %d: %v", round, err)
		}
		if rep.Round != round || int(rep.Seq) != i || int(rep.Count) != m {
			r.t.Fatalf("round %d: report %d has round %d seq %d count %d", round, i, rep.Round, rep.Seq, rep.Count)
		}
		reps = append(reps, rep)
		ack, _ := (&wire.Ack{Round: round, Status: wire.AckAccepted, Received: uint16(i + 1)}).MarshalBinary()
		r.send(ack)
	}
	return reps
}

// expectSilence fails if the client sends anything within wait.
func (r *fakeRelay) expectSilence(wait time.Duration, why string) {
	r.t.Helper()
	if f := r.recv(wait); f != nil {
		r.t.Fatalf("%s: client sent %d bytes (type %x)", why, len(f), f[:min(2, len(f))])
	}
}

// waitFor polls cond until it holds or a minute passes (generous: the
// conditions take milliseconds on an idle machine, and the tests run on
// small shared ones).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// startClient runs c on a fresh pipe and returns the relay side and a
// function that cancels the run and returns Run's error.
func startClient(t testing.TB, c *Client) (*fakeRelay, func() error) {
	t.Helper()
	cl, rl := newPipe(64)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx, cl) }()
	stop := func() error {
		cancel()
		select {
		case err := <-errc:
			return err
		case <-time.After(time.Minute):
			t.Fatal("Run did not return after cancel")
			return nil
		}
	}
	t.Cleanup(func() { cancel() })
	return &fakeRelay{t: t, tr: rl}, stop
}
