package wire

import (
	"errors"
	"github.com/blanket-fl/blanket/shared/envelope"
	"testing"
)

func apesParams(proto Protocol, k uint32) Params {
	return Params{Protocol: proto, Randomizer: RandomizerClipLaplace, D: 6, K: k, L: 1, Width: 1, NP: 3, MinBatch: 1,
		EpsL: 3, Clip: 1, CheckInP: 1}
}

// TestAPESParams: APES and S-APES announce D+1 columns of width-1
// messages (the budget column is index D), a per-coordinate maximum of
// EpsL/D, and survive the announcement encoding; every other shape or
// randomizer is refused.
func TestAPESParams(t *testing.T) {
	for _, p := range []Params{apesParams(ProtocolAPES, 6), apesParams(ProtocolSAPES, 2)} {
		if err := p.Validate(); err != nil {
			t.Fatalf("%v: %v", p.Protocol, err)
		}
		if p.Columns() != 7 || p.Messages() != 7 || p.BatchMessages(4) != 28 || p.PerCoordinateEpsilon() != 0.5 {
			t.Errorf("%v: columns %d, messages %d, batch %d, per coordinate %v", p.Protocol, p.Columns(), p.Messages(), p.BatchMessages(4), p.PerCoordinateEpsilon())
		}
		var b [paramsSize]byte
		putParams(b[:], p)
		if got, _ := getParams(b[:]); got != p {
			t.Errorf("%v: round trip %+v", p.Protocol, got)
		}
		if q, err := ParseProtocol(p.Protocol.String()); err != nil || q != p.Protocol {
			t.Errorf("%v: parse %v %v", p.Protocol, q, err)
		}
	}
	if r, err := ParseRandomizer("clip-laplace"); err != nil || r != RandomizerClipLaplace {
		t.Errorf("clip-laplace: %v %v", r, err)
	}
	for name, mut := range map[string]func(*Params){
		"laplace":        func(p *Params) { p.Randomizer = RandomizerLaplace },
		"width 2":        func(p *Params) { p.Width = 2 },
		"l 2":            func(p *Params) { p.L = 2 },
		"k below d":      func(p *Params) { p.K = 5 },
		"delta":          func(p *Params) { p.DeltaL = 1e-6 },
		"buckets":        func(p *Params) { p.Buckets = 3 },
		"np 0":           func(p *Params) { p.NP = 0 },
		"eps 0":          func(p *Params) { p.EpsL = 0 },
		"d at the limit": func(p *Params) { p.D, p.K = maxD, maxD },
	} {
		p := apesParams(ProtocolAPES, 6)
		mut(&p)
		if err := p.Validate(); !errors.Is(err, ErrParams) {
			t.Errorf("apes with %s: %v", name, err)
		}
	}
	for _, k := range []uint32{0, 6} {
		if err := apesParams(ProtocolSAPES, k).Validate(); !errors.Is(err, ErrParams) {
			t.Errorf("s-apes with k = %d: %v", k, err)
		}
	}
	// The FLAME protocols never take clip-laplace.
	p := apesParams(ProtocolSSSimple, 6)
	if err := p.Validate(); !errors.Is(err, ErrParams) {
		t.Errorf("ss-simple with clip-laplace: %v", err)
	}
}

// TestAPESBatchColumns: a batch of an APES round must cover D+1 columns
// (index D is the budget column) exactly n_p times; a report's index D is
// accepted and D+1 refused.
func TestAPESBatchColumns(t *testing.T) {
	p := apesParams(ProtocolAPES, 6)
	b := Batch{Round: 1, D: p.Columns(), Width: 1, NP: 3, Reports: 3, CheckedIn: 3}
	for i := range p.BatchMessages(3) {
		b.Messages = append(b.Messages, BatchMessage{Indices: []uint32{uint32(i % 7)}, Sealed: make([]byte, envelope.SealedLen(1))})
	}
	f, err := b.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseBatch(f, p); err != nil {
		t.Fatalf("apes batch: %v", err)
	}
	b.D = p.D
	b.Messages = b.Messages[:18]
	for i := range b.Messages {
		b.Messages[i].Indices = []uint32{uint32(i % 6)}
	}
	if f, err = b.MarshalBinary(); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseBatch(f, p); err == nil {
		t.Error("an apes batch without the budget column parsed")
	}
	for idx, ok := range map[uint32]bool{6: true, 7: false} {
		r := Report{Round: 1, Seq: 0, Count: uint16(p.Messages()), Indices: []uint32{idx}, Sealed: make([]byte, envelope.SealedLen(1))}
		f, err := r.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseReport(f, p); (err == nil) != ok {
			t.Errorf("report index %d: %v", idx, err)
		}
	}
}
