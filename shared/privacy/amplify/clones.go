package amplify

import (
	"errors"
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/shared/internal/check"
)

// Mixture is a binomial-mixture ("clone") dominating pair for the shuffle of
// N users, in structured form. With
//
//	C ~ Bin(N-1, Clone),  A ~ Bin(C, 1/2),
//
// the pair is over outcomes (a, b) in N^2:
//
//	P = (A+1, C-A) w.p. W10,  (A, C-A+1) w.p. W01,  "neutral" w.p. W00 = 1-W10-W01,
//	Q = (A+1, C-A) w.p. W01,  (A, C-A+1) w.p. W10,  "neutral" w.p. W00,
//
// where "neutral" is one extra outcome (the differing user's report is
// the common part of its two distributions; see NewVariationRatio for why
// it must not be merged into the counts).
//
// Interpretation (Feldman, McMillan, Talwar FOCS'21 Section 3): each of the
// N-1 other users is independently a "clone" with probability Clone, and a
// clone outputs a sample of the differing user's first or second
// distribution with probability 1/2 each; a counts the outputs that look
// like the first, b like the second. The differing user contributes one
// such output with probabilities (W10, W01) on dataset D and (W01, W10) on
// D', or a neutral output with probability W00 (variation-ratio pairs
// only). Every method of this package is a Mixture:
//
//	FMT21(n, eps0):   Clone = e^-eps0,        W10 = e^eps0/(e^eps0+1), W01 = 1/(e^eps0+1)
//	FMT23(n, eps0):   Clone = 2/(e^eps0+1),   same W10, W01
//	VariationRatio:   Clone = 2*alpha*p/q,    W10 = p*alpha, W01 = alpha, alpha = beta/(p-1)
//
// All are against ReplaceOne neighbours. The pair is symmetric
// (P(a,b) = Q(b,a)), so H(P||Q) = H(Q||P) and one order suffices.
type Mixture struct {
	Method   string
	N        int
	Clone    float64
	W10, W01 float64

	win *binomWindow // window of C ~ Bin(N-1, Clone)
	tol float64
	// merged selects the pair exactly as published by Wang et al. (the
	// neutral report of the differing user merged into the (a, b) counts).
	// It is not a valid dominating pair when W00 > 0 (see
	// NewVariationRatio); only tests set it, to document the counterexample.
	merged bool
}

// newMixture validates the parameters and precomputes the window of the
// clone count whose omitted mass is at most tailMass (0 means 1e-15).
func newMixture(method string, n int, clone, w10, w01, tailMass float64) (*Mixture, error) {
	if n < 1 {
		return nil, fmt.Errorf("amplify: %s: number of users %d < 1", method, n)
	}
	for _, v := range []float64{clone, w10, w01, tailMass} {
		if !check.Finite(v) {
			return nil, fmt.Errorf("amplify: %s: non-finite parameter %v", method, v)
		}
	}
	if clone < 0 || clone >= 1 {
		return nil, fmt.Errorf("amplify: %s: clone probability %v outside [0, 1)", method, clone)
	}
	if w01 <= 0 || w10 < w01 || w10+w01 > 1+1e-12 {
		return nil, fmt.Errorf("amplify: %s: weights W10=%v, W01=%v need 0 < W01 <= W10, W10+W01 <= 1", method, w10, w01)
	}
	if tailMass < 0 || tailMass > 1e-3 {
		return nil, fmt.Errorf("amplify: %s: tail mass %v outside [0, 1e-3]", method, tailMass)
	}
	if tailMass == 0 {
		tailMass = defaultTailMass
	}
	if w10+w01 > 1 {
		w10 = 1 - w01
	}
	win, err := newBinomWindow(n-1, clone, tailMass)
	if err != nil {
		return nil, fmt.Errorf("amplify: %s: %w", method, err)
	}
	return &Mixture{Method: method, N: n, Clone: clone, W10: w10, W01: w01, win: win, tol: tailMass}, nil
}

func checkEps0(eps0 float64) error {
	if !check.Finite(eps0) || eps0 <= 0 {
		return fmt.Errorf("amplify: local epsilon %v must be positive and finite", eps0)
	}
	if eps0 > 50 {
		return fmt.Errorf("amplify: local epsilon %v > 50 gives no amplification worth computing", eps0)
	}
	return nil
}

