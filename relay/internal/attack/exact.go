// Package attack measures, on the shipped code, an empirical lower bound on
// the ε of a shuffle round and compares it with what the accountant charges
// (docs/privacy.md, "Attacks on the accountant's rows").
//
// A test in this package fixes two neighbouring datasets (the target's
// update replaced, everyone else's fixed and chosen to be worst, including
// dimensions that overflow n_p so that the relay's truncation bites), runs
// the volunteers' encoder (roundspec.Spec.Encoder, shared/mechanism and
// shared/randomizer) and the relay's padding, truncation and uniform
// shuffle (roundspec.Spec.Shuffle: the Pad, Dummy and noise.Shuffle that
// relay/internal/shuffler applies) under each hypothesis, and applies a
// fixed likelihood-ratio threshold test to the values of the dimensions the
// replacement changes. Clopper-Pearson bounds on its two error rates give
// ε ≥ ln((TPR_lo − δ)/FPR_hi) (Kairouz et al. 2015), which must not exceed
// the charge.
//
// The test is the Neyman-Pearson test of a binned view: every value is put
// in one of a few bins (R_{γ,b}'s grid points exactly; intervals for Laplace
// and Gaussian), and this file computes the exact law of the bin counts of
// each changed dimension under both hypotheses (Model), hence the exact
// privacy-loss distribution of the binned view (PLD), its ε(δ) (a lower
// bound on the view's; equal to it for R_{γ,b}), the threshold to test at,
// and what a run of N trials can detect (Detectable). Nothing here is
// fitted to simulated data: the threshold comes from the exact law, so the
// Clopper-Pearson bounds hold as stated.
package attack

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"gonum.org/v1/gonum/integrate/quad"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/blanket-fl/blanket/shared/mechanism"
	"github.com/blanket-fl/blanket/shared/randomizer"
)

// Binning maps a reported value to a bin: bin i holds the values in
// (Cuts[i-1], Cuts[i]] (bin 0 everything up to Cuts[0], the last bin
// everything above the last cut).
type Binning struct {
	Cuts []float64
}

// Bins is the number of bins.
func (b Binning) Bins() int { return len(b.Cuts) + 1 }

// Bin returns the bin of y.
func (b Binning) Bin(y float64) int { return sort.SearchFloat64s(b.Cuts, y) }

// maxBins and countBits bound the count-vector encoding of a dimension's
// view: countBits bits per bin, so at most 2^countBits − 1 messages per
// dimension.
const (
	countBits = 5
	maxBins   = 64 / countBits
	maxCount  = 1<<countBits - 1
)

// NewBinning returns the exact binning of R_{γ,b} (one bin per output
// v/b, cuts at the midpoints), or, for Laplace and Gaussian, the bins with
// the given cuts, which must lie strictly inside the randomizer's clamped
// support (so that clamping moves no value across a cut).
func NewBinning(rz *randomizer.Bounded, cuts []float64) (Binning, error) {
	if rgb, ok := rz.Unwrap().(*randomizer.RGB); ok {
		b := rgb.Buckets()
		if b+1 > maxBins {
			return Binning{}, fmt.Errorf("attack: rgb with %d outputs, at most %d bins", b+1, maxBins)
		}
		out := make([]float64, b)
		for v := range b {
			out[v] = (float64(v) + 0.5) / float64(b)
		}
		return Binning{Cuts: out}, nil
	}
	lo, hi := rz.Support()
	if len(cuts)+1 > maxBins || len(cuts) == 0 {
		return Binning{}, fmt.Errorf("attack: %d cuts, want 1..%d", len(cuts), maxBins-1)
	}
	if !slices.IsSorted(cuts) || cuts[0] <= lo || cuts[len(cuts)-1] >= hi {
		return Binning{}, fmt.Errorf("attack: cuts %v must be increasing and inside the support (%v, %v)", cuts, lo, hi)
	}
	return Binning{Cuts: slices.Clone(cuts)}, nil
}

// Law is the distribution of one message over the bins.
type Law []float64

