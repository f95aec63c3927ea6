package privacy

import (
	"fmt"
	"math"
	"slices"

	"github.com/blanket-fl/blanket/shared/privacy/amplify"
	"github.com/blanket-fl/blanket/shared/privacy/pld"
	"github.com/blanket-fl/blanket/shared/privacy/rdp"
)

// RDP accounting (accountRDP).
//
// Pair rows. For every PLD row of accountNumerical there is an RDP row of
// the same dominating pair: per round, the Rényi divergence of the pair
// (rdp.PairRDP, exact over its atoms) at every order of rdpOrders, scaled
// by the coordinates(r) coordinates the release changes and by the
// rounds, and summed over the runs (RDP composition, Mironov 2017
// Proposition 1). A dominating pair dominates every Rényi divergence
// (Blackwell), and the amplify clone pairs dominate both orders of the
// neighbours, so each per-round curve is an RDP guarantee of the round
// (replace-one). The subsampled variants of SS-Double/SS-Topk use the
// same subsampled pair as the PLD rows, (βP + (1−β)Q, Q), whose Rényi
// divergence is computed exactly in both orders (its swap included) and
// maximised: it carries the same caveat as the PLD row (Poisson
// coordinates, or FLAME's 2k-coordinate argument). Shuffled check-in needs
// no separate subsampling step: the pair is already the one of the
// randomizer "absent with probability 1 − p, else R(x)" over the whole
// population (amplify.VariationRatio.Subsampled; for the generic
// randomizer this is rdp.TightCheckIn), i.e. the exact Poisson
// subsampling by the check-in rate, tighter than applying a generic
// subsampling theorem (Zhu-Wang) to a shuffle whose population is
// random.
//
// Since the PLD rows compose the same pairs almost exactly (the FFT grid
// adds at most ~1%) and converting RDP to (ε, δ) loses information, the
// RDP row of a pair is never much below its PLD row; it is reported as a
// cross-check and because RDP is the accountant the check-in paper uses.
//
// Check-in rows (all releases shuffled check-in):
//
//   - Theorem 2 of Liew, Hasegawa, Takahashi (Eq. 7, Chernoff Δ = 1/2 as
//     in their Remark 1, the e^{ε0} reading of l~ and Υ) for discrete
//     ε0-LDP randomizers, at the integer orders of rdpOrders. Caveated:
//     as printed it bounds the subsampled shuffle with k participants
//     using the check-in rate instead of k/n, which understates the
//     subsampling rate for k > np (see package rdp, checkin.go).
//   - Approach 2 (their Table 1, row 2) for generic (ε0, δ0)-LDP
//     randomizers, δ0 ≥ 0 (Federated DP-SGD with a Gaussian randomizer):
//     per k participants FMT'21's shuffle bound (Theorem 3.1, or Theorem
//     3.8 for δ0 > 0, whose δ includes (e^ε + 1)(1 + e^{−ε0}/2)·k·δ0),
//     subsampling by k/n (Balle-Barthe-Gaboardi 2018 Theorem 9), the
//     approximate-RDP conversion (rdp.approxDPToRDP) and the binomial
//     mixture of Theorem 1. The slack of every round (the shuffle δ, the
//     k·δ0 terms, the omitted binomial tail) adds to the row's δ; a row
//     whose slack exceeds the target δ is invalid with the reason.
//
// Central Gaussian rows (all releases dp-gaussian): the Gaussian RDP
// α/(2σ²) summed over the rounds (Mironov 2017 Proposition 7).
//
// Conversion. Every curve is converted at the row's δ by the better of
// Balle et al.'s conversion (AISTATS 2020 Theorem 21; check-in Lemma 2)
// and the optimal single-order conversion of Asoodeh et al. (2021;
// rdp.OptimalEpsilon), both valid, so their minimum is.

// rdpOrders is the fixed grid of Rényi orders of every RDP row: 1.25..10
// in steps of 0.25, every integer 11..64, then 72..256 in steps of 8.
func rdpOrders() []float64 {
	var o []float64
	for _, a := range rdp.DefaultOrders() {
		if a <= 256 {
			o = append(o, a)
		}
	}
	return o
}

