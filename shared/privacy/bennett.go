package privacy

import (
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/shared/internal/check"
)

// Mechanism names a local randomizer whose privacy amplification random
// variable BBGN'19's numerical bounds know how to bound. Construct it with
// LaplaceMechanism, RRMechanism or GenericMechanism.
type Mechanism struct {
	kind mechKind
	k    int
}

type mechKind int

const (
	mechGeneric mechKind = iota
	mechLaplace
	mechRR
)

// LaplaceMechanism is the Laplace mechanism with scale 1/ε0 on inputs in
// [0, 1] (ε0-LDP), the randomizer FLAME's experiments use.
func LaplaceMechanism() Mechanism { return Mechanism{kind: mechLaplace} }

// RRMechanism is k-ary randomized response R_{γ,k} with γ = k/(e^{ε0}+k−1)
// (FLAME Algorithm 1 with b = k). k must be at least 2.
func RRMechanism(k int) (Mechanism, error) {
	if err := check.Count(ErrInvalidParameter, "k", k, 2); err != nil {
		return Mechanism{}, err
	}
	return Mechanism{kind: mechRR, k: k}, nil
}

// GenericMechanism is any ε0-LDP randomizer; its bound uses only ε0 and is
// the loosest of the three.
func GenericMechanism() Mechanism { return Mechanism{kind: mechGeneric} }

// String names the mechanism.
func (m Mechanism) String() string {
	switch m.kind {
	case mechLaplace:
		return "Laplace"
	case mechRR:
		return fmt.Sprintf("RR-%d", m.k)
	default:
		return "generic"
	}
}

// amplParams are the quantities BBGN'19's bounds need about the privacy
// amplification random variable L = (μ_x(W) − e^ε·μ_{x'}(W))/ω(W), W ~ ω,
// for the worst pair of inputs x, x':
//
//	gamma, oneMinusGamma: a lower bound on the blanket mass γ and 1 − γ,
//	bPlus:  an upper bound on L (almost surely),
//	second: an upper bound on E[L²].
type amplParams struct {
	gamma, oneMinusGamma float64
	bPlus, second        float64
}

// params returns amplParams at local ε0 and target ε < ε0.
//
// Laplace on [0,1] with scale 1/ε0 (derivation; checked by numerical
// integration in bennett_test.go): the blanket is inf_x μ_x(y), of mass
// γ = e^{−ε0/2}. With x = 0, x' = 1, L = γ(e^{ε0} − e^ε) on y ≤ 0 (its
// maximum), γ(1 − e^{ε+ε0}) on y ≥ 1, γ(e^{ε0(1−2y)} − e^ε) on (0, 1/2) and
// γ(1 − e^{ε+ε0(2y−1)}) on (1/2, 1); integrating L² against ω gives
//
//	E[L²] = (e^{2ε}+1)/3·(2e^{ε0/2} + e^{−ε0}) − 2e^ε(2e^{−ε0/2} − e^{−ε0}).
//
// k-RR: L = γ(1 − e^ε) + (1−γ)k(1{W=x} − e^ε·1{W=x'}), W uniform on [k], so
// max L = γ(1 − e^ε) + (1−γ)k and E[L²] = γ(2−γ)(e^ε−1)² + (1−γ)²k(e^{2ε}+1).
//
// Generic ε0-LDP: γ ≥ e^{−ε0}, μ_x/ω ≤ e^{ε0}, so (BBGN'19 Section 5)
// max L ≤ e^{ε0}(1 − e^{ε−2ε0}) and E[L²] ≤ e^{ε0}(e^{2ε}+1) − 2e^{ε−3ε0}.
func (m Mechanism) params(eps0, eps float64) amplParams {
	switch m.kind {
	case mechLaplace:
		return amplParams{
			gamma:         math.Exp(-eps0 / 2),
			oneMinusGamma: -math.Expm1(-eps0 / 2),
			bPlus:         math.Exp(eps0/2) * -math.Expm1(eps-eps0),
			second: (math.Exp(2*eps)+1)/3*(2*math.Exp(eps0/2)+math.Exp(-eps0)) -
				2*math.Exp(eps)*(2*math.Exp(-eps0/2)-math.Exp(-eps0)),
		}
	case mechRR:
		k := float64(m.k)
		den := math.Exp(eps0) + k - 1
		g := k / den
		omg := math.Expm1(eps0) / den
		em1 := math.Expm1(eps)
		return amplParams{
			gamma:         g,
			oneMinusGamma: omg,
			bPlus:         -g*em1 + omg*k,
			second:        g*(2-g)*em1*em1 + omg*omg*k*(math.Exp(2*eps)+1),
		}
	default:
		g := math.Exp(-eps0)
		return amplParams{
			gamma:         g,
			oneMinusGamma: -math.Expm1(-eps0),
			bPlus:         math.Exp(eps0) * -math.Expm1(eps-2*eps0),
			second:        math.Exp(eps0)*(math.Exp(2*eps)+1) - 2*g*math.Exp(eps-2*eps0),
		}
	}
}

