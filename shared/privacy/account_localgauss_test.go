package privacy

import (
	"math"
	"testing"

	"github.com/blanket-fl/blanket/shared/randomizer"
)

// TestLocalGaussianMuCoversRandomizer: the accountant's bound on 1/σ0 is
// never below the randomizer's calibrated 1/σ0 (it would undercharge),
// and within 1e-6 of it.
func TestLocalGaussianMuCoversRandomizer(t *testing.T) {
	for _, c := range []struct{ eps, delta float64 }{{0.5, 1e-5 / 157}, {0.5, 1e-6 / 157}, {1, 1e-5}, {0.01, 1e-8}, {8, 1e-3}, {78.5 / 7850, 1e-6 / 7850}} {
		sigma, err := randomizer.GaussianSigma(c.eps, c.delta, 1)
		if err != nil {
			t.Fatal(err)
		}
		mu, err := gaussianMuBound(c.eps, c.delta)
		if err != nil {
			t.Fatal(err)
		}
		if mu < 1/sigma || mu > (1+1e-6)/sigma {
			t.Errorf("eps0 %v delta0 %v: mu bound %v, randomizer 1/sigma %v", c.eps, c.delta, mu, 1/sigma)
		}
	}
}

// TestLocalGaussianRow: SS-Double with the Gaussian randomizer at
// -deltal 1e-5 (eps0 = 78.5/157, delta0 = 1e-5/157, the release on which
// the aggregator used to exit after round 1): the local Gaussian row
// certifies every one of 5 rounds at the target delta 1e-5, growing, and
// is what the ledger's Session charges (the only proven row); one round of
// one coordinate costs at most eps0 at delta0 (the randomizer's own
// calibration), and c coordinates at most basic composition's c·eps0 at
// c·delta0; Account and Session agree; SS-Topk (data-dependent index
// sets) and the Laplace randomizer get no such row.
func TestLocalGaussianRow(t *testing.T) {
	rel := func(round int) Release {
		return Release{Round: round, Protocol: ProtocolSSDouble, Randomizer: RandomizerGaussian,
			Eps0: 0.5, Delta0: 1e-5 / 157, D: 7850, K: 157, N: 200, NP: 20}
	}
	find := func(rep Report) (AccountRow, int) {
		for i, r := range rep.Rows {
			if r.Method == localGaussMethod {
				return r, i
			}
		}
		return AccountRow{}, -1
	}
	s, err := NewSession(1e-5)
	if err != nil {
		t.Fatal(err)
	}
	var rels []Release
	prev := 0.0
	for r := 1; r <= 5; r++ {
		var rep Report
		rels = append(rels, rel(r))
		if s, rep, err = s.With(rel(r)); err != nil {
			t.Fatal(err)
		}
		row, i := find(rep)
		if i < 0 || !row.Valid || rep.Tightest != i || !(row.Epsilon > prev) || row.Delta != 1e-5 {
			t.Fatalf("round %d: row %+v at %d, tightest %d, previous eps %v", r, row, i, rep.Tightest, prev)
		}
		prev = row.Epsilon
		acc, err := Account(rels, 1e-5)
		if err != nil {
			t.Fatal(err)
		}
		if arow, _ := find(acc); math.Abs(arow.Epsilon-row.Epsilon) > 1e-12*row.Epsilon {
			t.Errorf("round %d: Account %v, Session %v", r, arow.Epsilon, row.Epsilon)
		}
	}
	t.Logf("5 rounds of ss-double/gaussian at delta_l 1e-5: eps %.4g at delta 1e-5 (basic composition: %g at %g)", prev, 5*78.5, 5e-5)
	one := Release{Round: 1, Protocol: ProtocolSSDouble, Randomizer: RandomizerGaussian, Eps0: 0.5, Delta0: 1e-7, D: 10, K: 1, N: 10, NP: 10}
	if rep, err := Account([]Release{one}, 1e-7); err != nil {
		t.Fatal(err)
	} else if row, i := find(rep); i < 0 || row.Epsilon > 0.5*(1+1e-6) {
		t.Errorf("one coordinate at delta0: %+v, want at most eps0 0.5", row)
	}
	if rep, err := Account([]Release{rel(1)}, 157*(1e-5/157)); err != nil {
		t.Fatal(err)
	} else if row, i := find(rep); i < 0 || row.Epsilon > 78.5 {
		t.Errorf("157 coordinates: %+v, want at most 78.5", row)
	}
	for _, r := range []Release{
		{Round: 1, Protocol: ProtocolSSTopk, Randomizer: RandomizerGaussian, Eps0: 0.5, Delta0: 1e-7, D: 10, K: 2, L: 2, N: 10, NP: 10},
		{Round: 1, Protocol: ProtocolSSDouble, Randomizer: RandomizerLaplace, Eps0: 0.5, D: 10, K: 2, N: 10, NP: 10},
	} {
		rep, err := Account([]Release{r}, 1e-5)
		if err != nil {
			t.Fatal(err)
		}
		if _, i := find(rep); i >= 0 {
			t.Errorf("%s/%s: local Gaussian row present", r.Protocol, r.Randomizer)
		}
	}
}
