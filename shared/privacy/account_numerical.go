package privacy

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/blanket-fl/blanket/shared/privacy/amplify"
	"github.com/blanket-fl/blanket/shared/privacy/pld"
)

// Numerical accounting of the shuffle (accountNumerical).
//
// Per coordinate. Every perturbed coordinate of a round is shuffled among
// the reports of that coordinate, and package amplify gives a dominating
// pair (P, Q) for the shuffle of n reports of an ε0-LDP randomizer against
// replacement of one user's report, valid for both orders of the
// neighbours: FMT'21 (Theorem 3.2), FMT'23 (= Wang et al.'s generic
// variation-ratio pair) and the variation-ratio pairs of the Laplace
// mechanism on [0, 1] and of R_{γ,b}.
//
// Which n. SS-Simple and APES shuffle the N real reports of each
// coordinate. SS-Double and SS-Topk pad every coordinate to n_p messages,
// the padding dummies being samples of the randomizer's blanket
// distribution ω = inf_x R(x)/γ (FLAME Algorithm 3). The population of the
// pair is n_p, because a dummy is indistinguishable, for the clone
// argument, from the report of a user with a fictitious input ⊥ under the
// extended randomizer R'(⊥) = ω: (i) R' is still ε0-LDP, since
// ω ≥ inf_x R(x) ≥ e^{-ε0} R(x) and ω ≤ R(x)/γ ≤ e^{ε0} R(x) (γ ≥ e^{-ε0}
// for every ε0-LDP randomizer, as inf_x R(x) ≥ e^{-ε0} R(x0) integrates to
// γ ≥ e^{-ε0}); (ii) the clone decompositions of FMT'21/FMT'23 need only
// R'(x) ≥ e^{-ε0}·max(R'(x0), R'(x1)) for every other message's input x,
// which (i) gives for x = ⊥ as well; (iii) for the variation-ratio pairs,
// TV(R(x), ω) ≤ 1 − ∫min(R(x), ω) ≤ 1 − ∫inf_x R(x) = 1 − γ, which is the
// β of LaplaceVR (1 − e^{-ε0/2}) and RGammaBVR (1 − γ), and the p- and
// q-ratios are at most e^{ε0} by (i). So the n_p messages of a coordinate
// are the shuffled reports of n_p users of the ε0-LDP randomizer R', the
// dummies having input ⊥, and the pair at n = n_p dominates. (If fewer
// than n_p messages were delivered the count is public and the pair at
// the realized count applies; Release.NP is the realized padding.)
// Unpadded SS-Double has a random per-coordinate population; it is not
// accounted numerically.
//
// Coordinates. A replacement of one user's data changes coordinates(r)
// coordinate mechanisms: d for SS-Simple and APES, 2b for S-APES, k for
// SS-Double and 2lk for SS-Topk. For SS-Double the k-subset is drawn from
// the user's own randomness independently of the data, so D and D' are
// coupled on the same subset: conditioned on it, exactly k coordinates
// differ, each dominated by (P, Q) (a coordinate not in the subset holds a
// dummy under both), and a mixture over the subset of dominated pairs is
// dominated by the worst (joint convexity of the hockey-stick divergence).
// For SS-Topk the subset depends on the data; under D and D' the user's
// message in a coordinate of the symmetric difference is a real report in
// one and a dummy in the other, again a neighbouring pair for R' by (i),
// so 2lk coordinates differ. FLAME Theorem 4 composes over 2k with
// subsampling amplification; that variant is reported too, with a caveat
// (see flameCaveat): the pair subsampled with rate β = lk/d by
// pld.SubsampleLog (Zhu, Dong, Wang AISTATS 2022, subsampling of dominating
// pairs: (βP + (1−β)Q, Q) and its swap, both orders accounted) composed
// over 2k coordinates.
//
// Shuffled check-in (Liew et al.): each of the population's clients takes
// part with probability p and absentees send nothing; the variation-ratio
// parameters of that randomizer are those of the base one with β scaled
// by p (amplify.VariationRatio.Subsampled), over the whole population.
//
// Composition. Per coordinate the pair's PLD (pld.FromLogPair with
// ConnectDots, Doroshenko et al. PETS 2022) is composed over the
// coordinates and the rounds by FFT (Koskela et al. AISTATS 2020; products
// of dominating pairs dominate adaptive compositions, Zhu et al. Theorem
// 10). A run of T identical rounds costs O(log T) convolutions.
//
// Grid width. All PLDs of one method share h = clamp(L/256, 1e-6, 1e-2)
// where L is the smallest per-coordinate maximal loss of the runs (ε0 for
// the generic pairs, ln(1 + β(e^{ε0} − 1)) when subsampled): the
// per-coordinate PLD then has at least a few hundred grid points, and the
// ConnectDots bias after m compositions stays far below the rounding of
// the printed ε (measured on FLAME's SS-Topk setting over 12 rounds:
// h/4 changes every row by less than 6e-4 relative; TestAccountGridConverged
// checks h/2 within 1%). A single shuffle (one coordinate, one round) needs
// no grid: the pair's exact ε is used (amplify.Mixture.Epsilon).