// FMT21 returns the numerical pair of Feldman, McMillan, Talwar, "Hiding
// among the clones" (FOCS 2021), Theorem 3.2: for any eps0-LDP local
// randomizer, the shuffled output of n users is dominated by the Mixture
// with C ~ Bin(n-1, e^-eps0), A ~ Bin(C, 1/2), Delta ~ Bern(e^eps0/(e^eps0+1)),
// P = (A+Delta, C-A+1-Delta), Q = (A+1-Delta, C-A+Delta). Guarantee: central
// (eps, Delta(eps))-DP for every eps >= 0, replace-one neighbours.
func FMT21(n int, eps0 float64) (*Mixture, error) {
	if err := checkEps0(eps0); err != nil {
		return nil, err
	}
	w01 := 1 / (math.Exp(eps0) + 1)
	return newMixture("fmt21", n, math.Exp(-eps0), 1-w01, w01, 0)
}

// FMT23 returns the stronger clone pair of Feldman, McMillan, Talwar,
// "Stronger privacy amplification by shuffling for Renyi and approximate
// differential privacy" (SODA 2023, Section 3): the same pair as FMT21 with
// the clone probability raised from e^-eps0 to 2/(e^eps0+1).
//
// Validity. The SODA'23 errata notes that the paper's original Lemma 3.5
// decomposition (clones drawn from R(x_1^0), R(x_1^1) themselves) fails for
// some randomizers; the pair itself stands with the decomposition of Wang et
// al. (VLDB 2024), which we re-derive here. Let R0 = R(x_1^0), R1 = R(x_1^1),
// beta = TV(R0, R1) <= (e^eps0-1)/(e^eps0+1), R~0 = (R0-R1)_+/beta,
// R~1 = (R1-R0)_+/beta. For any other input x, with r = 1/(e^eps0+1):
// pointwise r(R~0 + R~1) = r|R0-R1|/beta, and |R0-R1| <= (1-e^-eps0) max(R0,R1)
// <= (1-e^-eps0) e^eps0 R(x), so r(R~0+R~1) <= r (e^eps0-1) R(x)/beta = R(x)
// at the extreme beta = (e^eps0-1)/(e^eps0+1). So R(x) = r R~0 + r R~1 +
// (1-2r) LO_x with LO_x >= 0: every other user is a clone with probability
// 2r = 2/(e^eps0+1). The differing user is R0 = e^eps0/(e^eps0+1) R~0 +
// 1/(e^eps0+1) R~1 and symmetrically R1 (check: R0 - R1 = beta(R~0 - R~1)
// and both right-hand sides are >= 0 by the e^eps0 ratio bound). Pairs with
// a smaller total variation are covered by the variation-ratio theorem of
// Wang et al. (beta is an upper bound there). This is exactly
// NewVariationRatio(n, GenericVR(eps0)). Since this pair has more clones
// than FMT21's it is a post-processing of it (add extra clones, each a fair
// coin), hence never looser; TestOrdering checks it.
func FMT23(n int, eps0 float64) (*Mixture, error) {
	if err := checkEps0(eps0); err != nil {
		return nil, err
	}
	w01 := 1 / (math.Exp(eps0) + 1)
	return newMixture("fmt23", n, 2*w01, 1-w01, w01, 0)
}

// VariationRatio holds the (p, beta, q) parameters of Wang et al.,
// "Privacy amplification via shuffling: unified, simplified, and tightened"
// (VLDB 2024), Definition of the variation-ratio property: for all inputs
// x^0, x^1 of the differing user and every other input x,
//
//	R(x^0)(y) <= P * R(x^1)(y)                       (p: ratio between the differing user's outputs),
//	TV(R(x^0), R(x^1)) <= Beta                       (beta: variation),
//	R(x^0)(y) <= Q * R(x)(y), R(x^1)(y) <= Q * R(x)(y)   (q: ratio to any other user's output).
//
// Their theorem gives the Mixture with alpha = Beta/(P-1), W10 = P*alpha,
// W01 = alpha, Clone = 2*alpha*P/Q (q0 = q1 = q here).
type VariationRatio struct {
	P, Beta, Q float64
}