// bennettTail bounds E[(L_1 + … + L_m)_+] for m i.i.d. copies of L, given
// the Bennett coefficients. It is a parameter so that tests can plug in the
// pre-correction form FLAME used (reproduce_test.go); the package only ever
// uses correctedTail.
type bennettTail func(m float64, c bennettCoef) float64

// bennettCoef holds a = e^ε − 1 (so E[L] = −a), b = bPlus, and
// α = E[L²]/b², β = a·b/E[L²] of Bennett's inequality.
type bennettCoef struct {
	a, b, alpha, beta float64
}

// bennettH is h(u) = (1+u)ln(1+u) − u, by its Taylor series for small u
// where the closed form cancels catastrophically.
func bennettH(u float64) float64 {
	if u < 1e-3 {
		u2 := u * u
		return u2/2 - u2*u/6 + u2*u2/12 - u2*u2*u/20
	}
	return (1+u)*math.Log1p(u) - u
}

// correctedTail is the corrected Bennett tail bound (BBGN'19, as corrected
// by its authors in 2020). Derivation: with S_m = Σ L_i and E[L] = −a,
// Bennett's inequality for variables bounded above by b with second moment
// at most v (Boucheron, Lugosi, Massart, Theorem 2.9) gives
// P(S_m > t) ≤ exp(−m·α·h(β + b·t/(m·v))) with α = v/b², β = a·b/v.
// h is convex with h'(u) = ln(1+u), so h(β + s) ≥ h(β) + s·ln(1+β), and
//
//	E[(S_m)_+] = ∫_0^∞ P(S_m > t) dt ≤ e^{−m·α·h(β)} · b / ln(1+β).
//
// The pre-correction code divided this by m·a (it used η = a/b and an
// extra 1/m), understating δ by a factor ≈ m(e^ε − 1).
func correctedTail(m float64, c bennettCoef) float64 {
	return math.Exp(-m*c.alpha*bennettH(c.beta)) * c.b / math.Log1p(c.beta)
}

// bennettDelta is BBGN'19's numerical bound on δ at central ε for n
// shuffled reports of an ε0-LDP randomizer:
//
//	δ ≤ 1/(γn) · Σ_{m=1}^{n} P[Bin(n, γ) = m] · E[(L_1 + … + L_m)_+],
//
// with E[(·)_+] bounded by tail. For ε ≥ ε0 the shuffled output is already
// ε0-DP (post-processing of ε0-LDP reports) and δ = 0. The result is
// capped at 1.
func bennettDelta(m Mechanism, eps0 float64, n int, eps float64, tail bennettTail) float64 {
	if eps >= eps0 {
		return 0
	}
	if eps <= 0 {
		return 1
	}
	p := m.params(eps0, eps)
	a := math.Expm1(eps)
	if !(p.bPlus > 0) || !(p.second > 0) {
		return 1
	}
	c := bennettCoef{a: a, b: p.bPlus, alpha: p.second / (p.bPlus * p.bPlus), beta: a * p.bPlus / p.second}
	s := binomialExpect(n, p.gamma, p.oneMinusGamma, func(k int) float64 { return tail(float64(k), c) })
	d := s / (p.gamma * float64(n))
	if !(d < 1) { // also catches NaN
		return 1
	}
	return d
}

