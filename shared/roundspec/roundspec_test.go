package roundspec

import (
	"errors"
	"math"
	"testing"

	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/mechanism"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/wire"
)

// announceable lists one parameter set per protocol × randomizer the
// system can announce (small d so the statistical checks are quick).
func announceable(t *testing.T) []wire.Params {
	t.Helper()
	var out []wire.Params
	for _, proto := range ShuffleProtocols() {
		rzs := []wire.Randomizer{wire.RandomizerLaplace, wire.RandomizerRGB, wire.RandomizerGaussian}
		if proto.Wire().IsAPES() {
			rzs = []wire.Randomizer{wire.RandomizerClipLaplace}
		}
		for _, rz := range rzs {
			o := Options{Protocol: proto.Wire(), Randomizer: rz, K: 4, EpsL: 8, Clip: 0.5, MinBatch: 1}
			if rz == wire.RandomizerRGB {
				o.Buckets = 6
			}
			p, _, err := Build(40, 30, o)
			if err != nil {
				t.Fatalf("%v/%v: %v", proto.Wire(), rz, err)
			}
			out = append(out, p)
		}
	}
	return out
}

// TestPartiesAgree: for every announceable protocol and randomizer, the
// pieces each party takes from the spec are one derivation: the encoder's
// per-coordinate guarantee is the release's Eps0 and the randomizer's; the
// report is (EpsL, DeltaL)-LDP as announced; the shape is the announced
// one; every value the encoder emits and every dummy the relay draws is
// admissible at the aggregator, for extreme inputs too; the relay pads
// every dimension to exactly the batch's n_p; and the aggregator's estimate
// through the relay is unbiased.
//
// Unbiasedness: SS-Simple and SS-Double at n = 30 volunteers whose clipped
// update is +C on every coordinate, 400 seeded rounds; each coordinate's
// estimate has standard deviation scale·sd·sqrt(n_p)/n per round (sd =
// NoiseStd, the debiased noise per message; scale d/k for SS-Double), and
// the mean over 400 rounds and 40 coordinates (16,000 independent draws)
// is within 6 standard errors (plus the clamped mean's curvature,
// 2C·Bias/Slope) of C: a correct
// estimator fails with probability below 1e-8 (the seed is fixed).
func TestPartiesAgree(t *testing.T) {
	for _, p := range announceable(t) {
		name := p.Protocol.String() + "/" + p.Randomizer.String()
		spec := checkAgree(t, name, p)
		switch {
		case p.Protocol.IsAPES():
			checkAPESUnbiased(t, name, spec)
		case p.Protocol != wire.ProtocolSSTopk:
			checkUnbiased(t, name, spec)
		}
	}
}

