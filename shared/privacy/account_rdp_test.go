package privacy

import (
	"math"
	"strings"
	"testing"
)

// pldRDPPairs returns, for every RDP pair row of rep, the PLD row of the
// same pair (same name after the "PLD "/"RDP " prefix).
func pldRDPPairs(t *testing.T, rep Report) [][2]AccountRow {
	t.Helper()
	byName := map[string]AccountRow{}
	for _, r := range rep.Rows {
		if name, ok := strings.CutPrefix(r.Method, "PLD "); ok {
			byName[name] = r
		}
	}
	var out [][2]AccountRow
	for _, r := range rep.Rows {
		name, ok := strings.CutPrefix(r.Method, "RDP ")
		if !ok {
			continue
		}
		if p, ok := byName[name]; ok {
			out = append(out, [2]AccountRow{p, r})
		}
	}
	if len(out) == 0 {
		t.Fatalf("no PLD/RDP row pairs in %v", rep.Rows)
	}
	return out
}

// TestAccountRDPFloorAndPLD: for shuffled binary randomized response
// (R_{γ,2}, one coordinate, one round) every RDP row is at or above the
// exact ε of a fixed neighbouring pair of shuffled RR (no valid bound can
// be below it) and at or above the PLD row of the same pair (the PLD of a
// single shuffle is the pair's exact ε; RDP conversion can only lose).
func TestAccountRDPFloorAndPLD(t *testing.T) {
	const delta = 1e-6
	for _, eps0 := range []float64{0.5, 2} {
		for _, n := range []int{1000, 3000} {
			r := Release{Round: 1, Protocol: ProtocolSSSimple, Randomizer: RandomizerRGB, Buckets: 2, Eps0: eps0, D: 1, K: 1, N: n}
			rep, err := Account([]Release{r}, delta)
			if err != nil {
				t.Fatal(err)
			}
			checkReport(t, rep, delta)
			floor, err := floorShuffledRR(eps0, n, delta)
			if err != nil {
				t.Fatal(err)
			}
			pairs := pldRDPPairs(t, rep)
			if len(pairs) != 3 {
				t.Fatalf("eps0=%v n=%d: want 3 PLD/RDP pairs, got %d", eps0, n, len(pairs))
			}
			for _, pr := range pairs {
				p, q := pr[0], pr[1]
				if !p.Valid || !q.Valid {
					t.Fatalf("eps0=%v n=%d: invalid rows %v / %v", eps0, n, p.Bound, q.Bound)
				}
				if q.Epsilon < floor || q.Epsilon < p.Epsilon*(1-1e-9) {
					t.Errorf("eps0=%v n=%d: %s = %v below the floor %v or its PLD row %v", eps0, n, q.Method, q.Epsilon, floor, p.Epsilon)
				}
				if q.Epsilon > eps0*(1+1e-9) {
					t.Errorf("eps0=%v n=%d: %s = %v above the local eps0", eps0, n, q.Method, q.Epsilon)
				}
			}
		}
	}
}

// TestAccountRDPComposedNearPLD: on FLAME's SS-Topk setting over 3 rounds
// (3·2k composed coordinates, where RDP is at its best) every RDP row is
// at or above the PLD row of the same pair (up to the PLD grid's 1%
// rounding, see TestAccountGridConverged), within a factor 1.5 of it, and
// carries the same caveat.
func TestAccountRDPComposedNearPLD(t *testing.T) {
	const delta = 5e-6
	rep, err := Account(rounds(flameTopk(1), 3), delta)
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, rep, delta)
	pairs := pldRDPPairs(t, rep)
	if len(pairs) != 9 {
		t.Errorf("want 9 PLD/RDP pairs (3 methods x 3 modes), got %d", len(pairs))
	}
	for _, pr := range pairs {
		p, q := pr[0], pr[1]
		if !p.Valid || !q.Valid {
			t.Fatalf("invalid rows %v / %v", p.Bound, q.Bound)
		}
		if p.Caveat != q.Caveat {
			t.Errorf("%s: caveat %q, PLD row's %q", q.Method, q.Caveat, p.Caveat)
		}
		if !(p.Epsilon <= q.Epsilon*1.01) || !(q.Epsilon <= 1.5*p.Epsilon) {
			t.Errorf("%s: RDP %v, PLD %v", q.Method, q.Epsilon, p.Epsilon)
		}
	}
	if rep.Rows[rep.Tightest].Caveat != "" {
		t.Error("Tightest is a caveated row")
	}
}

