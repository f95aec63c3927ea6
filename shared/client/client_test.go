package client

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/internal/stattest"
	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/wire"
)

func TestNewValidates(t *testing.T) {
	k := testKey(t, 1)
	data := testData(t, 8, noise.NewSeeded(1))
	good := Config{Pinned: k.Public(), Data: data, Train: logreg.FLAMEConfig(2, 0.1)}
	if _, err := New(good); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	bad := map[string]func(*Config){
		"no key":        func(c *Config) { c.Pinned = envelope.PublicKey{} },
		"no data":       func(c *Config) { c.Data = logreg.Dataset{} },
		"zero training": func(c *Config) { c.Train = logreg.TrainConfig{} },
		"NaN rate":      func(c *Config) { c.Train.LearningRate = math.NaN() },
	}
	for name, mutate := range bad {
		cfg := good
		mutate(&cfg)
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestAlteredAnnouncementRejected: a flipped model byte, a foreign signing
// key and a foreign HPKE key are each rejected with an event and cause no
// frame at all; the next genuine announcement is then answered, and its
// check-in is the first frame the relay sees.
func TestAlteredAnnouncementRejected(t *testing.T) {
	k := testKey(t, 1)
	other := testKey(t, 2)
	c, log := newTestClient(t, k, 1, 10)
	relay, stop := startClient(t, c)
	p := testParams(1)

	altered := announce(t, k, 1, p)
	altered[116+3] ^= 0x01 // a bit of the model's first coordinate
	relay.send(altered)

	relay.send(announce(t, other, 2, p)) // signed by another aggregator

	foreignHPKE := &wire.Announcement{Round: 3, Deadline: time.Now().Add(time.Minute), Params: p,
		HPKEPub: other.Public().HPKE, Model: make([]float64, p.D)}
	if err := foreignHPKE.Sign(k); err != nil { // the pinned key signs, but seals would go to another key
		t.Fatal(err)
	}
	fb, _ := foreignHPKE.MarshalBinary()
	relay.send(fb)

	relay.send([]byte{1, 1, 0}) // truncated announcement

	waitFor(t, "four rejections", func() bool { return log.count(EventRejected) == 4 })
	for _, e := range log.of(EventRejected) {
		if e.Err == nil {
			t.Errorf("rejection of round %d without a reason", e.Round)
		}
	}
	if n := log.count(EventAnnouncement); n != 0 {
		t.Fatalf("%d announcements accepted, want 0", n)
	}
	if got := c.LastRound(); got != 0 {
		t.Fatalf("rejected announcements moved the last round to %d", got)
	}
	relay.send(announce(t, k, 4, p))
	reps := relay.expectReport(4, p)
	// The values open with the aggregator's key for this round only.
	for _, r := range reps {
		vals, err := k.OpenValues(4, r.Sealed, make([]float64, p.Width))
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		for _, v := range vals {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("non-finite value %v", v)
			}
		}
		if _, err := k.OpenValues(5, r.Sealed, nil); err == nil {
			t.Fatal("a report sealed for round 4 opened for round 5")
		}
	}
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v, want context.Canceled", err)
	}
	rej := log.of(EventRejected)
	if !errors.Is(rej[1].Err, wire.ErrSignature) || !errors.Is(rej[2].Err, wire.ErrSignature) {
		t.Errorf("foreign key rejections: %v, %v; want wire.ErrSignature", rej[1].Err, rej[2].Err)
	}
}

// TestOneReportPerRound: the same round announced again (a relay resend),
// an older round replayed after a newer one, and a resend after the coin
// said no never produce a second report; a new class's rounds, numbered
// from 1 again with later deadlines, are taken part in.
func TestOneReportPerRound(t *testing.T) {
	k := testKey(t, 1)
	c, log := newTestClient(t, k, 2, 10)
	relay, stop := startClient(t, c)
	p := testParams(1)

	a1 := announce(t, k, 1, p)
	relay.send(a1)
	relay.expectReport(1, p)
	relay.send(a1)
	relay.send(announce(t, k, 1, p)) // re-signed, same round
	relay.expectSilence(100*time.Millisecond, "round 1 announced again")

	a2 := announce(t, k, 2, p)
	relay.send(a2)
	relay.expectReport(2, p)
	relay.send(a1) // replay of an older round
	relay.expectSilence(100*time.Millisecond, "round 1 replayed after round 2")
	waitFor(t, "stale rejection", func() bool { return log.count(EventRejected) == 1 })
	if err := log.of(EventRejected)[0].Err; !errors.Is(err, ErrStale) {
		t.Fatalf("replay rejected with %v, want ErrStale", err)
	}
	// A new class of the same aggregator numbers its rounds from 1
	// again, with later deadlines: the client takes part without a reload
	// (issue 23: volunteers who stayed connected never joined a new
	// class). The old class's announcements replayed in it stay stale
	// (earlier deadlines), before and after the new class reaches their
	// round numbers: no round is reported twice.
	relay.send(announce(t, k, 1, p))
	relay.expectReport(1, p)
	relay.send(a1)
	relay.send(a2)
	relay.expectSilence(100*time.Millisecond, "the old class's rounds replayed in the new class")
	waitFor(t, "stale rejection", func() bool { return log.count(EventRejected) == 2 })
	relay.send(announce(t, k, 2, p))
	relay.expectReport(2, p)
	relay.send(a2)
	relay.send(a1)
	relay.expectSilence(100*time.Millisecond, "the old class's rounds replayed after the new class's round 2")
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
	if n := log.count(EventSent); n != 4 {
		t.Fatalf("%d reports sent, want 4", n)
	}
	if n := log.count(EventAck); n != 4*p.Messages() {
		t.Fatalf("%d acks seen, want %d", n, 4*p.Messages())
	}
}