// subsampleMode selects how SS-Double/SS-Topk coordinate sampling is
// accounted.
type subsampleMode int

const (
	// noSubsampling: the coupled argument, coordinates(r) unsubsampled
	// coordinates (rigorous for exact-k sampling).
	noSubsampling subsampleMode = iota
	// poissonCoordinates: every one of the d coordinates is a
	// β-subsampled shuffle; their product is the mechanism exactly when
	// each coordinate is sampled independently with probability β.
	poissonCoordinates
	// flameCoordinates: FLAME Theorem 4's structure, 2k β-subsampled
	// coordinates.
	flameCoordinates
)

// poissonCaveat marks the all-coordinates subsampled rows.
const poissonCaveat = "valid when each coordinate is sampled independently with probability β = k/d (Poisson); with exactly k coordinates (FLAME's K_r^β) the coordinates are dependent and product accounting can be optimistic (cf. Chua et al. 2024, shuffled vs Poisson batches)"

// numericalMethod is one family of shuffle pairs.
type numericalMethod struct {
	name, cite string
	family     Family
	// mixture returns the pair's structured form for release r at
	// population n and per-coordinate ε0, or an error if the method does
	// not apply to r.
	mixture func(r Release, n int, eps0 float64) (*amplify.Mixture, error)
	// checkin: the method applies to check-in rounds (variation-ratio
	// only).
	checkin bool
}

var errNotApplicable = errors.New("not applicable")

func numericalMethods() []numericalMethod {
	vr := func(f func(r Release, eps0 float64) (amplify.VariationRatio, error)) func(Release, int, float64) (*amplify.Mixture, error) {
		return func(r Release, n int, eps0 float64) (*amplify.Mixture, error) {
			v, err := f(r, eps0)
			if err != nil {
				return nil, err
			}
			if r.Protocol == ProtocolCheckIn {
				if v, err = v.Subsampled(r.CheckInRate); err != nil {
					return nil, err
				}
			}
			return amplify.NewVariationRatio(n, v)
		}
	}
	return []numericalMethod{
		{
			name: "FMT'21 clones", cite: "Feldman-McMillan-Talwar FOCS'21 Thm 3.2", family: FamilyFMT21,
			mixture: func(r Release, n int, eps0 float64) (*amplify.Mixture, error) {
				return amplify.FMT21(n, eps0)
			},
		},
		{
			name: "FMT'23 clones (generic ε0-LDP)", cite: "Feldman-McMillan-Talwar SODA'23 / Wang et al. VLDB'24 generic", family: FamilyFMT23,
			mixture: vr(func(r Release, eps0 float64) (amplify.VariationRatio, error) { return amplify.GenericVR(eps0) }),
			checkin: true,
		},
		{
			name: "variation-ratio (Laplace)", cite: "Wang et al. VLDB'24, Laplace on [0,1]", family: FamilyVRLaplace,
			mixture: vr(func(r Release, eps0 float64) (amplify.VariationRatio, error) {
				if r.Randomizer != RandomizerLaplace {
					return amplify.VariationRatio{}, errNotApplicable
				}
				return amplify.LaplaceVR(eps0)
			}),
			checkin: true,
		},
		{
			name: "variation-ratio (R_{γ,b})", cite: "Wang et al. VLDB'24, privacy-blanket randomizer", family: FamilyVRRGB,
			mixture: vr(func(r Release, eps0 float64) (amplify.VariationRatio, error) {
				if r.Randomizer != RandomizerRGB || r.Buckets < 2 {
					return amplify.VariationRatio{}, errNotApplicable
				}
				g, err := rgbGamma(eps0, r.Buckets)
				if err != nil {
					return amplify.VariationRatio{}, err
				}
				return amplify.RGammaBVR(g, r.Buckets)
			}),
			checkin: true,
		},
	}
}

