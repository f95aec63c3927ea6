package anchor

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blanket-fl/blanket/shared/ledger"
	"github.com/blanket-fl/blanket/shared/wire"
)

// secAggParams is a small secure-summation round whose release the
// relay's target (epsilon 50, delta 1e-5) admits a few times.
func secAggParams() wire.Params {
	return wire.Params{Protocol: wire.ProtocolSecAgg, Randomizer: wire.RandomizerDiscreteGaussian,
		D: 8, K: 1, L: 1, Width: 1, Sigma: 20000, Clip: 1, CheckInP: 1, MinBatch: 2, Quota: 16}
}

// peer is the aggregator's side of the exchange, in process: it holds the
// relay's head it was last given (held) and answers its own (own).
type peer struct {
	mu         sync.Mutex
	held, own  wire.Head
	posts, err int
	down       bool
}

func (p *peer) ask(_ context.Context, body []byte) (*wire.Anchor, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		p.err++
		return nil, errors.New("unreachable")
	}
	if body != nil {
		a, err := wire.ParseAnchor(body)
		if err != nil {
			return nil, err
		}
		p.held = a.Own
		p.posts++
	}
	return &wire.Anchor{Own: p.own, Held: p.held}, nil
}

func openLedger(t *testing.T, dir string) *ledger.Ledger {
	t.Helper()
	l, err := ledger.OpenNoise(dir, ledger.Options{TargetEpsilon: 50, TargetDelta: 1e-5})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestChargeWaitsForTheStartCheck: the ledger is suspended until the
// aggregator has been asked (a charge waits, an announcement is refused
// ErrUnchecked); once the check passes a charge goes through and its head
// is posted to the aggregator.
func TestChargeWaitsForTheStartCheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := openLedger(t, t.TempDir())
		defer l.Close()
		p := &peer{down: true}
		a := New(l, p.ask, slog.New(slog.DiscardHandler), 100*time.Millisecond, time.Second)
		ann := &wire.Announcement{Round: 1, Params: secAggParams()}
		if err := a.Admit(ann); !errors.Is(err, ErrUnchecked) {
			t.Fatalf("admit before the check: %v", err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go a.Loop(ctx)
		charged := make(chan error, 1)
		go func() { charged <- a.Charge(ctx, 1, secAggParams(), 3) }()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		select {
		case err := <-charged:
			t.Fatalf("charged before the check: %v", err)
		default:
		}
		p.mu.Lock()
		p.down = false
		p.mu.Unlock()
		if err := <-charged; err != nil {
			t.Fatal(err)
		}
		if err := a.Admit(&wire.Announcement{Round: 2, Params: secAggParams()}); err != nil {
			t.Errorf("admit after the check: %v", err)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.held != l.Head() || p.held.Count != 1 {
			t.Errorf("the aggregator holds %+v, the ledger's head is %+v", p.held, l.Head())
		}
	})
}

// TestRollbackStaysSuspended: an aggregator holding a relay head ahead of
// the ledger (the relay's state was rolled back) keeps the ledger
// suspended: Check says ledger.ErrRollback and nothing can be charged.
func TestRollbackStaysSuspended(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := openLedger(t, t.TempDir())
		defer l.Close()
		p := &peer{held: wire.Head{Count: 3, Hash: [32]byte{1}}}
		a := New(l, p.ask, slog.New(slog.DiscardHandler), 100*time.Millisecond, time.Second)
		if err := a.Check(t.Context()); !errors.Is(err, ledger.ErrRollback) {
			t.Fatalf("check: %v", err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go a.Loop(ctx)
		synctest.Wait()
		if err := a.Charge(ctx, 1, secAggParams(), 3); err == nil {
			t.Fatal("a rolled-back ledger charged")
		}
		if l.Head().Count != 0 {
			t.Errorf("head %+v after a refused charge", l.Head())
		}
	})
}