// binomialExpect returns an upper bound on Σ_{k=1}^{n} P[Bin(n,q)=k]·f(k)
// for f positive and non-increasing in k. It sums exactly over a window of
// ±40 standard deviations (plus 8) around the mode, where the pmf is
// computed from the mode by the ratio recurrence, and adds a rigorous bound
// on the rest: outside the window the pmf is monotone, so the k < lo terms
// are at most (lo−1)·pmf(lo)·f(1) and the k > hi terms at most
// (n−hi)·pmf(hi)·f(hi). Both are below 1e-300 of the sum in practice.
func binomialExpect(n int, q, oneMinusQ float64, f func(int) float64) float64 {
	fn := float64(n)
	mode := int(math.Floor((fn + 1) * q))
	if mode > n {
		mode = n
	}
	if mode < 1 {
		mode = 1
	}
	sd := math.Sqrt(fn * q * oneMinusQ)
	w := int(40*sd) + 8
	lo, hi := mode-w, mode+w
	if lo < 1 {
		lo = 1
	}
	if hi > n {
		hi = n
	}
	logq, log1q := math.Log(q), math.Log(oneMinusQ)
	lgN, _ := math.Lgamma(fn + 1)
	lgK, _ := math.Lgamma(float64(mode) + 1)
	lgNK, _ := math.Lgamma(fn - float64(mode) + 1)
	pmfMode := math.Exp(lgN - lgK - lgNK + float64(mode)*logq + float64(n-mode)*log1q)
	ratio := q / oneMinusQ
	sum := pmfMode * f(mode)
	pmf := pmfMode
	for k := mode; k < hi; k++ { // pmf(k+1) = pmf(k)·(n−k)/(k+1)·q/(1−q)
		pmf *= float64(n-k) / float64(k+1) * ratio
		sum += pmf * f(k+1)
	}
	pmfHi := pmf
	pmf = pmfMode
	for k := mode; k > lo; k-- { // pmf(k−1) = pmf(k)·k/(n−k+1)·(1−q)/q
		pmf *= float64(k) / float64(n-k+1) / ratio
		sum += pmf * f(k-1)
	}
	pmfLo := pmf
	if lo > 1 {
		sum += float64(lo-1) * pmfLo * f(1)
	}
	if hi < n {
		sum += float64(n-hi) * pmfHi * f(hi)
	}
	return sum
}

// maxBennettN bounds the number of shuffled reports the Bennett bound
// accepts: beyond it the log-gamma evaluation of the binomial pmf loses
// more than about 1e-8 relative precision.
const maxBennettN = 10_000_000

func checkBennettArgs(eps0 float64, n int) error {
	if err := check.Positive(ErrInvalidParameter, "eps0", eps0); err != nil {
		return err
	}
	if n < 1 || n > maxBennettN {
		return invalid("n = %d, want 1 <= n <= %d", n, maxBennettN)
	}
	return nil
}

// BennettDelta returns BBGN'19's numerical upper bound on δ such that
// shuffling n reports of the ε0-LDP randomizer m is (eps, δ)-DP for
// replacement of one user's input, in the form corrected by its authors in
// 2020 (see correctedTail). δ is 0 for eps ≥ eps0.
func BennettDelta(m Mechanism, eps0 float64, n int, eps float64) (float64, error) {
	if err := checkBennettArgs(eps0, n); err != nil {
		return 0, err
	}
	if err := check.NonNegative(ErrInvalidParameter, "eps", eps); err != nil {
		return 0, err
	}
	return bennettDelta(m, eps0, n, eps, correctedTail), nil
}

// BennettEpsilon returns the smallest central ε (to a relative precision of
// about 1e-12, rounded up) such that shuffling n reports of the ε0-LDP
// randomizer m is (ε, delta)-DP by BBGN'19's corrected Bennett bound, found
// by bisection over ε ∈ (0, ε0]. The returned ε is always one at which the
// bound was evaluated and found ≤ delta. When no ε < ε0 qualifies it returns
// ε0 itself (no amplification; valid since the reports are ε0-LDP).
func BennettEpsilon(m Mechanism, eps0 float64, n int, delta float64) (float64, error) {
	if err := checkBennettArgs(eps0, n); err != nil {
		return 0, err
	}
	if err := check.OpenUnit(ErrInvalidParameter, "delta", delta); err != nil {
		return 0, err
	}
	return bennettSearch(m, eps0, n, delta, correctedTail), nil
}

// bennettSearch bisects for the smallest ε with bennettDelta(ε) ≤ delta,
// keeping hi feasible throughout.
func bennettSearch(m Mechanism, eps0 float64, n int, delta float64, tail bennettTail) float64 {
	lo, hi := 0.0, eps0
	for i := 0; i < 200 && hi-lo > 1e-13*hi; i++ {
		mid := lo + (hi-lo)/2
		if mid <= lo || mid >= hi {
			break
		}
		if bennettDelta(m, eps0, n, mid, tail) <= delta {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// BennettAmplifier is the Amplifier backed by BennettEpsilon for one
// mechanism.
type BennettAmplifier struct {
	Mech Mechanism
}

// Name implements Amplifier.
func (a BennettAmplifier) Name() string { return "Bennett (" + a.Mech.String() + ")" }

// Citation implements Amplifier.
func (a BennettAmplifier) Citation() string {
	return "BBGN'19 numerical Bennett bound, 2020 correction"
}

// Epsilon implements Amplifier.
func (a BennettAmplifier) Epsilon(epsLocal float64, n int, delta float64) (float64, error) {
	return BennettEpsilon(a.Mech, epsLocal, n, delta)
}
