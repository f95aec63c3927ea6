package amplify

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/blanket-fl/blanket/shared/internal/check"
)

// Relation names the neighbouring relation a privacy guarantee holds for.
type Relation int

const (
	// ReplaceOne: neighbouring datasets have the same size n and differ in
	// the data of exactly one user. Every shuffle pair of this package is
	// stated for ReplaceOne (FMT'21, FMT'23 and Wang et al. VLDB 2024 all
	// work with replacement neighbours).
	ReplaceOne Relation = iota + 1
	// AddRemove: one dataset is the other with one user added.
	AddRemove
)

// String returns "replace-one" or "add-remove".
func (r Relation) String() string {
	switch r {
	case ReplaceOne:
		return "replace-one"
	case AddRemove:
		return "add-remove"
	default:
		return fmt.Sprintf("Relation(%d)", int(r))
	}
}

// Pair is a discrete dominating pair (P, Q) for a mechanism M: for every
// ordered pair of neighbouring datasets (D, D') under Relation and every
// eps (of either sign),
//
//	H_{e^eps}(M(D) || M(D')) <= H_{e^eps}(P || Q),
//	H_gamma(P || Q) = sum_i max(0, P_i - gamma*Q_i)   (the hockey-stick divergence),
//
// the definition of Zhu, Dong and Wang (AISTATS 2022, Definition 7). So M is
// (eps, Delta(eps))-DP for every eps >= 0, and because dominating pairs
// compose under products (Zhu-Dong-Wang Theorem 10), the k-fold product of
// pairs dominates the k-fold (adaptive) composition: this is what the PLD
// package builds on. A single Pair dominates both orders (D, D') and
// (D', D): every constructor here is stated for all pairs of inputs, so the
// reversed order is covered by the same pair; no Swap is needed for
// accounting (Swap exists for tests and for asymmetric pairs).
//
// Representation. Atom i has probability exp(LogP[i]) under P and
// exp(LogQ[i]) under Q (natural logarithms; -Inf encodes zero mass). Its
// privacy loss is LogP[i] - LogQ[i]. Atoms with LogQ[i] = -Inf and
// LogP[i] > -Inf have infinite loss. When a constructor truncates binomial
// tails it never makes the pair optimistic: the clone pairs put the
// dropped P-mass m on one atom with the largest loss the pair can have
// (Q-mass m*e^{-MaxLoss}) and the rest of the dropped Q-mass on an atom
// with LogP = -Inf. Since every dropped atom has Q_i >= P_i e^{-MaxLoss},
// every hockey-stick divergence and every Renyi divergence of order > 1 can
// only grow. (An atom with LogP = -Inf changes no H_gamma(P||Q), gamma >= 0.)
// Both P and Q sum to 1 within 1e-12 (Validate checks this), including
// these atoms.
//
// Atom order is unspecified unless a method says otherwise (Coarsen returns
// atoms sorted by increasing loss). Atoms are not necessarily distinct in
// loss.
//
// Constructors (one per method, each documented in its own file):
//
//	ShuffledRRPair(n, eps0)             exact count pair of shuffled binary RR (rr.go)
//	fmt21Pair(n, eps0, opt)             Feldman-McMillan-Talwar FOCS'21 Theorem 3.2 (clones.go)
//	FMT23Pair(n, eps0, opt)             Feldman-McMillan-Talwar SODA'23 stronger clone pair (clones.go)
//	VariationRatioPair(n, vr, opt)      Wang et al. VLDB'24 (p, beta, q)-variation-ratio pair (clones.go)
//
// For large n the clone pairs have O(n^2) atoms before truncation; pass
// PairOptions.LossStep > 0 to get the pessimistically coarsened pair
// (see Coarsen) with one atom per loss grid point.
type Pair struct {
	// Method names the bound, e.g. "fmt21" or "shuffled-rr".
	Method string
	// Relation is the neighbouring relation the pair dominates.
	Relation Relation
	// LogP and LogQ are the natural-log probabilities of the atoms; they
	// have equal length.
	LogP, LogQ []float64
}

