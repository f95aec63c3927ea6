package privacy

import (
	"fmt"
	"math"
	"slices"

	"github.com/blanket-fl/blanket/shared/internal/check"
	"github.com/blanket-fl/blanket/shared/privacy/rdp"
)

// Secure summation with distributed discrete Gaussian noise (ProtocolSecAgg).
//
// Mechanism (one round). Each volunteer checks in independently with
// probability q (Poisson subsampling of a population), L2-clips its update,
// encodes it on an integer grid so that x_i ∈ Z^d has ‖x_i‖₂ ≤ Δ (integer
// units; PINE's fixed-point grid, whose proof enforces the bound on every
// accepted report, or the Prio3 SumVec baseline's conditional randomized
// rounding), and secret-shares it between two servers. EACH server adds
// multivariate discrete Gaussian noise N_Z(0, σ²)^d to its aggregate share.
// What is released is Σ_i x_i + Z_1 + Z_2.
//
// Trust. The guarantee is stated for noise σ of ONE server: if one server
// colludes with the analyst (it knows its own Z_j) the release is still a
// post-processing of Σ_i x_i + Z_k for the honest server k; and when both
// are honest the release is Σ_i x_i + Z_1 plus independent noise Z_2, again
// a post-processing. So σ alone is accounted, never σ√2.
//
// Neighbouring relation: add/remove one volunteer (the volunteer's
// participation coin and data are present in one dataset and absent in the
// other), under Poisson check-in with rate q.
//
//  1. Base mechanism (q = 1). Adding or removing x_i shifts the mean of the
//     noise by an integer vector v with ‖v‖₂ ≤ Δ. For integer shifts the
//     1-D discrete Gaussian satisfies D_α(N_Z(μ, σ²) ‖ N_Z(ν, σ²)) ≤
//     α(μ−ν)²/(2σ²) (Canonne, Kamath, Steinke, NeurIPS 2020, Proposition
//     5); the d coordinates are independent, Rényi divergence adds over
//     products, so the multivariate divergence is at most α‖v‖²/(2σ²) ≤
//     αΔ²/(2σ²), in both directions (the bound is symmetric in μ, ν). This
//     is the continuous Gaussian's curve with noise multiplier σ/Δ.
//  2. Poisson check-in. The general upper bound of Zhu and Wang (ICML 2019,
//     "Poisson subsampled Rényi differential privacy", Theorem 6), which
//     holds for ANY mechanism with the given RDP curve at integer orders
//     α ≥ 2, gives the round's curve (rdp.PoissonSubsampled). No
//     property of the continuous Gaussian beyond its RDP curve is used.
//     At q = 1 it is the base curve itself.
//  3. Rounds compose by adding RDP curves (Mironov 2017, Proposition 1),
//     adaptively, with any σ, Δ, q per round.
//  4. Conversion to (ε, δ): the better of Balle et al. (AISTATS 2020,
//     Theorem 21) and the optimal conversion of Asoodeh et al. (2021), both
//     proven (rdpEpsilon).
//
// What is released is the noisy sum AND the exact count of accepted
// reports (the batch carries it). Steps 1-4 bound the noisy sum alone
// (SecAggEpsilon). Under add/remove the count moves with the volunteer:
// at q = 1 it always differs by one (no add/remove guarantee at all), and
// at q < 1 Zhu-Wang's theorem needs the base mechanism of the sampled set
// to be private, which M(S) = (Σ_S x + Z, |S|) is not (|S| and |S| + 1 are
// told apart). So no add/remove row is a guarantee of what Blanket
// releases: the row is reported not applicable, with that reason.
//
// Replace-one (a volunteer's data changed, participation unchanged, what
// the ledger charges): the count's law is the same in both datasets.
//
//	(b) Always: given the sampled set (same law in both), the count is
//	    the same and the sums differ by at most 2Δ, so by joint convexity
//	    the 2Δ curve without amplification bounds the pair
//	    (secAggReplaceCurve).
//	(c) Only when every round has q = 1: the count is the constant n in
//	    both datasets, so the release is a post-processing of the noisy
//	    sum, whose add/remove guarantee (ε, δ) gives (2ε, (1 + e^ε)·δ) for
//	    replace-one by group privacy (Dwork and Roth 2014, Theorem 2.2
//	    generalized to approximate DP; secAggReplaceOne). At q < 1 this
//	    route is not a guarantee: with no other volunteer, the count is 1
//	    exactly when the target took part, and then the sum is x + Z
//	    against x' + Z, un-amplified; the amplified add/remove ε of the sum
//	    is far below that pair's.
//
// The privacy loss of the multivariate discrete Gaussian under a shift v
// depends on v's direction on the lattice (not only on ‖v‖₂), so there is
// no exact 1-D reduction; the replace-one dominating-pair row
// (secagg_pair.go) composes instead a continuous Gaussian pair with
// slightly smaller noise, mixed with a negligible infinite-loss mass, that
// dominates every integer shift of norm at most 2Δ, exactly (no RDP
// conversion loss). The ledger charges the tightest valid row.

