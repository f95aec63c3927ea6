package roundspec

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/blanket-fl/blanket/shared/mechanism"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/randomizer"
	"github.com/blanket-fl/blanket/shared/wire"
)

// apesSpec builds an APES or S-APES spec of dimension d for about n
// volunteers at the largest per-coordinate budget epsMax.
func newAPESSpec(t *testing.T, proto wire.Protocol, d, n int, epsMax float64, o Options) *Spec {
	t.Helper()
	o.Protocol, o.EpsL, o.MinBatch = proto, epsMax*float64(d), 1
	if o.Clip == 0 {
		o.Clip = 0.5
	}
	p, _, err := Build(d, n, o)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// levels returns n levels spread evenly over [lo, 1] (a heterogeneous
// budget profile: the quantiles lo + (1-lo)(i+1/2)/n).
func levels(n int, lo float64) []float64 {
	f := make([]float64, n)
	for i := range f {
		f[i] = lo + (1-lo)*(float64(i)+0.5)/float64(n)
	}
	return f
}

// apesRound encodes one round of volunteers at the given levels, all with
// update x, and shuffles it through the spec (the relay's Pad and
// dummies).
func apesRound(t *testing.T, spec *Spec, lv []float64, x []float64, src noise.Source) mechanism.Batch {
	t.Helper()
	var all []mechanism.Message
	for _, f := range lv {
		enc, err := spec.Encoder(f)
		if err != nil {
			t.Fatal(err)
		}
		msgs, err := enc.Encode(x, src)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, msgs...)
	}
	b, _, err := spec.Shuffle(all, src)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkAPESUnbiased is TestPartiesAgree's estimate check for APES (called
// with the table's spec; it raises the budget so the check is sharp):
// see TestAPESAnalyzerHeterogeneous, which it runs at 60 rounds.
func checkAPESUnbiased(t *testing.T, name string, spec *Spec) {
	t.Helper()
	if spec.Params().Protocol != wire.ProtocolAPES {
		return // S-APES's estimate is biased by its sparsification (mechanism.APESAnalyzer)
	}
	p := spec.Params()
	p.EpsL = 4 * float64(p.D)
	s, err := New(p)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	apesUnbiased(t, name, s, levels(int(p.NP), 0.25), 60)
}

// apesUnbiased runs rounds seeded rounds of len(lv) volunteers at levels lv
// whose clipped update is +C/2 on every coordinate and checks that the mean
// estimate over all rounds and coordinates is C/2 plus the calibration's
// second-order (Jensen) bias, computed below, within 6 standard errors plus
// that bias again (the standard error measured from the rounds' estimates,
// which are independent across rounds and coordinates: a correct estimator
// fails with probability below 1e-8). Measured (go test -v -run
// 'APESAnalyzerHet|PartiesAgree' ./shared/roundspec/): n = 200: deviation
// 0.0030, bias 0.0013, standard error 0.0009; n = 30: 0.0137, 0.0091,
// 0.0023 (C/2 = 0.25). It also checks that the test can fail: the same
// batches calibrated as if every volunteer were at the largest level
// (budget column rewritten to 1) are off by more than the tolerance
// (0.173 instead of 0.25).
func apesUnbiased(t *testing.T, name string, spec *Spec, lv []float64, rounds int) {
	t.Helper()
	p := spec.Params()
	an, err := spec.Analyzer()
	if err != nil {
		t.Fatal(err)
	}
	src := noise.NewSeeded(7)
	x := make([]float64, p.D)
	for j := range x {
		x[j] = p.Clip / 2
	}
	var sum, sum2, naive float64
	for range rounds {
		b := apesRound(t, spec, lv, x, src)
		est, err := an.Estimate(b, len(lv))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, v := range est {
			sum += v
			sum2 += v * v
		}
		for _, m := range b.Messages {
			if m.Indices[0] == p.D {
				m.Values[0] = 1
			}
		}
		if est, err = an.Estimate(b, len(lv)); err != nil {
			t.Fatal(err)
		}
		for _, v := range est {
			naive += v
		}
	}
	m := float64(rounds) * float64(p.D)
	mean := sum / m
	v := sum2/m - mean*mean
	se := math.Sqrt(v / (m - 1))
	want := p.Clip / 2
	// Jensen: the estimate is h(ybar) with h the inverse of the mixture
	// mean M, so E[h(ybar)] - h(m) = h''(m)Var(ybar)/2 + ... with
	// h'' = -M''/M'^3; in update units (2C per unit of g, Var(g) =
	// Var(ybar)/M'^2) the bias is -(M''/(2M'))·v/(2C), v the estimates'
	// variance. M', M'' by central differences at the true g = 3/4.
	eps := make([]float64, len(lv))
	_, epsMax, _ := spec.APES()
	for i, f := range lv {
		eps[i] = f * epsMax
	}
	cal, err := randomizer.NewClipLaplaceCalibrator(eps, APESRangeRatio)
	if err != nil {
		t.Fatal(err)
	}
	const g, h = 0.75, 1e-3
	m1 := (cal.Mean(g+h) - cal.Mean(g-h)) / (2 * h)
	m2 := (cal.Mean(g+h) - 2*cal.Mean(g) + cal.Mean(g-h)) / (h * h)
	bias := -m2 / (2 * m1) * v / (2 * p.Clip)
	tol := 6*se + 2*math.Abs(bias) // the second-order term, doubled for the higher ones
	t.Logf("%s: mean %.5f, want %v, standard error %.5f, second-order bias %.5f, all-at-the-largest-level %.5f", name, mean, want, se, bias, naive/m)
	if math.Abs(mean-want-bias) > tol-math.Abs(bias) {
		t.Errorf("%s: mean estimate %v, want %v + bias %v within %v (standard error %v)", name, mean, want, bias, tol, se)
	}
	if math.Abs(naive/m-want) <= tol {
		t.Errorf("%s: calibrating everyone at the largest level gives %v, also within %v of %v: the check cannot tell", name, naive/m, tol, want)
	}
}

// TestAPESAnalyzerHeterogeneous: APES at d = 20, largest per-coordinate
// budget 4, 200 volunteers whose levels spread over [0.25, 1] (budgets 1
// to 4 per coordinate), 100 seeded rounds: the calibrated estimate is
// unbiased up to its second-order bias, within the tolerance apesUnbiased
// states, with every column full (n_p = n) and with 50 virtual volunteers
// padded in (announced n_p 250).
func TestAPESAnalyzerHeterogeneous(t *testing.T) {
	lv := levels(200, 0.25)
	apesUnbiased(t, "n_p = n", newAPESSpec(t, wire.ProtocolAPES, 20, 200, 4, Options{}), lv, 100)
	padded := newAPESSpec(t, wire.ProtocolAPES, 20, 200, 4, Options{NP: 250})
	b := apesRound(t, padded, lv, make([]float64, 20), noise.NewSeeded(3))
	if b.NP != 250 || b.Stats.DummyMessages != 50*21 {
		t.Fatalf("padded round: n_p %d with %d dummies, want 250 and %d", b.NP, b.Stats.DummyMessages, 50*21)
	}
	apesUnbiased(t, "n_p = 250 > n", padded, lv, 100)
}

// TestAPESEncoderLevel: a volunteer at level f reports every coordinate
// with Clip-Laplace at its own f·ε* (not at the announced ε*), sends f in
// the budget column, and its local release says f·EpsL. The check is the
// LDP ratio: 200,000 seeded reports of coordinate 0 for the inputs +C and
// -C, values in 10 equal bins of [0, 1]; every bin's log frequency ratio
// is at most f·ε* + 5 standard errors, and the extreme bin's is at least
// 0.8·f·ε* - 5 standard errors (its exact value lies in [0.8, 1]·f·ε*, as
// the density ratio e^{2εz} over z in [0.4, 0.5] shows), so neither a
// weaker (ε* = 2 here, twice f·ε*) nor a much stronger randomizer passes;
// each standard error sqrt(1/c1 + 1/c2) is about 0.01, a false failure
// below 1e-6 per bin.
func TestAPESEncoderLevel(t *testing.T) {
	spec := newAPESSpec(t, wire.ProtocolAPES, 2, 30, 2, Options{})
	const f, n = 0.5, 200000
	enc, err := spec.Encoder(f)
	if err != nil {
		t.Fatal(err)
	}
	eps := f * 2
	if enc.CoordinateEpsilon() != eps || math.Abs(enc.Epsilon()-f*spec.Params().EpsL) > 1e-12 || enc.Delta() != 0 {
		t.Fatalf("encoder at level %v: per coordinate %v, report %v", f, enc.CoordinateEpsilon(), enc.Epsilon())
	}
	if loc := spec.LocalRelease(f); loc.Protocol != privacy.ProtocolLocal || loc.Randomizer != privacy.RandomizerClipLaplace ||
		math.Abs(loc.Eps0*float64(loc.K)-f*spec.Params().EpsL) > 1e-12 {
		t.Errorf("local release %+v", loc)
	}
	src := noise.NewSeeded(11)
	var hist [2][10]float64
	for s, x := range []float64{0.5, -0.5} { // the clip is 0.5
		in := []float64{x, 0}
		for range n {
			msgs, err := enc.Encode(in, src)
			if err != nil {
				t.Fatal(err)
			}
			if len(msgs) != 3 || msgs[2].Indices[0] != 2 || msgs[2].Values[0] != f {
				t.Fatalf("report %+v: want 2 values and the level %v at index 2", msgs, f)
			}
			v := msgs[0].Values[0]
			if !spec.Admissible(v) {
				t.Fatalf("value %v not admissible", v)
			}
			hist[s][min(9, int(v*10))]++
		}
	}
	for k := range 10 {
		lr := math.Log(hist[0][k] / hist[1][k])
		se := math.Sqrt(1/hist[0][k] + 1/hist[1][k])
		if math.Abs(lr) > eps+5*se {
			t.Errorf("bin %d: log ratio %v above the level's epsilon %v", k, lr, eps)
		}
		if k == 9 && lr < 0.8*eps-5*se {
			t.Errorf("extreme bin: log ratio %v, want at least %v: more noise than the level asks", lr, 0.8*eps)
		}
	}
}

// TestAPESBudgetsRangeChecked: the aggregator admits exactly the values
// and levels an honest volunteer or dummy can send ([0, 1], finite), and
// the analyzer calibrates a level outside (0, 1] as the centre 1/2 — the
// value the aggregator substitutes for a rejected message — so a round
// whose budget column carries 0, a negative, a too-large or a non-finite
// level estimates exactly as with 1/2 there. A batch whose budget column
// is short is refused.
func TestAPESBudgetsRangeChecked(t *testing.T) {
	spec := newAPESSpec(t, wire.ProtocolAPES, 5, 40, 2, Options{})
	for _, v := range []float64{0, 0.5, 1, 1e-300} {
		if !spec.Admissible(v) {
			t.Errorf("%v refused", v)
		}
	}
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -1e-9, 1 + 1e-9, 40} {
		if spec.Admissible(v) {
			t.Errorf("%v admitted", v)
		}
	}
	if spec.Center() != 0.5 {
		t.Errorf("centre %v", spec.Center())
	}
	an, _ := spec.Analyzer()
	b := apesRound(t, spec, levels(40, 0.3), []float64{0.1, -0.2, 0.3, 0, 0.5}, noise.NewSeeded(5))
	budget := -1
	for i, m := range b.Messages {
		if m.Indices[0] == 5 {
			budget = i
			break
		}
	}
	b.Messages[budget].Values[0] = 0.5
	want, err := an.Estimate(b, 40)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []float64{0, -3, 1.5, math.NaN(), math.Inf(1)} {
		b.Messages[budget].Values[0] = bad
		got, err := an.Estimate(b, 40)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("level %v: estimate %v (%v), want %v", bad, got, err, want)
		}
	}
	short := b
	short.Messages = slices.Delete(slices.Clone(b.Messages), budget, budget+1)
	if _, err := an.Estimate(short, 40); !errors.Is(err, mechanism.ErrNotPadded) {
		t.Errorf("short budget column: %v", err)
	}
	if _, err := an.Estimate(b, 41); err == nil {
		t.Error("more reports than n_p accepted")
	}
}

