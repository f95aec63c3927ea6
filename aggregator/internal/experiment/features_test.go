package experiment

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/blanket-fl/blanket/aggregator/internal/params"
	"github.com/blanket-fl/blanket/shared/dataset"
	"github.com/blanket-fl/blanket/shared/features"
	"github.com/blanket-fl/blanket/shared/pine"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/wire"
)

// TestServerOptSteps checks each optimiser's step against its formula
// written out by hand for two rounds (Δ1 = (1, -2), Δ2 = (3, 0.5)).
func TestServerOptSteps(t *testing.T) {
	d1, d2 := []float64{1, -2}, []float64{3, 0.5}
	const lr, b1, b2, tau = 0.5, 0.9, 0.99, 1e-3
	run := func(kind string) []float64 {
		p := serverOptParams{Kind: kind, Beta1: b1, Beta2: b2, Tau: tau}
		if err := p.validate(); err != nil {
			t.Fatal(err)
		}
		o := newServerOpt(p, lr)
		g := []float64{10, 20}
		o.step(g, d1)
		o.step(g, d2)
		return g
	}
	near := func(kind string, got, want []float64) {
		for j := range want {
			if math.Abs(got[j]-want[j]) > 1e-12*(1+math.Abs(want[j])) {
				t.Errorf("%s: coordinate %d = %.15g, want %.15g", kind, j, got[j], want[j])
			}
		}
	}
	var sgd, mom, adam, yogi []float64
	for j := range d1 {
		sgd = append(sgd, []float64{10, 20}[j]+lr*(d1[j]+d2[j]))
		m1 := d1[j]
		m2 := b1*m1 + d2[j]
		mom = append(mom, []float64{10, 20}[j]+lr*(m1+m2))
		// Adam and Yogi: m0 = 0, v0 = τ².
		am1 := (1 - b1) * d1[j]
		am2 := b1*am1 + (1-b1)*d2[j]
		av1 := b2*tau*tau + (1-b2)*d1[j]*d1[j]
		av2 := b2*av1 + (1-b2)*d2[j]*d2[j]
		adam = append(adam, []float64{10, 20}[j]+lr*am1/(math.Sqrt(av1)+tau)+lr*am2/(math.Sqrt(av2)+tau))
		// Yogi: v0 = τ² < Δ² so v grows by (1-β2)Δ² each time here.
		yv1 := tau*tau + (1-b2)*d1[j]*d1[j]
		yv2 := yv1 - (1-b2)*d2[j]*d2[j]*math.Copysign(1, yv1-d2[j]*d2[j])
		yogi = append(yogi, []float64{10, 20}[j]+lr*am1/(math.Sqrt(yv1)+tau)+lr*am2/(math.Sqrt(yv2)+tau))
	}
	near("sgd", run(optSGD), sgd)
	near("momentum", run(optMomentum), mom)
	near("adam", run(optAdam), adam)
	near("yogi", run(optYogi), yogi)
	if slices.Equal(run(optAdam), run(optYogi)) {
		t.Error("adam and yogi took the same steps")
	}
	for _, p := range []serverOptParams{{Kind: "lamb"}, {Kind: optAdam, Beta1: 1, Beta2: 0.9, Tau: 1}, {Kind: optAdam, Beta1: 0.9, Beta2: 0.9, Tau: 0}, {Kind: optMomentum, Beta1: -0.1, Beta2: 0.9, Tau: 1}} {
		if err := p.validate(); err == nil {
			t.Errorf("%+v accepted", p)
		}
	}
}

// TestFeaturedWorld: the identity map is the product's world
// (w.repartition, the same examples bit for bit); pool4 keeps the
// partition (each volunteer holds the same digits, so the same labels),
// gives d = 10 x 49 + 10, and its features are the pooled pixels
// standardized with the training part's statistics.
func TestFeaturedWorld(t *testing.T) {
	ctx := context.Background()
	w, err := loadWorld("mnist-sample", "", 10, false, 7, 2)
	if err != nil {
		t.Fatal(err)
	}
	id, err := w.featured(ctx, "identity", 20, false)
	if err != nil {
		t.Fatal(err)
	}
	rp, err := w.repartition(20, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(id.users) != len(rp.users) || id.shape != rp.shape {
		t.Fatalf("identity: %d users, shape %+v; repartition %d, %+v", len(id.users), id.shape, len(rp.users), rp.shape)
	}
	for u := range id.users {
		for i := 0; i < id.users[u].Len(); i++ {
			if !slices.Equal(id.users[u].Row(i), rp.users[u].Row(i)) {
				t.Fatalf("identity: user %d example %d differs from the product's", u, i)
			}
		}
	}
	pw, err := w.featured(ctx, "pool4", 20, false)
	if err != nil {
		t.Fatal(err)
	}
	if pw.shape.Features != 49 || pw.shape.NumParams() != 500 || len(pw.users) != len(rp.users) || pw.test.Len() != rp.test.Len() {
		t.Fatalf("pool4: shape %+v, %d users, %d test", pw.shape, len(pw.users), pw.test.Len())
	}
	for u := range pw.users {
		for i := 0; i < pw.users[u].Len(); i++ {
			if pw.users[u].Label(i) != rp.users[u].Label(i) {
				t.Fatalf("pool4: user %d example %d has label %d, the product's partition %d", u, i, pw.users[u].Label(i), rp.users[u].Label(i))
			}
		}
	}
	// Recompute the features of the first training digit by hand.
	pooled, err := w.mapSet(ctx, features.AvgPool{K: 4}, w.source.train)
	if err != nil {
		t.Fatal(err)
	}
	z, err := dataset.FitStandardizer(pooled)
	if err != nil {
		t.Fatal(err)
	}
	zs, err := z.Apply(pooled)
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float64, 784)
	for j, v := range w.source.train.Row(0) {
		x[j] = float64(v)
	}
	y := make([]float64, 49)
	if err := (features.AvgPool{K: 4}).Apply(y, x); err != nil {
		t.Fatal(err)
	}
	for j := range y {
		if math.Abs(float64(pooled.Row(0)[j])-y[j]) > 1e-6 {
			t.Fatalf("pooled feature %d = %v, by hand %v", j, pooled.Row(0)[j], y[j])
		}
	}
	if !slices.Equal(zs.Row(0), pw.train.Row(0)) {
		t.Error("pool4 world's first training digit is not the standardized pooled digit")
	}
	if _, err := w.featured(ctx, "wavelets", 20, false); err == nil {
		t.Error("unknown map accepted")
	}
}

