package wire

import (
	"errors"
	"math"
	"testing"
)

func TestParamsValidate(t *testing.T) {
	for _, proto := range []Protocol{ProtocolSSSimple, ProtocolSSDouble, ProtocolSSTopk} {
		if err := testParams(proto).Validate(); err != nil {
			t.Fatalf("%v: %v", proto, err)
		}
	}
	rgb := testParams(ProtocolSSDouble)
	rgb.Randomizer, rgb.Buckets = RandomizerRGB, 8
	gauss := testParams(ProtocolSSDouble)
	gauss.Randomizer, gauss.DeltaL = RandomizerGaussian, 1e-6
	for name, p := range map[string]Params{"rgb": rgb, "gaussian": gauss} {
		if err := p.Validate(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	big := Params{Protocol: ProtocolSSSimple, Randomizer: RandomizerLaplace, D: maxD, K: maxD, L: 1, Width: 32, NP: 1, MinBatch: 1, EpsL: 1, Clip: 1, CheckInP: 1}
	if err := big.Validate(); err != nil {
		t.Fatalf("d = MaxD: %v", err)
	}

	bad := map[string]func(p *Params){
		"protocol 0":          func(p *Params) { p.Protocol = 0 },
		"protocol 4":          func(p *Params) { p.Protocol = 4 },
		"randomizer 0":        func(p *Params) { p.Randomizer = 0 },
		"randomizer 4":        func(p *Params) { p.Randomizer = 4 },
		"d 0":                 func(p *Params) { p.D, p.K = 0, 0 },
		"d too big":           func(p *Params) { p.D, p.K = maxD+1, maxD+1 },
		"simple k != d":       func(p *Params) { p.K = 4 },
		"simple l 2":          func(p *Params) { p.L = 2 },
		"width 0":             func(p *Params) { p.Width = 0 },
		"width not divisor":   func(p *Params) { p.Width = 4 },
		"width > k":           func(p *Params) { p.Width = 12 },
		"np 0":                func(p *Params) { p.NP = 0 },
		"laplace buckets":     func(p *Params) { p.Buckets = 2 },
		"rgb buckets 0":       func(p *Params) { p.Randomizer = RandomizerRGB },
		"rgb buckets big":     func(p *Params) { p.Randomizer, p.Buckets = RandomizerRGB, 1<<30+1 },
		"minBatch 0":          func(p *Params) { p.MinBatch = 0 },
		"quota < minBatch":    func(p *Params) { p.MinBatch, p.Quota = 5, 4 },
		"epsL 0":              func(p *Params) { p.EpsL = 0 },
		"epsL negative":       func(p *Params) { p.EpsL = -1 },
		"epsL NaN":            func(p *Params) { p.EpsL = math.NaN() },
		"epsL Inf":            func(p *Params) { p.EpsL = math.Inf(1) },
		"clip 0":              func(p *Params) { p.Clip = 0 },
		"clip NaN":            func(p *Params) { p.Clip = math.NaN() },
		"clip Inf":            func(p *Params) { p.Clip = math.Inf(1) },
		"checkInP 0":          func(p *Params) { p.CheckInP = 0 },
		"checkInP > 1":        func(p *Params) { p.CheckInP = 1.5 },
		"checkInP NaN":        func(p *Params) { p.CheckInP = math.NaN() },
		"laplace deltaL":      func(p *Params) { p.DeltaL = 1e-5 },
		"laplace deltaL -0":   func(p *Params) { p.DeltaL = math.Copysign(0, -1) },
		"gaussian deltaL 0":   func(p *Params) { p.Randomizer = RandomizerGaussian },
		"gaussian deltaL 1":   func(p *Params) { p.Randomizer, p.DeltaL = RandomizerGaussian, 1 },
		"gaussian deltaL NaN": func(p *Params) { p.Randomizer, p.DeltaL = RandomizerGaussian, math.NaN() },
	}
	for name, f := range bad {
		p := testParams(ProtocolSSSimple)
		f(&p)
		if err := p.Validate(); !errors.Is(err, ErrParams) || !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrParams", name, err)
		}
	}
	badOther := map[string]Params{
		"double k 0":    func() Params { p := testParams(ProtocolSSDouble); p.K = 0; return p }(),
		"double k > d":  func() Params { p := testParams(ProtocolSSDouble); p.K = 8; return p }(),
		"double l 2":    func() Params { p := testParams(ProtocolSSDouble); p.L = 2; return p }(),
		"topk l 0":      func() Params { p := testParams(ProtocolSSTopk); p.L = 0; return p }(),
		"topk k*l > d":  func() Params { p := testParams(ProtocolSSTopk); p.L = 4; return p }(),
		"topk overflow": func() Params { p := testParams(ProtocolSSTopk); p.K, p.L = 1<<31, 1<<31; return p }(),
		"too many msgs": func() Params {
			p := testParams(ProtocolSSSimple)
			p.D, p.K, p.Width, p.NP = 1<<17, 1<<17, 1, 1
			return p
		}(),
		"d*np not w-multi": func() Params { p := testParams(ProtocolSSDouble); p.D, p.K, p.Width, p.NP = 7, 4, 2, 1; return p }(),
	}
	for name, p := range badOther {
		if err := p.Validate(); !errors.Is(err, ErrParams) {
			t.Errorf("%s: err = %v, want ErrParams", name, err)
		}
	}
}

func TestParamsDerived(t *testing.T) {
	s, d, k := testParams(ProtocolSSSimple), testParams(ProtocolSSDouble), testParams(ProtocolSSTopk)
	if s.Messages() != 3 || d.Messages() != 2 || k.Messages() != 2 {
		t.Fatalf("Messages: %d %d %d", s.Messages(), d.Messages(), k.Messages())
	}
	if (Params{}).Messages() != 0 {
		t.Fatal("Messages of zero params")
	}
	// 18 + 4w + 32 + 8w + 16.
	if got := k.ReportFrameSize(); got != 18+12*3+48 {
		t.Fatalf("ReportFrameSize = %d", got)
	}
	if s.PerCoordinateEpsilon() != 3.0/6 || d.PerCoordinateEpsilon() != 3.0/4 || k.PerCoordinateEpsilon() != 3.0/2 {
		t.Fatalf("PerCoordinateEpsilon: %v %v %v", s.PerCoordinateEpsilon(), d.PerCoordinateEpsilon(), k.PerCoordinateEpsilon())
	}
	if (Params{}).PerCoordinateEpsilon() != 0 {
		t.Fatal("PerCoordinateEpsilon of zero params")
	}
	if s.BatchMessages(4) != 12 {
		t.Fatalf("BatchMessages = %d", s.BatchMessages(4))
	}
}

func TestParseNames(t *testing.T) {
	for _, p := range []Protocol{ProtocolSSSimple, ProtocolSSDouble, ProtocolSSTopk} {
		if q, err := ParseProtocol(p.String()); err != nil || q != p {
			t.Errorf("ParseProtocol(%q) = %v, %v", p, q, err)
		}
	}
	for _, r := range []Randomizer{RandomizerLaplace, RandomizerRGB, RandomizerGaussian} {
		if q, err := ParseRandomizer(r.String()); err != nil || q != r {
			t.Errorf("ParseRandomizer(%q) = %v, %v", r, q, err)
		}
	}
	if _, err := ParseProtocol("flame"); err == nil {
		t.Error("ParseProtocol accepted flame")
	}
	if _, err := ParseRandomizer("duchi"); err == nil {
		t.Error("ParseRandomizer accepted duchi")
	}
	if Protocol(9).String() != "protocol(9)" || Randomizer(9).String() != "randomizer(9)" || Type(0x10).String() != "type(16)" {
		t.Error("unknown names")
	}
}