// shuffleSetting returns the per-coordinate population and ε0 of a
// release, or an error if it is not a shuffle release the pairs cover.
func shuffleSetting(r Release) (n int, eps0 float64, err error) {
	if r.Delta0 > 0 {
		return 0, 0, outside("the shuffle pairs assume pure ε0-LDP reports (delta0 = %g)", r.Delta0)
	}
	switch r.Protocol {
	case ProtocolSSSimple:
		return r.N, r.Eps0, nil
	case ProtocolAPES, ProtocolSAPES:
		// Clip-Laplace users with budgets ε_i: every cross ratio
		// R_i(x)/R_j(x') is at most e^{max(ε_i, ε_j)} (the exact neighbor
		// divergence clipLaplaceNeighborDivergence is ≤ max(ε_i, ε_j)
		// because ln((e^x − 1)/x) increases), so all reports are
		// ε*-LDP for ε* = max ε_i in the cross sense the clone
		// decomposition needs, and the generic pairs at ε* apply.
		return r.N, slices.Max(r.PersonalEps), nil
	case ProtocolSSDouble, ProtocolSSTopk:
		if r.K == r.D {
			return r.N, r.Eps0, nil
		}
		if r.NP < 2 {
			return 0, 0, outside("unpadded %s: the per-coordinate population is random; pad with n_p", r.Protocol)
		}
		return r.NP, r.Eps0, nil
	case ProtocolCheckIn:
		if r.Population < 2 || !(r.CheckInRate > 0) {
			return 0, 0, outside("check-in needs the population and the check-in rate")
		}
		return r.Population, r.Eps0, nil
	default:
		return 0, 0, outside("protocol %q has no shuffle", r.Protocol)
	}
}

// defaultGridDivisor sets the grid width h = L/defaultGridDivisor (see
// the package comment above).
const defaultGridDivisor = 256

// accountNumerical returns, per numerical method, the PLD-composed
// guarantee over all the runs; for SS-Double/SS-Topk rounds also the
// subsampled variants (caveated).
func accountNumerical(runs []run, delta float64) []AccountRow {
	return accountNumericalGrid(runs, delta, defaultGridDivisor, newPairCache())
}

// pairKey identifies the enumerated shuffle pair of one method for one
// release: everything numericalMethod.mixture reads.
type pairKey struct {
	method, randomizer string
	n, buckets         int
	eps0, checkInRate  float64
	checkIn            bool
}

// pairCache holds the enumerated pairs shared by the PLD and RDP rows, so
// each distinct (method, release) pair is built once per Account call.
type pairCache struct{ pairs map[pairKey]*amplify.Pair }

func newPairCache() *pairCache { return &pairCache{pairs: map[pairKey]*amplify.Pair{}} }

// get returns the pair of method m for release r at population n, ε0
// eps0, built from mix on first use.
func (c *pairCache) get(m numericalMethod, r Release, n int, eps0 float64, mix *amplify.Mixture) (*amplify.Pair, error) {
	k := pairKey{method: m.name, randomizer: r.Randomizer, n: n, buckets: r.Buckets, eps0: eps0, checkIn: r.Protocol == ProtocolCheckIn}
	if k.checkIn {
		k.checkInRate = r.CheckInRate
	}
	if p, ok := c.pairs[k]; ok {
		return p, nil
	}
	p, err := mix.Pair(amplify.PairOptions{})
	if err != nil {
		return nil, fmt.Errorf("shuffle pair: %w", err)
	}
	c.pairs[k] = p
	return p, nil
}

