package randomizer

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// ClipLaplaceCalibrator inverts the APES eq. (1) calibration: the analyzer
// sees the mean of n shuffled Clip-Laplace reports of one dimension, made
// with personalized budgets eps_1..eps_n it cannot match to reports, and
// estimates the common input g in [0,1] by solving
//
//	F(g) = (1/n) sum_i E[CLap_i(g)] = observed,
//
// where E[CLap_i(g)] = ClipLaplace{eps_i, r}.Expect(g) (APES "Analyzing
// Process": the mean gradient gbar is plugged into every user's
// expectation). F is strictly increasing and continuous, so the root is
// unique; observed values below F(0) or above F(1) (possible through
// noise) are clamped to 0 or 1.
//
// The calibrator groups equal budgets and tabulates F once, so inverting
// the thousands of dimensions of a model costs a table lookup plus two or
// three safeguarded Newton steps each, every step O(#distinct budgets).
// It is immutable and safe for concurrent use.
type ClipLaplaceCalibrator struct {
	r      float64
	a      float64
	terms  []clipMoments // one per distinct budget
	ws     []float64     // their frequencies (sum 1)
	tableX []float64
	tableF []float64
}

// calibTableSize nodes of F bracket the root to 1/1024, so Newton starts
// within ~1e-6 of it and needs two steps.
const calibTableSize = 1025

// NewClipLaplaceCalibrator builds the calibrator for the budgets eps
// (each finite and > 0, at least one) and range ratio r (as in
// NewClipLaplace).
func NewClipLaplaceCalibrator(eps []float64, r float64) (*ClipLaplaceCalibrator, error) {
	if len(eps) == 0 {
		return nil, errors.New("randomizer: clip-laplace calibration needs at least one epsilon")
	}
	if err := checkRangeRatio(r); err != nil {
		return nil, err
	}
	sorted := slices.Clone(eps)
	for i, e := range sorted {
		if err := checkEpsilon(e); err != nil {
			return nil, fmt.Errorf("randomizer: clip-laplace calibration eps[%d]: %w", i, err)
		}
	}
	slices.Sort(sorted)
	c := &ClipLaplaceCalibrator{r: r, a: r / 2}
	n := float64(len(sorted))
	for i := 0; i < len(sorted); {
		j := i
		for j < len(sorted) && sorted[j] == sorted[i] {
			j++
		}
		c.terms = append(c.terms, newClipMoments(1/sorted[i], c.a))
		c.ws = append(c.ws, float64(j-i)/n)
		i = j
	}
	c.tableX = make([]float64, calibTableSize)
	c.tableF = make([]float64, calibTableSize)
	for k := range calibTableSize {
		x := float64(k) / (calibTableSize - 1)
		c.tableX[k] = x
		c.tableF[k] = c.Mean(x)
	}
	return c, nil
}

// Mean returns F(g) = (1/n) sum_i E[CLap_i(g)] in output units (g clamped
// to [0,1]).
func (c *ClipLaplaceCalibrator) Mean(g float64) float64 {
	m, _ := c.meanDeriv(g, false)
	return m
}

// meanDeriv returns F(g) and, if deriv, F'(g), in one pass over the
// budgets.
func (c *ClipLaplaceCalibrator) meanDeriv(g float64, deriv bool) (float64, float64) {
	f := clamp01(g) - 0.5
	s, d := 0.0, 0.0
	for i := range c.terms {
		m, dm := c.terms[i].mean(f, deriv)
		s += c.ws[i] * m
		d += c.ws[i] * dm
	}
	return 0.5 + s, d
}

func (c *ClipLaplaceCalibrator) deriv(g float64) float64 {
	_, d := c.meanDeriv(g, true)
	return d
}

// Range returns the attainable interval [F(0), F(1)] of observed means.
func (c *ClipLaplaceCalibrator) Range() (lo, hi float64) {
	return c.tableF[0], c.tableF[calibTableSize-1]
}

// Invert returns the g in [0,1] with Mean(g) = observed, to an absolute
// accuracy of about 1e-13 in g. It is a safeguarded Newton iteration
// (rtsafe): the table brackets the root, every step keeps the bracket
// [a, b] with F(a) < observed < F(b), and a Newton step that leaves the
// bracket is replaced by bisection, so it converges for any monotone F;
// it stops when a Newton step is below 1e-13 (the next one would be
// ~1e-26) or the bracket is narrower than 1e-14. observed must be finite;
// values outside Range() clamp to 0 or 1.
func (c *ClipLaplaceCalibrator) Invert(observed float64) (float64, error) {
	if math.IsNaN(observed) || math.IsInf(observed, 0) {
		return 0, fmt.Errorf("randomizer: clip-laplace calibration: observed mean %v must be finite", observed)
	}
	lo, hi := c.Range()
	if observed <= lo {
		return 0, nil
	}
	if observed >= hi {
		return 1, nil
	}
	// Bracket from the table: tableF is strictly increasing.
	k, _ := slices.BinarySearch(c.tableF, observed)
	a, b := c.tableX[k-1], c.tableX[k]
	fa, fb := c.tableF[k-1], c.tableF[k]
	x := a + (b-a)*(observed-fa)/(fb-fa)
	for range 200 {
		fx, d := c.meanDeriv(x, true)
		fx -= observed
		if fx == 0 {
			return x, nil
		}
		if fx < 0 {
			a = x
		} else {
			b = x
		}
		next := x - fx/d
		newton := d > 0 && next > a && next < b
		if !newton {
			next = a + (b-a)/2
		}
		if (newton && math.Abs(next-x) < 1e-13) || b-a < 1e-14 {
			return next, nil
		}
		x = next
	}
	return x, nil
}

// invertClipLaplaceMean solves (1/n) sum_i E[CLap_i(g)] = observed for g in
// [0,1] (APES eq. (1) calibration); see ClipLaplaceCalibrator, which
// should be reused when inverting many dimensions with the same budgets.
func invertClipLaplaceMean(observed float64, eps []float64, r float64) (float64, error) {
	c, err := NewClipLaplaceCalibrator(eps, r)
	if err != nil {
		return 0, err
	}
	return c.Invert(observed)
}