// rdpIntegerOrders is the integer part of rdpOrders (for bounds stated
// at integer orders only).
func rdpIntegerOrders() []float64 {
	var o []float64
	for _, a := range rdpOrders() {
		if a == math.Floor(a) {
			o = append(o, a)
		}
	}
	return o
}

// rdpEpsilon converts an RDP curve to ε at delta with the better of the
// Balle et al. and the optimal (Asoodeh et al.) conversions.
func rdpEpsilon(c rdp.Curve, delta float64) (float64, error) {
	return rdpEpsilonWindow(c, delta, optimalWindow)
}

// rdpEpsilonWindow is rdpEpsilon with the optimal conversion searched on
// window orders each side of Balle's minimiser (any sub-curve of an RDP
// curve is an RDP curve, so every window gives a valid bound).
func rdpEpsilonWindow(c rdp.Curve, delta float64, window int) (float64, error) {
	eb, ob, err := rdp.BalleEpsilon(c, delta)
	if err != nil {
		return 0, fmt.Errorf("rdp conversion: %w", err)
	}
	// The optimal conversion costs ~10^4 evaluations per order; it is run
	// on the orders near Balle's minimiser (any sub-curve of an RDP curve
	// is an RDP curve, so this is valid, and the optimal conversion's
	// minimiser lies next to Balle's on the measured settings).
	i := slices.Index(c.Orders, ob)
	lo, hi := max(0, i-window), min(len(c.Orders), i+window+1)
	eo, _, err := rdp.OptimalEpsilon(rdp.Curve{Orders: c.Orders[lo:hi], Eps: c.Eps[lo:hi]}, delta)
	if err != nil {
		return 0, fmt.Errorf("rdp conversion: %w", err)
	}
	eps := math.Min(eb, eo)
	if math.IsInf(eps, 1) || math.IsNaN(eps) {
		return 0, outside("the RDP curve is infinite at every order")
	}
	return eps, nil
}

// optimalWindow is how many orders on each side of Balle's minimiser the
// optimal conversion searches.
const optimalWindow = 4

const rdpConversionCite = "RDP composition (Mironov 2017), conversion: min of Balle et al. AISTATS'20 Thm 21 and Asoodeh et al. 2021 (optimal)"

// curveKey identifies a per-coordinate RDP curve in the cache.
type curveKey struct {
	pair *amplify.Pair
	mode subsampleMode
	beta float64
}

// rdpCache memoises per-coordinate curves across rows and runs.
type rdpCache struct {
	pairs  *pairCache
	curves map[curveKey]rdp.Curve
}

// accountRDP returns the RDP rows (see the comment at the top of this
// file), sharing enumerated pairs with the PLD rows through cache.
func accountRDP(runs []run, delta float64, cache *pairCache) []AccountRow {
	rc := &rdpCache{pairs: cache, curves: map[curveKey]rdp.Curve{}}
	orders := rdpOrders()
	var out []AccountRow
	for _, mode := range numericalModes(runs) {
		for _, m := range numericalMethods() {
			if row, ok := accountRDPPair(runs, delta, m, mode, orders, rc); ok {
				out = append(out, row)
			}
		}
	}
	if allProtocol(runs, ProtocolCheckIn) {
		t2, a2 := accountTheorem2(runs, delta), accountApproach2(runs, delta, orders)
		t2.Family, t2.Amplification, t2.Composition = FamilyCheckInThm2, AmplificationShuffleCheckIn, CompositionRDP
		a2.Family, a2.Amplification, a2.Composition = FamilyCheckInApp2, AmplificationShuffleCheckIn, CompositionRDP
		out = append(out, t2, a2)
	}
	if allProtocol(runs, ProtocolCentralGaussian) {
		g := accountGaussianRDP(runs, delta, orders)
		g.Family, g.Amplification, g.Composition = FamilyCentralGaussian, AmplificationNone, CompositionRDP
		out = append(out, g)
	}
	return out
}

// numericalModes lists the subsampling modes the releases call for.
func numericalModes(runs []run) []subsampleMode {
	for _, u := range runs {
		if (u.r.Protocol == ProtocolSSDouble || u.r.Protocol == ProtocolSSTopk) && u.r.K < u.r.D {
			return []subsampleMode{noSubsampling, poissonCoordinates, flameCoordinates}
		}
	}
	return []subsampleMode{noSubsampling}
}

