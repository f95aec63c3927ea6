package cohort

import (
	"context"
	"errors"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/shared/client"
	"github.com/blanket-fl/blanket/shared/envelope/envelopetest"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/wire"
)

// pipeEnd is one end of an in-memory frame pipe (a client.Transport).
type pipeEnd struct {
	in   <-chan []byte
	out  chan<- []byte
	done chan struct{}
	once *sync.Once
}

var errPipeClosed = errors.New("pipe closed")

func pipe() (a, b *pipeEnd) {
	x, y := make(chan []byte, 8), make(chan []byte, 8)
	done, once := make(chan struct{}), new(sync.Once)
	return &pipeEnd{in: x, out: y, done: done, once: once}, &pipeEnd{in: y, out: x, done: done, once: once}
}

func (p *pipeEnd) Send(ctx context.Context, f []byte) error {
	select {
	case p.out <- f:
		return nil
	case <-p.done:
		return errPipeClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *pipeEnd) Recv(ctx context.Context) ([]byte, error) {
	select {
	case f := <-p.in:
		return f, nil
	case <-p.done:
		return nil, errPipeClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (p *pipeEnd) Close() error { p.once.Do(func() { close(p.done) }); return nil }

// heapBytes is the Go heap's live and unswept objects plus goroutine
// stacks: what the volunteers hold.
func heapBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64() + s[1].Value.Uint64()
}

// BenchmarkVolunteerMemory measures the memory of a simulated volunteer:
// n volunteers (BLANKET_MEM_VOLUNTEERS, default 40; each with make run's
// 20 digits) connected over in-memory pipes (no websocket buffers) take
// part in one secure-summation round at make run's size (the digits task's d, 8,340, 400
// volunteers' parameters). It reports, per volunteer, the peak Go heap
// (objects and stacks, sampled every 2 ms, above the heap before the
// cohort loaded its data) during the round and the heap after it (GC'd),
// for the cohort's default pool (2 x GOMAXPROCS reports in preparation)
// and with no bound (every volunteer preparing at once, the cohort before
// the pool).
//
//	go test -run '^$' -bench VolunteerMemory -benchtime 1x ./scripts/internal/cohort
func BenchmarkVolunteerMemory(b *testing.B) {
	n := 40
	if v, err := strconv.Atoi(os.Getenv("BLANKET_MEM_VOLUNTEERS")); err == nil && v > 0 {
		n = v
	}
	for _, bc := range []struct {
		name    string
		workers int
	}{{"pool", 0}, {"unbounded", -1}} {
		b.Run(bc.name+"/volunteers="+strconv.Itoa(n), func(b *testing.B) {
			for range b.N {
				peak, idle := volunteerRound(b, n, bc.workers)
				b.ReportMetric(peak/float64(n)/(1<<20), "MB-peak/volunteer")
				b.ReportMetric(idle/float64(n)/(1<<20), "MB-idle/volunteer")
			}
		})
	}
}

func volunteerRound(b *testing.B, n, workers int) (peak, idle float64) {
	k, err := envelopetest.DeriveKey([32]byte{9})
	if err != nil {
		b.Fatal(err)
	}
	helper, err := envelopetest.GenerateHelperKey()
	if err != nil {
		b.Fatal(err)
	}
	p, _, err := roundspec.Build(digitsD(b), 400, roundspec.Options{Protocol: wire.ProtocolSecAgg, Sigma: 100, MinBatch: 1})
	if err != nil {
		b.Fatal(err)
	}
	a := &wire.Announcement{Round: 1, Deadline: time.Now().Add(time.Hour), Params: p, HPKEPub: k.Public().HPKE,
		RelayPub: helper.Public(), Model: make([]float64, p.D)}
	if err := a.Sign(k); err != nil {
		b.Fatal(err)
	}
	ann, err := a.MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	base := heapBytes()

	var mu sync.Mutex
	var relays []*pipeEnd
	connected := make(chan struct{}, n)
	dial := func(ctx context.Context, _, _ string) (client.Transport, error) {
		c, r := pipe()
		mu.Lock()
		relays = append(relays, r)
		mu.Unlock()
		connected <- struct{}{}
		return c, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, Config{Relay: "mem://", Key: k.Public(), Clients: n, PerUser: 20, Seed: 1, Dial: dial, Workers: workers})
		done <- err
	}()
	for range n {
		<-connected
	}
	var top atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			if h := heapBytes(); h > top.Load() {
				top.Store(h)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	var shares sync.WaitGroup
	mu.Lock()
	for _, r := range relays {
		shares.Go(func() {
			r.Send(ctx, ann)
			for {
				f, err := r.Recv(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				if typ, _ := wire.PeekType(f); typ == wire.TypeShares {
					return
				}
			}
		})
	}
	mu.Unlock()
	shares.Wait()
	close(stop)
	<-sampled
	runtime.GC()
	after := heapBytes()
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return float64(top.Load()) - float64(base), float64(after) - float64(base)
}
