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

// TestAuditBelowCharge is the privacy audit tier: for every protocol and
// randomizer Blanket can announce, every attack's lower bound on the
// round's ε stays below the ε the ledger charges. 1,000 trials per
// hypothesis and phase, Clopper-Pearson at Alpha = 1e-4 on each side: for a
// correct charge each attack exceeds it with probability at most 2e-4, so
// a spec fails with probability at most 9 × 2e-4 = 1.8e-3 (seeds fixed:
// the outcome is deterministic).
func TestAuditBelowCharge(t *testing.T) {
	if testing.Short() {
		t.Skip("the audit tier runs without -short")
	}
	for _, proto := range []wire.Protocol{wire.ProtocolSSSimple, wire.ProtocolSSDouble, wire.ProtocolSSTopk} {
		for _, rz := range []wire.Randomizer{wire.RandomizerLaplace, wire.RandomizerRGB, wire.RandomizerGaussian} {
			spec := small(t, proto, rz, 4)
			res, err := Run(spec, Options{Trials: 1000, Alpha: 1e-4, Seed: uint64(proto)<<8 | uint64(rz)})
			if err != nil {
				t.Fatalf("%v/%v: %v", proto, rz, err)
			}
			t.Logf("%v/%v: charged %.3f, audited lower bound %.3f", proto, rz, res.Charged, res.EpsLower)
			if !(res.Charged > 0) || res.EpsLower > res.Charged {
				t.Errorf("%v/%v: lower bound %.3f above the charge %.3f: %+v", proto, rz, res.EpsLower, res.Charged, res.Findings)
			}
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
// with a known leak; on it the audit must find a lower bound of at least 2
// where the sound relay of the same spec shows none. (1,000 trials: a
// perfect distinguisher proves about 4.6.)
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
		pipe  func(*roundspec.Spec, []mechanism.Message, noise.Source) (mechanism.Batch, error)
	}{
		{"unshuffled ss-simple", wire.ProtocolSSSimple, 1, 48, unshuffled},
		{"recognizable dummies, ss-topk", wire.ProtocolSSTopk, 1, 4, markedDummies},
	} {
		o := roundspec.Options{Protocol: tc.proto, K: 4, L: tc.l, NP: 10, EpsL: tc.epsL, Clip: 0.5, MinBatch: 1}
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
		sound, err := Run(spec, Options{Trials: 1000, Alpha: 1e-4, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		leaky, err := Run(spec, Options{Trials: 1000, Alpha: 1e-4, Seed: 3, Pipeline: tc.pipe})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: charged %.3f, sound lower bound %.3f, leaky lower bound %.3f", tc.name, sound.Charged, sound.EpsLower, leaky.EpsLower)
		if leaky.EpsLower < 2 || sound.EpsLower >= leaky.EpsLower {
			t.Errorf("%s: the audit missed the leak: leaky %.3f, sound %.3f: %+v", tc.name, leaky.EpsLower, sound.EpsLower, leaky.Findings)
		}
	}
}
