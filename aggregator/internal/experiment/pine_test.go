package experiment

import (
	"context"
	"math"
	"testing"

	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/pine"
	"github.com/blanket-fl/blanket/shared/secagg"
)

// TestFieldAdd: Field64 addition and the embedding of negative integers
// against big-integer arithmetic on edge cases.
func TestFieldAdd(t *testing.T) {
	const q = pineModulus
	for _, c := range []struct{ x, y, want uint64 }{
		{0, 0, 0}, {q - 1, 1, 0}, {q - 1, q - 1, q - 2}, {1 << 63, 1 << 63, (1 << 32) - 1}, {q - 5, 3, q - 2},
	} {
		if got := fieldAdd(c.x, c.y); got != c.want {
			t.Errorf("%d + %d = %d, want %d", c.x, c.y, got, c.want)
		}
	}
	if fieldOf(-1) != q-1 || fieldOf(7) != 7 || fieldAdd(fieldOf(-5), 5) != 0 {
		t.Error("negative integers are not embedded as q - |k|")
	}
}

// TestPineSumExact: one round of pineSum at d = 7,850 (C = 0.3) with 6
// volunteers, one of them sending the flipped update at full norm and one
// the range-edge vector. Without noise the unsharded sum is exactly the
// sum of the encodings (pine.Encode) of the accepted reports (the honest
// ones clipped, the flipper's -u at norm C), the edge report is rejected
// and counted, the others accepted; with noise, the noisy sum minus the
// exact one is, in fixed-point units, exactly the helper's plus the
// leader's secagg.DiscreteGaussianNoise draws on their streams (so the
// noise is added once per server, in the units the sensitivity is
// stated in), and with one noise share only the leader's.
func TestPineSumExact(t *testing.T) {
	const d, n, clip = 7850, 6, 0.3
	p, err := pine.ForBlanket(d, clip)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{seed: 5, workers: 2}
	src := noise.NewSeeded(99)
	users := make([]int, n)
	updates := make([][]float64, n)
	for i := range updates {
		users[i] = 10 * i
		scale := 0.002 * float64(i+1) // norms from about 0.1 C to above C
		updates[i] = make([]float64, d)
		for j := range updates[i] {
			updates[i][j] = scale * (2*noise.Uniform(src) - 1)
		}
	}
	// Volunteers 0 and 30 attack (Count 2 over a population of 60: step 30).
	atkFlip := attackSpec{Kind: attackFlip, Count: 2, Pop: 60}
	atkEdge := attackSpec{Kind: attackEdge, Count: 2, Pop: 60}
	if !atkFlip.is(0) || !atkFlip.is(30) || atkFlip.is(10) || atkFlip.is(60) {
		t.Fatal("attackSpec does not pick volunteers 0 and 30")
	}
	want := make([]int64, d)
	for i, u := range updates {
		x := clipL2(u, clip)
		if atkFlip.is(users[i]) {
			x = flipped(u, clip)
		}
		e, err := p.Encode(x)
		if err != nil {
			t.Fatal(err)
		}
		for j, v := range e {
			want[j] += v
		}
	}
	ctx := context.Background()
	exact, err := pineSum(ctx, w, p, clip, 0, 2, 1, users, updates, atkFlip)
	if err != nil {
		t.Fatal(err)
	}
	if exact.Accepted != n || len(exact.Rejected) != 0 {
		t.Fatalf("flip attack: %d accepted, rejected %v; want all %d accepted", exact.Accepted, exact.Rejected, n)
	}
	units := func(s []float64) []int64 {
		out := make([]int64, len(s))
		for j, v := range s {
			out[j] = int64(math.Round(v * p.Scale()))
		}
		return out
	}
	got := units(exact.Sum)
	for j := range want {
		if got[j] != want[j] {
			t.Fatalf("sum[%d] = %d units, want %d", j, got[j], want[j])
		}
	}
	// The edge attackers are rejected; the sum is the other reports'.
	edge, err := pineSum(ctx, w, p, clip, 0, 2, 1, users, updates, atkEdge)
	if err != nil {
		t.Fatal(err)
	}
	rej := 0
	for _, v := range edge.Rejected {
		rej += v
	}
	if edge.Accepted != n-2 || rej != 2 {
		t.Fatalf("edge attack: %d accepted, rejected %v; want %d and 2", edge.Accepted, edge.Rejected, n-2)
	}
	t.Logf("edge reports rejected: %s", fmtReasons(edge.Rejected))
	honest := make([]int64, d)
	for i, u := range updates {
		if atkEdge.is(users[i]) {
			continue
		}
		e, _ := p.Encode(clipL2(u, clip))
		for j, v := range e {
			honest[j] += v
		}
	}
	if g := units(edge.Sum); !equalInts(g, honest) {
		t.Fatal("edge attack: the sum is not the honest reports' sum")
	}
	// Noise: exactly the servers' draws, in fixed-point units.
	const sigma = 5000.5
	for _, shares := range []int{2, 1} {
		noisy, err := pineSum(ctx, w, p, clip, sigma, shares, 1, users, updates, atkFlip)
		if err != nil {
			t.Fatal(err)
		}
		lsrc, hsrc, _ := secaggStreams(w.seed, 1)
		zh, _ := secagg.DiscreteGaussianNoise(sigma, d, hsrc)
		zl, _ := secagg.DiscreteGaussianNoise(sigma, d, lsrc)
		g := units(noisy.Sum)
		for j := range g {
			z := zl[j]
			if shares == 2 {
				z += zh[j]
			}
			if g[j]-want[j] != z {
				t.Fatalf("%d noise shares: coordinate %d: noise %d units, want %d", shares, j, g[j]-want[j], z)
			}
		}
		if math.Abs(noisy.Mean[0]-noisy.Sum[0]/n) > 1e-12 {
			t.Error("mean is not sum / accepted")
		}
	}
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// gaussEpsilon is the exact ε at δ of the Gaussian mechanism with
// sensitivity/σ = mu (Balle and Wang 2018, Theorem 8: δ(ε) = Φ(-ε/μ +
// μ/2) - e^ε Φ(-ε/μ - μ/2)), by bisection. Its RDP curve is α μ²/2, so no
// conversion of that curve to (ε, δ) can give less.
func gaussEpsilon(mu, delta float64) float64 {
	phi := func(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }
	dl := func(e float64) float64 { return phi(-e/mu+mu/2) - math.Exp(e)*phi(-e/mu-mu/2) }
	lo, hi := 0.0, 1.0
	for dl(hi) > delta {
		hi *= 2
	}
	for range 200 {
		mid := (lo + hi) / 2
		if dl(mid) > delta {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// balleEpsilon is Balle et al. (AISTATS 2020, Theorem 21) for the RDP
// curve α·rho, minimised over the integer orders 2..64 (a subset of the
// ledger's orders): written here from the formula, not from shared/privacy.
func balleEpsilon(rho, delta float64) float64 {
	best := math.Inf(1)
	for a := 2.0; a <= 64; a++ {
		best = math.Min(best, a*rho+math.Log1p(-1/a)-(math.Log(delta)+math.Log(a))/(a-1))
	}
	return best
}

// TestPineRobust is issue 16's poisoning test with the real protocol, at
// make run's settings (the runner's secure-summation defaults: 400
// volunteers of 20 digits, every one every round, 5 rounds, C = 0.3,
// ε = 4 replace-one at δ = 1e-5, server lr 8), seed 1, 10 malicious
// volunteers of 400 (the robust table's rows; go run ./aggregator/lab
// simulate -table robust prints them):
//
//   - sending the strongest update PINE accepts (-u at norm C) costs at
//     most 3 points of final accuracy, and every one of their reports is
//     accepted;
//   - sending the range-edge vector (L2 norm 88.6 C) gets all 50 of their
//     reports rejected, none of the others, and costs at most 3 points
//     (their honest updates are missing).
//
// The runs are deterministic (fixed seeds), so the test fails only if
// the code changes; the margins are the 3 points. About a minute
// of CPU (three PINE runs of 2,000 reports): skipped under -short.
func TestPineRobust(t *testing.T) {
	if testing.Short() {
		t.Skip("three runs of 5 rounds of 400 volunteers through the real PINE")
	}
	o := Options{Table: tableRobust, Dataset: "mnist-sample", PerUser: 10, Rounds: 12, Seed: 1, JSON: true, Attackers: 10}
	res := simulateJSON(t, o)
	by := map[string]runResult{}
	for _, r := range res {
		by[r.ID] = r
		t.Logf("%-12s final %.4f, rejected %v", r.ID, r.Final, r.Rejected)
	}
	for _, id := range robustIDs {
		r, ok := by[id]
		if !ok {
			t.Fatalf("no row %q", id)
		}
		if len(r.Rounds) != 5 || r.Pop != 400 || !(r.Claim.Total <= 4*(1+1e-9)) {
			t.Errorf("%s: %d rounds, population %d, eps %v: want make run's 5 rounds of 400 at eps <= 4", id, len(r.Rounds), r.Pop, r.Claim.Total)
		}
	}
	clean := by["secagg"].Final
	if clean < 0.7 {
		t.Errorf("PINE without attackers: %.4f, want > 0.7", clean)
	}
	if f := by["secagg-flip"]; f.Final < clean-0.03 || len(f.Rejected) != 0 {
		t.Errorf("PINE: 10 flipping attackers took accuracy from %.4f to %.4f (margin 0.03), rejected %v (want none)", clean, f.Final, f.Rejected)
	}
	e := by["secagg-edge"]
	rej := 0
	for _, v := range e.Rejected {
		rej += v
	}
	if rej != 10*5 || e.Final < clean-0.03 {
		t.Errorf("PINE: over-norm attackers: %d reports rejected (want 50), accuracy %.4f (clean %.4f, margin 0.03)", rej, e.Final, clean)
	}
}

// TestPineSumFastIsExact: the runner's -secagg-fast path gives, bit for
// bit, the real PINE pipeline's noisy sum for honest volunteers (both
// servers' noise, one server's, and none), at the digits' d with updates
// below and above the clip; with the same seeds the two must agree on
// every coordinate (any difference in encoding, summation or noise order
// fails it).
func TestPineSumFastIsExact(t *testing.T) {
	const d, n, clip = 8340, 9, 0.3
	p, err := pine.ForBlanket(d, clip)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{seed: 11, workers: 3}
	src := noise.NewSeeded(7)
	users := make([]int, n)
	updates := make([][]float64, n)
	for i := range updates {
		users[i] = i
		scale := 0.001 * float64(i+1)
		updates[i] = make([]float64, d)
		for j := range updates[i] {
			updates[i][j] = scale * (2*noise.Uniform(src) - 1)
		}
	}
	ctx := context.Background()
	for _, c := range []struct {
		sigma  float64
		shares int
	}{{0, 2}, {5000, 2}, {5000, 1}} {
		full, err := pineSum(ctx, w, p, clip, c.sigma, c.shares, 3, users, updates, attackSpec{})
		if err != nil {
			t.Fatal(err)
		}
		fast, err := pineSumFast(ctx, w, p, clip, c.sigma, c.shares, 3, updates)
		if err != nil {
			t.Fatal(err)
		}
		if fast.Accepted != full.Accepted || len(fast.Sum) != d {
			t.Fatalf("sigma %v: accepted %d vs %d", c.sigma, fast.Accepted, full.Accepted)
		}
		for j := range full.Sum {
			if fast.Sum[j] != full.Sum[j] || fast.Mean[j] != full.Mean[j] {
				t.Fatalf("sigma %v, %d noise shares: coordinate %d: fast %v, real pipeline %v", c.sigma, c.shares, j, fast.Sum[j], full.Sum[j])
			}
		}
	}
}
