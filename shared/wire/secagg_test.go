package wire

import (
	"bytes"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/shared/envelope/envelopetest"
)

func secAggParams() Params {
	return Params{Protocol: ProtocolSecAgg, Randomizer: RandomizerDiscreteGaussian, D: 6, K: 1, L: 1, Width: 1,
		MinBatch: 2, Quota: 50, Clip: 1.5, CheckInP: 0.25, Sigma: 300}
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
		"bits set":     func(p *Params) { p.Bits = 8 },
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
	k, err := envelopetest.DeriveKey([32]byte{9})
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
	if len(b) != announcementSizeFor(p) || len(b) != announcementSize(6)+32 {
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

// TestSecAggFrames: the four secure-summation frames round-trip, and every
// truncation, extension and disagreeing length is refused.
func TestSecAggFrames(t *testing.T) {
	sh := &Shares{Round: 2, Leader: bytes.Repeat([]byte{1}, 40), Helper: bytes.Repeat([]byte{2}, 9)}
	b, err := sh.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseShares(b, 40, 9)
	if err != nil || got.Round != 2 || !bytes.Equal(got.Leader, sh.Leader) || !bytes.Equal(got.Helper, sh.Helper) {
		t.Fatalf("shares: %+v %v", got, err)
	}
	for _, bad := range [][]byte{b[:len(b)-1], append(bytes.Clone(b), 0)} {
		if _, err := ParseShares(bad, 40, 9); !errors.Is(err, ErrMalformed) {
			t.Errorf("shares of %d bytes: %v", len(bad), err)
		}
	}
	if _, err := ParseShares(b, 39, 10); !errors.Is(err, ErrMalformed) {
		t.Errorf("shares with other sizes: %v", err)
	}

	// 0x09, the retired whole-round SecAggBatch, is no frame type any more.
	retired := []byte{Version, 0x09, 0, 0, 0, 0, 0, 0, 0, 3}
	if _, err := PeekType(retired); !errors.Is(err, ErrType) {
		t.Errorf("a frame of the retired type 0x09: %v, want ErrType", err)
	}
	if _, _, err := PeekRound(retired); !errors.Is(err, ErrType) {
		t.Errorf("the round of a frame of the retired type 0x09: %v, want ErrType", err)
	}

	pr := &SecAggPrep{Round: 3, Status: BatchStatusOK, Msg: []byte("msg")}
	b, err = pr.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if gp, err := ParseSecAggPrep(b); err != nil || string(gp.Msg) != "msg" {
		t.Fatalf("prep: %+v %v", gp, err)
	}
	if _, err := (&SecAggPrep{Round: 3, Status: BatchStatusRefused, Msg: []byte("x")}).MarshalBinary(); err == nil {
		t.Error("a refused prep with a message encoded")
	}
	ref, _ := (&SecAggPrep{Round: 3, Status: BatchStatusRefused}).MarshalBinary()
	if gp, err := ParseSecAggPrep(ref); err != nil || gp.Status != BatchStatusRefused {
		t.Fatalf("refused prep: %v", err)
	}

	ag := &SecAggAggregate{Round: 3, Share: []byte("aggregate")}
	b, err = ag.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if ga, err := ParseSecAggAggregate(b); err != nil || string(ga.Share) != "aggregate" {
		t.Fatalf("aggregate: %+v %v", ga, err)
	}
	if _, err := ParseSecAggAggregate(b[:len(b)-1]); !errors.Is(err, ErrMalformed) {
		t.Errorf("short aggregate: %v", err)
	}
}

func FuzzSecAggFrames(f *testing.F) {
	for _, m := range []interface{ MarshalBinary() ([]byte, error) }{
		&Shares{Round: 1, Leader: []byte{1, 2, 3}, Helper: []byte{4}},
		&SecAggPrep{Round: 1, Status: BatchStatusOK, Msg: []byte{5}},
		&SecAggAggregate{Round: 1, Share: []byte{6, 7}},
	} {
		b, err := m.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		type enc interface{ MarshalBinary() ([]byte, error) }
		var got enc
		if s, err := ParseShares(b, 3, 1); err == nil {
			got = s
		} else if s, err := ParseSecAggPrep(b); err == nil {
			got = s
		} else if s, err := ParseSecAggAggregate(b); err == nil {
			got = s
		} else {
			return
		}
		out, err := got.MarshalBinary()
		if err != nil {
			t.Fatalf("accepted frame does not re-encode: %v", err)
		}
		if !bytes.Equal(out, b) {
			t.Fatalf("re-encoding differs:\n in  %x\n out %x", b, out)
		}
	})
}