// TestAPESRelease: the ledger's release of an APES round charges every one
// of the n_p values of a dimension at the announced largest per-coordinate
// budget ε* = EpsL/d (whatever the volunteers chose), over all d
// dimensions, and privacy.Account charges it with a proven generic bound
// (FMT'21/FMT'22 clones, FMT'23 generic, or APES's closed forms, which at
// equal budgets are FMT'22's): no Laplace- or blanket-specific row is
// valid, and the charge is the same as for a generic ε*-LDP randomizer.
// The realized n_p, not the relay's report count, is the population.
// S-APES is charged its local guarantee EpsL per round, no more and no
// less (docs/privacy.md: its shuffled view is not a post-processing of
// APES's), never Proposition 1's 2b.
func TestAPESRelease(t *testing.T) {
	const delta = 1e-6
	spec := newAPESSpec(t, wire.ProtocolAPES, 10, 500, 0.5, Options{})
	rel := spec.Release(4, 480, 500)
	if err := rel.Validate(); err != nil {
		t.Fatal(err)
	}
	if rel.Protocol != privacy.ProtocolAPES || rel.Randomizer != privacy.RandomizerClipLaplace || rel.D != 10 || rel.K != 10 ||
		rel.SparseB != 0 || rel.N != 500 || len(rel.PersonalEps) != 500 || rel.Eps0 != 0.5 {
		t.Fatalf("release %+v", rel)
	}
	for _, e := range rel.PersonalEps {
		if e != 0.5 {
			t.Fatalf("a budget charged at %v, want the announced 0.5", e)
		}
	}
	rep, err := privacy.Account([]privacy.Release{rel}, delta)
	if err != nil || rep.Tightest < 0 {
		t.Fatalf("account: %v", err)
	}
	row := rep.Rows[rep.Tightest]
	switch row.Family {
	case privacy.FamilyFMT21, privacy.FamilyFMT23, privacy.FamilyAPESClosedForm:
	default:
		t.Errorf("charged by %s (%s)", row.Method, row.Family)
	}
	if !row.Proven || !(row.Epsilon < 10*0.5) {
		t.Errorf("charged row %+v: want a proven bound below the local 5", row)
	}
	for _, r := range rep.Rows {
		if r.Valid && (r.Family == privacy.FamilyVRLaplace || r.Family == privacy.FamilyVRRGB || r.Family == privacy.FamilyFLAMEClosedForm) {
			t.Errorf("a randomizer-specific row is valid: %s", r.Method)
		}
	}
	gen := rel
	gen.Randomizer = privacy.RandomizerGeneric
	grep, err := privacy.Account([]privacy.Release{gen}, delta)
	if err != nil || grep.Tightest < 0 || grep.Rows[grep.Tightest].Epsilon != row.Epsilon {
		t.Errorf("charged %v, generic eps*-LDP randomizer %v (%v)", row.Epsilon, grep.Rows[grep.Tightest].Epsilon, err)
	}

	sp := newAPESSpec(t, wire.ProtocolSAPES, 10, 500, 0.5, Options{K: 3})
	srel := sp.Release(4, 480, 500)
	if err := srel.Validate(); err != nil || srel.Protocol != privacy.ProtocolLocal || srel.SparseB != 0 || srel.Eps0*float64(srel.K) != sp.Params().EpsL {
		t.Fatalf("s-apes release %+v: %v", srel, err)
	}
	srep, err := privacy.Account([]privacy.Release{srel}, delta)
	if err != nil || srep.Tightest < 0 || math.Abs(srep.Rows[srep.Tightest].Epsilon-sp.Params().EpsL) > 1e-12 {
		t.Fatalf("s-apes charged %+v (%v), want its local %v", srep.Rows, err, sp.Params().EpsL)
	}
}

