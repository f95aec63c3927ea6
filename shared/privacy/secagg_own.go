package privacy

import (
	"fmt"
	"slices"

	"github.com/blanket-fl/blanket/shared/internal/check"
)

// SecAggOwnCurve is the replace-one guarantee of identical
// secure-summation rounds (one server's discrete Gaussian noise σ, L2
// sensitivity Δ in integer units, Poisson check-in at rate q), with the
// per-round RDP curves computed once, so that the guarantee after any
// number of rounds is a scaling and a conversion: what a volunteer's own
// device evaluates every round (shared/client), and what
// SecAggReplaceOneEpsilon evaluates (it builds one and calls Epsilon: one
// code path, the same floating-point result).
//
// Guarantee of Epsilon(rounds, δ): replace one volunteer's data, its
// participation unchanged, noise of one server only (see the
// secure-aggregation comment in secagg.go). Per round, the RDP curves of
// secAggRoundCurve (add/remove: Canonne, Kamath, Steinke 2020 Prop. 5 and
// product composition, Zhu-Wang ICML'19 Thm 6 for the check-in) and
// secAggReplaceCurve (the sum moves by at most 2Δ, no amplification
// claimed); `rounds` identical rounds compose by adding the curves
// (Mironov 2017, Proposition 1), here multiplying them by rounds; the
// replace-one RDP row (secAggReplaceRow: the 2Δ curve, and at q = 1 also
// group privacy on the add/remove curve, Dwork and Roth 2014 Thm 2.2)
// converts at δ (Balle et al. AISTATS'20 Thm 21, Asoodeh et al. 2021);
// the exact Gaussian dominating-pair row (secagg_pair.go: Zhu-Dong-Wang
// 2022 Thm 10, Dong-Roth-Su 2022 Cor. 2, Balle-Wang ICML'18 Thm 8; any
// model of at most 2^40 coordinates) is the second route. Both are proven
// upper bounds, so the smaller is one.
//
// Cost: the curves (hundreds of microseconds at q < 1: Zhu-Wang's bound at
// every integer order) are paid once by NewSecAggReplaceOne; Epsilon pays
// the conversion of the composed curve (milliseconds: the optimal
// conversion's search, rdpEpsilon) and the pair row (microseconds).
// A SecAggOwnCurve is immutable: safe for concurrent use.
type SecAggOwnCurve struct {
	q float64
	// sigma, sens: σ and Δ (the pair row's arguments).
	sigma, sens float64
	// round: secAggRoundCurve's Eps (add/remove, at the check-in rate);
	// replace: secAggReplaceCurve (2Δ, no amplification). One round each,
	// on rdpOrders.
	round, replace []float64
}

// NewSecAggReplaceOne validates one secure-summation round's σ =
// sigma, Δ = sensitivity (integer units) and check-in rate q ∈ (0, 1] and
// computes its per-round RDP curves (see SecAggOwnCurve). An error for
// invalid parameters (ErrInvalidParameter) or an uncertifiable curve
// (ErrUncertified).
func NewSecAggReplaceOne(sigma, sensitivity, q float64) (*SecAggOwnCurve, error) {
	r := secAggOwnRelease(sigma, sensitivity, q)
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return newSecAggOwn(r)
}

// secAggOwnRelease is the one-round release whose curves SecAggOwnCurve
// holds (D and N do not enter them).
func secAggOwnRelease(sigma, sensitivity, q float64) Release {
	return Release{Round: 1, Protocol: ProtocolSecAgg, Randomizer: RandomizerDiscreteGaussian, D: 1, N: 1,
		SecAggSigma: sigma, SecAggSensitivity: sensitivity, CheckInRate: q}
}

// newSecAggOwn is NewSecAggReplaceOne for a validated release.
func newSecAggOwn(r Release) (*SecAggOwnCurve, error) {
	c, err := secAggRoundCurve(r)
	if err != nil {
		return nil, err
	}
	return &SecAggOwnCurve{q: r.CheckInRate, sigma: r.SecAggSigma, sens: r.SecAggSensitivity,
		round: c.Eps, replace: secAggReplaceCurve(r)}, nil
}

// Epsilon is the replace-one ε at δ = delta of `rounds` identical rounds
// (the guarantee stated on SecAggOwnCurve): the smaller of the RDP row and
// the dominating-pair row, whichever are valid; an error for rounds < 1, δ
// outside (0, 1), or when neither row is valid.
func (c *SecAggOwnCurve) Epsilon(rounds int, delta float64) (float64, error) {
	if err := secAggOwnArgs(rounds, delta); err != nil {
		return 0, err
	}
	return c.epsilon(rounds, delta)
}

// secAggOwnArgs validates Epsilon's arguments.
func secAggOwnArgs(rounds int, delta float64) error {
	if err := check.Count(ErrInvalidParameter, "rounds", rounds, 1); err != nil {
		return err
	}
	return check.OpenUnit(ErrInvalidParameter, "delta", delta)
}

// epsilon is Epsilon on validated arguments.
func (c *SecAggOwnCurve) epsilon(rounds int, delta float64) (float64, error) {
	total, total2 := slices.Clone(c.round), slices.Clone(c.replace)
	for j := range total {
		total[j] *= float64(rounds)
		total2[j] *= float64(rounds)
	}
	row := secAggReplaceRow(total, total2, nil, rounds, delta, c.q == 1)
	pe, perr := secAggPairReplaceOne(c.sigma, c.sens, rounds, delta)
	switch {
	case row.Valid && perr == nil:
		return min(row.Epsilon, pe), nil
	case perr == nil:
		return pe, nil
	case row.Valid:
		return row.Epsilon, nil
	}
	return 0, fmt.Errorf("secagg: %s; %w", row.Reason, perr)
}
