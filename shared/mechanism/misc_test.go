package mechanism

import (
	"math"
	"testing"

	"github.com/blanket-fl/blanket/shared/noise"
)

func TestClipper(t *testing.T) {
	for _, c := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		if _, err := newClipper(c); err == nil {
			t.Errorf("C=%v accepted", c)
		}
	}
	cl, err := newClipper(2)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ x, want float64 }{
		{-2, 0}, {2, 1}, {0, 0.5}, {1, 0.75}, {-5, 0}, {7, 1}, {math.Inf(1), 1}, {math.Inf(-1), 0},
	}
	for _, tc := range cases {
		if got := cl.Normalize(tc.x); got != tc.want {
			t.Errorf("Normalize(%v) = %v, want %v", tc.x, got, tc.want)
		}
	}
	src := noise.NewSeeded(1)
	for i := 0; i < 1000; i++ {
		x := 6 * (noise.Uniform(src) - 0.5)
		z := cl.Normalize(x)
		if z < 0 || z > 1 {
			t.Fatalf("Normalize(%v) = %v outside [0,1]", x, z)
		}
		if back := cl.Denormalize(z); math.Abs(back-cl.Clip(x)) > 1e-14 {
			t.Fatalf("Denormalize(Normalize(%v)) = %v, want clip %v", x, back, cl.Clip(x))
		}
	}
	if !math.IsNaN(cl.Normalize(math.NaN())) {
		t.Error("NaN should stay NaN")
	}
	v := cl.NormalizeVec(nil, []float64{-2, 0, 2})
	if v[0] != 0 || v[1] != 0.5 || v[2] != 1 {
		t.Errorf("NormalizeVec = %v", v)
	}
	m, err := cl.ClippedMean([][]float64{{3, -1}, {1, -3}}, 2)
	if err != nil || m[0] != 1.5 || m[1] != -1.5 {
		t.Errorf("ClippedMean = %v, %v", m, err)
	}
	if _, err := cl.ClippedMean([][]float64{{1}}, 2); err == nil {
		t.Error("ragged updates accepted")
	}
}

func TestTopkLFromNu(t *testing.T) {
	// FLAME's experiment: d = 7850, k = 157 (beta = 1/50), n/n_p = 3 gives
	// l = 16 and nu = 3.125 (Theorem 5, corrected reading).
	nu, l, err := TopkNu(1000, 333, 7850, 157)
	if err != nil || l != 16 || math.Abs(nu-3.125) > 1e-12 {
		t.Fatalf("TopkNu = %v, %d, %v; want 3.125, 16", nu, l, err)
	}
	if l, err := TopkL(3.125, 7850, 157); err != nil || l != 16 {
		t.Fatalf("TopkL(3.125) = %d, %v; want 16", l, err)
	}
	// nu = 1 needs l = d/k = 50.
	if l, err := TopkL(1, 7850, 157); err != nil || l != 50 {
		t.Fatalf("TopkL(1) = %d, %v; want 50", l, err)
	}
	// nu = 1 is impossible when k does not divide d.
	if _, err := TopkL(1, 100, 30); err == nil {
		t.Error("TopkL(1, 100, 30) should fail: l = 10/3 groups do not fit")
	}
	for _, bad := range []float64{0.5, math.NaN(), math.Inf(1), 51} {
		if _, err := TopkL(bad, 7850, 157); err == nil {
			t.Errorf("nu=%v accepted", bad)
		}
	}
	if _, err := TopkL(2, 10, 10); err == nil {
		t.Error("k = d accepted")
	}
	if _, _, err := TopkNu(1000, 10, 7850, 157); err == nil {
		t.Error("n_p below n*beta accepted")
	}
	if _, err := topkMinNu(7850, 157, 51); err == nil {
		t.Error("l > d/k accepted")
	}
	// Round trips: the l chosen for nu achieves nu, and is minimal.
	for _, dk := range [][2]int{{7850, 157}, {100, 7}, {60, 20}, {1000, 1}} {
		d, k := dk[0], dk[1]
		beta := float64(k) / float64(d)
		for nu := 1.0; nu <= float64(d)/float64(k); nu *= 1.13 {
			l, err := TopkL(nu, d, k)
			if err != nil {
				continue
			}
			ok := func(l int) bool {
				return 1/float64(l) <= nu*beta*(1+1e-9) && 1-1/float64(l) >= (1-beta)/nu*(1-1e-9)
			}
			if !ok(l) {
				t.Fatalf("d=%d k=%d nu=%v: l=%d violates Definition 3", d, k, nu, l)
			}
			if l > 1 && ok(l-1) {
				t.Fatalf("d=%d k=%d nu=%v: l=%d not minimal", d, k, nu, l)
			}
			if l >= 2 {
				minNu, _ := topkMinNu(d, k, l)
				if minNu > nu*(1+1e-9) {
					t.Fatalf("d=%d k=%d: TopkMinNu(%d) = %v > nu %v", d, k, l, minNu, nu)
				}
			}
		}
	}
}

