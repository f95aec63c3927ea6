package privacy

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/blanket-fl/blanket/shared/internal/check"
)

// AccountRow is one method's central guarantee for the composition of all
// the releases given to Account.
type AccountRow struct {
	Bound
	// Caveat is non-empty when the row's validity rests on an argument of a
	// paper that this package reproduces but has not re-derived: FLAME's
	// Theorems 3-4 combine the subsampling amplification of Lemma 4 with
	// a composition over only the 2k dimensions a replacement can change,
	// and for SS-Topk the dimension choice is data-dependent; Poisson
	// coordinate sampling standing in for exactly-k sampling; check-in
	// Theorem 2 as printed; FMT'21 Theorem 3.8's δ term for (ε0,
	// δ0)-LDP randomizers. Such rows are reported for comparison and
	// never chosen as Tightest.
	Caveat string
	// Family, Amplification and Composition identify the method in
	// structured form (Method is the display name); Proven is Caveat ==
	// "".
	Family        Family
	Amplification Amplification
	Composition   Composition
	Proven        bool
}

// Report is the result of Account: every applicable method's central
// (ε, δ) for the composition of all the releases, side by side.
type Report struct {
	// Delta is the target central δ every valid row meets (Row.Delta <=
	// Delta).
	Delta float64
	// Rounds is the number of releases composed.
	Rounds int
	// Rows lists the methods; rows whose conditions fail have Valid =
	// false and a Reason.
	Rows []AccountRow
	// Tightest is the index in Rows of the smallest ε among valid rows
	// without a Caveat, or -1 if there is none.
	Tightest int
	// TightestAny is the smallest ε among all valid rows, caveated ones
	// included (-1 if none); equal to Tightest when no caveated row wins.
	TightestAny int
}

// Account returns every applicable accountant's central (ε, δ)-DP
// guarantee, against replacement of one user's data (the relation of
// every source paper), for the adaptive composition of all the releases,
// at total central δ = delta. Every release is validated first; an
// invalid release or delta is an error wrapping ErrInvalidParameter.
//
// Methods (each documented where it is computed):
//
//   - closed forms: the papers' per-round bounds (SSSimple, SSDouble,
//     CompareAPES) composed over the rounds by basic composition (each
//     round at δ/T) and by advanced composition (each round at δ/(2T),
//     slack δ/2, at the largest per-round ε);
//   - numerical: per perturbed coordinate, a shuffle dominating pair of
//     package amplify (FMT'21, FMT'23, variation-ratio for Laplace and
//     R_{γ,b}) as a privacy loss distribution (package pld), optionally
//     subsampled, composed over coordinates and rounds by FFT
//     (see accountNumerical);
//   - RDP (see accountRDP): for every PLD pair row, the RDP curve of the
//     same pair (rdp.PairRDP over orders 1.25..256), composed over the
//     coordinates and the rounds by adding RDP, with the same subsampled
//     variants and caveats, converted by the better of Balle et al. 2020
//     and the optimal conversion (Asoodeh et al. 2021); for shuffled
//     check-in this is the tight per-round pair (the check-in rate is
//     Poisson subsampling built into the pair). Shuffled check-in also
//     gets the paper's Theorem 2 row (discrete ε0-LDP, caveated: not a
//     proven bound as printed) and its Approach 2 row for generic
//     (ε0, δ0)-LDP randomizers, the only shuffle row when δ0 > 0
//     (Federated DP-SGD with a Gaussian randomizer): its δ includes the
//     shuffle δ and FMT'21's k·δ0 terms of every round, and it is invalid
//     when they exceed the target δ;
//   - central Gaussian (dp-gaussian releases): exact, by PLD and by RDP;
//   - the local model (no amplification): basic composition of the local
//     guarantees (invalid when a release is SS-Topk, whose reports are not
//     locally private; such sessions get instead the padded shuffle
//     without amplification, ε0 per changed dimension: localTotals.rows),
//     and for SS-Simple and SS-Double with the Gaussian randomizer the
//     exact composition of the Gaussian reports (accountLocalGaussian).
//
// Consecutive identical releases (apart from Round) are composed by
// squaring, so T identical rounds cost O(log T) convolutions.
func Account(releases []Release, delta float64) (Report, error) {
	if len(releases) == 0 {
		return Report{}, invalid("no releases to account")
	}
	if err := check.OpenUnit(ErrInvalidParameter, "delta", delta); err != nil {
		return Report{}, err
	}
	for _, r := range releases {
		if err := r.Validate(); err != nil {
			return Report{}, err
		}
	}
	runs := groupRuns(releases)
	rep := Report{Delta: delta, Rounds: len(releases)}
	rep.Rows = append(rep.Rows, accountClosedForms(runs, delta)...)
	cache := newPairCache()
	rep.Rows = append(rep.Rows, accountNumericalGrid(runs, delta, defaultGridDivisor, cache)...)
	rep.Rows = append(rep.Rows, accountRDP(runs, delta, cache)...)
	rep.Rows = append(rep.Rows, accountGaussian(runs, delta)...)
	rep.Rows = append(rep.Rows, accountSecAgg(runs, delta)...)
	rep.Rows = append(rep.Rows, accountLocal(runs)...)
	rep.Rows = append(rep.Rows, accountLocalGaussian(runs, delta)...)
	finishRows(rep.Rows)
	rep.Tightest, rep.TightestAny = tightest(rep.Rows, delta)
	return rep, nil
}