// TestFrameSizesIndependentOfData: clients with different data (and
// different amounts of it) send frames of identical sizes, equal to the
// round's fixed size, for every protocol and randomizer.
func TestFrameSizesIndependentOfData(t *testing.T) {
	k := testKey(t, 1)
	simple := testParams(1)
	simple.Protocol, simple.K = wire.ProtocolSSSimple, simple.D
	topk := testParams(1)
	topk.Protocol, topk.K, topk.L = wire.ProtocolSSTopk, 3, 2
	rgb := testParams(1)
	rgb.Randomizer, rgb.Buckets = wire.RandomizerRGB, 5
	gauss := testParams(1)
	gauss.Randomizer, gauss.DeltaL = wire.RandomizerGaussian, 1e-5
	for _, p := range []wire.Params{testParams(1), simple, topk, rgb, gauss} {
		if err := p.Validate(); err != nil {
			t.Fatalf("%v/%v: %v", p.Protocol, p.Randomizer, err)
		}
		var sizes []int
		for i, n := range []int{1, 7, 40} {
			c, log := newTestClient(t, k, uint64(10+i), n)
			relay, stop := startClient(t, c)
			relay.send(announce(t, k, 1, p))
			reps := relay.expectReport(1, p) // checks every frame's size
			for _, r := range reps {
				b, _ := r.MarshalBinary()
				sizes = append(sizes, len(b))
			}
			if err := stop(); !errors.Is(err, context.Canceled) {
				t.Fatal(err)
			}
			sent := log.of(EventSent)
			if len(sent) != 1 || sent[0].FrameBytes != p.ReportFrameSize() || sent[0].Messages != p.Messages() {
				t.Fatalf("sent events %+v, want one of %d frames of %d bytes", sent, p.Messages(), p.ReportFrameSize())
			}
			if !(sent[0].NoiseStd > 0) {
				t.Fatalf("noise std %v", sent[0].NoiseStd)
			}
			if w := sent[0].Work; !(w.Train > 0 && w.Encode > 0 && w.Seal > 0 && w.Account >= 0) {
				t.Fatalf("work %+v: a phase not measured", w)
			}
		}
		for _, s := range sizes {
			if s != sizes[0] {
				t.Fatalf("%v/%v: frame sizes %v differ", p.Protocol, p.Randomizer, sizes)
			}
		}
	}
}

// TestCheckInRate: over many rounds the client's own coin checks in at
// rate p. 1,000 rounds at p = 0.3: the count is Binomial(1000, 0.3), sd
// 14.5; the test allows ZAlpha1e6 = 4.75 sd, so a correct coin fails it with
// probability about 2e-6 for a random seed (the seed is fixed, so the test
// is deterministic). Every checked-in round sends exactly one report.
func TestCheckInRate(t *testing.T) {
	const rounds, p = 1000, 0.3
	k := testKey(t, 1)
	c, log := newTestClient(t, k, 3, 5)
	relay, stop := startClient(t, c)
	params := testParams(p)
	var mu sync.Mutex
	var frames [][]byte
	go func() {
		for {
			f := relay.recv(time.Hour)
			if f == nil {
				return
			}
			mu.Lock()
			frames = append(frames, f)
			mu.Unlock()
		}
	}()
	// Round r+1 is announced once round r is decided, as the aggregator
	// does (an announcement arriving while a report is prepared drops it:
	// TestSupersededRoundDropped).
	for r := uint64(1); r <= rounds; r++ {
		relay.send(announce(t, k, r, params))
		waitFor(t, "round decided", func() bool { return log.count(EventSatOut)+log.count(EventSent) == int(r) })
	}
	waitFor(t, "all events", func() bool { return log.count(EventSatOut)+log.count(EventSent) == rounds })
	in := log.count(EventCheckedIn)
	waitFor(t, "all frames", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(frames) == in*(1+params.Messages())
	})
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	relay.tr.Close()
	if in+log.count(EventSatOut) != rounds {
		t.Fatalf("%d in + %d out != %d rounds", in, log.count(EventSatOut), rounds)
	}
	sd := math.Sqrt(rounds * p * (1 - p))
	if z := math.Abs(float64(in)-rounds*p) / sd; z > stattest.ZAlpha1e6 {
		t.Fatalf("checked in %d of %d rounds at p = %v (z = %.2f)", in, rounds, p, z)
	}
	perRound := map[uint64]int{}
	mu.Lock()
	defer mu.Unlock()
	for _, f := range frames {
		typ, _ := wire.PeekType(f)
		if typ == wire.TypeCheckIn {
			ci, _ := wire.ParseCheckIn(f)
			perRound[ci.Round]++
		}
	}
	if len(perRound) != in {
		t.Fatalf("%d check-in frames, %d check-in events", len(perRound), in)
	}
	for r, n := range perRound {
		if n != 1 {
			t.Fatalf("round %d: %d check-ins", r, n)
		}
	}
	eps, _, nr := c.Privacy()
	if nr != in || math.Abs(eps-float64(in)*params.EpsL) > 1e-9*float64(in) {
		t.Fatalf("privacy: eps %v over %d rounds, want %v over %d", eps, nr, float64(in)*params.EpsL, in)
	}
}