func allProtocol(runs []run, protocol string) bool {
	for _, u := range runs {
		if u.r.Protocol != protocol {
			return false
		}
	}
	return true
}

func roundsSuffix(runs []run) string {
	if totalRounds(runs) > 1 {
		return ", composed over rounds"
	}
	return ""
}

// accountRDPPair is the RDP counterpart of accountPairMethod.
func accountRDPPair(runs []run, delta float64, m numericalMethod, mode subsampleMode, orders []float64, rc *rdpCache) (AccountRow, bool) {
	row, ok := accountRDPPairRow(runs, delta, m, mode, orders, rc)
	row.Family, row.Amplification, row.Composition = m.family, amplificationOf(mode, runs[0].r.Protocol == ProtocolCheckIn), CompositionRDP
	return row, ok
}

func accountRDPPairRow(runs []run, delta float64, m numericalMethod, mode subsampleMode, orders []float64, rc *rdpCache) (AccountRow, bool) {
	method := "RDP " + m.name
	cite := m.cite + "; exact Rényi divergence of the pair; " + rdpConversionCite
	switch mode {
	case poissonCoordinates:
		method += ", subsampled β, all d coordinates"
		cite += "; subsampled pair (Zhu-Dong-Wang 2022), both orders"
	case flameCoordinates:
		method += ", subsampled β, 2k coordinates (FLAME-style)"
		cite += "; subsampled pair (Zhu-Dong-Wang 2022), both orders"
	}
	method += roundsSuffix(runs)
	fail := func(err error) (AccountRow, bool) {
		return AccountRow{Bound: makeBound(method, cite, 0, 0, err)}, true
	}
	mixes, _, caveat, applicable, err := pairSetup(runs, m, mode)
	if !applicable {
		return AccountRow{}, false
	}
	if err != nil {
		return fail(err)
	}
	total := rdp.Curve{Orders: orders, Eps: make([]float64, len(orders))}
	for i, u := range runs {
		n, eps0, _ := shuffleSetting(u.r) // checked by pairSetup
		pair, err := rc.pairs.get(m, u.r, n, eps0, mixes[i])
		if err != nil {
			return fail(err)
		}
		c, err := rc.coordinateCurve(pair, u.r, mode, orders)
		if err != nil {
			return fail(err)
		}
		coords := coordinates(u.r)
		if mode != noSubsampling {
			coords = subsampledCoordinates(u.r, mode)
		}
		w := float64(coords) * float64(u.count)
		for j := range total.Eps {
			total.Eps[j] += w * c.Eps[j]
		}
	}
	eps, err := rdpEpsilon(total, delta)
	return AccountRow{Bound: makeBound(method, cite, eps, delta, err), Caveat: caveat}, true
}

// coordinateCurve returns the RDP curve of one coordinate of one round:
// the pair's, or for the subsampled modes the maximum over both orders of
// the subsampled pair's.
func (rc *rdpCache) coordinateCurve(pair *amplify.Pair, r Release, mode subsampleMode, orders []float64) (rdp.Curve, error) {
	k := curveKey{pair: pair, mode: mode}
	if mode != noSubsampling {
		k.mode = poissonCoordinates // the per-coordinate curve is the same for both subsampled modes
		k.beta = coordinateRate(r)
	}
	if c, ok := rc.curves[k]; ok {
		return c, nil
	}
	var c rdp.Curve
	var err error
	if mode == noSubsampling {
		c, err = pairRDP(pair, orders)
	} else {
		c, err = subsampledPairRDP(pair, k.beta, orders)
	}
	if err != nil {
		return rdp.Curve{}, fmt.Errorf("pair RDP: %w", err)
	}
	rc.curves[k] = c
	return c, nil
}