// ProtocolSecAgg is secure summation with distributed discrete Gaussian
// noise; RandomizerDiscreteGaussian is its noise.
const (
	ProtocolSecAgg             = "secagg"
	RandomizerDiscreteGaussian = "discrete-gaussian"
)

// secAggCite cites the secure-aggregation rows.
const secAggCite = "Canonne-Kamath-Steinke 2020 Prop. 5 (discrete Gaussian RDP, integer shifts) + product composition; Zhu-Wang ICML'19 Thm 6 (Poisson subsampling, general bound); " + rdpConversionCite

// secAggRoundCurve is the RDP curve (orders of rdpOrders) of one
// secure-aggregation round under add/remove one volunteer with Poisson
// check-in: at q = 1 the base curve α·Δ²/(2σ²) itself; otherwise Zhu-Wang
// Theorem 6 applied to it at the integer orders, and at a fractional
// order α the value at ⌈α⌉, valid because the Rényi divergence is
// non-decreasing in its order (van Erven and Harremoës 2014, Theorem 3).
func secAggRoundCurve(r Release) (rdp.Curve, error) {
	rho := r.SecAggSensitivity * r.SecAggSensitivity / (2 * r.SecAggSigma * r.SecAggSigma)
	orders := rdpOrders()
	c := rdp.Curve{Orders: orders, Eps: make([]float64, len(orders))}
	if r.CheckInRate == 1 {
		for j, a := range orders {
			c.Eps[j] = a * rho
		}
	} else {
		base := func(j int) (float64, error) { return float64(j) * rho, nil }
		ints := rdpIntegerOrders()
		zw, err := rdp.PoissonSubsampled(r.CheckInRate, base, ints)
		if err != nil {
			return rdp.Curve{}, fmt.Errorf("secagg round %d: %w", r.Round, err)
		}
		for j, a := range orders {
			k := slices.Index(ints, math.Ceil(a))
			if k < 0 {
				return rdp.Curve{}, fmt.Errorf("%w: secagg: no integer order %v", ErrUncertified, math.Ceil(a))
			}
			c.Eps[j] = zw.Eps[k]
		}
	}
	for _, v := range c.Eps {
		if math.IsNaN(v) || v < 0 {
			return rdp.Curve{}, fmt.Errorf("%w: secagg round %d: RDP value %v", ErrUncertified, r.Round, v)
		}
	}
	return c, nil
}

// secAggReplaceCurve is the RDP curve of one secure-aggregation round for
// replacing one volunteer's data, without check-in amplification: the sum
// moves by at most 2Δ (x_i → x_i' with both norms at most Δ), so the base
// curve is α(2Δ)²/(2σ²) (CKS'20 Prop. 5); the volunteer's coin is the same
// in both datasets, and claiming nothing from it is an upper bound.
func secAggReplaceCurve(r Release) []float64 {
	rho := 4 * r.SecAggSensitivity * r.SecAggSensitivity / (2 * r.SecAggSigma * r.SecAggSigma)
	orders := rdpOrders()
	out := make([]float64, len(orders))
	for j, a := range orders {
		out[j] = a * rho
	}
	return out
}