// TestParamsMismatchRejected: a signed announcement for a model of another
// dimension is rejected, not answered.
func TestParamsMismatchRejected(t *testing.T) {
	k := testKey(t, 1)
	c, log := newTestClient(t, k, 4, 10)
	relay, stop := startClient(t, c)
	p := testParams(1)
	p.D, p.NP = 20, 10
	relay.send(announce(t, k, 1, p))
	relay.expectSilence(100*time.Millisecond, "wrong dimension")
	waitFor(t, "rejection", func() bool { return log.count(EventRejected) == 1 })
	if err := log.of(EventRejected)[0].Err; !errors.Is(err, ErrParams) {
		t.Fatalf("got %v, want ErrParams", err)
	}
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}

// TestPrivacyComposes: the client's own guarantee is the basic composition
// of its reports' local guarantees, (sum eps_l, sum delta_l).
func TestPrivacyComposes(t *testing.T) {
	k := testKey(t, 1)
	c, log := newTestClient(t, k, 5, 10)
	relay, stop := startClient(t, c)
	lap := testParams(1)
	gauss := testParams(1)
	gauss.Randomizer, gauss.DeltaL, gauss.EpsL = wire.RandomizerGaussian, 1e-6, 2
	relay.send(announce(t, k, 1, lap))
	relay.expectReport(1, lap)
	relay.send(announce(t, k, 2, gauss))
	relay.expectReport(2, gauss)
	relay.send(announce(t, k, 3, gauss))
	relay.expectReport(3, gauss)
	waitFor(t, "privacy events", func() bool { return log.count(EventPrivacy) == 3 })
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	eps, delta, n := c.Privacy()
	if n != 3 || math.Abs(eps-5) > 1e-9 || math.Abs(delta-2e-6) > 1e-15 {
		t.Fatalf("privacy (%v, %v) over %d rounds, want (5, 2e-6) over 3", eps, delta, n)
	}
	last := log.of(EventPrivacy)[2]
	if last.Epsilon != eps || last.Rounds != 3 {
		t.Fatalf("last privacy event %+v", last)
	}
}

// TestAckErrorReported: a refusing Ack becomes an EventAck with ErrAck and
// does not end Run.
func TestAckErrorReported(t *testing.T) {
	k := testKey(t, 1)
	c, log := newTestClient(t, k, 6, 10)
	relay, stop := startClient(t, c)
	ack, _ := (&wire.Ack{Round: 7, Status: wire.AckTooLate}).MarshalBinary()
	relay.send(ack)
	relay.send([]byte{9, 9}) // garbage is logged and skipped
	waitFor(t, "ack event", func() bool { return log.count(EventAck) == 1 })
	e := log.of(EventAck)[0]
	if !errors.Is(e.Err, ErrAck) || e.AckStatus != wire.AckTooLate || e.Round != 7 {
		t.Fatalf("ack event %+v", e)
	}
	p := testParams(1)
	relay.send(announce(t, k, 1, p))
	relay.expectReport(1, p)
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}

// TestRunCancel: Run blocked in Recv returns ctx's error promptly, and a
// second concurrent Run is refused.
func TestRunCancel(t *testing.T) {
	k := testKey(t, 1)
	c, _ := newTestClient(t, k, 7, 10)
	cl, _ := newPipe(1)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx, cl) }()
	waitFor(t, "Run to start", func() bool { return c.running.Load() })
	if err := c.Run(context.Background(), cl); !errors.Is(err, ErrBusy) {
		t.Fatalf("concurrent Run: %v, want ErrBusy", err)
	}
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run returned %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run ignored cancellation")
	}
}

// TestRunTransportError: a transport failure is returned to the caller,
// wrapped.
func TestRunTransportError(t *testing.T) {
	k := testKey(t, 1)
	c, _ := newTestClient(t, k, 8, 10)
	cl, rl := newPipe(1)
	rl.Close()
	if err := c.Run(context.Background(), cl); !errors.Is(err, errClosed) {
		t.Fatalf("Run returned %v, want the transport's error", err)
	}
}