// subsampledPairRDP is max(D_α(βP+(1−β)Q ‖ Q), D_α(Q ‖ βP+(1−β)Q)) at every
// order: the RDP of the subsampled pair in both orders (the PLD rows
// account the same two orders).
func subsampledPairRDP(pair *amplify.Pair, beta float64, orders []float64) (rdp.Curve, error) {
	logP, err := pld.SubsampleLog(pair.LogP, pair.LogQ, beta)
	if err != nil {
		return rdp.Curve{}, err
	}
	sub := &amplify.Pair{Method: pair.Method + "-subsampled", Relation: pair.Relation, LogP: logP, LogQ: pair.LogQ}
	a, err := pairRDP(sub, orders)
	if err != nil {
		return rdp.Curve{}, err
	}
	b, err := pairRDP(sub.Swap(), orders)
	if err != nil {
		return rdp.Curve{}, err
	}
	for j := range a.Eps {
		a.Eps[j] = math.Max(a.Eps[j], b.Eps[j])
	}
	return a, nil
}

// rdpBins is the loss-grid size of rdp.PairRDPBinned: with the loss range
// of a pair at most 2·MaxLoss, the cell width is at most MaxLoss/2048 and
// the chord error at order α is at most log(1 + (α·s)²/8)/(α−1) per
// coordinate (below 1e-6 relative for MaxLoss ≤ 1 at α ≤ 256 on the
// measured settings; TestRDPBinnedMatchesExact).
const rdpBins = 4096

// pairRDP is the exact rdp.PairRDP for small pairs and its binned upper
// bound for pairs with more atoms than a few cells each.
func pairRDP(p *amplify.Pair, orders []float64) (rdp.Curve, error) {
	if p.Len() <= rdpBins {
		return rdp.PairRDP(p, orders)
	}
	return rdp.PairRDPBinned(p, orders, rdpBins)
}

// theorem2Caveat marks the check-in Theorem 2 row.
const theorem2Caveat = "check-in Theorem 2 as printed bounds the k-participant subsampled shuffle with Girgis et al.'s Lemma 4 at the check-in rate instead of k/n, understating the subsampling rate for k > np; not re-derived here (see package rdp)"

// theorem2Delta is the Chernoff parameter Δ of check-in Theorem 2
// (Remark 1 of the paper uses 1/2).
const theorem2Delta = 0.5

// accountTheorem2 is the check-in Theorem 2 row (every run is a check-in
// release).
func accountTheorem2(runs []run, delta float64) AccountRow {
	method := "RDP check-in Theorem 2 (discrete ε0-LDP, Δ = 1/2)" + roundsSuffix(runs)
	cite := "Liew-Hasegawa-Takahashi, shuffled check-in Thm 2 (Eq. 7, e^{ε0} reading of Lemma 4); " + rdpConversionCite
	fail := func(err error) AccountRow {
		return AccountRow{Bound: makeBound(method, cite, 0, 0, err), Caveat: theorem2Caveat}
	}
	orders := rdpIntegerOrders()
	total := rdp.Curve{Orders: orders, Eps: make([]float64, len(orders))}
	for _, u := range runs {
		r := u.r
		switch {
		case r.Delta0 > 0:
			return fail(outside("Theorem 2 needs a pure ε0-LDP randomizer (delta0 = %g)", r.Delta0))
		case r.Randomizer != RandomizerRGB && r.Randomizer != RandomizerGeneric:
			return fail(outside("Theorem 2 is stated for discrete ε0-LDP randomizers; %q is continuous", r.Randomizer))
		case r.Population < 2 || !(r.CheckInRate > 0):
			return fail(outside("check-in needs the population and the check-in rate"))
		case (1-theorem2Delta)*float64(r.Population)*r.CheckInRate < 1:
			return fail(outside("Theorem 2 needs (1-Δ)·n·p >= 1, got %g", (1-theorem2Delta)*float64(r.Population)*r.CheckInRate))
		}
		c, err := rdp.Theorem2Curve(r.Population, r.CheckInRate, r.Eps0, orders, theorem2Delta)
		if err != nil {
			return fail(fmt.Errorf("theorem 2: %w", err))
		}
		for j := range total.Eps {
			total.Eps[j] += float64(u.count) * c.Eps[j]
		}
	}
	eps, err := rdpEpsilon(total, delta)
	return AccountRow{Bound: makeBound(method, cite, eps, delta, err), Caveat: theorem2Caveat}
}