// PairOptions tunes how a clone-type pair is enumerated. The zero value is
// valid and means the defaults below.
type PairOptions struct {
	// TailMass bounds the total probability (under P and under Q, each)
	// dropped by truncating binomial tails; dropped P-mass becomes an
	// infinite-loss atom, so the pair stays dominating and every Delta
	// grows by at most TailMass. Default 1e-15; must be in [0, 1e-3].
	TailMass float64
	// LossStep, if positive, coarsens the pair onto the loss grid
	// {k*LossStep}: every loss is rounded up (see Pair.Coarsen). Zero
	// keeps exact losses.
	LossStep float64
	// MaxAtoms bounds the number of atoms enumerated before coarsening;
	// constructors return an error instead of exhausting memory. Default
	// 1<<24 (about 16.8 million); must be >= 0.
	MaxAtoms int
}

const (
	defaultTailMass = 1e-15
	defaultMaxAtoms = 1 << 24
)

// withDefaults validates o and fills in defaults.
func (o PairOptions) withDefaults() (PairOptions, error) {
	if math.IsNaN(o.TailMass) || o.TailMass < 0 || o.TailMass > 1e-3 {
		return o, fmt.Errorf("amplify: TailMass %v outside [0, 1e-3]", o.TailMass)
	}
	if !check.Finite(o.LossStep) || o.LossStep < 0 {
		return o, fmt.Errorf("amplify: LossStep %v must be finite and >= 0", o.LossStep)
	}
	if o.MaxAtoms < 0 {
		return o, fmt.Errorf("amplify: MaxAtoms %d must be >= 0", o.MaxAtoms)
	}
	if o.TailMass == 0 {
		o.TailMass = defaultTailMass
	}
	if o.MaxAtoms == 0 {
		o.MaxAtoms = defaultMaxAtoms
	}
	return o, nil
}

// ErrInvalidPair is wrapped by Validate's errors.
var ErrInvalidPair = errors.New("amplify: invalid pair")

// Len returns the number of atoms.
func (p *Pair) Len() int { return len(p.LogP) }

// Validate checks that LogP and LogQ have equal non-zero length, contain no
// NaN or +Inf, and that each distribution sums to 1 within 1e-12.
func (p *Pair) Validate() error {
	if p == nil {
		return fmt.Errorf("%w: nil", ErrInvalidPair)
	}
	if len(p.LogP) == 0 || len(p.LogP) != len(p.LogQ) {
		return fmt.Errorf("%w: %d P atoms, %d Q atoms", ErrInvalidPair, len(p.LogP), len(p.LogQ))
	}
	if p.Relation != ReplaceOne && p.Relation != AddRemove {
		return fmt.Errorf("%w: unknown relation %d", ErrInvalidPair, int(p.Relation))
	}
	for i := range p.LogP {
		lp, lq := p.LogP[i], p.LogQ[i]
		if math.IsNaN(lp) || math.IsNaN(lq) || math.IsInf(lp, 1) || math.IsInf(lq, 1) || lp > 1e-12 || lq > 1e-12 {
			return fmt.Errorf("%w: atom %d has log-probabilities (%v, %v)", ErrInvalidPair, i, lp, lq)
		}
	}
	sp, sq := kahanExpSum(p.LogP), kahanExpSum(p.LogQ)
	if math.Abs(sp-1) > 1e-12 || math.Abs(sq-1) > 1e-12 {
		return fmt.Errorf("%w: P sums to 1%+.3g, Q sums to 1%+.3g", ErrInvalidPair, sp-1, sq-1)
	}
	return nil
}

// Probs returns the atom probabilities exp(LogP), exp(LogQ).
func (p *Pair) Probs() (P, Q []float64) {
	P = make([]float64, len(p.LogP))
	Q = make([]float64, len(p.LogQ))
	for i := range P {
		P[i] = math.Exp(p.LogP[i])
		Q[i] = math.Exp(p.LogQ[i])
	}
	return P, Q
}