// Validate checks 1 < P, 0 < Beta <= (P-1)/(P+1) (the largest total
// variation a log(P)-LDP pair can have), 1 <= Q, and Clone <= 1.
func (v VariationRatio) Validate() error {
	for _, x := range []float64{v.P, v.Beta, v.Q} {
		if !check.Finite(x) {
			return fmt.Errorf("amplify: variation-ratio parameter %v not finite", x)
		}
	}
	if v.P <= 1 {
		return fmt.Errorf("amplify: variation-ratio p = %v must exceed 1", v.P)
	}
	if v.Beta <= 0 || v.Beta > (v.P-1)/(v.P+1)*(1+1e-12) {
		return fmt.Errorf("amplify: variation-ratio beta = %v outside (0, (p-1)/(p+1) = %v]", v.Beta, (v.P-1)/(v.P+1))
	}
	if v.Q < 1 {
		return fmt.Errorf("amplify: variation-ratio q = %v must be >= 1", v.Q)
	}
	if alpha := v.Beta / (v.P - 1); 2*alpha*v.P/v.Q >= 1 {
		return fmt.Errorf("amplify: variation-ratio clone probability %v must be < 1", 2*alpha*v.P/v.Q)
	}
	return nil
}

// GenericVR returns the variation-ratio parameters valid for every
// eps0-LDP randomizer: p = q = e^eps0, beta = (e^eps0-1)/(e^eps0+1). (q is
// e^eps0, not 1: the q-ratio compares the differing user's output to any
// other user's output, which eps0-LDP bounds by e^eps0.) The resulting
// Mixture equals FMT23.
func GenericVR(eps0 float64) (VariationRatio, error) {
	if err := checkEps0(eps0); err != nil {
		return VariationRatio{}, err
	}
	e := math.Exp(eps0)
	return VariationRatio{P: e, Beta: (e - 1) / (e + 1), Q: e}, nil
}

// LaplaceVR returns the parameters of the Laplace mechanism on [0, 1] with
// scale 1/eps (sensitivity 1, eps-LDP): p = q = e^eps and beta = 1 - e^{-eps/2},
// the total variation between Lap(0, 1/eps) and Lap(1, 1/eps)
// (TV of a shift mu at scale b is 1 - exp(-mu/(2b))); equivalently its
// blanket weight is e^{-eps/2} (FLAME Section "The shuffle model").
func LaplaceVR(eps float64) (VariationRatio, error) {
	if err := checkEps0(eps); err != nil {
		return VariationRatio{}, err
	}
	e := math.Exp(eps)
	return VariationRatio{P: e, Beta: -math.Expm1(-eps / 2), Q: e}, nil
}

// RGammaBVR returns the parameters of the privacy-blanket randomizer
// R_{gamma,b} (FLAME Algorithm 1, Balle et al. 2019) with blanket
// probability gamma and k possible outputs: with probability 1-gamma it
// reports the randomly rounded input, otherwise a uniform output. Its
// output law is R(x)(y) = (1-gamma) pi_x(y) + gamma/k with pi_x the rounding
// law. Derivation:
//
//	p = max R(x)(y)/R(x')(y) = ((1-gamma) + gamma/k)/(gamma/k) = 1 + k(1-gamma)/gamma = e^eps0,
//	beta = max TV = (1-gamma) max TV(pi_x, pi_x') = 1-gamma (x = 0 vs x = 1),
//	q = p (the ratio to any other input's output has the same extremes).
//
// With FLAME's gamma = k/(e^eps0+k-1): beta = (e^eps0-1)/(e^eps0+k-1), the
// variation-ratio of k-ary randomized response. k = 2 is binary RR.
func RGammaBVR(gamma float64, k int) (VariationRatio, error) {
	if math.IsNaN(gamma) || gamma <= 0 || gamma >= 1 {
		return VariationRatio{}, fmt.Errorf("amplify: blanket probability gamma = %v outside (0, 1)", gamma)
	}
	if k < 2 {
		return VariationRatio{}, fmt.Errorf("amplify: R_{gamma,b} needs k >= 2 outputs, got %d", k)
	}
	p := 1 + float64(k)*(1-gamma)/gamma
	return VariationRatio{P: p, Beta: 1 - gamma, Q: p}, nil
}

// Subsampled returns the variation-ratio parameters of the randomizer that
// participates with probability gamma and otherwise sends a fixed "absent"
// symbol (equivalently: sends nothing, since the shuffler's output count
// reveals the number of absentees anyway). This models one round of
// shuffled check-in (Liew et al., Algorithm 1): p and q are unchanged
// (the absent symbol has ratio 1), beta scales by gamma.
func (v VariationRatio) Subsampled(gamma float64) (VariationRatio, error) {
	if math.IsNaN(gamma) || gamma <= 0 || gamma > 1 {
		return VariationRatio{}, fmt.Errorf("amplify: participation probability %v outside (0, 1]", gamma)
	}
	return VariationRatio{P: v.P, Beta: v.Beta * gamma, Q: v.Q}, nil
}