// TestSecAggFeaturesIsTheProducts: with a feature map the model's d
// changes, and the runner's round is still the product's for that d:
// σ is params.SecAggSigma(d, ...) for the aggregator's flags and the
// PINE instance is pine.ForBlanket(d, C); the charge still meets ε 4.
// The sensitivity is the clip's (PINE's norm bound), whatever d.
func TestSecAggFeaturesIsTheProducts(t *testing.T) {
	sp := defaultSecAggParams()
	for _, name := range []string{"pool2", "scatter1-pool"} {
		fm, err := features.Parse(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := fm.Dim(784)
		if err != nil {
			t.Fatal(err)
		}
		d := 10*f + 10
		sr, err := newSecAggRun(sp, d, sp.Pop)
		if err != nil {
			t.Fatal(err)
		}
		agg := params.Choice{Protocol: wire.ProtocolSecAgg.String(), Randomizer: "laplace", CheckIn: 1}
		sigma, err := params.SecAggSigma(d, 400, agg, 5, 4, 1e-5)
		if err != nil {
			t.Fatal(err)
		}
		pn, err := pine.ForBlanket(d, roundspec.DefaultSecAggClip)
		if err != nil {
			t.Fatal(err)
		}
		if sr.sigma != sigma || sr.pn.Config() != pn.Config() || sr.sens != pn.Sensitivity() || sr.pn.Config().Dimension != d {
			t.Fatalf("%s (d %d): runner sigma %v, PINE %+v; aggregator sigma %v, PINE %+v", name, d, sr.sigma, sr.pn.Config(), sigma, pn.Config())
		}
		if r := sr.sens / sr.pn.Scale() / sp.Clip; r < 1 || r > 1.01 {
			t.Errorf("%s: sensitivity %v C, want the clip (within PINE's rounding)", name, r)
		}
		m, err := secaggMethod(sp, d, sp.Pop, tableSecAgg)
		if err != nil {
			t.Fatal(err)
		}
		run := &runResult{Users: 400, Pop: 400}
		for r := range 5 {
			run.Rounds = append(run.Rounds, roundRecord{Round: r + 1, Participants: 400, CheckInRate: 1})
		}
		if c := m.claim(run); !(c.Total <= 4*(1+1e-9) && c.Total > 3.9) {
			t.Errorf("%s: claimed eps %v, want just below 4", name, c.Total)
		}
		t.Logf("%s: d %d, sigma %.1f units = %.4f x sensitivity", name, d, sigma, sigma/sr.sens)
	}
}

// TestSecAggFeaturesRun: a short run with a feature map and a server
// optimiser learns and is accounted like the product's run; the
// non-private reference of the same settings learns and claims no
// privacy. 800 volunteers of 10 digits, 2 rounds.
func TestSecAggFeaturesRun(t *testing.T) {
	o := tinySecAgg()
	o.SecAgg.Features = "pool4"
	o.SecAgg.Opt = serverOptParams{Kind: optMomentum, Beta1: 0.5}.withDefaults()
	o.SecAgg.ServerLR = 4
	o.Protocols = []string{"secagg", secaggNPID}
	res := simulateJSON(t, o)
	if len(res) != 2 || res[0].ID != "secagg" || res[1].ID != secaggNPID {
		t.Fatalf("got %d results", len(res))
	}
	if res[0].Final < 0.5 || res[1].Final < 0.5 {
		t.Errorf("accuracy: PINE %.3f, non-private %.3f; want >= 0.5 (chance 0.1)", res[0].Final, res[1].Final)
	}
	if c := res[0].Claim; !(c.Total <= 4*(1+1e-9) && c.Total > 3.9 && c.Delta == 1e-5) {
		t.Errorf("PINE claim %+v", c)
	}
	if c := res[1].Claim; c.Total != -1 { // jsonSafe: infinite
		t.Errorf("non-private claim %+v, want none (infinite)", c)
	}
	if n := res[0].Note; !strings.Contains(n, "d = 500") || !strings.Contains(n, "features pool4") || !strings.Contains(n, "server momentum beta 0.5") {
		t.Errorf("note does not say the settings: %s", res[0].Note)
	}
}