// TestAccountRDPMonotoneInRounds: every RDP row of a small check-in
// setting grows with the number of rounds, and at most linearly in the
// RDP (so the converted ε at most by the rounds' factor).
func TestAccountRDPMonotoneInRounds(t *testing.T) {
	const delta = 1e-6
	r := Release{Round: 1, Protocol: ProtocolCheckIn, Randomizer: RandomizerGeneric, Eps0: 1, D: 1, K: 1, N: 200, Population: 2000, CheckInRate: 0.1}
	prev := map[string]float64{}
	for _, T := range []int{1, 10, 100} {
		rep, err := Account(rounds(r, T), delta)
		if err != nil {
			t.Fatal(err)
		}
		checkReport(t, rep, delta)
		n := 0
		for _, row := range rep.Rows {
			name, ok := strings.CutPrefix(row.Method, "RDP ")
			if !ok {
				continue
			}
			name = strings.TrimSuffix(name, ", composed over rounds")
			n++
			if !row.Valid {
				t.Fatalf("T=%d: %v", T, row.Bound)
			}
			if p, ok := prev[name]; ok && !(row.Epsilon > p) {
				t.Errorf("%s: %v at T=%d not above %v", name, row.Epsilon, T, p)
			}
			prev[name] = row.Epsilon
		}
		if n != 3 {
			t.Errorf("T=%d: want 3 RDP rows (pair, Theorem 2, Approach 2), got %d", T, n)
		}
	}
}

// TestAccountCheckInPreset is the check-in paper's LDP-SGD setting (ε0 = 2,
// n = 60000, rate 0.1, 6800 rounds, δ = 1e-5): the Theorem 2 row and the
// tight-pair RDP row are valid and finite, Theorem 2's carries its
// caveat, the pair's does not and is at or above the PLD row of the same
// pair.
func TestAccountCheckInPreset(t *testing.T) {
	const delta = 1e-5
	r := Release{Round: 1, Protocol: ProtocolCheckIn, Randomizer: RandomizerGeneric, Eps0: 2, D: 1, K: 1, N: 6000, Population: 60000, CheckInRate: 0.1}
	rep, err := Account(rounds(r, 6800), delta)
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, rep, delta)
	th2 := rowByPrefix(t, rep, "RDP check-in Theorem 2")
	pair := rowByPrefix(t, rep, "RDP FMT'23")
	pldRow := rowByPrefix(t, rep, "PLD FMT'23")
	for _, row := range []AccountRow{th2, pair, pldRow} {
		if !row.Valid || math.IsInf(row.Epsilon, 0) || !(row.Epsilon > 0) {
			t.Fatalf("row not finite and valid: %v", row.Bound)
		}
	}
	if th2.Caveat == "" || pair.Caveat != "" {
		t.Errorf("caveats: Theorem 2 %q, pair %q", th2.Caveat, pair.Caveat)
	}
	if !(pldRow.Epsilon <= pair.Epsilon*1.01) || !(pair.Epsilon <= 1.5*pldRow.Epsilon) {
		t.Errorf("RDP pair %v, PLD %v", pair.Epsilon, pldRow.Epsilon)
	}
	// Local model: 6800 rounds of ε0 = 2.
	if loc := rowByPrefix(t, rep, "local model"); !(pair.Epsilon < loc.Epsilon/100) {
		t.Errorf("RDP pair %v not far below the local %v", pair.Epsilon, loc.Epsilon)
	}
}