// MessageLaw is the law of the bin of R(x) for the shipped randomizer rz
// (Laplace x + Lap(1/ε0), Gaussian x + N(0, σ²), both clamped to the
// support; R_{γ,b} exactly: randomized rounding of x·b with probability
// 1 − γ, a uniform grid point otherwise).
func MessageLaw(rz *randomizer.Bounded, b Binning, x float64) (Law, error) {
	return law(rz, b, x, false)
}

// BlanketLaw is the law of the bin of a dummy (the blanket ω: R(1/2) for
// Laplace and Gaussian, uniform on the grid for R_{γ,b}).
func BlanketLaw(rz *randomizer.Bounded, b Binning) (Law, error) {
	return law(rz, b, 0.5, true)
}

func law(rz *randomizer.Bounded, b Binning, x float64, blanket bool) (Law, error) {
	m := b.Bins()
	out := make(Law, m)
	var cdf func(c float64) float64
	switch r := rz.Unwrap().(type) {
	case *randomizer.Laplace:
		s := r.Scale()
		cdf = func(c float64) float64 {
			z := c - x
			if z < 0 {
				return 0.5 * math.Exp(z/s)
			}
			return 1 - 0.5*math.Exp(-z/s)
		}
	case *randomizer.Gaussian:
		sg := r.Sigma()
		cdf = func(c float64) float64 { return 0.5 * math.Erfc(-(c-x)/(sg*math.Sqrt2)) }
	case *randomizer.RGB:
		bk, g := r.Buckets(), r.Gamma()
		if m != bk+1 {
			return nil, fmt.Errorf("attack: rgb needs its grid binning (%d bins), got %d", bk+1, m)
		}
		for v := range out {
			out[v] = g / float64(bk+1)
		}
		if blanket {
			for v := range out {
				out[v] = 1 / float64(bk+1)
			}
			return out, nil
		}
		xc := math.Min(1, math.Max(0, x))
		fl := math.Floor(xc * float64(bk))
		frac := xc*float64(bk) - fl
		out[int(fl)] += (1 - g) * (1 - frac)
		if frac > 0 {
			out[int(fl)+1] += (1 - g) * frac
		}
		return out, nil
	default:
		return nil, fmt.Errorf("attack: randomizer %s has no exact law here", rz.Name())
	}
	prev := 0.0
	for i, c := range b.Cuts {
		v := cdf(c)
		out[i] = v - prev
		prev = v
	}
	out[m-1] = 1 - prev
	return out, nil
}

// Msg is Count messages with the same law in one dimension.
type Msg struct {
	Law   Law
	Count int
}

// DimLaw returns the exact law of the bin counts of one dimension after the
// relay: the messages msgs (the real ones), padded with dummies of law
// dummy up to np when there are fewer, or, when there are more (SS-Topk's
// truncation, mechanism.KeepAtMost), a uniformly random np of them. The key
// of a count vector packs countBits bits per bin (key(c) = Σ c_i·2^(i·countBits)),
// so adding keys adds count vectors.
func DimLaw(msgs []Msg, np int, dummy Law) (map[uint64]float64, error) {
	total := 0
	for _, m := range msgs {
		if m.Count < 0 {
			return nil, errors.New("attack: negative message count")
		}
		total += m.Count
	}
	if np < 1 || np > maxCount {
		return nil, fmt.Errorf("attack: n_p = %d, want 1..%d", np, maxCount)
	}
	if total <= np {
		all := append(slices.Clone(msgs), Msg{Law: dummy, Count: np - total})
		return convolveAll(all), nil
	}
	// Truncation: the kept counts per type are multivariate
	// hypergeometric.
	out := map[uint64]float64{}
	denom := logChoose(total, np)
	kept := make([]int, len(msgs))
	var rec func(i, left int, logw float64)
	rec = func(i, left int, logw float64) {
		if i == len(msgs) {
			if left != 0 {
				return
			}
			sub := make([]Msg, len(msgs))
			for t, m := range msgs {
				sub[t] = Msg{Law: m.Law, Count: kept[t]}
			}
			w := math.Exp(logw - denom)
			for k, p := range convolveAll(sub) {
				out[k] += w * p
			}
			return
		}
		for c := 0; c <= min(left, msgs[i].Count); c++ {
			kept[i] = c
			rec(i+1, left-c, logw+logChoose(msgs[i].Count, c))
		}
	}
	rec(0, np, 0)
	return out, nil
}

