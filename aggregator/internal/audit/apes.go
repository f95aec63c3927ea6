package audit

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/blanket-fl/blanket/shared/mechanism"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/randomizer"
	"github.com/blanket-fl/blanket/shared/roundspec"
)

// APES and S-APES (docs/privacy.md, "APES and S-APES"; roundspec/apes.go).
//
// Volunteers. The target encodes at level 1 (Clip-Laplace at ε* = EpsL/D
// per coordinate, the largest budget: the worst case for the target), or
// with Options.Encoder (the target's encoder only: a single client that
// claims a level but randomizes at another budget); the other volunteers
// alternate between apesOtherLevels (roundspec.Spec.Encoder at each level),
// so the cover is a mixture of budgets. The relay's round is the real one
// (Spec.Shuffle: the budget column, and dummies as Spec.Dummy when n < n_p).
//
// Neighbours (NeighboursFlip): the target's update is +C on every
// coordinate under H0 and −C under H1 (normalized 1 against 0), everyone
// else's −C everywhere, as for SS-Simple: under H1 the target is one more
// report centred where the others are, under H0 the only one centred at 1.
// The levels are settings, not data, and equal under both.

// apesOtherLevels are the levels of the other volunteers, cycled: half at
// the announced largest budget, half at half of it.
var apesOtherLevels = []float64{1, 0.5}

// apesNeighbours is neighbours for an APES or S-APES spec.
func apesNeighbours(spec *roundspec.Spec, opts Options) (pair, []*mechanism.Encoder, error) {
	cfg, epsMax, _ := spec.APES()
	p := spec.Params()
	if opts.Neighbours != NeighboursDefault && opts.Neighbours != NeighboursFlip {
		return pair{}, nil, fmt.Errorf("audit: neighbours %q do not apply to %v", opts.Neighbours, p.Protocol)
	}
	d, c, n := int(p.D), p.Clip, opts.Volunteers
	cols := int(p.Columns())
	encs := make([]*mechanism.Encoder, n)
	var err error
	if encs[0] = opts.Encoder; encs[0] == nil {
		if encs[0], err = spec.Encoder(1); err != nil {
			return pair{}, nil, fmt.Errorf("audit: %w", err)
		}
	}
	for i := 1; i < n; i++ {
		if encs[i], err = spec.Encoder(apesOtherLevels[(i-1)%len(apesOtherLevels)]); err != nil {
			return pair{}, nil, fmt.Errorf("audit: %w", err)
		}
	}
	if encs[0].Shape().Messages != cols || encs[0].CoordinateEpsilon() <= 0 {
		return pair{}, nil, errors.New("audit: the target's encoder does not have the apes layout")
	}
	// The level the target's budget message claims (data-independent).
	msgs, err := encs[0].Encode(make([]float64, d), noise.NewSeeded(opts.Seed^0x1e7e1))
	if err != nil {
		return pair{}, nil, fmt.Errorf("audit: encode: %w", err)
	}
	claimed := msgs[d].Values[0]

	pr := pair{kind: NeighboursFlip, a: make([]bool, cols), b: make([]bool, cols)}
	for h := range 2 {
		pr.target[h] = make([]float64, d)
	}
	for j := range d {
		pr.target[0][j], pr.target[1][j] = c, -c
		pr.a[j] = true
	}
	for range n - 1 {
		x := make([]float64, d)
		for j := range x {
			x[j] = -c
		}
		pr.others = append(pr.others, x)
	}
	am := &apesModel{d: d, b: cfg.B, r: cfg.RangeRatio, epsMax: epsMax, claimed: claimed, real: n, xo: 0, dens: map[float64]func(x, y float64) float64{}}
	if !cfg.Sparse() {
		am.b = d
	}
	tf, err := am.marginal(encs[0].CoordinateEpsilon())
	if err != nil {
		return pair{}, nil, err
	}
	dummy, err := randomizer.NewClipLaplace(epsMax, cfg.RangeRatio)
	if err != nil {
		return pair{}, nil, fmt.Errorf("audit: %w", err)
	}
	m := &lrModel{
		logf: func(x, y float64) float64 { return math.Log(tf(x, y)) },
		// ω: a relay dummy (Spec.Dummy: Clip-Laplace at ε* of the
		// centre); the target reports in every value column, so only
		// the leading-values statistic of a misrouted batch looks at it.
		logw:  func(y float64) float64 { return math.Log(dummy.Density(0.5, y)) },
		xo:    make([]float64, d),
		use:   make([]bool, d),
		cover: am.cover,
	}
	for h := range 2 {
		m.p[h], m.x[h] = make([]float64, d), make([]float64, d)
	}
	for j := range d {
		m.use[j] = true
		m.p[0][j], m.p[1][j] = 1, 1
		m.x[0][j], m.x[1][j] = 1, 0
	}
	pr.lr = m
	pr.apes = am
	return pr, encs, nil
}

// apesModel is the adversary's model of an APES or S-APES value column:
// the density of one volunteer's value in a column (marginal) and the cover
// of the target's value, a mixture over the other n_p − 1 values (cover).
type apesModel struct {
	d, b    int     // dimension; values kept per report (b = d: APES)
	r       float64 // Clip-Laplace range ratio
	epsMax  float64 // ε*
	claimed float64 // the target's level in the budget column
	real    int     // real reports (n)
	xo      float64 // the other volunteers' normalized value
	dens    map[float64]func(x, y float64) float64
}