// TestAPESNoDummiesUnlessShort: with every column full (n_p raised to the
// report count) the relay adds nothing; padding to an announced n_p above
// the report count adds virtual volunteers at the largest level (value
// dummies admissible, budget dummies exactly 1); unequal columns (which
// complete reports never produce) are padded column by column.
func TestAPESNoDummiesUnlessShort(t *testing.T) {
	spec := newAPESSpec(t, wire.ProtocolAPES, 6, 10, 1, Options{NP: 4})
	x := []float64{1, -1, 0.2, 0, 0, 0.3}
	b := apesRound(t, spec, levels(10, 0.5), x, noise.NewSeeded(1))
	if b.NP != 10 || b.Stats.DummyMessages != 0 || len(b.Messages) != 70 {
		t.Fatalf("full round: n_p %d, %d dummies, %d messages", b.NP, b.Stats.DummyMessages, len(b.Messages))
	}
	b = apesRound(t, spec, levels(2, 0.5), x, noise.NewSeeded(2))
	if b.NP != 4 || b.Stats.DummyMessages != 14 {
		t.Fatalf("short round: n_p %d, %d dummies", b.NP, b.Stats.DummyMessages)
	}
	ones := 0
	for _, m := range b.Messages {
		if !spec.Admissible(m.Values[0]) {
			t.Fatalf("inadmissible %v", m.Values[0])
		}
		if m.Indices[0] == 6 && m.Values[0] == 1 {
			ones++
		}
	}
	if ones < 2 { // the two dummies' levels (the volunteers' are 0.625 and 0.875)
		t.Errorf("%d budget dummies at level 1", ones)
	}
	if spec.Dummy(6, noise.NewSeeded(1)) != 1 {
		t.Error("budget dummy not at level 1")
	}
}