// tightest returns the index of the smallest valid ε without a caveat,
// and among all valid rows.
func tightest(rows []AccountRow, delta float64) (strict, any int) {
	strict, any = -1, -1
	for i, r := range rows {
		if !r.Valid || !check.Finite(r.Epsilon) || r.Epsilon < 0 || !(r.Delta >= 0 && r.Delta <= delta*(1+1e-9)) {
			continue
		}
		if any < 0 || r.Epsilon < rows[any].Epsilon {
			any = i
		}
		if r.Caveat == "" && (strict < 0 || r.Epsilon < rows[strict].Epsilon) {
			strict = i
		}
	}
	return strict, any
}

// run is a maximal block of consecutive releases that are identical apart
// from their round numbers.
type run struct {
	r     Release
	count int
}

func groupRuns(releases []Release) []run {
	var runs []run
	for _, r := range releases {
		if n := len(runs); n > 0 && sameRelease(runs[n-1].r, r) {
			runs[n-1].count++
			continue
		}
		runs = append(runs, run{r: r, count: 1})
	}
	return runs
}

func sameRelease(a, b Release) bool {
	a.Round, b.Round = 0, 0
	return reflect.DeepEqual(a, b)
}

// totalRounds is the number of releases in runs.
func totalRounds(runs []run) int {
	t := 0
	for _, u := range runs {
		t += u.count
	}
	return t
}

// coordinates returns how many per-coordinate mechanisms a replacement of
// one user's data can change in one round, and whether the coupling
// argument applies (see accountNumerical):
//
//   - SS-Simple, APES: every user reports all d coordinates: d.
//   - S-APES: 2b (APES Proposition 1).
//   - SS-Double: the k coordinates are chosen by the user's randomness,
//     independently of the data, so D and D' can be coupled on the same
//     subset: k coordinates differ. (FLAME Theorem 4 composes over 2k.)
//   - SS-Topk: the choice of the l·k reported coordinates depends on the
//     data, so up to 2lk coordinates differ (a coordinate reported under D
//     but not D' holds a real report in one and a padding dummy in the
//     other; see accountNumerical for why that pair is covered too).
//   - check-in and the local model: the whole report is one mechanism: 1.
func coordinates(r Release) int {
	switch r.Protocol {
	case ProtocolSSSimple, ProtocolAPES:
		return r.D
	case ProtocolSAPES:
		if r.SparseB > 0 {
			return min(2*r.SparseB, r.D)
		}
		return r.D
	case ProtocolSSDouble:
		return r.K
	case ProtocolSSTopk:
		return min(2*r.K*max(r.L, 1), r.D)
	default:
		return 1
	}
}

// localEps returns the local guarantee of one user's whole report in one
// round: the sum of the local budgets of the coordinates it perturbs
// (FLAME: ε_l = k·ε_lk; APES: d·max ε_i; check-in: ε0 of the whole
// report), with δ0 per coordinate summed likewise.
func localEps(r Release) (eps, delta float64) {
	switch r.Protocol {
	case ProtocolAPES, ProtocolSAPES:
		m := slices.Max(r.PersonalEps)
		c := r.D
		if r.Protocol == ProtocolSAPES && r.SparseB > 0 {
			c = min(r.SparseB, r.D)
		}
		return float64(c) * m, float64(c) * r.Delta0
	case ProtocolCheckIn:
		return r.Eps0, r.Delta0
	case ProtocolSSSimple:
		return float64(r.D) * r.Eps0, float64(r.D) * r.Delta0
	default:
		c := r.K * max(r.L, 1)
		return float64(c) * r.Eps0, float64(c) * r.Delta0
	}
}

// accountLocal returns the rows that count no amplification: the local
// model and, when a release is SS-Topk, the padded shuffle without
// amplification (see localTotals.rows).
func accountLocal(runs []run) []AccountRow {
	var t localTotals
	for _, u := range runs {
		t = t.add(u.r, u.count)
	}
	return t.rows()
}