func logChoose(n, k int) float64 {
	a, _ := math.Lgamma(float64(n + 1))
	b, _ := math.Lgamma(float64(k + 1))
	c, _ := math.Lgamma(float64(n - k + 1))
	return a - b - c
}

// convolveAll is the law of the count vector of independent messages.
func convolveAll(msgs []Msg) map[uint64]float64 {
	out := map[uint64]float64{0: 1}
	for _, m := range msgs {
		if m.Count == 0 {
			continue
		}
		out = convolve(out, multinomial(m.Law, m.Count))
	}
	return out
}

func convolve(a, b map[uint64]float64) map[uint64]float64 {
	out := make(map[uint64]float64, len(a)*len(b))
	for ka, pa := range a {
		for kb, pb := range b {
			out[ka+kb] += pa * pb
		}
	}
	return out
}

// multinomial is the law of the count vector of n messages of law p.
func multinomial(p Law, n int) map[uint64]float64 {
	out := map[uint64]float64{}
	counts := make([]int, len(p))
	lgn, _ := math.Lgamma(float64(n + 1))
	var rec func(i, left int)
	rec = func(i, left int) {
		if i == len(p)-1 {
			counts[i] = left
			lp := lgn
			var key uint64
			for j, c := range counts {
				if c > 0 {
					if p[j] <= 0 {
						return
					}
					lc, _ := math.Lgamma(float64(c + 1))
					lp += float64(c)*math.Log(p[j]) - lc
				}
				key += uint64(c) << (countBits * j)
			}
			out[key] += math.Exp(lp)
			return
		}
		for c := 0; c <= left; c++ {
			counts[i] = c
			rec(i+1, left-c)
		}
	}
	rec(0, n)
	return out
}

// Config is one equally-known setting of the round under a hypothesis
// (e.g. one of SS-Double's index subsets), with its probability Weight;
// Dims[i] are the real messages of the i-th changed dimension.
type Config struct {
	Weight float64
	Dims   [][]Msg
}

// Model is the exact law of the changed dimensions' bin counts under the
// two hypotheses: each a mixture of configurations, each configuration a
// product over the dimensions of DimLaw. Dimensions outside Dims have the
// same law under both hypotheses, independent of Dims' (the test ignores
// them, which can only weaken it).
type Model struct {
	Dims []uint32
	NP   int
	bins Binning
	laws [2][]cfgLaw
}

type cfgLaw struct {
	w    float64
	dims []map[uint64]float64
}

// NewModel computes the per-dimension laws of every configuration of both
// hypotheses; dummy is the blanket's law (BlanketLaw).
func NewModel(dims []uint32, np int, bins Binning, dummy Law, h0, h1 []Config) (*Model, error) {
	m := &Model{Dims: slices.Clone(dims), NP: np, bins: bins}
	for h, cfgs := range [2][]Config{h0, h1} {
		sum := 0.0
		for _, c := range cfgs {
			if len(c.Dims) != len(dims) {
				return nil, fmt.Errorf("attack: configuration with %d dimensions, want %d", len(c.Dims), len(dims))
			}
			cl := cfgLaw{w: c.Weight}
			for _, msgs := range c.Dims {
				l, err := DimLaw(msgs, np, dummy)
				if err != nil {
					return nil, err
				}
				cl.dims = append(cl.dims, l)
			}
			m.laws[h] = append(m.laws[h], cl)
			sum += c.Weight
		}
		if math.Abs(sum-1) > 1e-9 {
			return nil, fmt.Errorf("attack: hypothesis %d weights sum to %v", h, sum)
		}
	}
	return m, nil
}

// prob is the probability of the count vectors keys under hypothesis h.
func (m *Model) prob(h int, keys []uint64) float64 {
	p := 0.0
	for _, c := range m.laws[h] {
		q := c.w
		for i, k := range keys {
			q *= c.dims[i][k]
			if q == 0 {
				break
			}
		}
		p += q
	}
	return p
}

