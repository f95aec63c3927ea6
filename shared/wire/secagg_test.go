package wire

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/shared/envelope"
)

func secAggParams() Params {
	return Params{Protocol: ProtocolSecAgg, Randomizer: RandomizerDiscreteGaussian, D: 6, K: 1, L: 1, Width: 1,
		MinBatch: 2, Quota: 50, Clip: 1.5, CheckInP: 0.25, Bits: 8, Sigma: 300}
}

// TestSecAggParams: secure summation's configuration validates only in its
// own shape, and its bits and sigma travel in the buckets and epsL slots of
// the announcement (and nowhere for the shuffle protocols).
func TestSecAggParams(t *testing.T) {
	p := secAggParams()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if p.Messages() != 1 || p.PerCoordinateEpsilon() != 0 {
		t.Fatalf("messages %d, per-coordinate epsilon %v", p.Messages(), p.PerCoordinateEpsilon())
	}
	for name, mod := range map[string]func(*Params){
		"randomizer":   func(p *Params) { p.Randomizer = RandomizerLaplace },
		"k":            func(p *Params) { p.K = 2 },
		"np":           func(p *Params) { p.NP = 1 },
		"epsL":         func(p *Params) { p.EpsL = 1 },
		"bits low":     func(p *Params) { p.Bits = 1 },
		"bits high":    func(p *Params) { p.Bits = 17 },
		"sigma 0":      func(p *Params) { p.Sigma = 0 },
		"sigma NaN":    func(p *Params) { p.Sigma = math.NaN() },
		"no quota":     func(p *Params) { p.Quota = 0 },
		"quota < min":  func(p *Params) { p.Quota = 1 },
		"clip":         func(p *Params) { p.Clip = math.Inf(1) },
		"check-in":     func(p *Params) { p.CheckInP = 0 },
		"buckets used": func(p *Params) { p.Buckets = 3 },
	} {
		q := p
		mod(&q)
		if err := q.Validate(); !errors.Is(err, ErrParams) {
			t.Errorf("%s: %v", name, err)
		}
	}
	shuffle := testParams(ProtocolSSDouble)
	shuffle.Sigma = 1
	if err := shuffle.Validate(); !errors.Is(err, ErrParams) {
		t.Errorf("a shuffle protocol with a sigma: %v", err)
	}
	if got, err := ParseProtocol("SecAgg"); err != nil || got != ProtocolSecAgg {
		t.Errorf("ParseProtocol: %v %v", got, err)
	}
	if got, err := ParseRandomizer("discrete-gaussian"); err != nil || got != RandomizerDiscreteGaussian {
		t.Errorf("ParseRandomizer: %v %v", got, err)
	}
}

// TestSecAggAnnouncement: a secure-summation announcement carries the
// relay's key under the aggregator's signature; it round-trips byte for
// byte, a flipped relay-key byte breaks the signature, and a missing relay
// key is refused on both sides.
func TestSecAggAnnouncement(t *testing.T) {
	k, err := envelope.DeriveKey([32]byte{9})
	if err != nil {
		t.Fatal(err)
	}
	p := secAggParams()
	a := Announcement{Round: 3, Deadline: time.UnixMilli(1700000000000), Params: p, HPKEPub: k.Public().HPKE,
		RelayPub: [32]byte{1, 2, 3}, Model: []float64{1, 2, 3, 4, 5, 6}}
	if err := a.Sign(k); err != nil {
		t.Fatal(err)
	}
	b, err := a.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != AnnouncementSizeFor(p) || len(b) != AnnouncementSize(6)+32 {
		t.Fatalf("size %d", len(b))
	}
	got, err := ParseAnnouncement(b, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Params != p || got.RelayPub != a.RelayPub || got.Model[5] != 6 {
		t.Fatalf("decoded %+v", got)
	}
	if err := got.Verify(k.Public()); err != nil {
		t.Fatal(err)
	}
	again, _ := got.MarshalBinary()
	if string(again) != string(b) {
		t.Fatal("re-encoding differs")
	}
	b[annRelayPub] ^= 1
	tampered, err := ParseAnnouncement(b, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if err := tampered.Verify(k.Public()); !errors.Is(err, ErrSignature) {
		t.Fatalf("a substituted relay key verified: %v", err)
	}
	a.RelayPub = [32]byte{}
	if _, err := a.MarshalBinary(); err == nil {
		t.Fatal("a secagg announcement without a relay key encoded")
	}
	b[annRelayPub] ^= 1
	copy(b[annRelayPub:annRelayPub+32], make([]byte, 32))
	if _, err := ParseAnnouncement(b, Limits{}); err == nil {
		t.Fatal("a secagg announcement without a relay key decoded")
	}
	shuffle := Announcement{Round: 1, Params: testParams(ProtocolSSDouble), RelayPub: [32]byte{1}, Model: make([]float64, 6)}
	if _, err := shuffle.MarshalBinary(); err == nil {
		t.Fatal("a shuffle announcement with a relay key encoded")
	}
}
