package experiment

import (
	"fmt"
	"math"
	"slices"

	"github.com/blanket-fl/blanket/shared/privacy"
)

// claimResult is the central privacy a run claims: per epoch (every user
// takes part at most once, the unit FLAME and APES report) and over the whole
// run, at central delta Delta, with the accountant that gave it.
type claimResult struct {
	PerEpoch   float64 `json:"epsilon_per_epoch"`
	Total      float64 `json:"epsilon_run"`
	Delta      float64 `json:"delta"`
	Accountant string  `json:"accountant"`
	// Caveated is the tighter epsilon of a method whose proof Blanket does
	// not have (FLAME's own composition), 0 when there is none.
	Caveated float64 `json:"caveated_epsilon,omitempty"`
	// AddRemove is, for secure summation, the accountant's ε over the
	// run for add/remove one volunteer under Poisson check-in (Total is
	// replace-one, the relation of every other row); 0 otherwise.
	AddRemove float64 `json:"epsilon_add_remove,omitempty"`
}

func claimNone(*runResult) claimResult {
	return claimResult{PerEpoch: math.Inf(1), Total: math.Inf(1), Delta: math.NaN(), Accountant: "no privacy"}
}

// claimReleases accounts a run with privacy.Account, the tightest valid
// method without caveat (privacy.Report.Tightest). When a caveated method
// (FLAME's own composition of subsampling over 2k dimensions, which Blanket
// reproduces but cannot prove) is tighter, the accountant text shows it for
// comparison with the papers.
//
// With disjoint groups in turn (FLAME's schedule) a user takes part once per
// epoch, in the rounds g, g+G, g+2G, ... of its group g: the per-epoch claim
// is one round's, and the run's claim composes the rounds of one group
// (every group's rounds are alike; group 0 ran first and longest). With
// shuffled check-in any user may take part in any round, so the run's claim
// composes every round, and there is no epoch.
func claimReleases(delta float64, release func(run *runResult, rec roundRecord) privacy.Release) func(*runResult) claimResult {
	return func(run *runResult) claimResult {
		bad := func(msg string) claimResult {
			return claimResult{PerEpoch: math.NaN(), Total: math.NaN(), Delta: math.NaN(), Accountant: msg}
		}
		checkIn := run.Rounds[0].CheckInRate > 0
		groups := 1
		if !checkIn && run.Users < run.Pop {
			groups = run.Pop / run.Users
		}
		var user []privacy.Release
		for i, rec := range run.Rounds {
			if checkIn || i%groups == 0 {
				user = append(user, release(run, rec))
			}
		}
		// A local randomizer with delta0 > 0 (the Gaussian baselines) can
		// never be accounted below the sum of its local deltas: account
		// those runs at twice that sum instead of the table's target.
		local := 0.0
		for _, r := range user {
			k := r.K
			if r.Protocol == privacy.ProtocolSSSimple || r.Protocol == privacy.ProtocolLocal && r.K == 0 {
				k = r.D
			}
			local += float64(k) * r.Delta0
		}
		delta = max(delta, 2*local)
		total, err := privacy.Account(user, delta)
		if err != nil {
			return bad(err.Error())
		}
		if total.Tightest < 0 {
			return bad("no valid bound")
		}
		t := total.Rows[total.Tightest]
		c := claimResult{PerEpoch: math.NaN(), Total: t.Epsilon, Delta: delta, Accountant: t.Method}
		if !checkIn {
			epoch, err := privacy.Account(user[:1], delta)
			if err != nil || epoch.Tightest < 0 {
				return bad(fmt.Sprintf("per-epoch accounting failed: %v", err))
			}
			c.PerEpoch = epoch.Rows[epoch.Tightest].Epsilon
		}
		if total.TightestAny >= 0 && total.TightestAny != total.Tightest {
			a := total.Rows[total.TightestAny]
			c.Accountant += fmt.Sprintf("; caveated %s: %.4g", a.Method, a.Epsilon)
			c.Caveated = a.Epsilon
		}
		return c
	}
}

// dpflRelease: the central Gaussian of DP-FL at noise multiplier
// sigma/sensitivity.
func dpflRelease(d int, multiplier float64) func(*runResult, roundRecord) privacy.Release {
	return func(run *runResult, rec roundRecord) privacy.Release {
		return privacy.Release{Round: rec.Round, Protocol: privacy.ProtocolCentralGaussian, Randomizer: privacy.RandomizerGaussian,
			D: d, K: d, N: rec.Participants, NoiseMultiplier: multiplier}
	}
}

// checkInRelease: one shuffled check-in round of a vector randomizer that is
// (eps0, delta0)-LDP for the whole report.
func checkInRelease(d, pop int, randomizerName string, eps0, delta0 float64) func(*runResult, roundRecord) privacy.Release {
	return func(run *runResult, rec roundRecord) privacy.Release {
		return privacy.Release{Round: rec.Round, Protocol: privacy.ProtocolCheckIn, Randomizer: randomizerName, Eps0: eps0, Delta0: delta0,
			D: d, K: d, N: rec.Participants, Population: pop, CheckInRate: rec.CheckInRate}
	}
}

// apesRelease: one APES-family round with the participants' personalized
// per-dimension budgets (shuffled apart from the values), or, without
// shuffler, the local model at the largest budget.
func apesRelease(d int, protocol, randomizerName string, sparseB int, budgets func([]int) []float64) func(*runResult, roundRecord) privacy.Release {
	return func(run *runResult, rec roundRecord) privacy.Release {
		users := make([]int, rec.Participants)
		for i := range users {
			users[i] = i
		}
		eps := budgets(users)
		r := privacy.Release{Round: rec.Round, Protocol: protocol, Randomizer: randomizerName, D: d, K: d, N: rec.Participants}
		if protocol == privacy.ProtocolLocal {
			r.Eps0 = slices.Max(eps)
		} else {
			r.PersonalEps, r.SparseB = eps, sparseB
		}
		return r
	}
}