// NewVariationRatio returns the dominating pair for n users whose
// randomizer satisfies the (p, beta, q)-variation-ratio property of Wang et
// al. (VLDB 2024). Guarantee: central (eps, Delta(eps))-DP, replace-one
// neighbours.
//
// Correction. With alpha = beta/(p-1) the differing user's report is a
// clone-like sample with probability (p+1)alpha and a neutral sample with
// probability W00 = 1-(p+1)alpha. Wang et al.'s pair (and their code's
// Delta) merges the neutral case into the (a, b) counts, P = (A+1, C-A) /
// (A, C-A+1) / (A, C-A) w.p. p*alpha / alpha / W00. That is not a
// dominating pair when W00 > 0: for 3-ary RR at eps0 = 1.5, n = 5, with all
// other users holding the differing user's first value, the exact shuffled
// histograms have delta(1.2) = 0.0410 (the all-same-value outcome alone
// gives (e^1.5/(e^1.5+2))^5 (1 - e^{1.2-1.5}) = 0.041) while the merged pair
// gives 0.0224 (TestVariationRatioAgainstExactShuffles). The reason: the
// post-processing that turns (a, b) into shuffled reports must know
// whether the differing user was neutral (it then draws the non-clone
// reports LO_i of s other users instead of s-1), and that posterior differs
// between D and D'. Revealing that bit gives a valid pair: outcomes (a, b)
// from the clone case with weights (p*alpha, alpha) as above, plus one
// neutral outcome of mass W00 with P = Q. So for eps >= 0
//
//	delta(eps) = H_{e^eps}(clone part) = (1-W00) * delta_{normalised clone pair}(eps),
//
// i.e. the differing user is effectively subsampled with rate 1-W00. This
// is what we compute; for generic eps0-LDP (W00 = 0) it coincides with the
// published pair and with FMT23.
func NewVariationRatio(n int, v VariationRatio) (*Mixture, error) {
	if err := v.Validate(); err != nil {
		return nil, err
	}
	alpha := v.Beta / (v.P - 1)
	return newMixture("variation-ratio", n, 2*alpha*v.P/v.Q, v.P*alpha, alpha, 0)
}

// W00 is the probability that the differing user's report is neutral.
func (m *Mixture) W00() float64 { return math.Max(0, 1-m.W10-m.W01) }

// mergedW00 is the neutral weight that enters the (a, b) counts: W00 for
// the published (merged) variant, 0 for the valid one, where the neutral
// report is a separate outcome with P = Q.
func (m *Mixture) mergedW00() float64 {
	if m.merged {
		return m.W00()
	}
	return 0
}

// MaxLoss is the largest privacy loss any atom can have, log(W10/W01).
func (m *Mixture) MaxLoss() float64 { return math.Log(m.W10 / m.W01) }

// threshold returns the smallest a in [0, s] with P(a, s-a) > gamma*Q(a, s-a)
// (s+1 if none), gamma = e^eps. Derivation: for s >= 1 and 1 <= a <= s,
// dividing P and Q by pi(s-1) B_{s-1}(a-1) (pi the pmf of C, B the Bin(., 1/2)
// pmf) and using B_{s-1}(a)/B_{s-1}(a-1) = (s-a)/a and
// pi(s)B_s(a)/(pi(s-1)B_{s-1}(a-1)) = (N-s) Clone / (2a(1-Clone)) gives
//
//	P/Q = (W10 a + W01 b + g) / (W01 a + W10 b + g),  b = s-a,  g = W00 (N-s) Clone/(2(1-Clone)),
//
// increasing in a; P > gamma Q iff a > a* with
//
//	a* = (s(gamma W10 - W01) + g(gamma-1)) / ((W10 - W01)(1+gamma)).
//
// The formula also covers a = 0 (ratio (W01 s+g)/(W10 s+g) <= 1).
func (m *Mixture) threshold(s int, gamma float64) int {
	g := m.mergedW00() * float64(m.N-s) * m.Clone / (2 * (1 - m.Clone))
	den := (m.W10 - m.W01) * (1 + gamma)
	if den <= 0 {
		return s + 1
	}
	as := (float64(s)*(gamma*m.W10-m.W01) + g*(gamma-1)) / den
	if as < 0 {
		return 0
	}
	if as < float64(s)/2 {
		return int(math.Floor(as)) + 1
	}
	// Near the top, s - a* is computed directly: at eps above ~36.7
	// nats 1 + gamma rounds to gamma and a* rounds to s, which would drop
	// the atom a = s (of loss up to MaxLoss) and understate delta. With
	// b* = s - a* = (s(W10 - gamma W01) - g(gamma - 1)) / den, the
	// smallest integer a > a* is s + 1 - ceil(b*).
	bs := (float64(s)*(m.W10-gamma*m.W01) - g*(gamma-1)) / den
	if !(bs > 0) {
		return s + 1
	}
	return max(0, s+1-int(math.Ceil(bs)))
}