func accountNumericalGrid(runs []run, delta, gridDivisor float64, cache *pairCache) []AccountRow {
	var out []AccountRow
	anySub := false
	for _, u := range runs {
		if (u.r.Protocol == ProtocolSSDouble || u.r.Protocol == ProtocolSSTopk) && u.r.K < u.r.D {
			anySub = true
		}
	}
	modes := []subsampleMode{noSubsampling}
	if anySub {
		modes = append(modes, poissonCoordinates, flameCoordinates)
	}
	for _, m := range numericalMethods() {
		for _, mode := range modes {
			if row, applicable := accountPairMethod(runs, delta, m, mode, gridDivisor, cache); applicable {
				out = append(out, row)
			}
		}
	}
	return out
}

// accountPairMethod composes method m over all runs. applicable is false
// when the method does not apply to the releases at all (wrong
// randomizer, no shuffle), so that the row is omitted rather than listed
// as invalid. cache holds the enumerated pairs.
func accountPairMethod(runs []run, delta float64, m numericalMethod, mode subsampleMode, gridDivisor float64, cache *pairCache) (AccountRow, bool) {
	row, ok := accountPairMethodRow(runs, delta, m, mode, gridDivisor, cache)
	row.Family, row.Amplification = m.family, amplificationOf(mode, runs[0].r.Protocol == ProtocolCheckIn)
	if row.Composition == "" {
		row.Composition = CompositionPLD
	}
	return row, ok
}

func accountPairMethodRow(runs []run, delta float64, m numericalMethod, mode subsampleMode, gridDivisor float64, cache *pairCache) (row AccountRow, applicable bool) {
	method := "PLD " + m.name
	cite := m.cite + "; PLD/FFT composition (Koskela et al. 2020, connect-the-dots)"
	switch mode {
	case poissonCoordinates:
		method += ", subsampled β, all d coordinates"
		cite += "; subsampled pair (Zhu-Dong-Wang 2022)"
	case flameCoordinates:
		method += ", subsampled β, 2k coordinates (FLAME-style)"
		cite += "; subsampled pair (Zhu-Dong-Wang 2022)"
	}
	if totalRounds(runs) > 1 {
		method += ", composed over rounds"
	}
	fail := func(err error) (AccountRow, bool) {
		return AccountRow{Bound: makeBound(method, cite, 0, 0, err)}, true
	}
	mixes, minLoss, caveat, applicable, err := pairSetup(runs, m, mode)
	if !applicable {
		return AccountRow{}, false
	}
	if err != nil {
		return fail(err)
	}
	if len(runs) == 1 && runs[0].count == 1 && coordinates(runs[0].r) == 1 && mode == noSubsampling {
		// A single shuffle: the pair's exact ε by summation over the
		// binomial support (amplify.Mixture.Epsilon, an upper bound to
		// 1e-9 relative), no grid needed.
		eps, err := mixes[0].Epsilon(delta)
		return AccountRow{Bound: makeBound(method, m.cite+"; exact hockey-stick divergence of the pair", eps, delta, err), Composition: CompositionExact}, true
	}
	h := math.Min(1e-2, math.Max(1e-6, minLoss/gridDivisor))
	// Runs whose rounds have the same per-round PLD (same pair, same
	// composed coordinates and rate; e.g. padded rounds that differ only
	// in the realized n) are composed together: the product of dominating
	// pairs does not depend on their order, so T such rounds cost one
	// SelfCompose(T) instead of T compositions.
	type group struct {
		r     Release
		pair  *amplify.Pair
		count int
	}
	type groupKey struct {
		pair          *amplify.Pair
		coords, subCo int
		rate          float64
	}
	var groups []*group
	index := map[groupKey]*group{}
	for i, u := range runs {
		n, eps0, _ := shuffleSetting(u.r) // checked above
		pair, err := cache.get(m, u.r, n, eps0, mixes[i])
		if err != nil {
			return fail(err)
		}
		k := groupKey{pair: pair, coords: coordinates(u.r)}
		if mode != noSubsampling {
			k.subCo, k.rate = subsampledCoordinates(u.r, mode), coordinateRate(u.r)
		}
		if g, ok := index[k]; ok {
			g.count += u.count
			continue
		}
		g := &group{r: u.r, pair: pair, count: u.count}
		index[k] = g
		groups = append(groups, g)
	}
	var total *pld.PLD
	for _, g := range groups {
		p, err := runPLD(g.r, g.pair, h, mode, g.count)
		if err != nil {
			return fail(err)
		}
		if total == nil {
			total = p
		} else if total, err = total.Compose(p); err != nil {
			return fail(err)
		}
	}
	eps, err := total.Epsilon(delta)
	if err == nil && math.IsInf(eps, 1) {
		err = outside("delta %g is below the PLD's infinite-loss mass", delta)
	}
	return AccountRow{Bound: makeBound(method, cite, eps, delta, err), Caveat: caveat}, true
}

