package audit

import (
	"testing"

	"github.com/blanket-fl/blanket/shared/mechanism"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/wire"
)

// small is a small-scale spec of every announceable protocol: d = 24,
// k = 4, 30 volunteers (the audit's default), n_p = 10.
func small(t *testing.T, proto wire.Protocol, rz wire.Randomizer, epsL float64) *roundspec.Spec {
	t.Helper()
	o := roundspec.Options{Protocol: proto, Randomizer: rz, K: 4, NP: 10, EpsL: epsL, Clip: 0.5, MinBatch: 1}
	if rz == wire.RandomizerRGB {
		o.Buckets = 4
	}
	if proto == wire.ProtocolSSTopk {
		o.L = 2
	}
	if proto == wire.ProtocolSSSimple {
		o.NP = 30
	}
	p, _, err := roundspec.Build(24, 30, o)
	if err != nil {
		t.Fatal(err)
	}
	s, err := roundspec.New(p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// smallAPES is a small-scale APES or S-APES spec: d = 8 (S-APES keeps
// b = 2), ε_l = epsL (ε* = epsL/8), n_p = 36 for the audit's 30
// volunteers, so that every column carries 6 relay dummies
// (roundspec.Spec.Dummy).
func smallAPES(t *testing.T, proto wire.Protocol, epsL float64) *roundspec.Spec {
	t.Helper()
	np := 36 // APES: 6 relay dummies per column
	if proto == wire.ProtocolSAPES {
		np = 0 // S-APES pads nothing (roundspec: n_p = 1, raised to n)
	}
	p, _, err := roundspec.Build(8, 30, roundspec.Options{Protocol: proto, Randomizer: wire.RandomizerClipLaplace, K: 2, NP: np, EpsL: epsL, Clip: 0.5, MinBatch: 1})
	if err != nil {
		t.Fatal(err)
	}
	s, err := roundspec.New(p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestAuditBelowCharge is the privacy audit tier: for every protocol and
// randomizer Blanket can announce (and for SS-Topk both choices of
// neighbouring datasets), every attack's lower bound on the round's ε stays
// below the ε the ledger charges. FLAME protocols: 1,000 trials per
// hypothesis and phase, Clopper-Pearson at Alpha = 1e-4 on each side: for
// a correct charge each of the 12 attacks exceeds it with probability at
// most 2e-4, so a run fails with probability at most 12 × 2e-4 = 2.4e-3,
// the 12 runs at most 2.9e-2. APES and S-APES (smallAPES, volunteers at
// mixed levels: see apesNeighbours): 500 trials, Alpha = 1e-4, 14 attacks,
// at most 2.8e-3 per run; all 14 runs at most 3.5e-2 (seeds fixed: the
// outcome is deterministic).
func TestAuditBelowCharge(t *testing.T) {
	if testing.Short() {
		t.Skip("the audit tier runs without -short")
	}
	for _, proto := range []wire.Protocol{wire.ProtocolSSSimple, wire.ProtocolSSDouble, wire.ProtocolSSTopk} {
		for _, rz := range []wire.Randomizer{wire.RandomizerLaplace, wire.RandomizerRGB, wire.RandomizerGaussian} {
			spec := small(t, proto, rz, 4)
			kinds := []Neighbours{NeighboursFlip}
			if proto == wire.ProtocolSSTopk {
				kinds = append(kinds, NeighboursIndexSet)
			}
			for _, kind := range kinds {
				res, err := Run(spec, Options{Trials: 1000, Alpha: 1e-4, Seed: uint64(proto)<<8 | uint64(rz), Neighbours: kind})
				if err != nil {
					t.Fatalf("%v/%v/%s: %v", proto, rz, kind, err)
				}
				t.Logf("%v/%v/%s: charged %.3f, audited lower bound %.3f", proto, rz, res.Neighbours, res.Charged, res.EpsLower)
				if !(res.Charged > 0) || res.EpsLower > res.Charged {
					t.Errorf("%v/%v/%s: lower bound %.3f above the charge %.3f: %+v", proto, rz, kind, res.EpsLower, res.Charged, res.Findings)
				}
			}
		}
	}
	for _, proto := range []wire.Protocol{wire.ProtocolAPES, wire.ProtocolSAPES} {
		res, err := Run(smallAPES(t, proto, 4), Options{Trials: 500, Alpha: 1e-4, Seed: uint64(proto) << 8})
		if err != nil {
			t.Fatalf("%v: %v", proto, err)
		}
		t.Logf("%v: n_p %d, charged %.3f, audited lower bound %.3f", proto, res.NP, res.Charged, res.EpsLower)
		wantNP := 36 // APES: 30 reports and 6 relay dummies per column
		if proto == wire.ProtocolSAPES {
			wantNP = 30 // S-APES: no dummies
		}
		if !(res.Charged > 0) || res.EpsLower > res.Charged || res.NP != wantNP || len(res.Findings) != len(attacks)+len(apesAttacks) {
			t.Errorf("%v: lower bound %.3f above the charge %.3f (n_p %d): %+v", proto, res.EpsLower, res.Charged, res.NP, res.Findings)
		}
	}
}

// TestAuditRealCrypto: the same audit with every message sealed and opened
// by HPKE as the relay forwards and the aggregator opens it (sealed sizes
// in the attacks, and the check that no two messages share an
// encapsulated key), on SS-Double with Laplace; 150 trials per hypothesis
// and phase (Alpha = 1e-3: false failure at most 1.8e-2, fixed seed).
func TestAuditRealCrypto(t *testing.T) {
	if testing.Short() {
		t.Skip("the audit tier runs without -short")
	}
	spec := small(t, wire.ProtocolSSDouble, wire.RandomizerLaplace, 4)
	res, err := Run(spec, Options{Trials: 150, Seed: 11, RealCrypto: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.EpsLower > res.Charged {
		t.Errorf("lower bound %.3f above the charge %.3f: %+v", res.EpsLower, res.Charged, res.Findings)
	}
}

// TestAuditCatchesLeaks: the attacks are not blind. Each canary is a relay
// or client with a known leak; on it the audit must find a lower bound of
// at least 2 and above the ε the ledger charges for the spec, where the
// sound system of the same spec shows a smaller one. (1,000 trials at
// Alpha = 1e-4: a perfect distinguisher proves about 4.6; seeds fixed.)
// The APES canary is one volunteer (the target) whose encoder perturbs at
// 64 times the announced largest per-coordinate budget ε* while its budget
// message claims level 1, among honest volunteers at mixed levels.
func TestAuditCatchesLeaks(t *testing.T) {
	if testing.Short() {
		t.Skip("the audit tier runs without -short")
	}
	unshuffled := func(spec *roundspec.Spec, real []mechanism.Message, src noise.Source) (mechanism.Batch, error) {
		// Real messages in arrival order (the target's first), then the
		// dummies: a relay that forgot to shuffle.
		b2, _, err := spec.Shuffle(real, src)
		if err != nil {
			return b2, err
		}
		var dummies []mechanism.Message
		inReal := map[*float64]bool{}
		for i := range real {
			inReal[&real[i].Values[0]] = true
		}
		for _, m := range b2.Messages {
			if !inReal[&m.Values[0]] {
				dummies = append(dummies, m)
			}
		}
		b2.Messages = append(append([]mechanism.Message(nil), real...), dummies...)
		return b2, nil
	}
	markedDummies := func(spec *roundspec.Spec, real []mechanism.Message, src noise.Source) (mechanism.Batch, error) {
		// Dummies carry the blanket's mean instead of a blanket sample.
		b, _, err := spec.Shuffle(real, src)
		inReal := map[*float64]bool{}
		for i := range real {
			inReal[&real[i].Values[0]] = true
		}
		for _, m := range b.Messages {
			if !inReal[&m.Values[0]] {
				m.Values[0] = spec.Center()
			}
		}
		return b, err
	}
	for _, tc := range []struct {
		name  string
		proto wire.Protocol
		l     int
		epsL  float64
		kind  Neighbours
		pipe  func(*roundspec.Spec, []mechanism.Message, noise.Source) (mechanism.Batch, error)
		// weak: the volunteers randomize at weak times the announced
		// local budget (a client whose randomizer has a larger ε than the
		// ledger charges); 0: the announced one.
		weak float64
	}{
		{"unshuffled ss-simple", wire.ProtocolSSSimple, 1, 16, NeighboursFlip, unshuffled, 0},
		{"recognizable dummies, ss-topk", wire.ProtocolSSTopk, 1, 2, NeighboursIndexSet, markedDummies, 0}, // eps_l 2: SS-Topk's charge (no local row, docs/privacy.md) stays under the 1,000 trials' ceiling
		{"randomizer at 24 times the charged epsilon, ss-simple", wire.ProtocolSSSimple, 1, 4, NeighboursFlip, nil, 24},
		{"randomizer at 64 times the charged epsilon, ss-double", wire.ProtocolSSDouble, 1, 0.5, NeighboursFlip, nil, 64},
		{"target at 64 times the announced largest budget, apes", wire.ProtocolAPES, 1, 4, NeighboursFlip, nil, 64},
	} {
		build := func(epsL float64) *roundspec.Spec {
			if tc.proto.IsAPES() {
				return smallAPES(t, tc.proto, epsL)
			}
			o := roundspec.Options{Protocol: tc.proto, K: 4, L: tc.l, NP: 10, EpsL: epsL, Clip: 0.5, MinBatch: 1}
			if tc.proto == wire.ProtocolSSSimple {
				o.NP = 30
			}
			p, _, err := roundspec.Build(24, 30, o)
			if err != nil {
				t.Fatal(err)
			}
			spec, err := roundspec.New(p)
			if err != nil {
				t.Fatal(err)
			}
			return spec
		}
		spec := build(tc.epsL)
		leakyOpts := Options{Trials: 1000, Alpha: 1e-4, Seed: 3, Neighbours: tc.kind, Pipeline: tc.pipe}
		if tc.weak > 0 {
			// APES: the target's encoder only, which claims level 1 in
			// the budget column while perturbing at weak·ε*.
			enc, err := build(tc.weak * tc.epsL).Encoder(0)
			if err != nil {
				t.Fatal(err)
			}
			leakyOpts.Encoder = enc
		}
		sound, err := Run(spec, Options{Trials: 1000, Alpha: 1e-4, Seed: 3, Neighbours: tc.kind})
		if err != nil {
			t.Fatal(err)
		}
		leaky, err := Run(spec, leakyOpts)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: charged %.3f, sound lower bound %.3f, leaky lower bound %.3f", tc.name, sound.Charged, sound.EpsLower, leaky.EpsLower)
		if leaky.Charged != sound.Charged {
			t.Errorf("%s: the canary changed the charge: %.3f, sound %.3f", tc.name, leaky.Charged, sound.Charged)
		}
		if leaky.EpsLower < 2 || leaky.EpsLower <= leaky.Charged || sound.EpsLower >= leaky.EpsLower {
			t.Errorf("%s: the audit missed the leak: leaky %.3f, sound %.3f, charged %.3f: %+v", tc.name, leaky.EpsLower, sound.EpsLower, leaky.Charged, leaky.Findings)
		}
	}
}