// accountSecAgg is the rows of secure-aggregation releases (every run must
// be one; nil otherwise): replace-one first (what the ledger charges, as
// for every other protocol: the RDP row, then the dominating-pair row of
// secagg_pair.go), then add/remove, not applicable (the released count is
// not covered; see the comment above).
func accountSecAgg(runs []run, delta float64) []AccountRow {
	if !allProtocol(runs, ProtocolSecAgg) {
		return nil
	}
	full := true // every round at check-in rate 1: route (c) applies
	for _, u := range runs {
		full = full && u.r.CheckInRate == 1
	}
	orders := rdpOrders()
	total := make([]float64, len(orders))
	total2 := make([]float64, len(orders))
	var err error
	for _, u := range runs {
		var c rdp.Curve
		if c, err = secAggRoundCurve(u.r); err != nil {
			break
		}
		c2 := secAggReplaceCurve(u.r)
		for j := range total {
			total[j] += float64(u.count) * c.Eps[j]
			total2[j] += float64(u.count) * c2[j]
		}
	}
	rounds := totalRounds(runs)
	return []AccountRow{secAggReplaceRow(total, total2, err, rounds, delta, full), secAggPairRuns(runs, delta), secAggAddRemoveRow(rounds)}
}

// errSecAggAddRemove is why no add/remove row is a guarantee of a secure
// summation release.
var errSecAggAddRemove = outside("add/remove one volunteer: the release includes the exact count of accepted reports, " +
	"which adding the volunteer changes (at check-in rate 1 always: no add/remove guarantee); the add/remove proof " +
	"(Zhu-Wang Thm 6) covers the noisy sum, not the count; the ledger charges replace-one, under which the count's law does not change")

// secAggAddRemoveRow is the add/remove row: not applicable
// (errSecAggAddRemove).
func secAggAddRemoveRow(rounds int) AccountRow {
	return secAggRow(nil, errSecAggAddRemove, rounds, 0.5)
}

func secAggRow(total []float64, err error, rounds int, delta float64) AccountRow {
	method := "RDP discrete Gaussian secure aggregation, Poisson check-in (add/remove)"
	if rounds > 1 {
		method += ", composed over rounds"
	}
	var eps float64
	if err == nil {
		eps, err = rdpEpsilon(rdp.Curve{Orders: rdpOrders(), Eps: slices.Clone(total)}, delta)
	}
	return AccountRow{Bound: makeBound(method, secAggCite, eps, delta, err),
		Family: FamilySecAggDGauss, Amplification: AmplificationPoisson, Composition: CompositionRDP}
}

// secAggReplaceRow is the replace-one guarantee of the composed rounds:
// (b) the 2Δ curve without amplification (secAggReplaceCurve), and, only
// when full (every round at check-in rate 1), the smaller of it and (c)
// group privacy on the noisy sum's add/remove curve — (2ε', (1 +
// e^{ε'})δ') from an add/remove (ε', δ') with δ' chosen so that the total δ
// is at most delta (a fixed point: δ' = delta/(1 + e^{ε'(δ')}), reached from
// above since ε'(δ') decreases in δ'). Both are proven upper bounds where
// they are used (see the comment at the top of this file), so the smaller
// is one.
func secAggReplaceRow(total, total2 []float64, err error, rounds int, delta float64, full bool) AccountRow {
	method := "RDP discrete Gaussian secure aggregation (replace-one)"
	if rounds > 1 {
		method += ", composed over rounds"
	}
	eps := math.Inf(1)
	if err == nil {
		orders := rdpOrders()
		conv := func(c []float64, d float64) (float64, error) {
			return rdpEpsilon(rdp.Curve{Orders: orders, Eps: slices.Clone(c)}, d)
		}
		if e, err2 := conv(total2, delta); err2 == nil {
			eps = e
		}
		if e, err2 := conv(total, delta/2); full && err2 == nil {
			for range 200 {
				d := delta / (1 + math.Exp(e))
				e2, err3 := conv(total, d)
				if err3 != nil {
					break
				}
				if e2 <= e {
					if g, gd, err4 := secAggReplaceOne(e2, d); err4 == nil && gd <= delta*(1+1e-12) {
						eps = min(eps, g)
					}
					break
				}
				e = e2 * (1 + 1e-10)
			}
		}
		if math.IsInf(eps, 1) {
			err = fmt.Errorf("%w: no replace-one bound for secure aggregation", ErrUncertified)
		}
	}
	return AccountRow{Bound: makeBound(method, secAggCite+"; group privacy (Dwork and Roth 2014 Thm 2.2) or sensitivity 2Δ", eps, delta, err),
		Family: FamilySecAggDGauss, Amplification: AmplificationPoisson, Composition: CompositionRDP}
}

