package audit

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/secagg"
	"github.com/blanket-fl/blanket/shared/wire"
)

// makeRunSecAgg is make run's secure-summation configuration: d = 7,850,
// the default clip and bits, every volunteer checks in, σ calibrated so
// that 5 rounds cost ε = 4 at δ = 1e-5 for replace-one (what
// scripts/runlocal passes the aggregator).
func makeRunSecAgg(t *testing.T, n int) *roundspec.Spec {
	t.Helper()
	sigma, err := makeRunSigma()
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := roundspec.Build(7850, n, roundspec.Options{Protocol: wire.ProtocolSecAgg, Sigma: sigma, CheckInP: 1})
	if err != nil {
		t.Fatal(err)
	}
	s, err := roundspec.New(p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// makeRunSigma is make run's σ (calibrated once: about 1.6 s of CPU).
var makeRunSigma = sync.OnceValues(func() (float64, error) {
	return roundspec.CalibrateSigma(7850, roundspec.Options{}, 5, 1, 4, 1e-5)
})

// TestSecAggPathMatchesVDAF: the audit's path — Σ Encode(x_i) in the
// integer domain plus the relay's and the leader's noise from serverNoise —
// equals, coordinate for coordinate, the Sum that the real PINE round
// unshards (Shard, Helper.Prepare, Leader.Prepare and Combine,
// Helper.Finish, both AddNoise, Leader.Unshard) on the same seeded streams,
// at d = 6 with 4 volunteers, 3 rounds. Exact equality: no statistics.
func TestSecAggPathMatchesVDAF(t *testing.T) {
	p, err := secagg.NewPineParams(6, 0.3, 300, 16)
	if err != nil {
		t.Fatal(err)
	}
	for round := uint64(1); round <= 3; round++ {
		r, err := secagg.NewRound(p, round)
		if err != nil {
			t.Fatal(err)
		}
		upd := noise.NewSeeded(round)
		var ls, hs [][]byte
		want := make([]int64, p.Dim)
		for i := range 4 {
			x := make([]float64, p.Dim)
			for j := range x {
				x[j] = 0.2 * (2*noise.Uniform(upd) - 1)
			}
			seed := round<<8 | uint64(i)
			l, h, err := r.Shard(x, noise.NewSeeded(seed))
			if err != nil {
				t.Fatal(err)
			}
			ls, hs = append(ls, l), append(hs, h)
			// What Shard puts in the sum (deterministic).
			q, err := secagg.Encode(p, x)
			if err != nil {
				t.Fatal(err)
			}
			for j, v := range q {
				want[j] += v
			}
		}
		hsrc, lsrc := round<<16|1, round<<16|2
		for _, s := range []struct {
			leader bool
			seed   uint64
		}{{false, hsrc}, {true, lsrc}} {
			k, err := serverNoise(r, s.leader, noise.NewSeeded(s.seed))
			if err != nil {
				t.Fatal(err)
			}
			for j := range want {
				want[j] += k[j]
			}
		}
		key := make([]byte, secagg.VerifyKeySize)
		key[0] = byte(round)
		helper, _ := secagg.NewHelper(r, key)
		leader, _ := secagg.NewLeader(r, key)
		pm, rej, err := helper.Prepare(hs)
		if err != nil || len(rej) > 0 {
			t.Fatal(rej, err)
		}
		if rej, err := leader.Prepare(ls); err != nil || len(rej) > 0 {
			t.Fatal(rej, err)
		}
		mm, rej, err := leader.Combine(pm)
		if err != nil || len(rej) > 0 {
			t.Fatal(rej, err)
		}
		if _, err := helper.Finish(mm); err != nil {
			t.Fatal(err)
		}
		ha, _ := helper.AggregateShare()
		if err := ha.AddNoise(noise.NewSeeded(hsrc)); err != nil {
			t.Fatal(err)
		}
		hmsg, err := ha.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		la, _ := leader.AggregateShare()
		if err := la.AddNoise(noise.NewSeeded(lsrc)); err != nil {
			t.Fatal(err)
		}
		got, err := leader.Unshard(la, hmsg)
		if err != nil {
			t.Fatal(err)
		}
		nonzero := false
		for j := range want {
			if got.Sum[j] != want[j] {
				t.Fatalf("round %d coordinate %d: VDAF %d, audit path %d (all: %v vs %v)", round, j, got.Sum[j], want[j], got.Sum, want)
			}
			nonzero = nonzero || want[j] != 0
		}
		if !nonzero {
			t.Fatal("an all-zero sum: the comparison would not see missing noise")
		}
	}
}

// TestSecAggNoiseLaw: serverNoise's coordinates have the discrete
// Gaussian's variance σ² (CKS 2020: at most σ², within 1e-6 relative for
// σ >= 1 by their Proposition 19's bound). 20,000 coordinates at σ = 50:
// the sample variance's standard error is σ²·√(2/20,000) ≈ 1%, so the 5%
// tolerance is 5 standard errors (false failure below 1e-6; fixed seed).
// Checks the decoding (Field64 to signed, signs kept) on real AddNoise
// output.
func TestSecAggNoiseLaw(t *testing.T) {
	p, err := secagg.NewPineParams(20000, 0.3, 50, 4)
	if err != nil {
		t.Fatal(err)
	}
	r, err := secagg.NewRound(p, 1)
	if err != nil {
		t.Fatal(err)
	}
	k, err := serverNoise(r, false, noise.NewSeeded(9))
	if err != nil {
		t.Fatal(err)
	}
	var m, v float64
	neg := 0
	for _, x := range k {
		m += float64(x)
		if x < 0 {
			neg++
		}
	}
	m /= float64(len(k))
	for _, x := range k {
		v += (float64(x) - m) * (float64(x) - m)
	}
	v /= float64(len(k) - 1)
	if math.Abs(v/2500-1) > 0.05 || math.Abs(m) > 5*50/math.Sqrt(float64(len(k))) || neg < 9000 {
		t.Fatalf("mean %v, variance %v (want 0, 2500), %d negative of %d", m, v, neg, len(k))
	}
}

// TestSecAggAuditBelowCharge: at make run's configuration (n = 200; σ
// calibrated for 5 rounds at ε = 4), the audit of one round — the
// relay's real noise, the canary pair ±C·e_j (replace-one, shift 2c) —
// shows a lower bound at most the per-round charge, and at most the exact
// ε of the continuous Gaussian with the same shift (gdpEpsilon(2c/σ), the
// truth up to discreteness, itself below the RDP charge). 50,000 trials
// per hypothesis and phase, Alpha = 1e-3: a correct charge is exceeded with
// probability at most 2e-3 (fixed seed: deterministic). The run reports
// its Ceiling and Detectable, and Detectable is above the charge.
func TestSecAggAuditBelowCharge(t *testing.T) {
	if testing.Short() {
		t.Skip("the audit tier runs without -short")
	}
	spec := makeRunSecAgg(t, 200)
	p, _ := spec.SecAgg()
	res, err := RunSecAgg(context.Background(), spec, SecAggOptions{Volunteers: 200, Trials: 50_000, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	truth := gdpEpsilon(2*p.ClipUnits()/p.Sigma, res.Delta)
	t.Logf("d %d, c = %.6g, sensitivity %.6g, sigma %.6g", p.Dim, p.ClipUnits(), p.Sensitivity(), p.Sigma)
	t.Logf("one round: charged %.4f, Gaussian truth %.4f, audited %.4f (TPR %.5f, FPR %.5f), ceiling %.3f, detectable %.3f", res.Charged, truth, res.EpsLower, res.TPR, res.FPR, res.Ceiling, res.Detectable)
	if res.Shift != 2*math.Round(p.ClipUnits()) || res.Servers != 1 || res.Sigma != p.Sigma {
		t.Errorf("shift %v (want %v), servers %d, sigma %v", res.Shift, 2*math.Round(p.ClipUnits()), res.Servers, res.Sigma)
	}
	if !(res.Charged > 0) || res.EpsLower > res.Charged || res.EpsLower > truth || truth > res.Charged {
		t.Errorf("lower bound %.4f, Gaussian truth %.4f, charge %.4f", res.EpsLower, truth, res.Charged)
	}
	if !(res.Detectable > res.Charged) || !(res.Ceiling > res.Detectable) {
		t.Errorf("detectable %v, ceiling %v, charge %v", res.Detectable, res.Ceiling, res.Charged)
	}
	if res.EpsLower == 0 {
		t.Error("the optimal test proved nothing: a bound of 0 at 50,000 trials means the attack is blind")
	}
}

// TestSecAggAuditCatchesUnderchargedNoise: the canary is a relay whose
// noise is σ/k while the ledger charges σ. With k = 3 the audit (50,000
// trials per hypothesis and phase, Alpha = 1e-3, fixed seed) must show a
// bound above the per-round charge, where the honest σ does not; k = 2 is
// logged (at this trial count it is near the detection limit: Detectable
// is the smallest Gaussian-shaped leak caught half the time, about 3.1
// here, and σ/2's true ε, 3.2, is barely above it; σ/3's, 5.1, far above).
func TestSecAggAuditCatchesUnderchargedNoise(t *testing.T) {
	if testing.Short() {
		t.Skip("the audit tier runs without -short")
	}
	spec := makeRunSecAgg(t, 30)
	p, _ := spec.SecAgg()
	for _, k := range []float64{2, 3} {
		res, err := RunSecAgg(context.Background(), spec, SecAggOptions{Trials: 50_000, Seed: 2, NoiseSigma: p.Sigma / k})
		if err != nil {
			t.Fatal(err)
		}
		truth := gdpEpsilon(k*2*p.ClipUnits()/p.Sigma, res.Delta)
		t.Logf("noise sigma/%v: charged %.4f, true %.4f, audited %.4f (TPR %.5f, FPR %.5f), detectable %.3f", k, res.Charged, truth, res.EpsLower, res.TPR, res.FPR, res.Detectable)
		if k == 3 && res.EpsLower <= res.Charged {
			t.Errorf("sigma/%v not caught: lower bound %.4f, charge %.4f", k, res.EpsLower, res.Charged)
		}
		if truth < res.Detectable && res.EpsLower > res.Charged {
			t.Logf("caught below the detectable level (chance)")
		}
	}
}

// TestSecAggAuditComposed: five rounds against the composed charge (ε = 4
// at make run's σ), 20,000 trials (Alpha = 1e-3): below the charge, and
// above the one-round bound's ceiling of what one round could show.
func TestSecAggAuditComposed(t *testing.T) {
	if testing.Short() {
		t.Skip("the audit tier runs without -short")
	}
	spec := makeRunSecAgg(t, 30)
	res, err := RunSecAgg(context.Background(), spec, SecAggOptions{Trials: 20_000, Rounds: 5, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("5 rounds: charged %.4f, audited %.4f, detectable %.3f", res.Charged, res.EpsLower, res.Detectable)
	if math.Abs(res.Charged-4) > 1e-3 || res.EpsLower > res.Charged || res.EpsLower == 0 {
		t.Errorf("charged %v, lower bound %v", res.Charged, res.EpsLower)
	}
}

// TestLowerBoundSecAgg: the live entry point names the relation, attack
// and mechanism, is reproducible, lies below the charge, and reports what
// it could have caught.
func TestLowerBoundSecAgg(t *testing.T) {
	spec := makeRunSecAgg(t, 30)
	trials := 20_000
	if testing.Short() {
		trials = 5000
	}
	b, err := LowerBoundSecAgg(context.Background(), spec, 30, trials, 5)
	if err != nil {
		t.Fatal(err)
	}
	again, err := LowerBoundSecAgg(context.Background(), spec, 30, trials, 5)
	if err != nil || again != b {
		t.Fatalf("not reproducible: %+v, then %+v (%v)", b, again, err)
	}
	t.Logf("%+v", b)
	if b.Neighbours != NeighboursReplaceOne || b.Confidence != BoundConfidence || b.Trials != trials || b.Mechanism == "" ||
		(b.Lower > 0) != (b.Attack == SecAggAttack) || b.Lower > b.Charged || !(b.DetectableFactor > 1) || !(b.Ceiling > b.Charged) {
		t.Errorf("%+v", b)
	}
	// The variance test raises its alarm at NoiseTestAlpha, not at the
	// bounds' level (make run's configuration, whose seed is fixed, drew
	// an honest relay's noise at z = −2.66 and was flagged at every run
	// at the former level of 1/60, 2026-11-29).
	if b.Noise.Alpha != NoiseTestAlpha || math.Abs(b.Noise.Threshold-4.753) > 0.01 || b.Noise.Flagged {
		t.Errorf("the live variance test: %+v, want alpha %g (threshold 4.75)", b.Noise, NoiseTestAlpha)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := LowerBoundSecAgg(ctx, spec, 30, trials, 5); err == nil {
		t.Error("a cancelled context did not stop it")
	}
	shuffle := small(t, wire.ProtocolSSDouble, wire.RandomizerLaplace, 4)
	if _, err := LowerBoundSecAgg(context.Background(), shuffle, 30, 100, 1); err == nil {
		t.Error("a shuffle spec accepted")
	}
}

// BenchmarkLowerBoundSecAgg times the live secure-summation audit at make
// run's configuration (d = 7,850, n = 200) with audit.SecAggTrials trials
// per hypothesis and phase. Run: go test -run '^$' -bench LowerBoundSecAgg
// -benchtime 1x ./aggregator/internal/audit/
func BenchmarkLowerBoundSecAgg(b *testing.B) {
	sigma, err := makeRunSigma()
	if err != nil {
		b.Fatal(err)
	}
	p, _, err := roundspec.Build(7850, 200, roundspec.Options{Protocol: wire.ProtocolSecAgg, Sigma: sigma, CheckInP: 1})
	if err != nil {
		b.Fatal(err)
	}
	spec, err := roundspec.New(p)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := LowerBoundSecAgg(context.Background(), spec, 200, SecAggTrials, 1); err != nil {
			b.Fatal(err)
		}
	}
}

// TestMainSecAgg: `aggregator audit -protocols secagg` prints one row per
// audited release (one round and the composed rounds, each with the
// credited relay's noise and, with -secagg-both, both servers'), each with
// its ceiling and detectable columns, and exits 0 when no bound exceeds
// its charge (2,000 trials, Alpha = 1e-3, σ = 115,000 PINE fixed-point units (clip 0.3 is 39,322 units) at d = 64: charge
// about 3.1 per round; fixed seed). The JSON form carries the same rows.
func TestMainSecAgg(t *testing.T) {
	if testing.Short() {
		t.Skip("the audit tier runs without -short")
	}
	args := []string{"-protocols", "secagg", "-d", "64", "-n", "10", "-secagg-trials", "2000", "-secagg-rounds", "2", "-secagg-both", "-sigma", "115000", "-alpha", "1e-3"}
	var out, errs strings.Builder
	if code := Main(context.Background(), args, &out, &errs); code != 0 {
		t.Fatalf("exit %d: %s%s", code, out.String(), errs.String())
	}
	rows := 0
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "secagg ") && strings.Contains(l, "discrete-gaussian") { // not the legend's "secagg noise variance test: ..."
			rows++
			if !strings.Contains(l, "ok") || strings.Count(l, "x)") != 1 {
				t.Errorf("row %q", l)
			}
		}
	}
	if rows != 4 {
		t.Fatalf("%d secagg rows:\n%s", rows, out.String())
	}
	out.Reset()
	if code := Main(context.Background(), append(args, "-json"), &out, &errs); code != 0 {
		t.Fatalf("json: exit %d: %s", code, errs.String())
	}
	var got struct {
		SecAgg []SecAggResult `json:"secagg"`
	}
	if err := json.Unmarshal([]byte(out.String()), &got); err != nil || len(got.SecAgg) != 4 {
		t.Fatalf("json %v: %s", err, out.String())
	}
	for i, r := range got.SecAgg {
		wantServers, wantRounds := 1+i/2, 1+i%2
		if r.Servers != wantServers || r.Rounds != wantRounds || r.Sigma != 115000 || r.EpsLower > r.Charged || !(r.Ceiling > 0) {
			t.Errorf("row %d: %+v", i, r)
		}
	}
}

// TestSecAggNoiseTestPower: the variance test on the relay's noise draws
// (noiseVarianceTest) at make run's configuration, 20,000 trials per
// hypothesis and phase (80,000 draws), Alpha = 1e-3, fixed seeds. An
// honest relay (the spec's σ) is not flagged (false-alarm probability
// 1e-3 per run, up to the normal approximation); relays adding σ/1.02 and
// σ/1.1 are, while the likelihood-ratio test on the canary does not show
// σ/1.1 above the charge (its Detectable is about 2x the charge). At
// 80,000 draws the test's Factor (σ/k caught half the time) is
// 1/sqrt(1 − 3.09·sqrt(2/80,000)) ≈ 1.0078, so σ/1.02 is 4.7 standard
// deviations past the threshold: a miss has probability below 1e-5. At
// RunSecAgg's default 100,000 trials (400,000 draws) the Factor is below
// 1.004.
func TestSecAggNoiseTestPower(t *testing.T) {
	spec := makeRunSecAgg(t, 30)
	p, _ := spec.SecAgg()
	const trials = 20_000
	for _, c := range []struct {
		k    float64
		flag bool
	}{{1, false}, {1.02, true}, {1.1, true}} {
		opts := SecAggOptions{Trials: trials, Alpha: 1e-3, Seed: 11}
		if c.k != 1 {
			opts.NoiseSigma = p.Sigma / c.k
		}
		res, err := RunSecAgg(context.Background(), spec, opts)
		if err != nil {
			t.Fatal(err)
		}
		n := res.Noise
		t.Logf("sigma/%v: %d draws, variance ratio %.5f (1/k^2 = %.5f), z = %.2f (threshold -%.2f), flagged %v, factor %.5f; canary test: eps >= %.3f, charged %.3f, detectable %.3f",
			c.k, n.Draws, n.Ratio, 1/(c.k*c.k), n.Z, n.Threshold, n.Flagged, n.Factor, res.EpsLower, res.Charged, res.Detectable)
		if n.Draws != 4*trials || n.Flagged != c.flag || math.Abs(n.Ratio*c.k*c.k-1) > 0.03 {
			t.Errorf("sigma/%v: %+v, want flagged %v", c.k, n, c.flag)
		}
		if want := 1 / math.Sqrt(1-n.Threshold*math.Sqrt(2.0/float64(n.Draws))); math.Abs(n.Factor/want-1) > 1e-3 {
			t.Errorf("factor %v, the Gaussian formula gives %v", n.Factor, want)
		}
		if c.k == 1.1 && res.EpsLower > res.Charged {
			t.Logf("the canary test caught sigma/1.1 too (chance)")
		}
	}
	// The default trial count: Factor from the test's own computation.
	var m secondMoment
	for range 4 * 100_000 {
		m.add(int64(p.Sigma))
	}
	d, err := noiseVarianceTest(m, p.Sigma, 1, 1e-3)
	if err != nil {
		t.Fatal(err)
	}
	if !(d.Factor > 1 && d.Factor < 1.004) {
		t.Errorf("default trials: factor %v, want in (1, 1.004)", d.Factor)
	}
}

// TestSecondMomentExact: the 128-bit accumulator and dgMoments against
// direct computation.
func TestSecondMomentExact(t *testing.T) {
	var m secondMoment
	var want float64
	for _, k := range []int64{0, 1, -1, 3_000_000_000, -(1 << 40), 7} {
		m.add(k)
		want += float64(k) * float64(k)
	}
	if m.n != 6 || m.sum() != want {
		t.Fatalf("sum %v n %d, want %v 6", m.sum(), m.n, want)
	}
	// N_Z(0, 1): E K² = 0.99999999..., well known below σ² (CKS 2020).
	v, m4, err := dgMoments(1)
	if err != nil || !(v < 1 && v > 0.9999) || !(m4 > 2.99 && m4 < 3.01) {
		t.Fatalf("dgMoments(1) = %v, %v, %v", v, m4, err)
	}
	v, m4, _ = dgMoments(300)
	if math.Abs(v/90000-1) > 1e-12 || math.Abs(m4/(3*90000*90000)-1) > 1e-12 {
		t.Fatalf("dgMoments(300) = %v, %v", v, m4)
	}
}
