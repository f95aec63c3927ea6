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
//     guarantees, and for SS-Simple and SS-Double with the Gaussian
//     randomizer the exact composition of the Gaussian reports
//     (accountLocalGaussian).
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
	rep.Rows = append(rep.Rows, accountLocal(runs))
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

// accountLocal is the local-model baseline: without any shuffler each
// report is (ε_l, δ_l)-LDP, so any post-processing of a round is
// (ε_l, δ_l)-DP for replacing one user (FLAME Definition 2, APES Lemma 1)
// and T rounds compose by basic composition (Dwork and Roth 2014,
// Theorem 3.16).
func accountLocal(runs []run) AccountRow {
	const method, cite = "local model (no shuffler), basic composition", "LDP + basic composition (Dwork-Roth Thm 3.16)"
	var eps, delta float64
	for _, u := range runs {
		if u.r.Protocol == ProtocolCentralGaussian || u.r.Protocol == ProtocolSecAgg {
			return AccountRow{Bound: makeBound(method, cite, 0, 0, outside("central noise releases (central Gaussian, secure aggregation) have no local guarantee")), Family: FamilyLocal, Amplification: AmplificationNone, Composition: CompositionBasic}
		}
		e, d := localEps(u.r)
		eps += float64(u.count) * e
		delta += float64(u.count) * d
	}
	return localRow(eps, delta)
}

// localRow is the local-model row for summed local guarantees.
func localRow(eps, delta float64) AccountRow {
	const method, cite = "local model (no shuffler), basic composition", "LDP + basic composition (Dwork-Roth Thm 3.16)"
	var err error
	if delta >= 1 {
		err = outside("total local delta %g >= 1", delta)
	}
	return AccountRow{Bound: makeBound(method, cite, eps, delta, err), Family: FamilyLocal, Amplification: AmplificationNone, Composition: CompositionBasic}
}

// errString formats an error for a Reason.
func errString(format string, args ...any) error { return fmt.Errorf(format, args...) }