// Delta returns H_{e^eps}(P || Q) of the pair, summed exactly over the
// support inside the clone-count window, plus a rigorous bound on the part
// outside: atoms with C outside the window carry P-mass Omitted and each
// has loss at most log(W10/W01), contributing at most
// Omitted*max(0, 1 - e^eps W01/W10). So the result is an upper bound,
// exceeding the exact value by at most the TailMass (1e-15) plus
// floating-point rounding (relative ~1e-12).
//
// For each total s = a+b the set {P > e^eps Q} is {a >= t_s} (see
// threshold), so with T_c(k) = Pr[Bin(c,1/2) >= k]:
//
//	P(set) = W10 pi(s-1) T_{s-1}(t-1) + W01 pi(s-1) T_{s-1}(t) + W00 pi(s) T_s(t)
//	Q(set) = W01 pi(s-1) T_{s-1}(t-1) + W10 pi(s-1) T_{s-1}(t) + W00 pi(s) T_s(t)
//
// and T_s(t) = (T_{s-1}(t) + T_{s-1}(t-1))/2. The tails are carried from one
// s to the next by exact recurrences (tailTracker), so one evaluation
// costs O(window) = O(sqrt(n)) after an O(sqrt(n)) start.
func (m *Mixture) Delta(eps float64) float64 {
	d, _ := m.delta(eps, true)
	return d
}

// DeltaLower is Delta without the tail allowance: a lower bound on the
// hockey-stick divergence of the exact (untruncated) pair.
func (m *Mixture) DeltaLower(eps float64) float64 {
	d, _ := m.delta(eps, false)
	return d
}

func (m *Mixture) delta(eps float64, upper bool) (float64, error) {
	if math.IsNaN(eps) {
		return math.NaN(), errors.New("amplify: eps is NaN")
	}
	gamma := math.Exp(eps)
	w00 := m.mergedW00()
	var sum, comp float64
	add := func(t float64) {
		y := t - comp
		u := sum + y
		comp = (u - sum) - y
		sum = u
	}
	if nw := m.W00(); !m.merged && nw > 0 && gamma < 1 {
		// The neutral outcomes: total mass W00 under both P and Q.
		add((1 - gamma) * nw)
	}
	if gamma < 1 && w00 > 0 {
		// atom (0,0): P = Q = W00 pi(0), in the set when gamma < 1.
		add((1 - gamma) * w00 * m.win.pmf(0))
	}
	sLo, sHi := m.win.Lo, m.win.Hi+1
	if sLo < 1 {
		sLo = 1
	}
	var tr tailTracker
	for s := sLo; s <= sHi; s++ {
		pim, pis := m.win.pmf(s-1), 0.0
		if w00 > 0 {
			pis = m.win.pmf(s)
		}
		if pim == 0 && pis == 0 {
			continue
		}
		t := m.threshold(s, gamma)
		if t > s {
			continue
		}
		x0, b := tr.at(s-1, t) // T_{s-1}(t), b_{s-1}(t-1)
		x1 := x0 + b           // T_{s-1}(t-1)
		y := 0.5 * (x0 + x1)   // T_s(t)
		v := (m.W10-gamma*m.W01)*pim*x1 + (m.W01-gamma*m.W10)*pim*x0 + (1-gamma)*w00*pis*y
		if v > 0 {
			add(v)
		}
	}
	if upper {
		if f := 1 - gamma*m.W01/m.W10; f > 0 {
			add(m.win.Omitted * f)
		}
	}
	return sum, nil
}