// checkAgree is TestPartiesAgree's agreement of the encoder, the relay,
// the aggregator and the ledger for one announceable shuffle parameter
// set (without the unbiasedness check), and returns the spec.
func checkAgree(t *testing.T, name string, p wire.Params) *Spec {
	t.Helper()
	spec, err := New(p)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	enc, err := spec.Encoder(0)
	if err != nil {
		t.Fatal(err)
	}
	rel := spec.Release(1, 30, int(p.NP))
	if err := rel.Validate(); err != nil {
		t.Fatalf("%s: release: %v", name, err)
	}
	if enc.CoordinateEpsilon() != rel.Eps0 || rel.Eps0 != spec.Blanket().Epsilon() || rel.Eps0 != p.PerCoordinateEpsilon() {
		t.Errorf("%s: encoder %v, release %v, randomizer %v, announced %v per coordinate", name,
			enc.CoordinateEpsilon(), rel.Eps0, spec.Blanket().Epsilon(), p.PerCoordinateEpsilon())
	}
	if math.Abs(enc.Epsilon()-p.EpsL) > 1e-9*p.EpsL || math.Abs(enc.Delta()-p.DeltaL) > 1e-15 {
		t.Errorf("%s: report (%v, %v)-LDP, announced (%v, %v)", name, enc.Epsilon(), enc.Delta(), p.EpsL, p.DeltaL)
	}
	if sh := enc.Shape(); sh.Width != 1 || sh.Messages != p.Messages() {
		t.Errorf("%s: shape %+v, announced %d messages", name, sh, p.Messages())
	}
	wantRel := map[wire.Protocol]string{wire.ProtocolSSSimple: privacy.ProtocolSSSimple, wire.ProtocolSSDouble: privacy.ProtocolSSDouble, wire.ProtocolSSTopk: privacy.ProtocolSSTopk,
		wire.ProtocolAPES: privacy.ProtocolAPES, wire.ProtocolSAPES: privacy.ProtocolLocal} // S-APES: its local guarantee (docs/privacy.md)
	if rel.Protocol != wantRel[p.Protocol] || rel.Randomizer != p.Randomizer.String() {
		t.Errorf("%s: release %s/%s", name, rel.Protocol, rel.Randomizer)
	}
	src := noise.NewSeeded(uint64(p.Protocol)*10 + uint64(p.Randomizer))
	var all []mechanism.Message
	for i := range 30 {
		x := make([]float64, p.D)
		for j := range x {
			x[j] = []float64{-1e300, 1e300, 0, 5e-324}[(i+j)%4] // clipped to [-C, C]
		}
		msgs, err := enc.Encode(x, src)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, msgs...)
	}
	b, _, err := spec.Shuffle(all, src)
	if err != nil {
		t.Fatalf("%s: relay: %v", name, err)
	}
	counts := make([]int, p.Columns())
	for _, m := range b.Messages {
		if len(m.Indices) != 1 || len(m.Values) != 1 {
			t.Fatalf("%s: a message of width %d", name, len(m.Indices))
		}
		counts[m.Indices[0]]++
		if !spec.Admissible(m.Values[0]) {
			t.Fatalf("%s: value %v not admissible at the aggregator", name, m.Values[0])
		}
	}
	for j, c := range counts {
		if c != b.NP {
			t.Fatalf("%s: dimension %d has %d messages, batch n_p %d", name, j, c, b.NP)
		}
	}
	if p.Protocol == wire.ProtocolSSTopk && b.NP != int(p.NP) {
		t.Errorf("%s: ss-topk's n_p moved from %d to %d", name, p.NP, b.NP)
	}
	return spec
}