// TestAPESNoiseStd: NoiseStd is the debiased noise of one report at the
// centre at the largest level: with 200 volunteers at level 1 whose update
// is zero, the 2,000 estimates (d = 20, 100 seeded rounds) have a standard
// deviation within 10% of NoiseStd/sqrt(200) (the sample standard deviation
// of 2,000 near-normal draws is within 10% with probability above
// 1 - 1e-5; the calibration is linear to first order at the centre).
func TestAPESNoiseStd(t *testing.T) {
	spec := newAPESSpec(t, wire.ProtocolAPES, 20, 200, 4, Options{})
	sd, err := spec.NoiseStd()
	if err != nil {
		t.Fatal(err)
	}
	an, _ := spec.Analyzer()
	src := noise.NewSeeded(17)
	lv := make([]float64, 200)
	for i := range lv {
		lv[i] = 1
	}
	var sum, sum2 float64
	m := 0
	for range 100 {
		est, err := an.Estimate(apesRound(t, spec, lv, make([]float64, 20), src), 200)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range est {
			sum += v
			sum2 += v * v
			m++
		}
	}
	mean := sum / float64(m)
	got := math.Sqrt(sum2/float64(m) - mean*mean)
	want := sd / math.Sqrt(200)
	t.Logf("estimate sd %v, NoiseStd/sqrt(n) %v", got, want)
	if math.Abs(got-want) > 0.1*want {
		t.Errorf("estimate sd %v, NoiseStd/sqrt(n) %v", got, want)
	}
}

// TestSAPESPadsNothing: S-APES announces n_p = 1, so the relay raises n_p
// to the report count and adds no dummy even in a short round; any other
// n_p is refused as a layout without a proof.
func TestSAPESPadsNothing(t *testing.T) {
	spec := newAPESSpec(t, wire.ProtocolSAPES, 6, 10, 1, Options{K: 2})
	if spec.Params().NP != 1 {
		t.Fatalf("s-apes announces n_p = %d", spec.Params().NP)
	}
	b := apesRound(t, spec, levels(2, 0.5), []float64{1, -1, 0.2, 0, 0, 0.3}, noise.NewSeeded(3))
	if b.NP != 2 || b.Stats.DummyMessages != 0 || len(b.Messages) != 14 {
		t.Fatalf("short round: n_p %d, %d dummies, %d messages", b.NP, b.Stats.DummyMessages, len(b.Messages))
	}
	p := spec.Params()
	p.NP = 4
	if _, err := New(p); !errors.Is(err, ErrLayout) {
		t.Fatalf("s-apes with n_p 4: %v", err)
	}
}