// TestAccountCheckInGaussianApproach2: a Gaussian (ε0, δ0)-LDP randomizer
// under shuffled check-in (Federated DP-SGD) gets a valid Approach 2 row,
// whose δ includes the FMT'21 k·δ0 terms, when the target δ allows them;
// the pure-ε0 shuffle rows are invalid with a reason. When δ0 is so large
// that the slack exceeds the target δ, the Approach 2 row is invalid and
// says why.
func TestAccountCheckInGaussianApproach2(t *testing.T) {
	const delta = 1e-5
	r := Release{Round: 1, Protocol: ProtocolCheckIn, Randomizer: RandomizerGaussian, Eps0: 2, Delta0: 1e-12, D: 10, K: 10, N: 6000, Population: 60000, CheckInRate: 0.1}
	rep, err := Account(rounds(r, 100), delta)
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, rep, delta)
	a2 := rowByPrefix(t, rep, "RDP check-in Approach 2")
	if !a2.Valid || a2.Caveat == "" || !(a2.Delta <= delta) {
		t.Fatalf("Approach 2 row %v (caveat %q)", a2.Bound, a2.Caveat)
	}
	t.Logf("Gaussian check-in, eps0 2, delta0 1e-12, 100 rounds: Approach 2 (%.4g, %.3g)", a2.Epsilon, a2.Delta)
	if loc := rowByPrefix(t, rep, "local model"); !(a2.Epsilon < loc.Epsilon) {
		t.Errorf("Approach 2 %v not below the local %v", a2.Epsilon, loc.Epsilon)
	}
	for _, row := range rep.Rows {
		if strings.HasPrefix(row.Method, "PLD ") || strings.HasPrefix(row.Method, "RDP check-in Theorem 2") {
			if row.Valid {
				t.Errorf("%s valid for delta0 > 0", row.Method)
			}
		}
	}
	r.Delta0 = 1e-8 // slack ≈ 100 rounds · 0.1 · 6000 · 2.2e-8 ≈ 1.3e-3 > δ
	rep, err = Account(rounds(r, 100), delta)
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, rep, delta)
	if a2 = rowByPrefix(t, rep, "RDP check-in Approach 2"); a2.Valid || !strings.Contains(a2.Reason, "slack") {
		t.Errorf("Approach 2 with delta0 = 1e-8: %v", a2.Bound)
	}
}

// TestAccountGaussianRDP: the central Gaussian RDP row is at or above the
// exact row and within 20% of it (σ = 1, 1 round; σ = 4, 50 rounds).
func TestAccountGaussianRDP(t *testing.T) {
	for _, c := range []struct {
		sigma float64
		T     int
	}{{1, 1}, {4, 50}} {
		g := Release{Round: 1, Protocol: ProtocolCentralGaussian, Randomizer: RandomizerGaussian, D: 10, K: 10, N: 100, NoiseMultiplier: c.sigma}
		rep, err := Account(rounds(g, c.T), 1e-5)
		if err != nil {
			t.Fatal(err)
		}
		checkReport(t, rep, 1e-5)
		exact := rowByPrefix(t, rep, "central Gaussian, exact")
		r := rowByPrefix(t, rep, "central Gaussian, RDP")
		if !r.Valid || r.Epsilon < exact.Epsilon*(1-1e-9) || r.Epsilon > 1.2*exact.Epsilon {
			t.Errorf("σ=%v T=%d: RDP %v, exact %v", c.sigma, c.T, r.Bound, exact.Epsilon)
		}
	}
}

// TestAccountTheorem2Refuses: Theorem 2 is stated for discrete pure
// ε0-LDP randomizers; a Laplace check-in release gets an invalid row.
func TestAccountTheorem2Refuses(t *testing.T) {
	r := Release{Round: 1, Protocol: ProtocolCheckIn, Randomizer: RandomizerLaplace, Eps0: 1, D: 1, K: 1, N: 200, Population: 2000, CheckInRate: 0.1}
	rep, err := Account([]Release{r}, 1e-6)
	if err != nil {
		t.Fatal(err)
	}
	if th2 := rowByPrefix(t, rep, "RDP check-in Theorem 2"); th2.Valid || th2.Reason == "" {
		t.Errorf("Theorem 2 for Laplace: %v", th2.Bound)
	}
}

func BenchmarkAccountAPES(b *testing.B) {
	r := Release{Round: 1, Protocol: ProtocolAPES, Randomizer: RandomizerClipLaplace, D: 1, K: 1, N: 10000, PersonalEps: Uniform2Budgets(10000)}
	for b.Loop() {
		if _, err := Account([]Release{r}, 1e-8); err != nil {
			b.Fatal(err)
		}
	}
}