// Epsilon returns the smallest eps >= 0 with Delta(eps) <= delta (an upper
// bound on the pair's exact epsilon, to within 1e-9 relative). Errors for
// delta outside (0, 1).
func (m *Mixture) Epsilon(delta float64) (float64, error) {
	if math.IsNaN(delta) || delta <= 0 || delta >= 1 {
		return 0, fmt.Errorf("amplify: delta %v outside (0, 1)", delta)
	}
	return solveEpsilon(m.Delta, delta, m.MaxLoss())
}

// solveEpsilon finds the smallest eps in [0, hi] with f(eps) <= delta for a
// non-increasing f, by the Illinois variant of regula falsi on
// log f(eps) - log delta, safeguarded by bisection; it returns the upper end
// of the final bracket, so f(result) <= delta always holds.
func solveEpsilon(f func(float64) float64, delta, hi float64) (float64, error) {
	flo := f(0)
	if flo <= delta {
		return 0, nil
	}
	fhi := f(hi)
	if fhi > delta {
		return 0, fmt.Errorf("amplify: delta(eps) = %.3g exceeds %.3g even at the largest loss %v", fhi, delta, hi)
	}
	lo := 0.0
	phi := func(v float64) float64 {
		if v <= 0 {
			return -800 - math.Log(delta)
		}
		return math.Log(v) - math.Log(delta)
	}
	glo, ghi := phi(flo), phi(fhi)
	side := 0
	for it := 0; it < 200 && hi-lo > 1e-10*math.Max(hi, 1e-3); it++ {
		x := hi - ghi*(hi-lo)/(ghi-glo)
		// Safeguard: stay well inside the bracket, else bisect.
		if math.IsNaN(x) || x <= lo+(hi-lo)*1e-3 || x >= hi-(hi-lo)*1e-3 || it%4 == 3 {
			x = lo + (hi-lo)/2
		}
		fx := f(x)
		gx := phi(fx)
		if fx <= delta {
			hi, ghi = x, gx
			if side == -1 {
				glo /= 2
			}
			side = -1
		} else {
			lo, glo = x, gx
			if side == 1 {
				ghi /= 2
			}
			side = 1
		}
	}
	return hi, nil
}

// Pair enumerates the Mixture as an explicit Pair. Atoms are the outcomes
// (a, b) with the clone count inside the window and A within its own
// window of Bin(c, 1/2) (each of omitted mass at most opt.TailMass); the
// P- and Q-mass of everything omitted is placed on one atom with loss
// exactly MaxLoss (P-mass m_P, Q-mass m_P*W01/W10) plus one atom with P = 0
// carrying the remaining Q-mass. This keeps the pair dominating for every
// hockey-stick and every Renyi divergence of order > 1, since each omitted
// atom has P_i/Q_i <= W10/W01, i.e. Q_i >= P_i W01/W10. If opt.LossStep > 0
// the result is coarsened (Pair.Coarsen).
func (m *Mixture) Pair(opt PairOptions) (*Pair, error) {
	opt, err := opt.withDefaults()
	if err != nil {
		return nil, err
	}
	if m.merged {
		return nil, errors.New("amplify: the merged (published) variation-ratio pair is not dominating; no Pair for it")
	}
	var lp, lq []float64
	if nw := m.W00(); nw > 0 {
		// All neutral outcomes have P = Q; merged into one atom (exact).
		lp = append(lp, math.Log(nw))
		lq = append(lq, math.Log(nw))
	}
	count := 0
	for s := 1; s <= m.win.Hi+1 && s <= m.N; s++ {
		lpim := m.win.logpmf(s - 1)
		if math.IsInf(lpim, -1) {
			continue
		}
		// A ~ Bin(s-1, 1/2) on its window; outcome a = A+1 (weight W10
		// under P) or a = A (weight W01), so a ranges over [lo, hi+1].
		aw, err := newBinomWindow(s-1, 0.5, opt.TailMass)
		if err != nil {
			return nil, err
		}
		count += aw.Hi - aw.Lo + 2
		if count > opt.MaxAtoms {
			return nil, fmt.Errorf("amplify: %s pair at n=%d needs more than %d atoms; set PairOptions.LossStep or raise MaxAtoms", m.Method, m.N, opt.MaxAtoms)
		}
		ref := aw.logPMF[(len(aw.logPMF)-1)/2]
		bx := make([]float64, aw.Hi-aw.Lo+3) // bx[j+1] = b(Lo+j)/b(ref), zero padded
		for j, l := range aw.logPMF {
			bx[j+1] = math.Exp(l - ref)
		}
		base := lpim + ref
		for a := aw.Lo; a <= aw.Hi+1; a++ {
			x1 := bx[a-aw.Lo]   // b(a-1)
			x0 := bx[a-aw.Lo+1] // b(a)
			p := m.W10*x1 + m.W01*x0
			q := m.W01*x1 + m.W10*x0
			if p == 0 && q == 0 {
				continue
			}
			lp = append(lp, base+math.Log(p))
			lq = append(lq, base+math.Log(q))
		}
	}
	keptP, keptQ := kahanExpSum(lp), kahanExpSum(lq)
	mP := math.Max(0, 1-keptP)
	mQ := math.Max(0, 1-keptQ)
	if mP > 0 {
		qa := mP * m.W01 / m.W10
		if qa > mQ {
			qa = mQ
		}
		lp = append(lp, math.Log(mP))
		lq = append(lq, math.Log(qa))
		mQ -= qa
	}
	if mQ > 0 {
		lp = append(lp, math.Inf(-1))
		lq = append(lq, math.Log(mQ))
	}
	out := &Pair{Method: m.Method, Relation: ReplaceOne, LogP: lp, LogQ: lq}
	if opt.LossStep > 0 {
		return out.Coarsen(opt.LossStep)
	}
	return out, nil
}

