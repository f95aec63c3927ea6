package privacy

import (
	"math"
	"strings"
	"testing"

	"github.com/blanket-fl/blanket/shared/privacy/pld"
)

// makeRunNormBound is PINE's norm bound Δ (fixed-point units) at make
// run's clip C = 0.3 on the digits (d = 7850), as `go run ./aggregator/lab
// privacy -preset secagg` prints it.
const makeRunNormBound = 39367

// pairRow returns Account's dominating-pair row and RDP replace-one row
// for rels.
func pairRow(t *testing.T, rels []Release, delta float64) (pair, rdpRow AccountRow) {
	t.Helper()
	rep, err := Account(rels, delta)
	if err != nil {
		t.Fatal(err)
	}
	var okP, okR bool
	for _, r := range rep.Rows {
		switch {
		case strings.HasPrefix(r.Method, "exact Gaussian dominating pair, discrete Gaussian secure aggregation (replace-one)"):
			pair, okP = r, true
		case strings.HasPrefix(r.Method, "RDP discrete Gaussian secure aggregation (replace-one)"):
			rdpRow, okR = r, true
		}
	}
	if !okP || !okR {
		t.Fatalf("rows %+v", rep.Rows)
	}
	return pair, rdpRow
}

// exactGaussianEps is an independent computation of the exact ε(δ) of
// the continuous Gaussian pair N(0, 1) vs N(mu, 1): bisection (60 steps)
// on Balle and Wang's (ICML 2018) Theorem 8, δ(ε) = Φ(μ/2 − ε/μ) −
// e^ε Φ(−μ/2 − ε/μ), written here with math.Erfc directly (not
// pld.GaussianDelta, which the row uses).
func exactGaussianEps(mu, delta float64) float64 {
	phi := func(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }
	d := func(e float64) float64 { return phi(mu/2-e/mu) - math.Exp(e)*phi(-mu/2-e/mu) }
	lo, hi := 0.0, 1.0
	for d(hi) > delta {
		lo, hi = hi, 2*hi
	}
	for range 60 {
		mid := (lo + hi) / 2
		if d(mid) > delta {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// TestSecAggPairMatchesExactGaussian: the dominating-pair row is an upper
// bound on, and within 1% of, the exact ε of the continuous Gaussian with
// the worst replace-one shift 2Δ at the same σ composed over T rounds
// (μ = 2Δ√T/σ; Balle-Wang Thm 8, computed independently by
// exactGaussianEps), and within 1% of the numerical PLD of that Gaussian
// composed by FFT (pld.Gaussian, ConnectDots, SelfCompose: a second
// independent computation); it is below the RDP row. Sample: Δ = 39,367
// (make run's norm bound), σ/Δ ∈ {1.5, 2.5, 5, 20}, T ∈ {1, 5, 10, 100},
// δ ∈ {1e-5, 1e-8}, d = 7850, q = 1: 32 cases.
func TestSecAggPairMatchesExactGaussian(t *testing.T) {
	const sens = makeRunNormBound
	for _, ratio := range []float64{1.5, 2.5, 5, 20} {
		sigma := ratio * sens
		for _, T := range []int{1, 5, 10, 100} {
			rels := make([]Release, T)
			for i := range rels {
				rels[i] = Release{Round: i + 1, Protocol: ProtocolSecAgg, Randomizer: RandomizerDiscreteGaussian, D: 7850, N: 400,
					SecAggSigma: sigma, SecAggSensitivity: sens, CheckInRate: 1}
			}
			for _, delta := range []float64{1e-5, 1e-8} {
				pair, rdpRow := pairRow(t, rels, delta)
				exact := exactGaussianEps(2*sens*math.Sqrt(float64(T))/sigma, delta)
				if !pair.Valid || pair.Epsilon < exact || pair.Epsilon > 1.01*exact {
					t.Errorf("σ/Δ=%v T=%d δ=%g: pair row %+v, exact Gaussian %v", ratio, T, delta, pair, exact)
				}
				if !rdpRow.Valid || !(pair.Epsilon < rdpRow.Epsilon) {
					t.Errorf("σ/Δ=%v T=%d δ=%g: pair %v not below RDP %v", ratio, T, delta, pair.Epsilon, rdpRow.Epsilon)
				}
				p, err := pld.Gaussian(sigma, 2*sens, pld.Options{Width: 1e-3, Method: pld.ConnectDots})
				if err == nil && T > 1 {
					p, err = p.SelfCompose(T)
				}
				var pe float64
				if err == nil {
					pe, err = p.Epsilon(delta)
				}
				if err != nil || math.Abs(pair.Epsilon-pe) > 0.01*pe {
					t.Errorf("σ/Δ=%v T=%d δ=%g: pair %v, FFT PLD %v (%v)", ratio, T, delta, pair.Epsilon, pe, err)
				}
			}
		}
	}
}

// TestSecAggPairDominatesDiscrete checks the domination claim itself on
// the discrete mechanism, where it can be computed exactly: for d = 2 the
// hockey-stick divergence H_{e^ε}(N_Z(0, σ²)² ‖ N_Z(v, σ²)²) is a lattice
// sum (over the box [−14σ, 14σ]², outside which each distribution has
// mass below 1e-40, added as slack), and must be at most the pair's
// δ(ε) = (1−θ)·δ_G(2Δ/τ, ε) + θ for every integer v with ‖v‖₂ ≤ 2Δ,
// including shifts off the axes whose 1-D projection ⟨Z, v⟩ is not a
// discrete Gaussian ((7,1), (6,3), (5,5)). Sample: σ ∈ {4.5, 8}, 2Δ =
// √50 and √65, ε ∈ {0, 0.25, ..., 4} (17 values), 5 and 4 shifts.
func TestSecAggPairDominatesDiscrete(t *testing.T) {
	for _, c := range []struct {
		sigma, shift2 float64
		shifts        [][2]int
	}{
		{4.5, 50, [][2]int{{7, 1}, {5, 5}, {6, 3}, {7, 0}, {1, 1}}},
		{8, 65, [][2]int{{8, 1}, {7, 4}, {8, 0}, {4, 4}}},
	} {
		sens := math.Sqrt(c.shift2) / 2
		mu, logKeep, err := secAggPairRound(c.sigma, sens, 2)
		if err != nil {
			t.Fatal(err)
		}
		theta := -math.Expm1(logKeep)
		B := int(math.Ceil(14 * c.sigma))
		w := make([]float64, 2*B+1+64) // 1-D weights on [−B, B+64], normalized over Z
		norm := 0.0
		for j := -2000; j <= 2000; j++ {
			norm += math.Exp(-float64(j*j) / (2 * c.sigma * c.sigma))
		}
		for i := range w {
			j := float64(i - B)
			w[i] = math.Exp(-j*j/(2*c.sigma*c.sigma)) / norm
		}
		p := func(x int) float64 { return w[x+B] }
		worst := 0.0
		for _, v := range c.shifts {
			if float64(v[0]*v[0]+v[1]*v[1]) > c.shift2 {
				t.Fatalf("shift %v above 2Δ", v)
			}
			for k := 0; k <= 16; k++ {
				eps := 0.25 * float64(k)
				g := math.Exp(eps)
				h := 0.0
				for x := -B; x <= B; x++ {
					for y := -B; y <= B; y++ {
						// P = N_Z(0)², Q = N_Z(v)²: Q(x, y) = P(x−v0, y−v1).
						q := 0.0
						if x-v[0] >= -B && y-v[1] >= -B {
							q = p(x-v[0]) * p(y-v[1])
						}
						h += max(0, p(x)*p(y)-g*q)
					}
				}
				h += 1e-40
				bound := (1-theta)*pld.GaussianDelta(mu, eps) + theta
				if h > bound {
					t.Errorf("σ=%v v=%v ε=%v: discrete δ %v above the pair's %v", c.sigma, v, eps, h, bound)
				}
				if h > 1e-6 {
					worst = max(worst, h/bound)
				}
			}
		}
		t.Logf("σ=%v: largest discrete δ / pair δ = %.4f", c.sigma, worst)
	}
}

// TestSecAggPairSmoothingBound checks the two numerical facts the pair
// rests on (secagg_pair.go, step 2): thetaSum(s) bounds η(s) = 2 Σ_{m≥1}
// e^{−2π²s²m²} (summed directly to m = 60) and is within 0.1% of it for
// s ≥ 0.5; and |ρ_r(Z − y)/(√(2π) r) − 1| ≤ η(r) at 1000 points y ∈
// [0, 1) for r ∈ {0.3, 0.5, 0.8} (values where η is large enough for a
// violation to show in float64).
func TestSecAggPairSmoothingBound(t *testing.T) {
	for _, s := range []float64{0.2, 0.3, 0.5, 0.8, 1, 2} {
		direct := 0.0
		for m := 1; m <= 60; m++ {
			direct += 2 * math.Exp(-2*math.Pi*math.Pi*s*s*float64(m*m))
		}
		if b := thetaSum(s); b < direct || (s >= 0.5 && b > 1.001*direct) {
			t.Errorf("s=%v: thetaSum %v, direct %v", s, b, direct)
		}
	}
	for _, r := range []float64{0.3, 0.5, 0.8} {
		eta := thetaSum(r)
		for i := range 1000 {
			y := float64(i) / 1000
			sum := 0.0
			for j := -60; j <= 60; j++ {
				sum += math.Exp(-(float64(j) - y) * (float64(j) - y) / (2 * r * r))
			}
			if dev := math.Abs(sum/(math.Sqrt(2*math.Pi)*r) - 1); dev > eta*(1+1e-9)+1e-15 {
				t.Errorf("r=%v y=%v: deviation %v above η %v", r, y, dev, eta)
			}
		}
	}
}

// TestSecAggPairRounds: the Session's incremental row equals Account's
// (rounds with different σ and Δ composed in μ² and ln(1−θ)); at q < 1
// the row is valid and equals the q = 1 row (no amplification claimed),
// below the un-amplified RDP row; a σ too small for the smoothing bound
// makes the row invalid, not wrong.
func TestSecAggPairRounds(t *testing.T) {
	rels := []Release{secAggRelease(1, 300, 138, 1), secAggRelease(2, 500, 100, 1), secAggRelease(3, 300, 138, 1)}
	acc, _ := pairRow(t, rels, 1e-6)
	s, err := NewSession(1e-6)
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	for _, r := range rels {
		if s, rep, err = s.With(r); err != nil {
			t.Fatal(err)
		}
	}
	var ses *AccountRow
	for i := range rep.Rows {
		if rep.Rows[i].Method == acc.Method {
			ses = &rep.Rows[i]
		}
	}
	if ses == nil || !ses.Valid || math.Abs(ses.Epsilon-acc.Epsilon) > 1e-12*acc.Epsilon || rep.Rows[rep.Tightest].Method != acc.Method {
		t.Fatalf("session row %+v (tightest %d), Account %+v", ses, rep.Tightest, acc)
	}
	mu2 := 0.0
	for _, r := range rels {
		mu2 += 4 * r.SecAggSensitivity * r.SecAggSensitivity / (r.SecAggSigma * r.SecAggSigma)
	}
	if exact := exactGaussianEps(math.Sqrt(mu2), 1e-6); acc.Epsilon < exact || acc.Epsilon > 1.01*exact {
		t.Errorf("heterogeneous rounds: pair %v, exact %v", acc.Epsilon, exact)
	}

	full, _ := pairRow(t, []Release{secAggRelease(1, 300, 138, 1)}, 1e-5)
	part, rdpPart := pairRow(t, []Release{secAggRelease(1, 300, 138, 0.1)}, 1e-5)
	if !part.Valid || part.Epsilon != full.Epsilon || !(part.Epsilon < rdpPart.Epsilon) {
		t.Errorf("q = 0.1: pair %+v, q = 1 pair %v, RDP %v", part, full.Epsilon, rdpPart.Epsilon)
	}

	tiny, _ := pairRow(t, []Release{secAggRelease(1, 0.5, 0.1, 1)}, 1e-5)
	if tiny.Valid {
		t.Errorf("σ = 0.5: pair row valid %+v, want invalid (η(σ/2) too large)", tiny)
	}
}

// TestSecAggPairCharge is the measurement (docs/accounting.md):
// make run's replace-one charge before (RDP row) and after (tightest row)
// at the σ the old accountant calibrated, and the old and new calibrated
// σ, for T = 5 rounds (make run) and T = 10, Δ = 39,367, q = 1, ε = 4,
// δ = 1e-5, d = 7850. It asserts the goal: at the old σ the charge
// is at most 3.75 where the RDP row charges 4.00. Run with -v to print:
//
//	go test ./shared/privacy/ -run TestSecAggPairCharge -v
func TestSecAggPairCharge(t *testing.T) {
	const sens, delta, target = makeRunNormBound, 1e-5, 4.0
	for _, T := range []int{5, 10} {
		rdpOnly := func(sigma float64) (float64, error) {
			r := secAggRelease(1, sigma, sens, 1)
			c, err := secAggRoundCurve(r)
			if err != nil {
				return 0, err
			}
			c2 := secAggReplaceCurve(r)
			for j := range c.Eps {
				c.Eps[j] *= float64(T)
				c2[j] *= float64(T)
			}
			row := secAggReplaceRow(c.Eps, c2, nil, T, delta, true)
			return row.Epsilon, nil
		}
		oldSigma, err := calibrateSigma(target, sens, rdpOnly)
		if err != nil {
			t.Fatal(err)
		}
		newSigma, err := CalibrateSecAggSigmaReplaceOne(target, delta, T, 1, sens)
		if err != nil {
			t.Fatal(err)
		}
		rels := make([]Release, T)
		for i := range rels {
			rels[i] = Release{Round: i + 1, Protocol: ProtocolSecAgg, Randomizer: RandomizerDiscreteGaussian, D: 7850, N: 400,
				SecAggSigma: oldSigma, SecAggSensitivity: sens, CheckInRate: 1}
		}
		rep, err := Account(rels, delta)
		if err != nil || rep.Tightest < 0 {
			t.Fatalf("T=%d: %v", T, err)
		}
		pair, rdpRow := pairRow(t, rels, delta)
		after := rep.Rows[rep.Tightest]
		t.Logf("T=%d: old sigma %.0f: RDP row charges %.4f, the ledger's tightest row (%s) %.4f; calibrated sigma old %.0f -> new %.0f (%.2f%%)",
			T, oldSigma, rdpRow.Epsilon, after.Method, after.Epsilon, oldSigma, newSigma, 100*(newSigma/oldSigma-1))
		if math.Abs(rdpRow.Epsilon-target) > 1e-3 || after.Epsilon > 3.75 || after.Method != pair.Method {
			t.Errorf("T=%d: before %v, after %v by %q", T, rdpRow.Epsilon, after.Epsilon, after.Method)
		}
		if e, err := SecAggReplaceOneEpsilon(newSigma, sens, 1, T, delta); err != nil || e > target || !(newSigma < 0.95*oldSigma) {
			t.Errorf("T=%d: new sigma %v gives %v (%v); old sigma %v", T, newSigma, e, err, oldSigma)
		}
		if e, _ := SecAggReplaceOneEpsilon(0.999*newSigma, sens, 1, T, delta); e <= target {
			t.Errorf("T=%d: 0.999 of the new sigma still meets the target: %v", T, e)
		}
	}
}

// BenchmarkSecAggPairRound measures what the servers and volunteers pay
// per round for the secure-summation rows: composing round 6 onto a
// Session of 5 rounds at make run's setting (all rows, the RDP ones
// included), and the dominating-pair row alone. Run:
//
//	go test ./shared/privacy/ -run '^$' -bench SecAggPairRound
func BenchmarkSecAggPairRound(b *testing.B) {
	rel := func(round int) Release {
		return Release{Round: round, Protocol: ProtocolSecAgg, Randomizer: RandomizerDiscreteGaussian, D: 7850, N: 400,
			SecAggSigma: 190344, SecAggSensitivity: makeRunNormBound, CheckInRate: 1}
	}
	b.Run("session-round", func(b *testing.B) {
		s, err := NewSession(1e-5)
		if err != nil {
			b.Fatal(err)
		}
		for r := 1; r <= 5; r++ {
			if s, _, err = s.With(rel(r)); err != nil {
				b.Fatal(err)
			}
		}
		b.ResetTimer()
		for b.Loop() {
			if _, _, err := s.With(rel(6)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("pair-row", func(b *testing.B) {
		runs := []run{{r: rel(1), count: 6}}
		for b.Loop() {
			if row := secAggPairRuns(runs, 1e-5); !row.Valid {
				b.Fatal(row.Reason)
			}
		}
	})
}
