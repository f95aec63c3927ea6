package pld

import (
	"errors"
	"fmt"
	"math"
)

// ErrRegridRange is returned by Regrid when a direction's finite losses
// span more than maxRegridSpan nats (the connect-the-dots hull is then not
// representable in float64); the caller keeps the finer grid.
var ErrRegridRange = errors.New("pld: loss range too wide to regrid")

// maxRegridSpan bounds the finite loss range Regrid accepts (e^{-700} is
// still a normal float64).
const maxRegridSpan = 700

// Regrid returns a PLD on the grid {i*h2} that dominates p: for every
// direction, its hockey-stick curve is the connect-the-dots interpolation
// (Doroshenko, Ghazi, Kamath, Kumar, Manurangsi, PETS 2022, Section 3; see
// connectDots) of upper bounds of p's curve at the new grid points, so
// Delta(eps) of the result is >= p's Delta(eps) at every eps, alone and
// after any composition (the result is the PLD of a pair dominating a pair
// that p dominates). The bounds include p's error bound and the rounding
// of their own evaluation, so the result carries no error of its own
// (ErrorBound 0 before further composition).
//
// Use: a composed round (thousands of coordinates) built on the fine grid
// its coordinates need is regridded to a grid matched to its own spread
// before it is composed over many rounds: the composition's grid then
// stays small, and unlike rounding the losses up (bias up to h2 per
// round, linear in the rounds) connect-the-dots does not shift every loss
// by about h2/2.
func (p *PLD) Regrid(h2 float64) (*PLD, error) {
	if math.IsNaN(h2) || h2 < 1e-7 || h2 > 1 {
		return nil, fmt.Errorf("pld: grid width %v must be in [1e-7, 1]", h2)
	}
	out := &PLD{h: h2, tail: p.tail}
	var err error
	if out.remove, err = p.remove.regrid(p.h, h2, p.tail); err != nil {
		return nil, err
	}
	if p.add != nil {
		if out.add, err = p.add.regrid(p.h, h2, p.tail); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (d *dist) regrid(h, h2, tail float64) (*dist, error) {
	if len(d.probs) == 0 {
		return &dist{inf: d.inf, errL1: d.errL1, truncated: d.truncated}, nil
	}
	lmin := float64(d.offset) * h
	lmax := float64(d.offset+len(d.probs)-1) * h
	if lmax-lmin > maxRegridSpan {
		return nil, fmt.Errorf("%w: %g nats", ErrRegridRange, lmax-lmin)
	}
	lo := int(math.Floor(lmin / h2))
	hi := int(math.Ceil(lmax / h2))
	n := hi - lo + 1
	if n > maxBuckets {
		return nil, fmt.Errorf("pld: regridded PLD of %d points exceeds %d", n, maxBuckets)
	}
	// Sweep the new grid points downwards: A = P-mass above eps,
	// B = sum over losses above eps of P e^{eps - L} (all exponents <= 0,
	// rescaled at every step), delta(eps) = inf + A - B.
	vals := make([]float64, n)
	errs := make([]float64, n)
	var ka kahan
	b := 0.0
	j := len(d.probs) - 1
	prevEps := math.NaN()
	for i := n - 1; i >= 0; i-- {
		eps := float64(lo+i) * h2
		if !math.IsNaN(prevEps) {
			b *= math.Exp(eps - prevEps)
		}
		prevEps = eps
		for j >= 0 {
			l := float64(d.offset+j) * h
			if l <= eps {
				break
			}
			ka.add(d.probs[j])
			b += d.probs[j] * math.Exp(eps-l)
			j--
		}
		a := ka.value()
		v := d.inf + a - b
		vals[i] = max(v, 0)
		// p's own bound: (inf + S)(1 + sumMargin) + errL1; plus the
		// rounding of this sweep (the rescaled B accumulates a few ulps
		// per step, relative to A >= B).
		errs[i] = sumMargin*(d.inf+a) + d.errL1 + 8*unitRoundoff*float64(n-i+8)*(d.inf+a+b)
	}
	out, err := connectDotsShift(lo, h2, vals, errs, 1, tail, float64(hi)*h2)
	if err != nil {
		return nil, err
	}
	out.truncated = d.truncated
	return out, nil
}
