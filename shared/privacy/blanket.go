package privacy

import (
	"math"

	"github.com/blanket-fl/blanket/shared/internal/check"
)

// rgbGamma returns the blanket probability γ = b/(e^ε + b − 1) at which the
// randomizer R_{γ,b} of FLAME Algorithm 1 (BBGN'19) is ε-LDP.
func rgbGamma(epsLocal float64, b int) (float64, error) {
	if err := check.Positive(ErrInvalidParameter, "epsLocal", epsLocal); err != nil {
		return 0, err
	}
	if err := check.Count(ErrInvalidParameter, "b", b, 1); err != nil {
		return 0, err
	}
	fb := float64(b)
	return fb / (math.Exp(epsLocal) + fb - 1), nil
}

// blanketRGB returns the central ε of shuffling n reports of the randomizer
// R_{γ,k} with blanket probability gamma, at central delta:
//
//	ε = sqrt(14·k·ln(2/δ) / ((n − 1)·γ)).
//
// Source: BBGN'19 Theorem 3.1, which takes
// γ = max{14k·ln(2/δ)/((n−1)ε²), 27k/((n−1)ε)} for ε ≤ 1; solving the
// first branch for ε gives the formula above. The result is refused
// (ErrOutsideValidity) unless ε ≤ 1 and the first branch is the maximum,
// i.e. γ ≥ 27k/((n−1)ε); otherwise the theorem does not give this ε.
// Guarantee: the shuffled reports are (ε, delta)-DP for replacement of one
// user's input.
func blanketRGB(gamma float64, k, n int, delta float64) (float64, error) {
	if !check.Finite(gamma) || gamma <= 0 || gamma > 1 {
		return 0, invalid("gamma = %v, want 0 < gamma <= 1", gamma)
	}
	if err := check.Count(ErrInvalidParameter, "k", k, 1); err != nil {
		return 0, err
	}
	if err := check.Count(ErrInvalidParameter, "n", n, 2); err != nil {
		return 0, err
	}
	if err := check.OpenUnit(ErrInvalidParameter, "delta", delta); err != nil {
		return 0, err
	}
	fk, fn1 := float64(k), float64(n-1)
	eps := math.Sqrt(14 * fk * math.Log(2/delta) / (fn1 * gamma))
	if eps > 1 {
		return 0, outside("BBGN'19 Theorem 3.1 needs eps <= 1, the formula gives %.6g (n too small or gamma too small)", eps)
	}
	if gamma < 27*fk/(fn1*eps) {
		return 0, outside("BBGN'19 Theorem 3.1: gamma = %.6g < 27k/((n-1)eps) = %.6g", gamma, 27*fk/(fn1*eps))
	}
	return eps, nil
}

// BlanketLemma1 returns FLAME Lemma 1 (BBGN'19): the central ε_c of
// shuffling n reports of R_{γ,b} that is epsLocal-LDP, at central delta,
//
//	ε_c = sqrt(14·ln(2/δ_c)·(e^{ε_l} + b − 1) / (n − 1)),
//
// i.e. blanketRGB with γ = b/(e^{ε_l} + b − 1). FLAME states the validity
// range sqrt(14·ln(2/δ_c)(b−1)/(n−1)) < ε_c ≤ 1; its lower end always holds
// (e^{ε_l} > 1), so the binding conditions are ε_c ≤ 1 and the 27k branch
// of BBGN'19 Theorem 3.1, both enforced (ErrOutsideValidity otherwise).
func BlanketLemma1(epsLocal float64, b, n int, delta float64) (float64, error) {
	gamma, err := rgbGamma(epsLocal, b)
	if err != nil {
		return 0, err
	}
	eps, err := blanketRGB(gamma, b, n, delta)
	if err != nil {
		return 0, err
	}
	if lower := math.Sqrt(14 * math.Log(2/delta) * float64(b-1) / float64(n-1)); eps <= lower {
		return 0, outside("FLAME Lemma 1 needs eps_c > %.6g, got %.6g", lower, eps)
	}
	return eps, nil
}
