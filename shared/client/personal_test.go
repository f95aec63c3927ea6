package client

import (
	"math"
	"strings"
	"testing"

	"github.com/blanket-fl/blanket/shared/wire"
)

// TestPersonalFraction: a volunteer's personal level lowers its own
// per-coordinate guarantee to the chosen fraction, for every randomizer
// (R_{gamma,b} included), by reporting a blanket sample instead of its datum
// with probability 1-q; the announced budget, the randomizer everyone else
// is covered by and the message shape never change.
func TestPersonalFraction(t *testing.T) {
	base := wire.Params{Protocol: wire.ProtocolSSDouble, Randomizer: wire.RandomizerLaplace, D: 100, K: 10, L: 1, Width: 1,
		NP: 20, MinBatch: 1, EpsL: 5, Clip: 0.01, CheckInP: 1}
	rgb := base
	rgb.Randomizer, rgb.Buckets = wire.RandomizerRGB, 4
	gauss := base
	gauss.Randomizer, gauss.DeltaL = wire.RandomizerGaussian, 1e-5
	for _, p := range []wire.Params{base, rgb, gauss} {
		full, err := setupRound(p, 100, 0)
		if err != nil {
			t.Fatal(err)
		}
		half, err := setupRound(p, 100, 0.5)
		if err != nil {
			t.Fatal(err)
		}
		if got := half.enc.Epsilon(); math.Abs(got-p.EpsL/2) > 1e-9 || !half.personal {
			t.Errorf("%v half level: report epsilon %v (applied %v), want %v", p.Randomizer, got, half.personal, p.EpsL/2)
		}
		if math.Abs(half.release.Eps0*float64(half.release.K)-p.EpsL/2) > 1e-9 || half.release.Eps0 >= full.release.Eps0 {
			t.Errorf("%v: own release %v x %d, full %v", p.Randomizer, half.release.Eps0, half.release.K, full.release.Eps0)
		}
		if half.enc.Shape() != full.enc.Shape() || half.enc.Randomizer() != full.enc.Randomizer() && half.enc.Randomizer().Epsilon() != full.enc.Randomizer().Epsilon() {
			t.Errorf("%v: shape or randomizer changed with the personal level", p.Randomizer)
		}
	}
	for _, f := range []float64{-0.1, 1.5, math.NaN()} {
		if _, err := New(Config{PersonalFraction: f}); err == nil || !strings.Contains(err.Error(), "personal privacy level") {
			t.Errorf("PersonalFraction %v: err = %v, want the personal level refused", f, err)
		}
	}
}