func secaggSlots() []slot {
	return []slot{{kind: slotSecAggReplace}, {kind: slotSecAggPair}, {kind: slotSecAgg}}
}

func (sl *slot) addSecAgg(r Release, count int) error {
	if r.Protocol != ProtocolSecAgg {
		return outside("round %d is not a secure-aggregation release", r.Round)
	}
	c, err := secAggRoundCurve(r)
	if err != nil {
		return err
	}
	sl.curve = addCurve(sl.curve, c.Eps, float64(count))
	sl.partial = sl.partial || r.CheckInRate != 1
	if sl.kind == slotSecAggReplace {
		sl.curve2 = addCurve(sl.curve2, secAggReplaceCurve(r), float64(count))
	}
	return nil
}

func (sl slot) secAggRow(s *Session) AccountRow {
	if sl.kind == slotSecAggPair {
		return secAggPairRow(sl.invMu2, sl.logKeep, sl.err, s.rounds, s.delta)
	}
	if sl.kind == slotSecAggReplace {
		return secAggReplaceRow(sl.curve, sl.curve2, sl.err, s.rounds, s.delta, !sl.partial)
	}
	return secAggAddRemoveRow(s.rounds)
}

// SecAggReplaceOneEpsilon is SecAggEpsilon for replacing one volunteer's
// data: the smaller of the two replace-one rows (RDP above, and the
// dominating pair of secagg_pair.go for any model of at most 2^40
// coordinates) for `rounds` identical rounds, what the ledger charges
// (its tightest valid row). Both are proven upper bounds, so the smaller
// is one; an error only when neither is valid. It is
// NewSecAggReplaceOne(sigma, sensitivity, q).Epsilon(rounds, delta)
// (secagg_own.go, which states the guarantee in full), the arguments
// checked in this order: the round's σ, Δ and q, rounds, delta, the curve.
func SecAggReplaceOneEpsilon(sigma, sensitivity, q float64, rounds int, delta float64) (float64, error) {
	r := secAggOwnRelease(sigma, sensitivity, q)
	if err := r.Validate(); err != nil {
		return 0, err
	}
	if err := secAggOwnArgs(rounds, delta); err != nil {
		return 0, err
	}
	c, err := newSecAggOwn(r)
	if err != nil {
		return 0, err
	}
	return c.epsilon(rounds, delta)
}

// CalibrateSecAggSigmaReplaceOne is CalibrateSecAggSigma for the
// replace-one guarantee the ledger charges (SecAggReplaceOneEpsilon, which
// is non-increasing in σ: every one of its routes is; for the dominating
// pair, μ = 2Δ/√(σ² − r²) and θ decrease in σ): the smallest σ, to 1e-6
// relative and certified at the returned value.
func CalibrateSecAggSigmaReplaceOne(targetEps, delta float64, rounds int, q, sensitivity float64) (float64, error) {
	return calibrateSigma(targetEps, sensitivity, func(sigma float64) (float64, error) {
		return SecAggReplaceOneEpsilon(sigma, sensitivity, q, rounds, delta)
	})
}

