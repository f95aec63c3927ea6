package client

import (
	"errors"
	"math"
	"testing"

	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/wire"
)

// TestSetupGuarantee: the encoder built from announced parameters has
// exactly the announced local guarantee (EpsL, DeltaL) per report and the
// announced shape, for every protocol and randomizer; layouts without a
// privacy proof (width > 1) and bad budgets are refused.
func TestSetupGuarantee(t *testing.T) {
	base := wire.Params{D: 60, K: 6, L: 1, Width: 1, NP: 5, MinBatch: 1, EpsL: 2, Clip: 0.5, CheckInP: 1}
	for _, proto := range []wire.Protocol{wire.ProtocolSSSimple, wire.ProtocolSSDouble, wire.ProtocolSSTopk} {
		for _, rz := range []wire.Randomizer{wire.RandomizerLaplace, wire.RandomizerRGB, wire.RandomizerGaussian} {
			p := base
			p.Protocol, p.Randomizer = proto, rz
			switch proto {
			case wire.ProtocolSSSimple:
				p.K = p.D
			case wire.ProtocolSSTopk:
				p.L = 4
			}
			switch rz {
			case wire.RandomizerRGB:
				p.Buckets = 7
			case wire.RandomizerGaussian:
				p.DeltaL = 1e-5
			}
			s, err := setupRound(p, int(p.D), 0)
			if err != nil {
				t.Fatalf("%v/%v: %v", proto, rz, err)
			}
			enc := s.enc
			if math.Abs(enc.Epsilon()-p.EpsL) > 1e-12 || math.Abs(enc.Delta()-p.DeltaL) > 1e-18 {
				t.Errorf("%v/%v: encoder is (%v, %v)-LDP, announced (%v, %v)", proto, rz, enc.Epsilon(), enc.Delta(), p.EpsL, p.DeltaL)
			}
			if enc.Shape().Messages != p.Messages() || enc.Shape().Width != int(p.Width) {
				t.Errorf("%v/%v: shape %+v, announced %d x %d", proto, rz, enc.Shape(), p.Messages(), p.Width)
			}
			if enc.Randomizer().Name() != rz.String() {
				t.Errorf("randomizer %q for %v", enc.Randomizer().Name(), rz)
			}
			wide := p
			wide.Width = 2
			if _, err := setupRound(wide, int(p.D), 0); !errors.Is(err, roundspec.ErrLayout) {
				t.Errorf("%v/%v: width 2 accepted (err %v)", proto, rz, err)
			}
		}
	}
	bad := base
	bad.Protocol, bad.Randomizer = 9, wire.RandomizerLaplace
	if _, err := setupRound(bad, int(bad.D), 0); err == nil {
		t.Error("unknown protocol accepted")
	}
	bad.Protocol, bad.EpsL = wire.ProtocolSSDouble, math.NaN()
	if _, err := setupRound(bad, int(bad.D), 0); err == nil {
		t.Error("NaN epsilon accepted")
	}
}

// TestNoiseStd compares noiseStd with the empirical standard deviation of
// de-biased randomized centre values 2C(R(1/2) - offset)/slope, n = 20,000
// draws per randomizer. The sample sd's relative standard error is about
// sqrt((kurtosis-1)/4n) <= 0.9% (Laplace, excess kurtosis 3: sqrt(5/80000)),
// so the 6% tolerance is over 6 standard errors: a correct formula fails
// with probability below 1e-9 for a random seed (the seed is fixed).
func TestNoiseStd(t *testing.T) {
	const n = 20000
	p := wire.Params{Protocol: wire.ProtocolSSDouble, D: 40, K: 4, L: 1, Width: 1, NP: 5, MinBatch: 1, EpsL: 4, Clip: 0.7, CheckInP: 1}
	for _, rz := range []wire.Randomizer{wire.RandomizerLaplace, wire.RandomizerRGB, wire.RandomizerGaussian} {
		for _, b := range []uint32{3, 8} {
			q := p
			q.Randomizer = rz
			switch rz {
			case wire.RandomizerRGB:
				q.Buckets = b
			case wire.RandomizerGaussian:
				q.DeltaL = 1e-5
			default:
				if b != 3 {
					continue
				}
			}
			s, err := setupRound(q, int(q.D), 0)
			if err != nil {
				t.Fatal(err)
			}
			r := s.enc.Randomizer()
			off, slope := r.Affine()
			src := noise.NewSeeded(uint64(rz)*100 + uint64(b))
			var sum, sq float64
			for range n {
				z := 2 * q.Clip * (r.Randomize(0.5, src) - off) / slope
				sum += z
				sq += z * z
			}
			mean := sum / n
			sd := math.Sqrt(sq/n - mean*mean)
			if math.Abs(sd/s.noiseStd-1) > 0.06 {
				t.Errorf("%v b=%d: noiseStd %v, empirical %v", rz, q.Buckets, s.noiseStd, sd)
			}
		}
	}
}