// Swap returns the pair (Q, P).
func (p *Pair) Swap() *Pair {
	return &Pair{Method: p.Method, Relation: p.Relation,
		LogP: append([]float64(nil), p.LogQ...), LogQ: append([]float64(nil), p.LogP...)}
}

// Delta returns the hockey-stick divergence H_{e^eps}(P || Q) =
// sum_i max(0, P_i - e^eps Q_i), which is the delta(eps) of every mechanism
// the pair dominates. Each positive term is computed as
// P_i * (-expm1(eps + LogQ_i - LogP_i)) so that terms with loss just above
// eps lose no relative precision. eps may be any real or +Inf (Delta(+Inf)
// is the mass of infinite-loss atoms); NaN returns NaN.
func (p *Pair) Delta(eps float64) float64 {
	if math.IsNaN(eps) {
		return math.NaN()
	}
	var s, c float64 // Kahan summation of non-negative terms
	for i, lp := range p.LogP {
		if math.IsInf(lp, -1) {
			continue
		}
		lq := p.LogQ[i]
		var t float64
		switch {
		case math.IsInf(lq, -1):
			t = math.Exp(lp)
		case math.IsInf(eps, 1):
			continue
		default:
			d := eps + lq - lp
			if d >= 0 {
				continue
			}
			t = math.Exp(lp) * -math.Expm1(d)
		}
		y := t - c
		u := s + y
		c = (u - s) - y
		s = u
	}
	return s
}

// MaxLoss returns the largest finite privacy loss LogP-LogQ over atoms with
// positive P-mass, and the P-mass of atoms with infinite loss.
func (p *Pair) MaxLoss() (maxFinite, infMass float64) {
	maxFinite = math.Inf(-1)
	var inf []float64
	for i, lp := range p.LogP {
		if math.IsInf(lp, -1) {
			continue
		}
		if math.IsInf(p.LogQ[i], -1) {
			inf = append(inf, lp)
			continue
		}
		if l := lp - p.LogQ[i]; l > maxFinite {
			maxFinite = l
		}
	}
	if len(inf) > 0 {
		infMass = kahanExpSum(inf)
	}
	return maxFinite, infMass
}

// Epsilon returns the smallest eps >= 0 with Delta(eps) <= delta, to within
// an absolute 1e-12 and rounded up (the returned eps always satisfies
// Delta(eps) <= delta). It returns an error if delta is not in (0, 1) or if
// no finite eps reaches delta (delta below the infinite-loss mass).
func (p *Pair) Epsilon(delta float64) (float64, error) {
	if math.IsNaN(delta) || delta <= 0 || delta >= 1 {
		return 0, fmt.Errorf("amplify: delta %v outside (0, 1)", delta)
	}
	maxL, inf := p.MaxLoss()
	if inf > delta {
		return 0, fmt.Errorf("amplify: delta %v is below the infinite-loss mass %v of the %s pair", delta, inf, p.Method)
	}
	return bisectEpsilon(p.Delta, delta, maxL)
}