// pairSetup builds the structured pair of method m for every run and
// returns them with the smallest per-coordinate maximal loss (after
// subsampling, for the grid width) and the caveat the mode carries.
// applicable is false when the method does not apply to the releases at
// all (wrong randomizer, no shuffle), so that its rows are omitted rather
// than listed as invalid; err is why an applicable method fails.
func pairSetup(runs []run, m numericalMethod, mode subsampleMode) (mixes []*amplify.Mixture, minLoss float64, caveat string, applicable bool, err error) {
	mixes = make([]*amplify.Mixture, len(runs))
	minLoss = math.Inf(1)
	for i, u := range runs {
		if u.r.Protocol == ProtocolCheckIn && !m.checkin {
			return nil, 0, "", false, nil
		}
		n, eps0, err := shuffleSetting(u.r)
		if err != nil {
			if u.r.Protocol == ProtocolLocal || u.r.Protocol == ProtocolCentralGaussian || u.r.Protocol == ProtocolSecAgg {
				return nil, 0, "", false, nil
			}
			return nil, 0, "", true, err
		}
		mix, err := m.mixture(u.r, n, eps0)
		if errors.Is(err, errNotApplicable) {
			return nil, 0, "", false, nil
		}
		if err != nil {
			return nil, 0, "", true, err
		}
		mixes[i] = mix
		L := mix.MaxLoss()
		if mode != noSubsampling {
			if !(u.r.Protocol == ProtocolSSDouble || u.r.Protocol == ProtocolSSTopk) || u.r.K == u.r.D {
				return nil, 0, "", true, outside("subsampled accounting applies only to SS-Double/SS-Topk rounds with k < d")
			}
			L = math.Log1p(coordinateRate(u.r) * math.Expm1(L))
			caveat = flameCaveat
			if mode == poissonCoordinates {
				caveat = poissonCaveat
			}
			if u.r.Protocol == ProtocolSSTopk {
				caveat += topkCaveat
			}
		}
		minLoss = math.Min(minLoss, L)
	}
	return mixes, minLoss, caveat, true, nil
}

// coordinateRate is β = lk/d, the rate at which SS-Double/SS-Topk sample a
// coordinate.
func coordinateRate(r Release) float64 {
	return float64(r.K*max(r.L, 1)) / float64(r.D)
}

// subsampledCoordinates is how many β-subsampled coordinates the
// subsampled modes compose: all d (Poisson) or 2lk (FLAME Theorem 4).
func subsampledCoordinates(r Release, mode subsampleMode) int {
	if mode == flameCoordinates {
		return min(2*r.K*max(r.L, 1), r.D)
	}
	return r.D
}

// runPLD returns the PLD of count identical rounds of release r, whose
// per-coordinate shuffle is dominated by pair.
func runPLD(r Release, pair *amplify.Pair, h float64, mode subsampleMode, count int) (*pld.PLD, error) {
	opt := pld.Options{Width: h, Method: pld.ConnectDots, BothOrdersDominated: true}
	logP := pair.LogP
	coords := coordinates(r)
	if mode != noSubsampling {
		var err error
		if logP, err = pld.SubsampleLog(pair.LogP, pair.LogQ, coordinateRate(r)); err != nil {
			return nil, fmt.Errorf("subsampling: %w", err)
		}
		opt.BothOrdersDominated = false
		coords = subsampledCoordinates(r, mode)
	}
	per, err := pld.FromLogPair(logP, pair.LogQ, opt)
	if err != nil {
		return nil, fmt.Errorf("pld: %w", err)
	}
	if per, err = per.SelfCompose(coords); err != nil {
		return nil, fmt.Errorf("composing %d coordinates: %w", coords, err)
	}
	if count > 1 {
		if per, err = per.SelfCompose(count); err != nil {
			return nil, fmt.Errorf("composing %d rounds: %w", count, err)
		}
	}
	return per, nil
}