func TestCheckIn(t *testing.T) {
	for _, p := range []float64{0, -0.1, 1.5, math.NaN()} {
		if _, err := NewCheckIn(p); err == nil {
			t.Errorf("p=%v accepted", p)
		}
	}
	ci, _ := NewCheckIn(1)
	in, st, err := ci.Simulate(50, noise.NewSeeded(1))
	if err != nil || len(in) != 50 || st.Rate != 1 {
		t.Fatalf("p=1: %d in, %+v, %v", len(in), st, err)
	}
	if _, _, err := ci.Simulate(0, noise.NewSeeded(1)); err == nil {
		t.Error("empty population accepted")
	}
}

// TestCheckInRate: over 50 rounds of 20000 clients at p = 0.1, each
// round's count is Binomial(20000, 0.1) (sd 42.4); each must lie within 5
// sd of 2000 (false-failure probability 50 x 5.7e-7 < 3e-5) and the pooled
// empirical rate within 5 sd (0.00042) of p. Per round, the participants
// must be distinct, sorted and in range, and RoundStats consistent.
func TestCheckInRate(t *testing.T) {
	const pop, p, rounds = 20000, 0.1, 50
	ci, _ := NewCheckIn(p)
	src := noise.NewSeeded(2)
	var stats []RoundStats
	sd := math.Sqrt(pop * p * (1 - p))
	firstHalf := 0
	for r := 0; r < rounds; r++ {
		in, st, err := ci.Simulate(pop, src)
		if err != nil {
			t.Fatal(err)
		}
		if st.CheckedIn != len(in) || st.Population != pop || st.P != p || st.Rate != float64(len(in))/pop {
			t.Fatalf("stats %+v for %d participants", st, len(in))
		}
		if math.Abs(float64(len(in))-pop*p) > 5*sd {
			t.Fatalf("round %d: %d checked in, expected %v +- %v", r, len(in), pop*p, sd)
		}
		for i := range in {
			if in[i] < 0 || in[i] >= pop || (i > 0 && in[i] <= in[i-1]) {
				t.Fatalf("participant list not sorted and distinct at %d", i)
			}
			if in[i] < pop/2 {
				firstHalf++
			}
		}
		stats = append(stats, st)
	}
	rate := empiricalRate(stats)
	if math.Abs(rate-p) > 5*math.Sqrt(p*(1-p)/(pop*rounds)) {
		t.Fatalf("empirical rate %v, want %v", rate, p)
	}
	// Coins do not depend on the client's position: the first half of
	// the population checks in as often as the second (Binomial(total,
	// 1/2), 5 sd).
	total := rate * pop * rounds
	if math.Abs(float64(firstHalf)-total/2) > 5*math.Sqrt(total/4) {
		t.Fatalf("first half %d of %v", firstHalf, total)
	}
	if !math.IsNaN(empiricalRate(nil)) {
		t.Error("EmpiricalRate(nil) should be NaN")
	}
	if s := newRoundStats(0, 0, 0.5); s.Rate != 0 {
		t.Errorf("zero population rate %v", s.Rate)
	}
}

func TestExpectedCount(t *testing.T) {
	cfg := FLAMEConfig{Protocol: SSTopk, D: 7850, K: 157, L: 16, EpsL: 78.5, C: 1, NewRandomizer: AffineFactory(fakeFactory)}
	got, err := expectedCount(cfg, 10000)
	if err != nil || math.Abs(got-3200) > 1e-9 {
		t.Fatalf("ExpectedCount = %v, %v; want 3200", got, err)
	}
	cfg.L = 0
	if _, err := expectedCount(cfg, 10); err == nil {
		t.Error("invalid config accepted")
	}
}