func checkUnbiased(t *testing.T, name string, spec *Spec) {
	t.Helper()
	p := spec.Params()
	enc, _ := spec.Encoder(0)
	an, err := spec.Analyzer()
	if err != nil {
		t.Fatal(err)
	}
	src := noise.NewSeeded(99)
	const n, rounds = 30, 400
	x := make([]float64, p.D)
	for j := range x {
		x[j] = 10 // clipped to C
	}
	sum := 0.0
	for range rounds {
		var all []mechanism.Message
		for range n {
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
		est, err := an.Estimate(b, n)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range est {
			sum += v
		}
	}
	mean := sum / float64(rounds*int(p.D))
	sd, err := spec.NoiseStd()
	if err != nil {
		t.Fatal(err)
	}
	// Each coordinate's estimate sums n_p debiased messages (noise sd
	// NoiseStd each, scaled by d/k for SS-Double) over n; estimates are
	// independent across coordinates and rounds.
	scale := float64(p.D) / float64(spec.Perturbed())
	if p.Protocol == wire.ProtocolSSSimple {
		scale = 1
	}
	se := scale * sd * math.Sqrt(float64(p.NP)) / n / math.Sqrt(float64(rounds)*float64(p.D))
	// The clamped mean's distance from its tangent, per real value, in
	// update units (randomizer.Bounded.Bias); x~ = 1 is where it is largest.
	_, slope := spec.Randomizer().Affine()
	bias := 2 * p.Clip * spec.Randomizer().Bias() / slope
	if math.Abs(mean-p.Clip) > 6*se+bias {
		t.Errorf("%s: mean estimate %v, want the clipped mean %v", name, mean, p.Clip)
	}
}

// TestLayoutsWithoutProofRefused: widths above 1 and unknown protocols are
// never announceable, and Build never produces one.
func TestLayoutsWithoutProofRefused(t *testing.T) {
	for _, p := range announceable(t) {
		for _, w := range []uint32{2, 4} {
			q := p
			q.Width = w
			if q.Validate() != nil {
				continue // not even well-formed (e.g. width must divide k*l)
			}
			if _, err := New(q); !errors.Is(err, ErrLayout) {
				t.Errorf("%v/%v width %d: %v", q.Protocol, q.Randomizer, w, err)
			}
		}
	}
	if _, err := lookup(9); err == nil {
		t.Error("unknown protocol found")
	}
	if _, _, err := Build(40, 30, Options{Protocol: wire.ProtocolSSDouble, K: 4, Randomizer: wire.RandomizerRGB}); err == nil {
		t.Error("rgb without buckets built")
	}
	for _, bad := range []Options{{EpsL: math.NaN()}, {Clip: -1}, {K: -1}, {CheckInP: math.Inf(1)}} {
		if _, _, err := Build(40, 30, bad); err == nil {
			t.Errorf("options %+v built", bad)
		}
	}
}

// TestPersonalLevel: a personal fraction f lowers the encoder's guarantee
// to exactly f·EpsL (KeepFor/KeptEpsilon), keeps the randomizer and the
// shape, and the kept fraction of reported coordinates is q: over 20,000
// seeded coordinates with Laplace at a large eps_c (so R(x=1) and the
// blanket are far apart: a value above 0.75 is a kept datum with
// probability 1 - e^{-eps_c/4}/2 and a blanket sample with probability
// e^{-eps_c/4}/2), the share of values above 0.75 is within 5 standard
// errors of its expectation (false failure below 1e-6).
func TestPersonalLevel(t *testing.T) {
	p, _, err := Build(40, 30, Options{Protocol: wire.ProtocolSSSimple, EpsL: 40 * 40, MinBatch: 1})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	full, _ := spec.Encoder(0)
	for _, f := range []float64{0.9, 0.5, 0.1} {
		enc, err := spec.Encoder(f)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(enc.Epsilon()-f*p.EpsL) > 1e-9*p.EpsL || enc.Shape() != full.Shape() || enc.Randomizer() != full.Randomizer() {
			t.Errorf("f = %v: report epsilon %v, want %v", f, enc.Epsilon(), f*p.EpsL)
		}
		loc := spec.LocalRelease(f)
		if math.Abs(loc.Eps0*float64(loc.K)-f*p.EpsL) > 1e-9*p.EpsL {
			t.Errorf("f = %v: local release %v x %d", f, loc.Eps0, loc.K)
		}
		q, _ := mechanism.KeepFor(spec.Randomizer().Epsilon(), f)
		src := noise.NewSeeded(uint64(f * 100))
		x := make([]float64, p.D)
		for j := range x {
			x[j] = 1
		}
		hi, total := 0, 0
		for total < 20000 {
			msgs, _ := enc.Encode(x, src)
			for _, m := range msgs {
				if m.Values[0] > 0.75 {
					hi++
				}
				total++
			}
		}
		tail := math.Exp(-spec.Randomizer().Epsilon()/4) / 2
		want := q*(1-tail) + (1-q)*tail
		se := math.Sqrt(want * (1 - want) / float64(total))
		if got := float64(hi) / float64(total); math.Abs(got-want) > 5*se {
			t.Errorf("f = %v: %.4f of values above 0.75, want %.4f (q = %.4f)", f, got, want, q)
		}
	}
}

// TestSecAggSpec: a secure-summation spec derives its secagg parameters
// from the announcement (clip, bits, sigma, quota as the field bound), its
// release carries one server's sigma and the quantized vector's
// sensitivity at the announced check-in rate, shuffle-only derivations are
// refused, and CalibrateSigma's sigma meets the budget it was asked for
// (and a slightly smaller one does not).
func TestSecAggSpec(t *testing.T) {
	const d, rounds, q, eps, delta = 7850, 30, 0.1, 4.0, 1e-5
	sigma, err := CalibrateSigma(d, Options{}, rounds, q, eps, delta)
	if err != nil {
		t.Fatal(err)
	}
	p, lr, err := Build(d, 200, Options{Protocol: wire.ProtocolSecAgg, Sigma: sigma, CheckInP: q})
	if err != nil {
		t.Fatal(err)
	}
	if p.Randomizer != wire.RandomizerDiscreteGaussian || p.Bits != 0 || p.Quota != 400 || p.Clip != DefaultSecAggClip || lr != DefaultSecAggLR {
		t.Fatalf("params %+v lr %v", p, lr)
	}
	spec, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := spec.SecAgg()
	if err != nil || sp.Dim != d || sp.Sigma != sigma || sp.MaxReports != 400 || sp.Clip != p.Clip {
		t.Fatalf("secagg params %+v, %v", sp, err)
	}
	if spec.IsShuffle() || spec.Randomizer() != nil || spec.Perturbed() != 0 {
		t.Fatal("a secagg spec looks like a shuffle spec")
	}
	for name, err := range map[string]error{
		"encoder":  func() error { _, err := spec.Encoder(0); return err }(),
		"analyzer": func() error { _, err := spec.Analyzer(); return err }(),
		"pad":      func() error { _, err := spec.Pad(nil, noise.NewSeeded(1)); return err }(),
	} {
		if !errors.Is(err, ErrNotShuffle) {
			t.Errorf("%s: %v", name, err)
		}
	}
	rel := spec.Release(1, 180, 0)
	if err := rel.Validate(); err != nil || rel.Protocol != privacy.ProtocolSecAgg || rel.SecAggSigma != sigma ||
		rel.SecAggSensitivity != sp.Sensitivity() || rel.CheckInRate != q {
		t.Fatalf("release %+v: %v", rel, err)
	}
	rels := make([]privacy.Release, rounds)
	for i := range rels {
		rels[i] = spec.Release(i+1, 180, 0)
	}
	rep, err := privacy.Account(rels, delta)
	if err != nil || rep.Tightest < 0 {
		t.Fatalf("account: %v", err)
	}
	if got := rep.Rows[rep.Tightest].Epsilon; got > eps || got < 0.9*eps {
		t.Errorf("%d rounds at the calibrated sigma %v: epsilon %v, want just below %v", rounds, sigma, got, eps)
	}
	if e, err := privacy.SecAggReplaceOneEpsilon(0.99*sigma, sp.Sensitivity(), q, rounds, delta); err != nil || e <= eps {
		t.Errorf("1%% less noise still meets the budget: %v %v", e, err)
	}
	if _, err := (&Spec{}).SecAgg(); !errors.Is(err, ErrNotSecAgg) {
		t.Errorf("a shuffle spec's secagg params: %v", err)
	}
	if _, _, err := Build(d, 200, Options{Protocol: wire.ProtocolSecAgg}); err == nil {
		t.Error("secagg without sigma built")
	}
}

// TestSecAggShares: a volunteer's shares, sealed as the client seals them,
// have exactly the sizes the spec announces for the Shares frame.
func TestSecAggShares(t *testing.T) {
	p, _, err := Build(40, 10, Options{Protocol: wire.ProtocolSecAgg, Sigma: 50, Clip: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	lead, help, err := spec.SharesSizes()
	if err != nil {
		t.Fatal(err)
	}
	r, err := spec.SecAggRound(7)
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float64, 40)
	x[3] = 2
	l, h, err := r.Shard(x, noise.NewSeeded(1))
	if err != nil {
		t.Fatal(err)
	}
	if envelope.ShareSealedLen(len(l)) != lead || envelope.ShareSealedLen(len(h)) != help {
		t.Fatalf("shares of %d and %d bytes sealed, spec says %d and %d", len(l), len(h), lead, help)
	}
}