// bisectEpsilon finds the smallest eps in [0, hi] with f(eps) <= delta for a
// non-increasing f with f(hi) <= delta (hi may be -Inf or NaN when there is
// no finite loss, in which case 0 is returned).
func bisectEpsilon(f func(float64) float64, delta, hi float64) (float64, error) {
	if f(0) <= delta {
		return 0, nil
	}
	if !check.Finite(hi) || hi <= 0 {
		return 0, nil
	}
	if f(hi) > delta {
		// Rounding: nudge up once.
		hi = hi*(1+1e-9) + 1e-12
		if f(hi) > delta {
			return 0, fmt.Errorf("amplify: delta(eps) = %v > %v at the largest loss %v", f(hi), delta, hi)
		}
	}
	lo := 0.0
	for hi-lo > 1e-12 && hi-lo > 1e-13*hi {
		mid := lo + (hi-lo)/2
		if f(mid) <= delta {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, nil
}

// Coarsen returns the pessimistic discretisation of p onto the loss grid
// {k*step : k integer}: each atom's loss L = LogP-LogQ is rounded up to
// L' = ceil(L/step)*step by lowering its Q-mass to P*e^{-L'}; the removed
// Q-mass is moved to one atom with P = 0 (loss -Inf); atoms with equal L'
// are merged. Why this still dominates: for gamma >= 0 each term
// max(0, P_i - gamma*Q_i) can only grow when Q_i shrinks, the new P = 0
// atom contributes 0, and merging atoms of equal loss leaves every
// hockey-stick divergence unchanged (max(0, P_i - gamma Q_i) is then
// additive). So H_gamma(P'||Q') >= H_gamma(P||Q) for every gamma >= 0, i.e.
// every eps >= 0 guarantee of the coarse pair holds for the original.
//
// The result has one atom per occupied grid point, sorted by increasing
// loss, then at most one infinite-loss atom and one P = 0 atom at the end.
// step must be positive and finite.
func (p *Pair) Coarsen(step float64) (*Pair, error) {
	if !check.Finite(step) || step <= 0 {
		return nil, fmt.Errorf("amplify: coarsening step %v must be positive and finite", step)
	}
	type acc struct{ lp, lq []float64 }
	grid := make(map[int64]*acc)
	var infP, zeroQ []float64 // P-mass with Q = 0; Q-mass moved to the P = 0 atom
	for i, lp := range p.LogP {
		lq := p.LogQ[i]
		switch {
		case math.IsInf(lp, -1):
			if !math.IsInf(lq, -1) {
				zeroQ = append(zeroQ, lq)
			}
			continue
		case math.IsInf(lq, -1):
			infP = append(infP, lp)
			continue
		}
		k := int64(math.Ceil((lp - lq) / step))
		lq2 := lp - float64(k)*step // <= lq
		if lq2 < lq {
			// removed Q-mass e^lq - e^lq2 = e^lq * (1 - e^{lq2-lq})
			if r := lq + math.Log(-math.Expm1(lq2-lq)); !math.IsInf(r, -1) {
				zeroQ = append(zeroQ, r)
			}
		}
		a := grid[k]
		if a == nil {
			a = &acc{}
			grid[k] = a
		}
		a.lp = append(a.lp, lp)
		a.lq = append(a.lq, lq2)
	}
	keys := make([]int64, 0, len(grid))
	for k := range grid {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	out := &Pair{Method: p.Method, Relation: p.Relation}
	for _, k := range keys {
		a := grid[k]
		lp := logSumExp(a.lp)
		out.LogP = append(out.LogP, lp)
		// Keep the loss exactly on the grid point.
		out.LogQ = append(out.LogQ, lp-float64(k)*step)
	}
	if len(infP) > 0 {
		out.LogP = append(out.LogP, logSumExp(infP))
		out.LogQ = append(out.LogQ, math.Inf(-1))
	}
	if len(zeroQ) > 0 {
		out.LogP = append(out.LogP, math.Inf(-1))
		out.LogQ = append(out.LogQ, logSumExp(zeroQ))
	}
	return out, nil
}

// logSumExp returns log(sum exp(x_i)), -Inf for an empty or all -Inf input.
func logSumExp(x []float64) float64 {
	m := math.Inf(-1)
	for _, v := range x {
		if v > m {
			m = v
		}
	}
	if math.IsInf(m, -1) {
		return m
	}
	if math.IsInf(m, 1) {
		return m
	}
	var s, c float64
	for _, v := range x {
		t := math.Exp(v - m)
		y := t - c
		u := s + y
		c = (u - s) - y
		s = u
	}
	return m + math.Log(s)
}

// kahanExpSum returns sum exp(x_i) with compensated summation.
func kahanExpSum(x []float64) float64 {
	var s, c float64
	for _, v := range x {
		t := math.Exp(v)
		y := t - c
		u := s + y
		c = (u - s) - y
		s = u
	}
	return s
}