// approach2Caveat marks Approach 2 rows with δ0 > 0.
const approach2Caveat = "the δ term of FMT'21 Theorem 3.8 for (ε0, δ0)-LDP randomizers, (e^ε + 1)(1 + e^{-ε0}/2)·k·δ0, is reproduced from a reading not checked against the paper's text (see rdp.FMT21ApproxShuffleDP)"

// approach2Splits are the fractions of the target δ tried for the
// per-round shuffle δ (summed over rounds, weighted by the check-in
// rate); the best valid split is reported.
var approach2Splits = []float64{0.02, 0.1, 0.3, 0.6}

// accountApproach2 is the check-in Approach 2 row (every run is a
// check-in release).
func accountApproach2(runs []run, delta float64, orders []float64) AccountRow {
	method := "RDP check-in Approach 2 (generic (ε0, δ0)-LDP)" + roundsSuffix(runs)
	cite := "Liew-Hasegawa-Takahashi Table 1 Approach 2: FMT'21 Thm 3.1/3.8 + Balle-Barthe-Gaboardi'18 Thm 9 + approximate RDP (Kairouz-Oh-Viswanath) + Thm 1; " + rdpConversionCite
	caveat := ""
	rateSum := 0.0
	for _, u := range runs {
		if u.r.Delta0 > 0 {
			caveat = approach2Caveat
		}
		if u.r.Population < 2 || !(u.r.CheckInRate > 0) {
			return AccountRow{Bound: makeBound(method, cite, 0, 0, outside("check-in needs the population and the check-in rate")), Caveat: caveat}
		}
		rateSum += float64(u.count) * u.r.CheckInRate
	}
	best := AccountRow{Bound: makeBound(method, cite, 0, 0, outside("no split of δ was tried")), Caveat: caveat}
	for _, f := range approach2Splits {
		deltaS := f * delta / rateSum
		var total rdp.ApproxCurve
		var err error
		for i, u := range runs {
			var sh rdp.ShuffleDP
			if sh, err = rdp.FMT21ApproxShuffleDP(u.r.Eps0, u.r.Delta0, deltaS); err != nil {
				break
			}
			var ac rdp.ApproxCurve
			if ac, err = rdp.Approach2(u.r.Population, u.r.CheckInRate, orders, sh); err != nil {
				break
			}
			if ac, err = ac.ScaleApprox(u.count); err != nil {
				break
			}
			if i == 0 {
				total = ac
			} else if total, err = rdp.ComposeApprox(total, ac); err != nil {
				break
			}
		}
		if err == nil && !(total.Delta < delta) {
			err = outside("the slack δ %.3g of the rounds (shuffle δ, FMT'21 k·δ0 terms, binomial tail) is not below the target δ %g", total.Delta, delta)
		}
		var eps float64
		if err == nil {
			eps, err = rdpEpsilon(total.Curve, delta-total.Delta)
		}
		if err != nil {
			if !best.Valid {
				best.Bound = makeBound(method, cite, 0, 0, fmt.Errorf("approach 2: %w", err))
			}
			continue
		}
		if !best.Valid || eps < best.Epsilon {
			best.Bound = makeBound(method, cite, eps, delta, nil)
		}
	}
	return best
}

// accountGaussianRDP is the RDP row of central Gaussian releases: the
// curve α·Σ_r 1/(2σ_r²) (Mironov 2017 Proposition 7, sensitivity 1 in
// units of the noise multiplier), converted.
func accountGaussianRDP(runs []run, delta float64, orders []float64) AccountRow {
	const method, cite = "central Gaussian, RDP", "Mironov 2017 Prop. 7; " + rdpConversionCite
	total := rdp.Curve{Orders: orders, Eps: make([]float64, len(orders))}
	for _, u := range runs {
		c, err := rdp.GaussianRDP(u.r.NoiseMultiplier, 1, orders)
		if err != nil {
			return AccountRow{Bound: makeBound(method, cite, 0, 0, err)}
		}
		for j := range total.Eps {
			total.Eps[j] += float64(u.count) * c.Eps[j]
		}
	}
	eps, err := rdpEpsilon(total, delta)
	return AccountRow{Bound: makeBound(method, cite, eps, delta, err)}
}
