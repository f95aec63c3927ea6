package wire

import (
	"bytes"
	"encoding/binary"
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

// TestCountBlocksAnnounced: a secure-summation round's count blocks travel
// in the announcement (their number in the np slot, the blocks between the
// relay's key and the model) under the signature, round-trip exactly, and
// every malformed list is refused by Validate and by the decoder: a wrong
// kind, an evaluation block not first or twice, rows or options out of
// range, a σ below 4 or not finite, blocks on a shuffle protocol, and a
// frame whose block count disagrees with its length.
func TestCountBlocksAnnounced(t *testing.T) {
	k, err := envelopetest.DeriveKey([32]byte{9})
	if err != nil {
		t.Fatal(err)
	}
	blocks := []CountBlock{{Kind: CountEval, N: 100, Sigma: 9930.4}, {Kind: CountQuestion, N: 4, Sigma: 3895}, {Kind: CountQuestion, N: 2, Sigma: 4}}
	p := secAggParams()
	p.Counts = NewCountList(blocks...)
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := p.Counts.Blocks(); len(got) != 3 || got[0] != blocks[0] || got[1] != blocks[1] || got[2] != blocks[2] {
		t.Fatalf("blocks %+v", got)
	}
	a := Announcement{Round: 3, Deadline: time.UnixMilli(1700000000000), Params: p, HPKEPub: k.Public().HPKE,
		RelayPub: [32]byte{1, 2, 3}, Model: []float64{1, 2, 3, 4, 5, 6}}
	if err := a.Sign(k); err != nil {
		t.Fatal(err)
	}
	b, err := a.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != announcementSize(6)+32+13*3 {
		t.Fatalf("size %d, want %d", len(b), announcementSize(6)+32+13*3)
	}
	if got := binary.BigEndian.Uint32(b[annParams+18:]); got != 3 {
		t.Fatalf("np slot %d, want the block count 3", got)
	}
	got, err := ParseAnnouncement(b, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Params != p || got.Model[5] != 6 {
		t.Fatalf("decoded %+v", got.Params)
	}
	if err := got.Verify(k.Public()); err != nil {
		t.Fatal(err)
	}
	// A block's σ is signed: changing it breaks the signature.
	b[annCounts+13+5] ^= 1
	if tampered, err := ParseAnnouncement(b, Limits{}); err != nil || tampered.Verify(k.Public()) == nil {
		t.Fatalf("a changed block sigma verified (%v)", err)
	}
	b[annCounts+13+5] ^= 1
	// The block count disagrees with the frame's length.
	for _, n := range []uint32{2, 4, MaxCountBlocks + 1} {
		c := bytes.Clone(b)
		binary.BigEndian.PutUint32(c[annParams+18:], n)
		if _, err := ParseAnnouncement(c, Limits{}); err == nil {
			t.Errorf("a frame of 3 blocks decoded with the count %d", n)
		}
	}
	for name, bs := range map[string][]CountBlock{
		"unknown kind":     {{Kind: 3, N: 2, Sigma: 10}},
		"eval second":      {{Kind: CountQuestion, N: 2, Sigma: 10}, {Kind: CountEval, N: 5, Sigma: 10}},
		"two evals":        {{Kind: CountEval, N: 5, Sigma: 10}, {Kind: CountEval, N: 5, Sigma: 10}},
		"eval rows 0":      {{Kind: CountEval, N: 0, Sigma: 10}},
		"eval rows 2^20+1": {{Kind: CountEval, N: 1<<20 + 1, Sigma: 10}},
		"one option":       {{Kind: CountQuestion, N: 1, Sigma: 10}},
		"1025 options":     {{Kind: CountQuestion, N: 1025, Sigma: 10}},
		"sigma 3.9":        {{Kind: CountQuestion, N: 2, Sigma: 3.9}},
		"sigma NaN":        {{Kind: CountQuestion, N: 2, Sigma: math.NaN()}},
		"sigma +Inf":       {{Kind: CountQuestion, N: 2, Sigma: math.Inf(1)}},
	} {
		q := secAggParams()
		q.Counts = NewCountList(bs...)
		if err := q.Validate(); !errors.Is(err, ErrParams) {
			t.Errorf("%s: %v", name, err)
		}
	}
	low := secAggParams()
	low.Sigma, low.Counts = 3, NewCountList(blocks[1])
	if err := low.Validate(); !errors.Is(err, ErrParams) {
		t.Errorf("count blocks with an update sigma of 3: %v", err)
	}
	sh := testParams(ProtocolSSDouble)
	sh.Counts = NewCountList(blocks[1])
	if err := sh.Validate(); !errors.Is(err, ErrParams) {
		t.Errorf("count blocks on a shuffle protocol: %v", err)
	}
}
