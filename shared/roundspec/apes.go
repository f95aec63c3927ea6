package roundspec

import (
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/shared/mechanism"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/randomizer"
	"github.com/blanket-fl/blanket/shared/wire"
)

// APES and S-APES over the network (Liu et al., "Echo of Neighbors", AAAI
// 2023; docs/privacy.md, "APES and S-APES").
//
// Layout: every volunteer sends D+1 width-1 messages: coordinate j < D
// perturbed by Clip-Laplace (range ratio APESRangeRatio) at its own
// per-coordinate budget f·ε*, ε* = EpsL/D, and, at index D (the budget
// column), its level f in (0, 1] (report budget ε_i = f·EpsL). The relay
// shuffles all messages uniformly, so every column is shuffled
// independently of every other (APES Algorithm 1). Index lists are
// data-independent (every column once per report), so every column holds
// exactly n real values; the relay raises n_p to n or pads the shortfall
// below the announced n_p with virtual volunteers at the largest level
// (Spec.Dummy).
//
// Charge: per dimension, the n_p shuffled values are reports of
// randomizers each ε*-LDP in the cross sense (any two Clip-Laplace
// budgets ≤ ε*: privacy.ClipLaplaceNeighborDivergence ≤ max), so the
// generic shuffle bounds of privacy.Account at ε* (FMT'21/'22 clones,
// FMT'23 generic; no Laplace- or blanket-specific row) hold, composed over
// the D independent dimensions. Spec.Release states it with every one of
// the n_p budgets at ε*, whatever the volunteers chose: the charge never
// depends on their claims.
//
// S-APES announces n_p = 1, so the relay raises n_p to n and never pads
// (Check refuses any other n_p): dummies would serve no charge, and a
// dummy could not follow the law of a real report's post-selected values
// without simulating a whole virtual report per dummy.
//
// S-APES is charged its local guarantee, EpsL per round (no amplification
// claimed): its post-sparsification selects each volunteer's kept
// coordinates from the whole perturbed vector before the shuffle, so its
// columns are not independent given the data and its shuffled view is not
// a post-processing of APES's shuffled view (the selection needs the
// cross-column linkage the shuffle erases). Each S-APES report is still a
// post-processing of the volunteer's EpsL-LDP APES report plus independent
// noise, which is what the local charge needs. APES Proposition 1's 2b
// bound is not charged either (see docs/privacy.md).

// APESRangeRatio is Clip-Laplace's r = A/C for the announced APES
// protocols (APES's experiments: A = C): outputs lie in [0, 1] on the
// normalized scale, so every level in (0, 1] also lies in the value range.
const APESRangeRatio = 1

// apesProtocol marks the APES protocols in the table.
type apesProtocol interface {
	shuffleProtocol
	// sparseB is S-APES's b (0 for APES).
	sparseB(p wire.Params) int
}

// checkAPES is the layout check of APES and S-APES (wire.Params.Validate
// fixed width 1, l = 1 and the randomizer).
func checkAPES(p wire.Params) error {
	if p.Width != 1 {
		return fmt.Errorf("%w: %v with messages of width %d", ErrLayout, p.Protocol, p.Width)
	}
	if p.Randomizer != wire.RandomizerClipLaplace {
		return fmt.Errorf("%w: %v needs clip-laplace, got %v", ErrLayout, p.Protocol, p.Randomizer)
	}
	return nil
}

func apesDefaults(n int, o Options) wire.Params {
	np := o.NP
	if np == 0 {
		np = n
	}
	return wire.Params{L: 1, Width: 1, NP: uint32(np)}
}

// apes: APES, every coordinate at the volunteer's own budget.
type apes struct{}

func (apes) Wire() wire.Protocol                { return wire.ProtocolAPES }
func (apes) Check(p wire.Params) error          { return checkAPES(p) }
func (apes) Perturbed(p wire.Params) int        { return int(p.D) }
func (apes) Changed(p wire.Params) int          { return int(p.D) }
func (apes) Mechanism() mechanism.Protocol      { return 0 }
func (apes) Release() string                    { return privacy.ProtocolAPES }
func (apes) Overflow() mechanism.OverflowPolicy { return mechanism.OverflowRaise }
func (apes) sparseB(wire.Params) int            { return 0 }
func (apes) Defaults(d, n int, o Options) (wire.Params, float64, error) {
	p := apesDefaults(n, o)
	p.K = uint32(d)
	return p, 1, nil
}

// sapes: S-APES, APES followed by post-sparsification to the K = b largest
// perturbed coordinates (APES Algorithm 2). Changed is d, not APES
// Proposition 1's 2b: the selection happens after perturbation, so every
// coordinate's distribution depends on the data.
type sapes struct{}

func (sapes) Wire() wire.Protocol { return wire.ProtocolSAPES }
func (sapes) Check(p wire.Params) error {
	if err := checkAPES(p); err != nil {
		return err
	}
	if p.NP != 1 {
		return fmt.Errorf("%w: s-apes pads nothing (n_p = 1, raised to n by the relay), got n_p = %d: its charge claims no amplification, and a relay dummy could not follow the law of a real report's post-selected values", ErrLayout, p.NP)
	}
	return nil
}
func (sapes) Perturbed(p wire.Params) int        { return int(p.D) }
func (sapes) Changed(p wire.Params) int          { return int(p.D) }
func (sapes) Mechanism() mechanism.Protocol      { return 0 }
func (sapes) Release() string                    { return privacy.ProtocolLocal }
func (sapes) Overflow() mechanism.OverflowPolicy { return mechanism.OverflowRaise }
func (sapes) sparseB(p wire.Params) int          { return int(p.K) }
func (sapes) Defaults(d, n int, o Options) (wire.Params, float64, error) {
	p := apesDefaults(n, o)
	if o.NP == 0 {
		p.NP = 1 // no dummies (Check)
	}
	p.K = uint32(chooseK(d, o))
	return p, 1, nil
}

