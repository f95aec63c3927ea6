package audit

import (
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/shared/randomizer"
)

// logDensity returns y ↦ log of the output density (Laplace, Gaussian) or
// probability mass (R_{γ,b}, on its grid) of r at input x in [0, 1], and the
// log density of its blanket ω, in the same units (so that a mixture of the
// two is a density). Additive constants common to all inputs are kept, so
// values of different inputs compare.
func logDensity(r *randomizer.Bounded) (logf func(x, y float64) float64, logw func(y float64) float64, err error) {
	switch rz := r.Unwrap().(type) {
	case *randomizer.Laplace:
		// Density (ε/2)e^{-ε|y-x|}; ω = R(1/2).
		eps := rz.Epsilon()
		c := math.Log(eps / 2)
		logf = func(x, y float64) float64 { return c - eps*math.Abs(y-x) }
		logw = func(y float64) float64 { return logf(0.5, y) }
	case *randomizer.Gaussian:
		s := rz.Sigma()
		c := -math.Log(s * math.Sqrt(2*math.Pi))
		logf = func(x, y float64) float64 { d := (y - x) / s; return c - d*d/2 }
		logw = func(y float64) float64 { return logf(0.5, y) }
	case *randomizer.RGB:
		b := float64(rz.Buckets())
		lw := -math.Log(b + 1)
		logf = func(x, y float64) float64 {
			p := rz.PMF(x, int(math.Round(y*b)))
			if p <= 0 {
				return math.Inf(-1)
			}
			return math.Log(p)
		}
		logw = func(float64) float64 { return lw }
	default:
		return nil, nil, fmt.Errorf("audit: no density for randomizer %q", r.Name())
	}
	return logf, logw, nil
}

// lrModel is the adversary's model of one dimension's multiset V_j: the
// target's report, present with probability p[h][j] and then distributed as
// R(x[h][j]) under hypothesis h, hidden among n_p - 1 cover values, each
// (independently, in the model) another volunteer's report R(xo[j]) with
// probability π = min(1, other/(n_p - 1)) (other: the expected number of
// the other volunteers' reports in the dimension; n_p the batch's) and a
// blanket sample ω otherwise: g_j = π R(xo[j]) + (1 - π) ω.
//
// Likelihood ratio. If the cover values are i.i.d. with law g_j, the
// probability of the multiset under h is, up to the factor Π_i g_j(v_i)
// common to both hypotheses,
//
//	L_h(V_j) = (1 - p) + p · (1/n_p) Σ_i f_h(v_i)/g_j(v_i),
//
// (the target is any one of the n_p values, equally likely, after the
// shuffle), and log L_0 - log L_1 is the Neyman-Pearson optimal statistic
// for the dimension. It is exact where the cover is i.i.d. — SS-Simple
// without dummies (every other volunteer reports R(xo)), SS-Topk's target
// dimensions (only blanket samples: dummies and decoys) — and the
// product-of-mixtures approximation for SS-Double, whose real/dummy split
// per dimension follows a hypergeometric rather than a binomial law. Any
// statistic gives a valid audit (the threshold is chosen on separate
// trials); exactness only makes it the most powerful.
//
// The dimensions are independent given the coupled sampling
// (docs/privacy.md, step 4), so the combined statistic is the sum of the
// per-dimension log likelihood ratios over the dimensions the neighbours
// can differ in.
type lrModel struct {
	logf  func(x, y float64) float64 // the volunteers' randomizer R(x)
	logw  func(y float64) float64    // the relay's blanket ω
	p, x  [2][]float64
	xo    []float64 // the other volunteers' normalized value per dimension
	other float64   // expected number of other volunteers' data-carrying reports per dimension
	use   []bool    // the dimensions the combined statistic sums
	one   int       // the dimension of the single-dimension statistic
}

// llr returns the single-dimension and the combined log likelihood ratio
// log L_0 - log L_1 of a view.
func (m *lrModel) llr(v view) (single, combined float64) {
	d := len(m.use)
	np := float64(max(v.np, 1))
	pi := 0.0
	if v.np > 1 {
		pi = min(1, m.other/(np-1))
	}
	lpi, l1pi := math.Log(pi), math.Log1p(-pi)
	// Online log-sum-exp per dimension and hypothesis of
	// log f_h(v) - log g_j(v).
	var mx, sm [2][]float64
	for h := range 2 {
		mx[h], sm[h] = make([]float64, d), make([]float64, d)
		for j := range mx[h] {
			mx[h][j] = math.Inf(-1)
		}
	}
	for i, j := range v.index {
		if int(j) >= d || !m.use[j] {
			continue
		}
		y := v.value[i]
		lg := m.logw(y)
		if pi > 0 {
			lg = logAddExp(l1pi+lg, lpi+m.logf(m.xo[j], y))
		}
		for h := range 2 {
			if m.p[h][j] == 0 {
				continue
			}
			a := m.logf(m.x[h][j], y) - lg
			switch {
			case math.IsInf(a, -1):
			case a > mx[h][j]:
				sm[h][j] = sm[h][j]*math.Exp(mx[h][j]-a) + 1
				mx[h][j] = a
			default:
				sm[h][j] += math.Exp(a - mx[h][j])
			}
		}
	}
	logN := math.Log(np)
	for j := range d {
		if !m.use[j] {
			continue
		}
		var t [2]float64
		for h := range 2 {
			p := m.p[h][j]
			if p == 0 {
				continue
			}
			lse := mx[h][j] + math.Log(sm[h][j]) - logN
			if sm[h][j] == 0 {
				lse = math.Inf(-1)
			}
			if p >= 1 {
				t[h] = lse
			} else {
				t[h] = logAddExp(math.Log1p(-p), math.Log(p)+lse)
			}
		}
		l := t[0] - t[1]
		if math.IsNaN(l) {
			l = 0 // both -Inf: a view impossible under either (cannot happen with honest values)
		}
		combined += l
		if j == m.one {
			single = l
		}
	}
	return single, combined
}

func logAddExp(a, b float64) float64 {
	if a < b {
		a, b = b, a
	}
	if math.IsInf(a, -1) {
		return a
	}
	return a + math.Log1p(math.Exp(b-a))
}

// leading is the local likelihood ratio of the batch's first messages, as
// many as one volunteer sends: log L_0 - log L_1 of their values if they
// are the target's report (R(x_h) where the target reports under h, ω
// where it does not). It is the optimal test against a relay that forwards
// reports in arrival order with the target first (the unshuffled canary),
// and has no power against a uniform shuffle.
func (m *lrModel) leading(v view) float64 {
	s := 0.0
	for i := range min(max(1, v.perVolunteer), len(v.value)) {
		j, y := v.index[i], v.value[i]
		if int(j) >= len(m.use) || !m.use[j] {
			continue
		}
		var a [2]float64
		for h := range 2 {
			if m.p[h][j] > 0 {
				a[h] = m.logf(m.x[h][j], y)
			} else {
				a[h] = m.logw(y)
			}
		}
		if l := a[0] - a[1]; !math.IsNaN(l) {
			s += l
		}
	}
	return s
}
