package volunteer

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/shared/client"
	"github.com/blanket-fl/blanket/shared/envelope/envelopetest"
	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/task"
	"github.com/blanket-fl/blanket/shared/wire"
)

// feed is an in-memory client.Transport: Recv returns the frames put on in,
// Send counts what the client sends.
type feed struct {
	in    chan []byte
	bytes int
}

func (f *feed) Send(_ context.Context, b []byte) error { f.bytes += len(b); return nil }
func (f *feed) Close() error                           { return nil }
func (f *feed) Recv(ctx context.Context) ([]byte, error) {
	select {
	case b := <-f.in:
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// mnistTopk is an SS-Topk round on the digits task's model (scatter1's 833
// features: d = 8,340) with FLAME's MNIST settings (k = 157, eps_l = 78.5,
// C = 0.01), with l = 5 groups in messages of width 1.
func mnistTopk() wire.Params {
	return wire.Params{Protocol: wire.ProtocolSSTopk, Randomizer: wire.RandomizerLaplace, D: 8340,
		K: 157, L: 5, Width: 1, NP: 100, MinBatch: 1, EpsL: 78.5, Clip: 0.01, CheckInP: 1}
}

func announce(tb testing.TB, k *envelopetest.Key, round uint64, p wire.Params) []byte {
	tb.Helper()
	a := wire.Announcement{Round: round, Deadline: time.Now().Add(time.Hour + time.Duration(round)*time.Millisecond), Params: p, // later for each round, as the aggregator's
		HPKEPub: k.Public().HPKE, Model: make([]float64, p.D)}
	if err := a.Sign(k); err != nil {
		tb.Fatal(err)
	}
	b, err := a.MarshalBinary()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// roundRunner runs a Client over a feed and returns after each round the
// kind of the event that decided it.
type roundRunner struct {
	c      *client.Client
	f      *feed
	done   chan client.Event
	cancel context.CancelFunc
	exit   chan error
}

func newRoundRunner(tb testing.TB, k *envelopetest.Key, s *Session, data logreg.Dataset, src noise.Source, floor uint64) *roundRunner {
	tb.Helper()
	r := &roundRunner{f: &feed{in: make(chan []byte, 1)}, done: make(chan client.Event, 16), exit: make(chan error, 1)}
	c, err := client.New(client.Config{Pinned: k.Public(), Data: data, Train: Train(task.DigitsRecipe()), Source: src,
		OnEvent: func(e client.Event) {
			if s != nil {
				s.Record(e)
			}
			switch e.Kind {
			case client.EventPrivacy, client.EventFailed, client.EventRejected, client.EventSatOut:
				r.done <- e
			}
		}})
	if err != nil {
		tb.Fatal(err)
	}
	r.c = c
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.exit <- c.Run(ctx, SkipDecided(r.f, floor)) }()
	return r
}

func (r *roundRunner) round(tb testing.TB, frame []byte) client.Event {
	tb.Helper()
	r.f.in <- frame
	return <-r.done
}

func (r *roundRunner) stop(tb testing.TB) {
	tb.Helper()
	r.cancel()
	if err := <-r.exit; !errors.Is(err, context.Canceled) {
		tb.Fatalf("Run: %v", err)
	}
}

// TestSessionAcrossClients: a volunteer who stops after round 1 and starts
// again (a new Client, as blanket.start builds) keeps its privacy total and
// does not report again in round 1 when the relay re-sends it.
func TestSessionAcrossClients(t *testing.T) {
	d := testDigits(t)
	k, err := envelopetest.DeriveKey([32]byte{9})
	if err != nil {
		t.Fatal(err)
	}
	var draw Drawings
	data, err := LocalData(d, &draw, SourceShard, 11)
	if err != nil {
		t.Fatal(err)
	}
	p := mnistTopk()
	var s Session
	r1 := newRoundRunner(t, k, &s, data, noise.NewSeeded(1), s.Floor())
	if e := r1.round(t, announce(t, k, 1, p)); e.Kind != client.EventPrivacy {
		t.Fatalf("round 1 ended with %v (%v)", e.Kind, e.Err)
	}
	sent1 := r1.f.bytes
	if want := wire.CheckInSize + p.Messages()*p.ReportFrameSize(); sent1 != want {
		t.Fatalf("round 1 sent %d bytes, want %d", sent1, want)
	}
	r1.stop(t)
	s.Finish(r1.c)
	eps, _, rounds := s.Privacy()
	if rounds != 1 || eps != p.EpsL || s.Floor() != 1 {
		t.Fatalf("after round 1: eps %v over %d rounds, floor %d", eps, rounds, s.Floor())
	}

	r2 := newRoundRunner(t, k, &s, data, noise.NewSeeded(2), s.Floor())
	r2.f.in <- announce(t, k, 1, p) // re-sent by the relay: dropped
	if e := r2.round(t, announce(t, k, 2, p)); e.Kind != client.EventPrivacy || e.Round != 2 {
		t.Fatalf("round 2 ended with %v round %d (%v)", e.Kind, e.Round, e.Err)
	}
	if r2.f.bytes != sent1 {
		t.Fatalf("second client sent %d bytes, want one report (%d)", r2.f.bytes, sent1)
	}
	rec := s.Note(KindData)
	if rec.Rounds != 2 || rec.Epsilon != 2*p.EpsL {
		t.Fatalf("running totals %v over %d rounds, want %v over 2", rec.Epsilon, rec.Rounds, 2*p.EpsL)
	}
	r2.stop(t)
	s.Finish(r2.c)
	if eps, _, rounds := s.Privacy(); rounds != 2 || eps != 2*p.EpsL || s.Floor() != 2 {
		t.Fatalf("after round 2: eps %v over %d rounds, floor %d", eps, rounds, s.Floor())
	}
}

// BenchmarkLocalRound is one local round of a browser volunteer: train on
// a 20-example shard for 10 epochs, encode with SS-Topk (MNIST, k = 157,
// l = 5), randomize and seal 5 messages of width 157, from the
// announcement's arrival to the last frame handed to the transport. Run it
// under GOOS=js with Node.js (go_js_wasm_exec) for the browser figure.
func BenchmarkLocalRound(b *testing.B) {
	d := testDigits(b)
	k, err := envelopetest.DeriveKey([32]byte{9})
	if err != nil {
		b.Fatal(err)
	}
	var draw Drawings
	data, err := LocalData(d, &draw, SourceShard, 11)
	if err != nil {
		b.Fatal(err)
	}
	p := mnistTopk()
	frames := make([][]byte, b.N)
	for i := range frames {
		frames[i] = announce(b, k, uint64(i+1), p)
	}
	r := newRoundRunner(b, k, nil, data, noise.NewSeeded(1), 0)
	b.ResetTimer()
	for i := range b.N {
		if e := r.round(b, frames[i]); e.Kind != client.EventPrivacy {
			b.Fatalf("round ended with %v (%v)", e.Kind, e.Err)
		}
	}
	b.StopTimer()
	r.stop(b)
}
