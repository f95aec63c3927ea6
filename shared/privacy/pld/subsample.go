package pld

import (
	"fmt"
	"math"
)

// subsample returns the mixture rate*P + (1-rate)*Q. Used as the pair
// (subsample(P, Q, rate), Q), it is the dominating pair of the Poisson
// subsampled mechanism for the remove direction whenever (P, Q) dominates
// the remove direction of the base mechanism (Zhu, Dong, Wang, AISTATS
// 2022, Poisson subsampling of dominating pairs: a user's record is used with probability rate, so
// M_q(D) = rate*M(D) + (1-rate)*M(D') and M_q(D') = M(D')). For the add
// direction the dominating pair is the mirror (Q, rate*P + (1-rate)*Q),
// which is exactly the swap fromPair/FromLogPair account as the add
// direction, so
//
//	fromPair(subsample(P, Q, rate), Q, opt)
//
// (without BothOrdersDominated) reports the max over both directions,
// dp_accounting's treatment of sampled mechanisms. It is used for
// SS-Double's d'/d coordinate sampling and shuffled check-in's rate p.
// If (P, Q) dominates both orders of replace-one neighbours (shuffle pairs),
// the same pair with Q as the reference dominates the remove direction of
// the subsampled mechanism; the add direction again needs the swap.
func subsample(p, q []float64, rate float64) ([]float64, error) {
	if len(p) != len(q) {
		return nil, fmt.Errorf("pld: P has %d atoms and Q has %d", len(p), len(q))
	}
	if math.IsNaN(rate) || rate < 0 || rate > 1 {
		return nil, fmt.Errorf("pld: sampling rate %v must be in [0, 1]", rate)
	}
	out := make([]float64, len(p))
	for i := range p {
		if math.IsNaN(p[i]) || math.IsNaN(q[i]) || p[i] < 0 || q[i] < 0 {
			return nil, fmt.Errorf("pld: atom %d has probabilities (%v, %v)", i, p[i], q[i])
		}
		out[i] = rate*p[i] + (1-rate)*q[i]
	}
	return out, nil
}

// SubsampleLog is subsample on natural log-probabilities:
// log(rate e^{logP} + (1-rate) e^{logQ}), computed stably.
func SubsampleLog(logP, logQ []float64, rate float64) ([]float64, error) {
	if len(logP) != len(logQ) {
		return nil, fmt.Errorf("pld: P has %d atoms and Q has %d", len(logP), len(logQ))
	}
	if math.IsNaN(rate) || rate < 0 || rate > 1 {
		return nil, fmt.Errorf("pld: sampling rate %v must be in [0, 1]", rate)
	}
	lr, l1r := math.Log(rate), math.Log1p(-rate)
	out := make([]float64, len(logP))
	for i := range logP {
		if math.IsNaN(logP[i]) || math.IsNaN(logQ[i]) {
			return nil, fmt.Errorf("pld: atom %d has NaN log-probability", i)
		}
		out[i] = logAddExp(lr+logP[i], l1r+logQ[i])
	}
	return out, nil
}

func logAddExp(a, b float64) float64 {
	if math.IsInf(a, -1) {
		return b
	}
	if math.IsInf(b, -1) {
		return a
	}
	if a < b {
		a, b = b, a
	}
	return a + math.Log1p(math.Exp(b-a))
}