// fmt21Pair is FMT21(n, eps0) enumerated as a Pair.
func fmt21Pair(n int, eps0 float64, opt PairOptions) (*Pair, error) {
	m, err := FMT21(n, eps0)
	if err != nil {
		return nil, err
	}
	return m.Pair(opt)
}

// FMT23Pair is FMT23(n, eps0) enumerated as a Pair.
func FMT23Pair(n int, eps0 float64, opt PairOptions) (*Pair, error) {
	m, err := FMT23(n, eps0)
	if err != nil {
		return nil, err
	}
	return m.Pair(opt)
}

// VariationRatioPair is NewVariationRatio(n, v) enumerated as a Pair.
func VariationRatioPair(n int, v VariationRatio, opt PairOptions) (*Pair, error) {
	m, err := NewVariationRatio(n, v)
	if err != nil {
		return nil, err
	}
	return m.Pair(opt)
}

// ErrInvalidRegime is returned by closed forms outside their validity
// conditions.
var ErrInvalidRegime = errors.New("amplify: parameters outside the theorem's validity conditions")

// FMT21ClosedForm returns the closed-form bound of Feldman, McMillan,
// Talwar (FOCS 2021) Theorem 3.1: for eps0-LDP randomizers, n users and
// delta in (0, 1) with eps0 <= log(n / (16 log(2/delta))), the shuffle is
// (eps, delta)-DP (replace-one) with
//
//	eps = log(1 + (e^eps0 - 1)/(e^eps0 + 1) * (8 sqrt(e^eps0 log(4/delta)) / sqrt(n) + 8 e^eps0 / n)).
//
// Outside that condition it returns ErrInvalidRegime.
func FMT21ClosedForm(n int, eps0, delta float64) (float64, error) {
	if err := checkEps0(eps0); err != nil {
		return 0, err
	}
	if n < 1 {
		return 0, fmt.Errorf("amplify: number of users %d < 1", n)
	}
	if math.IsNaN(delta) || delta <= 0 || delta >= 1 {
		return 0, fmt.Errorf("amplify: delta %v outside (0, 1)", delta)
	}
	if eps0 > math.Log(float64(n)/(16*math.Log(2/delta))) {
		return 0, fmt.Errorf("%w: FMT'21 Theorem 3.1 needs eps0 <= log(n/(16 log(2/delta))) = %.4g, got eps0 = %v",
			ErrInvalidRegime, math.Log(float64(n)/(16*math.Log(2/delta))), eps0)
	}
	e := math.Exp(eps0)
	fn := float64(n)
	return math.Log1p((e - 1) / (e + 1) * (8*math.Sqrt(e*math.Log(4/delta))/math.Sqrt(fn) + 8*e/fn)), nil
}

// logSumExp3 is logSumExp of three values without allocating.
func logSumExp3(a, b, c float64) float64 {
	m := math.Max(a, math.Max(b, c))
	if math.IsInf(m, 0) {
		return m
	}
	return m + math.Log(math.Exp(a-m)+math.Exp(b-m)+math.Exp(c-m))
}