// marginal returns the density of one volunteer's value in a value column
// when every coordinate of its update is x (normalized) and it perturbs at
// per-coordinate budget eps, with Clip-Laplace's density (APES Definition
// 4; randomizer.ClipLaplace.Density, the continuous law of which the
// sampler draws a fine-grid version).
//
// APES: the Clip-Laplace density R_eps(x)(y). S-APES (b < d, APES
// Algorithm 2): the value y of coordinate j is kept if fewer than b of the
// other d − 1 perturbed coordinates (i.i.d. R_eps(x), as every coordinate
// is x) lie farther from the centre, and replaced by a fresh draw
// R_eps(1/2) otherwise, so its marginal is
//
//	R_eps(x)(y)·P[Bin(d − 1, s(y)) ≤ b − 1] + (1 − b/d)·R_eps(1/2)(y),
//
// s(y) = P[|Y − 1/2| > |y − 1/2|] for Y ~ R_eps(x) (ties, of probability
// 0 in the continuous law, ignored). Exact for the flip neighbours'
// constant updates; the columns of one S-APES report are dependent (the
// selection links them), which the sum over dimensions ignores.
func (am *apesModel) marginal(eps float64) (func(x, y float64) float64, error) {
	if f, ok := am.dens[eps]; ok {
		return f, nil
	}
	cl, err := randomizer.NewClipLaplace(eps, am.r)
	if err != nil {
		return nil, fmt.Errorf("audit: clip-laplace at %v: %w", eps, err)
	}
	f := cl.Density
	if am.b < am.d {
		lam, a := 1/eps, am.r/2
		// The Laplace(f, λ) CDF of the centred output z = y − 1/2.
		lcdf := func(fc, z float64) float64 {
			if z < fc {
				return math.Exp((z-fc)/lam) / 2
			}
			return 1 - math.Exp(-(z-fc)/lam)/2
		}
		bin := distuv.Binomial{N: float64(am.d - 1)}
		q := 1 - float64(am.b)/float64(am.d)
		f = func(x, y float64) float64 {
			fc := min(max(x, 0), 1) - 0.5
			t := math.Abs(y - 0.5)
			s := 1 - (lcdf(fc, t)-lcdf(fc, -t))/(lcdf(fc, a)-lcdf(fc, -a))
			bin.P = min(max(s, 0), 1)
			keep := bin.CDF(float64(am.b - 1))
			return cl.Density(x, y)*keep + q*cl.Density(0.5, y)
		}
	}
	am.dens[eps] = f
	return f, nil
}

// cover returns the log density of the target's cover in a value column
// for view v: the mixture, over the n_p − 1 other values, of their laws.
// The budget column tells the adversary every level: it removes the
// n_p − n largest (the relay's dummies, level 1: Clip-Laplace at ε* of the
// centre, roundspec.Spec.Dummy) and one copy of the target's claimed
// level; the rest are the other volunteers', at their update xo. The cover
// is a fixed set of laws, not i.i.d., so the per-dimension likelihood ratio
// with the mixture is an approximation (any statistic gives a valid audit).
func (am *apesModel) cover(v view) func(j uint32, y float64) float64 {
	var levels []float64
	for i, j := range v.index {
		if int(j) == am.d {
			levels = append(levels, mechanism.APESLevelOrCentre(v.value[i]))
		}
	}
	slices.Sort(levels)
	dummies := max(0, len(levels)-am.real)
	others := levels[:len(levels)-dummies]
	if i := slices.Index(others, am.claimed); i >= 0 {
		others = slices.Delete(slices.Clone(others), i, i+1)
	}
	count := map[float64]float64{}
	for _, l := range others {
		count[l]++
	}
	type comp struct {
		w float64
		f func(x, y float64) float64
		x float64
	}
	var comps []comp
	total := float64(len(others) + dummies)
	for _, l := range slices.Sorted(func(yield func(float64) bool) {
		for l := range count {
			if !yield(l) {
				return
			}
		}
	}) {
		f, err := am.marginal(l * am.epsMax)
		if err != nil {
			continue // a level the model cannot price: left out of the mixture
		}
		comps = append(comps, comp{count[l] / total, f, am.xo})
	}
	if dummies > 0 {
		cl, err := randomizer.NewClipLaplace(am.epsMax, am.r)
		if err == nil {
			comps = append(comps, comp{float64(dummies) / total, cl.Density, 0.5})
		}
	}
	return func(_ uint32, y float64) float64 {
		g := 0.0
		for _, c := range comps {
			g += c.w * c.f(c.x, y)
		}
		return math.Log(g)
	}
}

// farSide is the far-values statistic (the cross-column probe for
// S-APES, whose selection keeps each report's values farthest from the
// centre): over every value column, the number of values above
// 1/2 + τ minus those below 1/2 − τ, with τ the (1 − b/d)-quantile of
// |Y − 1/2| for Y ~ R_{ε*}(1/2) (so that about b of d values per report
// count; APES: τ = 0, the sign of every value).
func (am *apesModel) farSide(v view) float64 {
	lam, a := 1/am.epsMax, am.r/2
	q := 1 - float64(am.b)/float64(am.d)
	// |z| for z ~ Laplace(0, λ) truncated to [−a, a] has CDF
	// (1 − e^{−t/λ})/(1 − e^{−a/λ}) on [0, a].
	tau := -lam * math.Log1p(q*math.Expm1(-a/lam))
	s := 0.0
	for i, j := range v.index {
		if int(j) >= am.d {
			continue
		}
		switch y := v.value[i]; {
		case y > 0.5+tau:
			s++
		case y < 0.5-tau:
			s--
		}
	}
	return s
}

// levelSum is the budget column's sum: equal under both neighbours unless
// a level depends on the data.
func levelSum(v view, d int) float64 {
	s := 0.0
	for i, j := range v.index {
		if int(j) == d {
			s += v.value[i]
		}
	}
	return s
}