// apesSpec is what a Spec derives for APES and S-APES.
type apesSpec struct {
	cfg    mechanism.APESConfig
	epsMax float64                 // ε* = EpsL/D, the largest per-coordinate budget
	top    *randomizer.ClipLaplace // Clip-Laplace at ε*: value dummies, range
}

func newAPES(p wire.Params, proto apesProtocol) (*Spec, error) {
	d := int(p.D)
	epsMax := p.EpsL / float64(d)
	top, err := randomizer.NewClipLaplace(epsMax, APESRangeRatio)
	if err != nil {
		return nil, fmt.Errorf("roundspec: %v at epsilon %v per coordinate: %w", p.Protocol, epsMax, err)
	}
	cfg := mechanism.APESConfig{D: d, C: p.Clip, RangeRatio: APESRangeRatio, B: proto.sparseB(p)}
	if _, err := mechanism.NewAPESWireEncoder(cfg, epsMax, 1); err != nil {
		return nil, fmt.Errorf("roundspec: %w", err)
	}
	s := &Spec{p: p, proto: proto, shuffle: proto, ap: &apesSpec{cfg: cfg, epsMax: epsMax, top: top}}
	s.cfg = mechanism.FLAMEConfig{D: d, K: d, L: 1, Width: 1, EpsL: p.EpsL, C: p.Clip}
	return s, nil
}

// APES returns the APES configuration and the largest per-coordinate
// budget ε* = EpsL/D of an APES or S-APES spec (ok false otherwise).
func (s *Spec) APES() (cfg mechanism.APESConfig, epsMax float64, ok bool) {
	if s.ap == nil {
		return mechanism.APESConfig{}, 0, false
	}
	return s.ap.cfg, s.ap.epsMax, true
}

// apesLevel is the level f a personal choice gives: personal in (0, 1),
// else 1 (the announced largest budget).
func apesLevel(personal float64) float64 {
	if personal > 0 && personal < 1 {
		return personal
	}
	return 1
}

// apesRelease is Release for APES and S-APES: see the comment at the top
// of this file. APES: the shuffle population of every dimension is np (the
// values the aggregator counted; the relay's dummies are virtual
// volunteers at ε*), and each of the np budgets is charged as ε*. S-APES:
// the local model, D coordinates at ε* (EpsL per round).
func (s *Spec) apesRelease(round, np int) privacy.Release {
	np = max(np, 1)
	if s.ap.cfg.Sparse() {
		return privacy.Release{
			Round: round, Protocol: privacy.ProtocolLocal, Randomizer: privacy.RandomizerClipLaplace,
			Eps0: s.ap.epsMax, D: int(s.p.D), K: int(s.p.D), L: 1, N: np,
		}
	}
	eps := make([]float64, np)
	for i := range eps {
		eps[i] = s.ap.epsMax
	}
	return privacy.Release{
		Round: round, Protocol: privacy.ProtocolAPES, Randomizer: privacy.RandomizerClipLaplace,
		Eps0: s.ap.epsMax, D: int(s.p.D), K: int(s.p.D), L: 1, N: np, PersonalEps: eps,
	}
}

// apesNoiseStd is NoiseStd for APES at the largest budget: the standard
// deviation of Clip-Laplace's output at the centre, sd² = 2λ²(1 − e^{−u}(1
// + u + u²/2))/(1 − e^{−u}) with λ = 1/ε*, u = A/λ (the truncated Laplace's
// second moment on [−A, A]), mapped to update units by the calibration's
// local slope: 2C·sd/M'(1/2), M = E[CLap(·)] (central difference).
func (s *Spec) apesNoiseStd() float64 {
	lam := 1 / s.ap.epsMax
	u := (APESRangeRatio / 2.0) / lam
	em := math.Exp(-u)
	v := 2 * lam * lam * (1 - em*(1+u+u*u/2)) / -math.Expm1(-u)
	const h = 1e-4
	slope := (s.ap.top.Expect(0.5+h) - s.ap.top.Expect(0.5-h)) / (2 * h)
	return 2 * s.p.Clip * math.Sqrt(max(v, 0)) / slope
}

// Dummy draws the value of one relay dummy in dimension dim: for the
// shuffle protocols a sample of the randomizer's blanket; for APES and
// S-APES a report of a virtual volunteer at the largest level — in a value
// column Clip-Laplace at ε* of the centre (a zero update), in the budget
// column (dim = D) the level 1.
func (s *Spec) Dummy(dim uint32, src noise.Source) float64 {
	if s.ap != nil {
		if dim == s.p.D {
			return 1
		}
		return s.ap.top.Blanket(src)
	}
	return s.rz.Blanket(src)
}

// Blanket is the distribution of the relay's dummies in every value column
// (Dummy for dim < D), which the relay may draw and seal ahead of the
// round's close; nil for secure summation.
func (s *Spec) Blanket() randomizer.Randomizer {
	switch {
	case s.ap != nil:
		return s.ap.top
	case s.rz != nil:
		return s.rz
	}
	return nil
}