// calibrateSigma returns the smallest σ (to 1e-6 relative) with
// eps(σ) <= targetEps, for eps non-increasing in σ: doubling from
// sensitivity, then bisection; the returned σ was evaluated (certified).
func calibrateSigma(targetEps, sensitivity float64, eps func(sigma float64) (float64, error)) (float64, error) {
	if err := check.Positive(ErrInvalidParameter, "target epsilon", targetEps); err != nil {
		return 0, err
	}
	if err := check.Positive(ErrInvalidParameter, "sensitivity", sensitivity); err != nil {
		return 0, err
	}
	fits := func(sigma float64) (bool, error) {
		e, err := eps(sigma)
		if err != nil {
			return false, err
		}
		return e <= targetEps, nil
	}
	lo, hi := 0.0, sensitivity
	for {
		ok, err := fits(hi)
		if err != nil {
			return 0, err
		}
		if ok {
			break
		}
		if hi > 1e12*sensitivity {
			return 0, fmt.Errorf("%w: no sigma up to %g reaches epsilon %g", ErrOutsideValidity, hi, targetEps)
		}
		lo, hi = hi, 2*hi
	}
	for hi-lo > 1e-6*hi {
		mid := lo + (hi-lo)/2
		ok, err := fits(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, nil
}

// SecAggEpsilon returns the central ε at δ = delta of the NOISY SUM ALONE
// of `rounds` identical secure-aggregation rounds with per-server discrete
// Gaussian noise sigma (integer units), L2 sensitivity sensitivity
// (integer units) and check-in rate q ∈ (0, 1], under add/remove one
// volunteer with Poisson check-in (see the secure-aggregation comment in
// this file: CKS'20 Prop. 5, Zhu-Wang'19 Thm 6, RDP composition, Balle et
// al./Asoodeh et al. conversion). It is not a guarantee of what Blanket
// releases, which also carries the exact count of accepted reports (the
// add/remove row is not applicable); SecAggReplaceOneEpsilon is. An
// uncertifiable result is an error.
func SecAggEpsilon(sigma, sensitivity, q float64, rounds int, delta float64) (float64, error) {
	r := Release{Round: 1, Protocol: ProtocolSecAgg, Randomizer: RandomizerDiscreteGaussian, D: 1, N: 1,
		SecAggSigma: sigma, SecAggSensitivity: sensitivity, CheckInRate: q}
	if err := r.Validate(); err != nil {
		return 0, err
	}
	if err := check.Count(ErrInvalidParameter, "rounds", rounds, 1); err != nil {
		return 0, err
	}
	if err := check.OpenUnit(ErrInvalidParameter, "delta", delta); err != nil {
		return 0, err
	}
	c, err := secAggRoundCurve(r)
	if err != nil {
		return 0, err
	}
	for j := range c.Eps {
		c.Eps[j] *= float64(rounds)
	}
	row := secAggRow(c.Eps, nil, rounds, delta)
	if !row.Valid {
		return 0, fmt.Errorf("secagg: %s", row.Reason)
	}
	return row.Epsilon, nil
}

// CalibrateSecAggSigma returns the smallest per-server noise σ (integer
// units, to 1e-6 relative, rounded up) for which `rounds` identical
// secure-aggregation rounds with L2 sensitivity sensitivity and check-in
// rate q are (targetEps, delta)-DP by SecAggEpsilon (add/remove one
// volunteer, Poisson check-in). SecAggEpsilon is non-increasing in σ (the
// base curve α·Δ²/(2σ²) decreases, Zhu-Wang's bound is increasing in the
// base curve, the conversions are increasing in the curve), so bisection
// applies; the returned σ is certified: SecAggEpsilon(σ) <= targetEps was
// evaluated at exactly that σ. An error when no σ up to 1e12·Δ suffices.
func CalibrateSecAggSigma(targetEps, delta float64, rounds int, q, sensitivity float64) (float64, error) {
	return calibrateSigma(targetEps, sensitivity, func(sigma float64) (float64, error) {
		return SecAggEpsilon(sigma, sensitivity, q, rounds, delta)
	})
}

// secAggReplaceOne converts an (ε, δ) guarantee for add/remove one
// volunteer into one for replacing a volunteer's data (two add/remove
// steps): (2ε, (1 + e^ε)·δ), by group privacy for approximate DP (Dwork
// and Roth 2014, Theorem 2.2 and its (ε, δ) form k·ε, k·e^{(k−1)ε}·δ at
// k = 2). An overflowing result is an error.
func secAggReplaceOne(eps, delta float64) (float64, float64, error) {
	if err := check.NonNegative(ErrInvalidParameter, "eps", eps); err != nil {
		return 0, 0, err
	}
	if err := check.DeltaOrZero(ErrInvalidParameter, "delta", delta); err != nil {
		return 0, 0, err
	}
	d := delta * (1 + math.Exp(eps))
	if !check.Finite(d) || d >= 1 {
		return 0, 0, outside("replace-one delta %g is no guarantee", d)
	}
	return 2 * eps, d, nil
}
