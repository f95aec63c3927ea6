package pld

import (
	"errors"
	"math"
	"testing"
)

// TestRegridDominates: the regridded PLD's delta is never below the
// original's (it dominates), stays close to it, and its composition over
// rounds gives an eps within 0.5% of the fine grid's; also far above 709
// nats (100 rounds of eps0 = 8 randomized response, losses 672..800).
func TestRegridDominates(t *testing.T) {
	g, err := Gaussian(1, 1, Options{Width: 1e-3, Method: ConnectDots})
	if err != nil {
		t.Fatal(err)
	}
	round, err := g.SelfCompose(50) // mu = 7.07, spread ~ +-60 nats
	if err != nil {
		t.Fatal(err)
	}
	rr, err := randomizedResponse(8, 2, Options{Width: 1e-2, Method: ConnectDots})
	if err != nil {
		t.Fatal(err)
	}
	high, err := rr.SelfCompose(100)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		p    *PLD
		h2   float64
		eps  []float64
	}{
		{"gaussian", round, 0.05, []float64{-5, 0, 1, 5, 20, 40, 60}},
		{"rr-high", high, 0.1, []float64{600, 700, 720, 750, 790}},
	} {
		r, err := c.p.Regrid(c.h2)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for _, e := range c.eps {
			a, b := mustDelta(t, c.p, e), mustDelta(t, r, e)
			if b < a {
				t.Errorf("%s eps=%v: regridded delta %.6g below the original %.6g", c.name, e, b, a)
			}
			if b > a+0.02 {
				t.Errorf("%s eps=%v: regridded delta %.6g far above %.6g", c.name, e, b, a)
			}
		}
	}
	// Composition over 20 rounds: fine vs regridded.
	fine, err := round.SelfCompose(20)
	if err != nil {
		t.Fatal(err)
	}
	rg, err := round.Regrid(0.05)
	if err != nil {
		t.Fatal(err)
	}
	coarse, err := rg.SelfCompose(20)
	if err != nil {
		t.Fatal(err)
	}
	for _, delta := range []float64{1e-10, 1e-5, 1e-2} {
		ef, err := fine.Epsilon(delta)
		if err != nil {
			t.Fatal(err)
		}
		ec, err := coarse.Epsilon(delta)
		if err != nil {
			t.Fatal(err)
		}
		exact := exactGaussianEpsilon(math.Sqrt(1000), delta)
		if ec < exact || ef < exact {
			t.Errorf("delta=%g: eps fine %v coarse %v below exact %v", delta, ef, ec, exact)
		}
		if ec > ef*1.005 {
			t.Errorf("delta=%g: regridded composition eps %v more than 0.5%% above fine %v", delta, ec, ef)
		}
	}
	wide, err := rr.SelfCompose(200)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wide.Regrid(0.1); !errors.Is(err, ErrRegridRange) && err != nil {
		t.Errorf("wide range: %v", err)
	}
}