// Names of the rows that count no amplification.
const (
	localMethod = "local model (no shuffler), basic composition"
	localCite   = "LDP + basic composition (Dwork-Roth Thm 3.16)"
	// unamplifiedMethod is SS-Topk's replacement for the local row: the
	// per-dimension worst case over the dimensions a replacement changes.
	unamplifiedMethod = "padded shuffle without amplification, basic composition over the changed dimensions"
	unamplifiedCite   = "per-dimension ε0-DP of the padded, truncated shuffle (docs/privacy.md, \"SS-Topk has no local row\") + basic composition (Dwork-Roth Thm 3.16)"
)

// localTotals accumulates, over a sequence of releases, the guarantees
// that count no amplification.
type localTotals struct {
	// eps, delta: the sum of the reports' local guarantees (localEps).
	eps, delta float64
	// ueps, udelta: the sum of unamplifiedEps.
	ueps, udelta float64
	// topk: some release is SS-Topk, whose reports are not locally
	// private, so the local row is no bound.
	topk bool
	// central: some release is central noise (central Gaussian, secure
	// aggregation): no local guarantee at all.
	central bool
}

// add returns t after count rounds of release r.
func (t localTotals) add(r Release, count int) localTotals {
	if r.Protocol == ProtocolCentralGaussian || r.Protocol == ProtocolSecAgg {
		t.central = true
		return t
	}
	if r.Protocol == ProtocolSSTopk {
		t.topk = true
	}
	e, d := localEps(r)
	t.eps += float64(count) * e
	t.delta += float64(count) * d
	e, d = unamplifiedEps(r)
	t.ueps += float64(count) * e
	t.udelta += float64(count) * d
	return t
}

// rows returns the local row and, when a release is SS-Topk, the
// unamplified padded-shuffle row.
//
// Local row: without any shuffler each report is (ε_l, δ_l)-LDP, so any
// post-processing of a round is (ε_l, δ_l)-DP for replacing one user
// (FLAME Definition 2, APES Lemma 1) and T rounds compose by basic
// composition (Dwork and Roth 2014, Theorem 3.16). It is invalid when a
// release is SS-Topk: an SS-Topk report carries the volunteer's top-k
// indices unperturbed, so it is not LDP at all, and after the relay's
// padding and truncation a replacement can cost up to ε0 in each of 2lk
// dimensions, more than the lk·ε0 the local sum counts (docs/privacy.md,
// "SS-Topk has no local row"; relay/internal/attack
// TestTopkLocalRowAttack measures ε > k·ε0 on the shipped code).
//
// Unamplified row (SS-Topk present): the aggregator's view of a round is,
// given the sampling, a product over dimensions, each dimension's n_p
// messages change by at most one ε0-LDP message of the extended randomizer
// (a report, a dummy, or under truncation a uniformly chosen other
// volunteer's report), so each changed dimension is (ε0, δ0)-DP for the
// replacement and the ≤ min(2lk, d) changed dimensions compose by basic
// composition (docs/privacy.md). Other protocols contribute their local
// guarantee, which bounds the view too.
func (t localTotals) rows() []AccountRow {
	local := func(eps, delta float64, err error) AccountRow {
		if err == nil && delta >= 1 {
			err = outside("total local delta %g >= 1", delta)
		}
		return AccountRow{Bound: makeBound(localMethod, localCite, eps, delta, err), Family: FamilyLocal, Amplification: AmplificationNone, Composition: CompositionBasic}
	}
	if t.central {
		return []AccountRow{local(0, 0, outside("central noise releases (central Gaussian, secure aggregation) have no local guarantee"))}
	}
	if !t.topk {
		return []AccountRow{local(t.eps, t.delta, nil)}
	}
	var err error
	if t.udelta >= 1 {
		err = outside("total delta %g >= 1", t.udelta)
	}
	return []AccountRow{
		local(0, 0, outside("an SS-Topk report is not locally private: its indices are the volunteer's unperturbed top-k, and the relay's padding and truncation let a replacement change up to 2lk dimensions by up to ε0 each (docs/privacy.md, \"SS-Topk has no local row\")")),
		{Bound: makeBound(unamplifiedMethod, unamplifiedCite, t.ueps, t.udelta, err), Family: FamilyLocal, Amplification: AmplificationNone, Composition: CompositionBasic},
	}
}

// unamplifiedEps is the per-round guarantee of the padded shuffle counting
// no amplification: for SS-Topk, ε0 (δ0) in each of the coordinates(r) =
// min(2lk, d) dimensions a replacement can change (docs/privacy.md, "SS-Topk
// has no local row"); for every other protocol its local guarantee
// (localEps), which bounds any post-processing of the reports.
func unamplifiedEps(r Release) (eps, delta float64) {
	if r.Protocol == ProtocolSSTopk {
		c := float64(coordinates(r))
		return c * r.Eps0, c * r.Delta0
	}
	return localEps(r)
}

// errString formats an error for a Reason.
func errString(format string, args ...any) error { return fmt.Errorf(format, args...) }
