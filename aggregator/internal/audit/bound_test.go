package audit

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/wire"
)

// TestLowerBound: the live system's bound for the small SS-Topk and
// SS-Double specs (100 trials per hypothesis, phase and choice of
// neighbours; fixed seeds) is reproducible, names its attack when
// positive, states its confidence and trials, charges as Run does, and
// lies below the charge (for a correct charge it exceeds it with
// probability at most 1 - BoundConfidence = 5%; deterministic here).
func TestLowerBound(t *testing.T) {
	if testing.Short() {
		t.Skip("the audit tier runs without -short")
	}
	for _, proto := range []wire.Protocol{wire.ProtocolSSDouble, wire.ProtocolSSTopk} {
		spec := small(t, proto, wire.RandomizerLaplace, 4)
		b, err := LowerBound(context.Background(), spec, 30, 100, 7)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%v: %+v", proto, b)
		again, err := LowerBound(context.Background(), spec, 30, 100, 7)
		if err != nil {
			t.Fatal(err)
		}
		if again != b {
			t.Errorf("%v: not reproducible: %+v, then %+v", proto, b, again)
		}
		if b.Confidence != BoundConfidence || b.Trials != 100 || b.Delta != BoundDelta || b.NP < 10 {
			t.Errorf("%v: %+v", proto, b)
		}
		if (b.Lower > 0) != (b.Attack != "") || b.Lower > b.Charged {
			t.Errorf("%v: %+v", proto, b)
		}
		res, err := Run(spec, Options{Volunteers: 30, Trials: 10, Delta: BoundDelta, Seed: 7})
		if err != nil {
			t.Fatal(err)
		}
		if res.Charged != b.Charged {
			t.Errorf("%v: charged %v, Run charges %v", proto, b.Charged, res.Charged)
		}
	}
}

// TestLowerBoundStops: a cancelled context stops LowerBound with its
// error; secure summation and bad arguments are refused.
func TestLowerBoundStops(t *testing.T) {
	spec := small(t, wire.ProtocolSSDouble, wire.RandomizerLaplace, 4)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := LowerBound(ctx, spec, 30, 100, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if _, err := LowerBound(context.Background(), spec, 1, 100, 1); err == nil {
		t.Error("n = 1 accepted")
	}
	if _, err := LowerBound(context.Background(), spec, 30, 5, 1); err == nil {
		t.Error("5 trials accepted")
	}
	p, _, err := roundspec.Build(24, 30, roundspec.Options{Protocol: wire.ProtocolSecAgg, Sigma: 50})
	if err != nil {
		t.Fatal(err)
	}
	sa, err := roundspec.New(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LowerBound(context.Background(), sa, 30, 100, 1); !errors.Is(err, roundspec.ErrNotShuffle) {
		t.Errorf("secure summation: %v", err)
	}
}

// BenchmarkLowerBound times LowerBound at the live defaults
// (roundspec.Build's: SS-Topk, Laplace, eps_l = 78.5, k = 157, n_p =
// ceil(n/3), l by FLAME Theorem 5) for the 7,850-parameter model, with 10
// trials per hypothesis, phase and choice of neighbours (80 simulated
// rounds). Run: go test -run '^$' -bench LowerBound -benchtime 1x
// ./aggregator/internal/audit/
func BenchmarkLowerBound(b *testing.B) {
	for _, n := range []int{30, 230} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			p, _, err := roundspec.Build(7850, n, roundspec.Options{})
			if err != nil {
				b.Fatal(err)
			}
			spec, err := roundspec.New(p)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := LowerBound(context.Background(), spec, n, 10, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