// LogLR is ln(P0/P1) of the changed dimensions' count vectors keys: the
// Neyman-Pearson statistic of the binned view.
func (m *Model) LogLR(keys []uint64) float64 {
	return math.Log(m.prob(0, keys)) - math.Log(m.prob(1, keys))
}

// Keys returns the count vectors of the changed dimensions in a batch as
// the aggregator opens it (one value per width-1 message).
func (m *Model) Keys(b mechanism.Batch, dst []uint64) []uint64 {
	dst = slices.Grow(dst[:0], len(m.Dims))[:len(m.Dims)]
	clear(dst)
	for _, msg := range b.Messages {
		j := msg.Indices[0]
		for i, dj := range m.Dims {
			if dj == j {
				dst[i] += 1 << (countBits * m.bins.Bin(msg.Values[0]))
			}
		}
	}
	return dst
}

// Point is one atom of a privacy-loss distribution: the loss ln(P0/P1) and
// its probabilities under both hypotheses.
type Point struct{ Loss, P0, P1 float64 }

// PLD is the exact privacy-loss distribution of the binned view, atoms in
// decreasing loss (equal losses merged).
type PLD []Point

// Exact enumerates every combination of the changed dimensions' count
// vectors (at most maxTuples) and returns the PLD of the binned view.
func (m *Model) Exact(maxTuples int) (PLD, error) {
	supp := make([][]uint64, len(m.Dims))
	total := 1
	for i := range m.Dims {
		set := map[uint64]bool{}
		for h := range 2 {
			for _, c := range m.laws[h] {
				for k := range c.dims[i] {
					set[k] = true
				}
			}
		}
		for k := range set {
			supp[i] = append(supp[i], k)
		}
		slices.Sort(supp[i])
		total *= len(supp[i])
		if total > maxTuples {
			return nil, fmt.Errorf("attack: more than %d outcomes", maxTuples)
		}
	}
	pts := make([]Point, 0, total)
	keys := make([]uint64, len(m.Dims))
	var rec func(i int)
	rec = func(i int) {
		if i == len(m.Dims) {
			p0, p1 := m.prob(0, keys), m.prob(1, keys)
			if p0 == 0 && p1 == 0 {
				return
			}
			pts = append(pts, Point{Loss: math.Log(p0) - math.Log(p1), P0: p0, P1: p1})
			return
		}
		for _, k := range supp[i] {
			keys[i] = k
			rec(i + 1)
		}
	}
	rec(0)
	slices.SortFunc(pts, func(a, b Point) int {
		switch {
		case a.Loss > b.Loss:
			return -1
		case a.Loss < b.Loss:
			return 1
		}
		return 0
	})
	var out PLD
	for _, p := range pts {
		if n := len(out); n > 0 && out[n-1].Loss == p.Loss {
			out[n-1].P0 += p.P0
			out[n-1].P1 += p.P1
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

// Delta is the hockey-stick divergence δ(ε) = Σ (P0 − e^ε P1)_+.
func (d PLD) Delta(eps float64) float64 {
	s := 0.0
	for _, p := range d {
		if v := p.P0 - math.Exp(eps)*p.P1; v > 0 {
			s += v
		}
	}
	return s
}

// Epsilon is the smallest ε ≥ 0 with Delta(ε) ≤ delta (bisection to 1e-9):
// the exact ε(δ) of the binned view for this direction of the neighbours.
func (d PLD) Epsilon(delta float64) float64 {
	if d.Delta(0) <= delta {
		return 0
	}
	lo, hi := 0.0, 1.0
	for d.Delta(hi) > delta {
		hi *= 2
		if hi > 1e3 {
			return math.Inf(1)
		}
	}
	for hi-lo > 1e-9 {
		mid := (lo + hi) / 2
		if d.Delta(mid) > delta {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// Threshold is the test chosen from the exact law: reject "H1" (say H0)
// when the statistic is at least T; P0 and P1 are its exact true- and
// false-positive rates, Detect the lower bound a run of Trials trials per
// hypothesis reaches with probability ≥ 1 − Beta (Detectable).
type Threshold struct {
	T, P0, P1, Detect float64
	Trials            int
	Alpha, Beta       float64
}

// ChooseThreshold returns, among the PLD's loss values, the threshold whose
// Detectable bound with the given trials is largest: the test a run of
// that size can best use (its ε at the chosen region, ln((P0 − δ)/P1), is
// at most the PLD's Epsilon(δ)).
func (d PLD) ChooseThreshold(trials int, alpha, beta, delta float64) Threshold {
	best := Threshold{T: math.Inf(1), Trials: trials, Alpha: alpha, Beta: beta}
	var c0, c1 float64
	// Candidate cut points: every atom while few, then every step-th.
	step := max(1, len(d)/4000)
	for i, p := range d {
		c0 += p.P0
		c1 += p.P1
		if i%step != 0 && i != len(d)-1 {
			continue
		}
		if c0*float64(trials) < 5 {
			continue
		}
		if det := Detectable(c0, c1, trials, alpha, beta, delta); det > best.Detect {
			best.T, best.P0, best.P1, best.Detect = p.Loss, c0, c1, det
		}
	}
	return best
}

// Region returns the exact rates of the test "statistic ≥ t".
func (d PLD) Region(t float64) (p0, p1 float64) {
	for _, p := range d {
		if p.Loss >= t {
			p0 += p.P0
			p1 += p.P1
		}
	}
	return p0, p1
}

// EpsLower is ln((TPR_lo − δ)/FPR_hi) with one-sided Clopper-Pearson bounds
// at level alpha each, from tp true positives and fp false positives in
// trials trials per hypothesis (0 when not positive). If the round is
// (ε, δ)-DP, it exceeds ε with probability at most 2·alpha.
func EpsLower(tp, fp, trials int, alpha, delta float64) float64 {
	lo := cpLower(tp, trials, alpha)
	hi := cpUpper(fp, trials, alpha)
	if lo-delta <= 0 || hi <= 0 {
		return 0
	}
	return max(0, math.Log((lo-delta)/hi))
}

func cpLower(k, n int, alpha float64) float64 {
	if k <= 0 {
		return 0
	}
	return distuv.Beta{Alpha: float64(k), Beta: float64(n - k + 1)}.Quantile(alpha)
}

func cpUpper(k, n int, alpha float64) float64 {
	if k >= n {
		return 1
	}
	return distuv.Beta{Alpha: float64(k + 1), Beta: float64(n - k)}.Quantile(1 - alpha)
}

// Detectable is a lower bound that a run of trials trials per hypothesis
// reaches with probability at least 1 − beta when the test's exact rates
// are p0 and p1: the true positives are at least a, the (beta/2)-quantile
// of Bin(trials, p0), and the false positives at most b, the
// (1 − beta/2)-quantile of Bin(trials, p1), together with probability
// ≥ (1 − beta/2)² ≥ 1 − beta (independent hypotheses), and EpsLower is
// monotone in both; so EpsLower(a, b) is reached. An accountant charging
// less than Detectable at δ fails the test with probability ≥ 1 − beta.
func Detectable(p0, p1 float64, trials int, alpha, beta, delta float64) float64 {
	a := binomQuantile(trials, p0, beta/2)
	b := binomQuantile(trials, p1, 1-beta/2)
	return EpsLower(a, b, trials, alpha, delta)
}

// binomQuantile is the smallest k with P(Bin(n, p) ≤ k) ≥ q.
func binomQuantile(n int, p, q float64) int {
	if p <= 0 {
		return 0
	}
	if p >= 1 {
		return n
	}
	bin := distuv.Binomial{N: float64(n), P: p}
	lo, hi := -1, n // CDF(lo) < q ≤ CDF(hi)
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if bin.CDF(float64(mid)) >= q {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// ClipLaplaceLaw is the law of the bin of R(x) for APES's Clip-Laplace
// randomizer c (randomizer.ClipLaplace, APES Definition 4): the Laplace
// density e^{−|y−x|/λ}, λ = 1/ε, truncated to the output range [lo, hi]
// and renormalized (the shipped sampler works on a grid of step about
// λ·2^−40, whose bin masses differ from these by less than 10⁻¹⁰). The
// cuts must lie strictly inside the range. x is clamped to [0, 1] as
// Randomize does; the blanket (a dummy, a centre draw) is x = 1/2.
func ClipLaplaceLaw(c *randomizer.ClipLaplace, b Binning, x float64) (Law, error) {
	lo, hi := c.Bounds()
	if err := clipCutsInside(b, lo, hi); err != nil {
		return nil, err
	}
	cdf := clipLaplaceCDF(c, x)
	out := make(Law, b.Bins())
	prev := 0.0
	for i, cut := range b.Cuts {
		v := cdf(cut)
		out[i] = v - prev
		prev = v
	}
	out[len(out)-1] = 1 - prev
	return out, nil
}

func clipCutsInside(b Binning, lo, hi float64) error {
	if len(b.Cuts) == 0 || b.Bins() > maxBins {
		return fmt.Errorf("attack: %d cuts, want 1..%d", len(b.Cuts), maxBins-1)
	}
	if !slices.IsSorted(b.Cuts) || b.Cuts[0] <= lo || b.Cuts[len(b.Cuts)-1] >= hi {
		return fmt.Errorf("attack: cuts %v must be increasing and inside the range (%v, %v)", b.Cuts, lo, hi)
	}
	return nil
}

// clipLaplaceCDF is the distribution function of R(x) for Clip-Laplace:
// (L(y) − L(lo))/(L(hi) − L(lo)) with L the Laplace(x, λ) distribution
// function, for y in [lo, hi] (0 below, 1 above).
func clipLaplaceCDF(c *randomizer.ClipLaplace, x float64) func(y float64) float64 {
	lo, hi := c.Bounds()
	x = math.Min(1, math.Max(0, x))
	lam := 1 / c.Epsilon()
	lap := func(y float64) float64 {
		z := y - x
		if z < 0 {
			return 0.5 * math.Exp(z/lam)
		}
		return 1 - 0.5*math.Exp(-z/lam)
	}
	l0, l1 := lap(lo), lap(hi)
	return func(y float64) float64 {
		switch {
		case y <= lo:
			return 0
		case y >= hi:
			return 1
		}
		return (lap(y) - l0) / (l1 - l0)
	}
}

// SparsePairLaw is the joint law of the bins of one S-APES report of
// dimension 2 with b = 1 (APES Algorithm 2 as mechanism.APESEncoder ships
// it): y_j = R(x_j) independently by Clip-Laplace c, the coordinate with
// the larger |y_j − 1/2| kept (ties, of probability below 10⁻¹⁰ on the
// sampler's grid, ignored) and the other replaced by a fresh blanket draw
// R(1/2). out[a][e] is the probability that coordinate 0's reported value
// falls in bin a and coordinate 1's in bin e:
//
//	out[a][e] = K_0(a)·ω(e) + ω(a)·K_1(e),  K_j(A) = ∫_A p_j(y)·G_{1−j}(|y − 1/2|) dy,
//
// with p_j the density of R(x_j) (ClipLaplace.Density), G_j(t) = P(|R(x_j) − 1/2| ≤ t) and ω
// the blanket's bin law. The integrals are Gauss–Legendre (64 nodes) on
// the pieces of each bin between the integrand's kinks (x_j, 1/2,
// 1/2 ± |x_{1−j} − 1/2|), where it is a smooth exponential, so they are
// exact to rounding.
func SparsePairLaw(c *randomizer.ClipLaplace, b Binning, x0, x1 float64) ([][]float64, error) {
	lo, hi := c.Bounds()
	if err := clipCutsInside(b, lo, hi); err != nil {
		return nil, err
	}
	om, err := ClipLaplaceLaw(c, b, 0.5)
	if err != nil {
		return nil, err
	}
	xs := [2]float64{math.Min(1, math.Max(0, x0)), math.Min(1, math.Max(0, x1))}
	var kept [2]Law
	for j := range 2 {
		xj, xo := xs[j], xs[1-j]
		dens := func(y float64) float64 { return c.Density(xj, y) }
		other := clipLaplaceCDF(c, xo)
		g := func(t float64) float64 { return other(0.5+t) - other(0.5-t) }
		f := func(y float64) float64 { return dens(y) * g(math.Abs(y-0.5)) }
		kinks := []float64{xj, 0.5, 0.5 + math.Abs(xo-0.5), 0.5 - math.Abs(xo-0.5)}
		edges := append([]float64{lo}, b.Cuts...)
		edges = append(edges, hi)
		kept[j] = make(Law, b.Bins())
		for a := range b.Bins() {
			pts := []float64{edges[a], edges[a+1]}
			for _, k := range kinks {
				if k > edges[a] && k < edges[a+1] {
					pts = append(pts, k)
				}
			}
			slices.Sort(pts)
			for i := 0; i+1 < len(pts); i++ {
				kept[j][a] += quad.Fixed(f, pts[i], pts[i+1], 64, quad.Legendre{}, 0)
			}
		}
	}
	out := make([][]float64, b.Bins())
	sum := 0.0
	for a := range out {
		out[a] = make([]float64, b.Bins())
		for e := range out[a] {
			out[a][e] = kept[0][a]*om[e] + om[a]*kept[1][e]
			sum += out[a][e]
		}
	}
	if math.Abs(sum-1) > 1e-9 {
		return nil, fmt.Errorf("attack: s-apes pair law sums to %v", sum)
	}
	return out, nil
}

// PairLaw is the joint law of the count vectors of two dimensions (keys
// as in DimLaw), for reports whose messages in the two are dependent.
type PairLaw map[[2]uint64]float64

// PairCounts is the joint law of the two dimensions' count vectors of
// independent reports, report i putting one message in each dimension
// with joint bin law reports[i] (reports[i][a][e]: bin a in the first, e
// in the second).
func PairCounts(reports [][][]float64) (PairLaw, error) {
	if len(reports) > maxCount {
		return nil, fmt.Errorf("attack: %d reports, at most %d", len(reports), maxCount)
	}
	out := PairLaw{{0, 0}: 1}
	for i, r := range reports {
		if len(r) > maxBins {
			return nil, fmt.Errorf("attack: report %d has %d bins, at most %d", i, len(r), maxBins)
		}
		next := PairLaw{}
		for k, p := range out {
			for a, row := range r {
				for e, q := range row {
					if q == 0 {
						continue
					}
					next[[2]uint64{k[0] + 1<<(countBits*a), k[1] + 1<<(countBits*e)}] += p * q
				}
			}
		}
		out = next
	}
	return out, nil
}

// NewPairModel is NewModel for two dependent dimensions dims whose joint
// count law under each hypothesis is h0, h1 (PairCounts; nothing padded:
// np is the number of reports). It writes the joint law as a mixture over
// the first dimension's count vector k: weight P_h(k), the first dimension
// a point mass at k, the second its conditional law given k. That is the
// same law, so Model's statistic, PLD and threshold are exact for it.
func NewPairModel(dims [2]uint32, np int, bins Binning, h0, h1 PairLaw) (*Model, error) {
	m := &Model{Dims: []uint32{dims[0], dims[1]}, NP: np, bins: bins}
	for h, law := range [2]PairLaw{h0, h1} {
		marg := map[uint64]float64{}
		cond := map[uint64]map[uint64]float64{}
		sum := 0.0
		for k, p := range law {
			marg[k[0]] += p
			if cond[k[0]] == nil {
				cond[k[0]] = map[uint64]float64{}
			}
			cond[k[0]][k[1]] += p
			sum += p
		}
		if math.Abs(sum-1) > 1e-9 {
			return nil, fmt.Errorf("attack: hypothesis %d sums to %v", h, sum)
		}
		firsts := make([]uint64, 0, len(marg))
		for k := range marg {
			firsts = append(firsts, k)
		}
		slices.Sort(firsts)
		for _, k := range firsts {
			w := marg[k]
			if w == 0 {
				continue
			}
			c := cond[k]
			for k1 := range c {
				c[k1] /= w
			}
			m.laws[h] = append(m.laws[h], cfgLaw{w: w, dims: []map[uint64]float64{{k: 1}, c}})
		}
	}
	return m, nil
}
