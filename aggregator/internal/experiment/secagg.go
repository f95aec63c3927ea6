package experiment

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/secagg"
)

// tableSecAgg is the table of the secure-summation method run alone.
const tableSecAgg = "secagg"

// Neighbouring relations a secure-summation run can be calibrated to.
const (
	relationReplaceOne = "replace-one"
	relationAddRemove  = "add-remove"
)

// secaggParams configure the simulated secure-summation method: every
// round each of Pop volunteers checks in with probability Q by its own
// coin, trains locally, and the round's update is the mean that
// shared/secagg releases (clip to L2 Clip, conditional randomized rounding
// to Bits bits, two servers each adding N_Z(0, Sigma^2) per coordinate),
// times ServerLR.
type secaggParams struct {
	Pop      int     // simulated population (0 = the world's users)
	Q        float64 // check-in rate
	Rounds   int     // planned rounds (the calibration composes all of them)
	Clip     float64 // L2 clip C in model units
	Bits     uint    // bits per SumVec entry
	Eps      float64 // target ε over the whole run at Delta (used when Sigma = 0)
	Delta    float64
	Relation string  // relationReplaceOne or relationAddRemove: what Eps is for
	Sigma    float64 // per-server σ in integer units; 0 = calibrate to Eps
	ServerLR float64
	Epochs   int  // local epochs (FLAME's SGD, batch 7, lr 0.1, L2 0.001)
	Prio3    bool // run the real Prio3 pipeline (FLP proofs) instead of the fast path
	// NoiseShares is how many servers add noise: 2 (0 means 2) is the
	// protocol; 1 is the trusted-aggregator counterfactual (the same σ
	// once), which measures what not trusting the aggregator costs. The
	// accounting is the same (it never counts the second server's noise).
	NoiseShares int
	// Attack and Attackers: Attackers volunteers of the population mount
	// Attack (attackFlip or attackEdge; see attackSpec) every round they
	// check in. Simulation of poisoning only (the robust table).
	Attack    string
	Attackers int
}

// noiseShares is NoiseShares with its default.
func (sp secaggParams) noiseShares() int {
	if sp.NoiseShares == 1 {
		return 1
	}
	return 2
}

// defaultSecAggParams are the tuned defaults of the simulation
// (docs/experiments.md, "Secure summation"): 4,000 simulated volunteers
// (each of the embedded digits' 800 shards of 10 held by 5 of them),
// q = 0.05 (about 200 per round), 20 rounds, C = 0.3, 8 bits, σ
// calibrated to ε = 4 at δ = 1e-5 for replace-one over the whole run,
// server learning rate 4.
func defaultSecAggParams() secaggParams {
	return secaggParams{Pop: 4000, Q: 0.05, Rounds: 20, Clip: 0.3, Bits: 8, Eps: 4, Delta: 1e-5,
		Relation: relationReplaceOne, ServerLR: 4, Epochs: 10}
}

// LiveSecAgg are the recommended parameters of the live demo (about 200
// native volunteers with 40 digits each plus about 30 students): every
// connected volunteer takes part in every round (q = 1: no subsampling
// amplification is claimed, so the guarantee does not rest on the coins
// being secret or random), 3 rounds, C = 0.3, 10 bits (sensitivity 1.009
// C instead of 1.085 C at 8 bits), server learning rate 8, σ calibrated
// to replace-one ε = 4 at δ = 1e-5 over the 3 rounds (which at q = 1 is
// the sensitivity-2Δ route of secaggReplaceOne). Simulated by
// `aggregator simulate -protocols secagg -per-user 40 -secagg-pop 230 -secagg-q 1 -secagg-rounds 3 -secagg-clip 0.3 -secagg-bits 10 -secagg-lr 8`
// (docs/experiments.md).
type LiveSecAgg struct {
	Population int
	Q          float64
	Rounds     int
	Clip       float64
	Bits       uint
	ServerLR   float64
	Eps, Delta float64
	// Params are the secagg parameters (Sigma calibrated, MaxReports =
	// Population).
	Params secagg.Params
}

// LiveSecAggDefaults returns the recommended live parameters with σ
// calibrated by CalibrateSecAggSigma (replace-one).
func LiveSecAggDefaults() (LiveSecAgg, error) {
	l := LiveSecAgg{Population: 230, Q: 1, Rounds: 3, Clip: 0.3, Bits: 10, ServerLR: 8, Eps: 4, Delta: 1e-5}
	var err error
	l.Params, err = secaggRoundParams(secaggParams{Q: l.Q, Rounds: l.Rounds, Clip: l.Clip, Bits: l.Bits, Eps: l.Eps, Delta: l.Delta,
		Relation: relationReplaceOne}, logreg.MNIST.NumParams(), l.Population)
	return l, err
}

// SecAggReleases returns the ledger's releases of rounds identical rounds
// of p at check-in rate q with n reports each (see secaggReleases).
func SecAggReleases(p secagg.Params, q float64, n, rounds int) []privacy.Release {
	parts := make([]int, rounds)
	for i := range parts {
		parts[i] = n
	}
	return secaggReleases(p, q, parts)
}

// SecAggReplaceOne is secaggReplaceOne: the replace-one ε at total δ of
// secure-summation releases, and the route that gave it.
func SecAggReplaceOne(rs []privacy.Release, delta float64) (float64, string, error) {
	return secaggReplaceOne(rs, delta)
}

// CalibrateSecAggSigma is calibrateSecAggSigma with relation
// "replace-one" or "add-remove".
func CalibrateSecAggSigma(relation string, eps, delta float64, rounds int, q, sens float64) (float64, error) {
	return calibrateSecAggSigma(relation, eps, delta, rounds, q, sens)
}

// withDefaults fills zero fields from defaultSecAggParams (Sigma = 0
// stays: calibrate; Pop = 0 stays only if the default is 0).
func (sp secaggParams) withDefaults() secaggParams {
	d := defaultSecAggParams()
	if sp.Pop == 0 {
		sp.Pop = d.Pop
	}
	if sp.Q == 0 {
		sp.Q = d.Q
	}
	if sp.Rounds == 0 {
		sp.Rounds = d.Rounds
	}
	if sp.Clip == 0 {
		sp.Clip = d.Clip
	}
	if sp.Bits == 0 {
		sp.Bits = d.Bits
	}
	if sp.Eps == 0 {
		sp.Eps = d.Eps
	}
	if sp.Delta == 0 {
		sp.Delta = d.Delta
	}
	if sp.Relation == "" {
		sp.Relation = d.Relation
	}
	if sp.ServerLR == 0 {
		sp.ServerLR = d.ServerLR
	}
	if sp.Epochs == 0 {
		sp.Epochs = d.Epochs
	}
	return sp
}

// secaggClaim is the run's privacy under both relations.
type secaggClaim struct {
	// AddRemove is privacy.Account's add/remove row for the run's
	// releases at δ: NaN, not applicable (addRemoveEps).
	AddRemove float64
	// ReplaceOne is the smaller of the two replace-one routes of
	// secaggReplaceOne, at total δ.
	ReplaceOne float64
	// Route names the replace-one route that gave ReplaceOne.
	Route string
	// Method is the accountant row's name.
	Method string
}

// secaggReleases are the ledger's releases of a run of rounds rounds: one
// ProtocolSecAgg release per round with the per-server σ, the integer L2
// sensitivity Δ of secagg.Params and the ANNOUNCED check-in rate q (the
// probability of each volunteer's coin, which is what Poisson subsampling
// amplifies; the realized fraction is not a privacy parameter).
func secaggReleases(p secagg.Params, q float64, participants []int) []privacy.Release {
	return dgaussReleases(p.Sigma, p.Sensitivity(), p.Dim, q, participants)
}

// dgaussReleases are the releases of a secure-summation run with
// per-server σ sigma and L2 sensitivity sens of one report (both in the
// integer units the noise is added in: SumVec's grid or PINE's fixed
// point), d coordinates, check-in rate q.
func dgaussReleases(sigma, sens float64, d int, q float64, participants []int) []privacy.Release {
	out := make([]privacy.Release, len(participants))
	for i, n := range participants {
		out[i] = privacy.Release{Round: i + 1, Protocol: privacy.ProtocolSecAgg, Randomizer: privacy.RandomizerDiscreteGaussian,
			D: d, N: max(n, 1), SecAggSigma: sigma, SecAggSensitivity: sens, CheckInRate: q}
	}
	return out
}

// secaggClaimFunc is the claim of a secure-summation run (SumVec or
// PINE): the run's releases (dgaussReleases) accounted by claimSecAgg.
func secaggClaimFunc(sigma, sens float64, d int, sp secaggParams) func(*runResult) claimResult {
	return func(run *runResult) claimResult {
		parts := make([]int, len(run.Rounds))
		for i, rec := range run.Rounds {
			parts[i] = rec.Participants
		}
		c, err := claimSecAgg(dgaussReleases(sigma, sens, d, sp.Q, parts), sp.Delta)
		if err != nil {
			return claimResult{PerEpoch: math.NaN(), Total: math.NaN(), Delta: math.NaN(), Accountant: err.Error()}
		}
		if math.IsNaN(c.AddRemove) { // not applicable: no add/remove ε is claimed
			return claimResult{PerEpoch: math.NaN(), Total: c.ReplaceOne, Delta: sp.Delta,
				Accountant: fmt.Sprintf("replace-one: %s; add/remove: not applicable (privacy.Account: the exact count of accepted reports is released)", c.Route)}
		}
		return claimResult{PerEpoch: math.NaN(), Total: c.ReplaceOne, Delta: sp.Delta, AddRemove: c.AddRemove,
			Accountant: fmt.Sprintf("replace-one: %s; add/remove %.4g: %s", c.Route, c.AddRemove, c.Method)}
	}
}

// tightestEps is the ε of privacy.Account's tightest proven row.
func tightestEps(rs []privacy.Release, delta float64) (float64, string, error) {
	rep, err := privacy.Account(rs, delta)
	if err != nil {
		return 0, "", err
	}
	if rep.Tightest < 0 {
		return 0, "", errors.New("no valid accountant row")
	}
	row := rep.Rows[rep.Tightest]
	return row.Epsilon, row.Method, nil
}

// secaggReplaceOne bounds the run's privacy for REPLACING one volunteer's
// data (participation coin unchanged), the relation of the rest of Blanket
// and of DP-FL's row, at total δ = delta: privacy.Account's tightest proven
// row for secure summation, which is its replace-one row (the better of
// group privacy on the add/remove guarantee and sensitivity 2Δ without
// check-in amplification; shared/privacy/secagg.go) — what the ledger
// charges.
func secaggReplaceOne(rs []privacy.Release, delta float64) (float64, string, error) {
	return tightestEps(rs, delta)
}

// addRemoveEps is privacy.Account's add/remove row for secure summation
// at δ = delta: NaN with the row's reason when it is not applicable, as it
// is for every secure-summation release (the released exact count of
// accepted reports is not covered; shared/privacy/secagg.go), so no
// add/remove ε is claimed.
func addRemoveEps(rs []privacy.Release, delta float64) (float64, string, error) {
	rep, err := privacy.Account(rs, delta)
	if err != nil {
		return 0, "", err
	}
	for _, row := range rep.Rows {
		if row.Family == privacy.FamilySecAggDGauss && strings.Contains(row.Method, "(add/remove)") {
			if !row.Valid {
				return math.NaN(), row.Method + ": " + row.Reason, nil
			}
			return row.Epsilon, row.Method, nil
		}
	}
	return 0, "", errors.New("no add/remove row for secure summation")
}

// calibrateSecAggSigma returns the smallest per-server σ (integer units)
// for which `rounds` rounds at check-in rate q and sensitivity sens meet
// ε <= eps at δ = delta under the given relation, with the accountant's
// calibration helper privacy.CalibrateSecAggSigma:
//
//   - add/remove: CalibrateSecAggSigma(eps, delta, rounds, q, sens);
//   - replace-one: the smaller of the two routes of secaggReplaceOne,
//     each calibrated exactly: group privacy needs add/remove ε/2 at
//     δ' = delta/(1 + e^{ε/2}) (then (1 + e^{ε'})δ' <= delta), and the
//     no-amplification route needs sensitivity 2Δ at q = 1.
//
// The result is certified by construction (the helper evaluates the
// returned σ) and non-increasing in eps.
func calibrateSecAggSigma(relation string, eps, delta float64, rounds int, q, sens float64) (float64, error) {
	switch relation {
	case relationAddRemove:
		return privacy.CalibrateSecAggSigma(eps, delta, rounds, q, sens)
	case relationReplaceOne:
		return privacy.CalibrateSecAggSigmaReplaceOne(eps, delta, rounds, q, sens)
	}
	return 0, fmt.Errorf("unknown relation %q (want %s or %s)", relation, relationReplaceOne, relationAddRemove)
}

// secaggRoundParams returns the secagg.Params of every round: σ either
// given or calibrated (at least 1 integer unit, secagg's minimum).
func secaggRoundParams(sp secaggParams, d, pop int) (secagg.Params, error) {
	p, err := secagg.NewParams(d, sp.Clip, sp.Bits, 0, pop)
	if err != nil {
		return secagg.Params{}, err
	}
	sigma := sp.Sigma
	if sigma == 0 {
		if sigma, err = calibrateSecAggSigma(sp.Relation, sp.Eps, sp.Delta, sp.Rounds, sp.Q, p.Sensitivity()); err != nil {
			return secagg.Params{}, fmt.Errorf("calibrate sigma: %w", err)
		}
		sigma = math.Max(1, sigma)
	}
	return secagg.NewParams(d, sp.Clip, sp.Bits, sigma, pop)
}

// secaggMethod builds the "secagg" method.
func secaggMethod(sp secaggParams, d, worldUsers int, table string) (*method, error) {
	pop := sp.Pop
	if pop == 0 {
		pop = worldUsers
	}
	if !(sp.Q > 0 && sp.Q <= 1) {
		return nil, fmt.Errorf("secagg: check-in rate %v outside (0, 1]", sp.Q)
	}
	if sp.Rounds < 1 || sp.Epochs < 1 || !(sp.ServerLR > 0) {
		return nil, fmt.Errorf("secagg: rounds %d, local epochs %d, server lr %v", sp.Rounds, sp.Epochs, sp.ServerLR)
	}
	p, err := secaggRoundParams(sp, d, pop)
	if err != nil {
		return nil, fmt.Errorf("secagg: %w", err)
	}
	path := "fast path (same quantization, integer sum, the servers' discrete Gaussian noise and unsharding; FLP proof skipped)"
	if sp.Prio3 {
		path = "real Prio3 pipeline (Shard, Prepare/Combine/Finish, AddNoise, Unshard)"
	}
	shares := sp.noiseShares()
	atk := attackSpec{Kind: sp.Attack, Count: sp.Attackers, Pop: pop}
	if sp.Prio3 && (shares != 2 || atk.Kind != attackNone) {
		return nil, errors.New("secagg: the real Prio3 pipeline runs the protocol only (two noise shares, no attackers)")
	}
	target := "sigma given"
	if sp.Sigma == 0 {
		target = fmt.Sprintf("sigma calibrated to eps %g (%s) at delta %g over %d rounds", sp.Eps, sp.Relation, sp.Delta, sp.Rounds)
	}
	m := &method{
		id: "secagg", name: "SecAgg", table: table, train: logreg.FLAMEConfig(sp.Epochs, 0.1), serverLR: sp.ServerLR,
		checkInP: sp.Q, pop: pop, rounds: sp.Rounds,
		note: fmt.Sprintf("population %d (shards of %d users), check-in q = %.4g, L2 clip %g, %d bits (sensitivity %.1f units), per-server discrete Gaussian sigma %.1f units (%.3f x sensitivity; %s), %s, server lr %g, %d local epochs; %s",
			pop, worldUsers, sp.Q, sp.Clip, sp.Bits, p.Sensitivity(), p.Sigma, p.Sigma/p.Sensitivity(), target, noiseSharesNote(shares), sp.ServerLR, sp.Epochs, path),
	}
	m.aggregate = func(ctx context.Context, w *world, in roundInput) (roundOutput, error) {
		var res *secagg.Result
		var err error
		if sp.Prio3 {
			res, err = prio3SecAggSum(ctx, w, p, uint64(in.round+1), in.users, in.updates)
		} else {
			res, err = fastSecAggSumWith(ctx, w, p, uint64(in.round+1), in.users, in.updates, shares, atk)
		}
		if err != nil {
			return roundOutput{}, err
		}
		return roundOutput{delta: res.Mean}, nil
	}
	m.claim = secaggClaimFunc(p.Sigma, p.Sensitivity(), p.Dim, sp)
	return m, nil
}

// claimSecAgg accounts a secure-summation run: add/remove is
// privacy.Account's tightest row of the releases; replace-one is
// secaggReplaceOne of the same releases.
func claimSecAgg(rs []privacy.Release, delta float64) (secaggClaim, error) {
	var c secaggClaim
	var err error
	if c.AddRemove, c.Method, err = addRemoveEps(rs, delta); err != nil {
		return c, err
	}
	if c.ReplaceOne, c.Route, err = secaggReplaceOne(rs, delta); err != nil {
		return c, err
	}
	return c, nil
}

// Seeded streams of a simulated secure-summation round: volunteer u's
// Shard (quantization first, then Prio3's nonce and randomness) draws
// from mix(seed, tagClient, round, u); the helper's noise from
// mix(seed, tagServer, round, 1), the leader's from mix(seed, tagServer,
// round, 0), the servers' verify key from mix(seed, tagServer, round, 2).
func secaggStreams(seed, round uint64) (leader, helper, key noise.Source) {
	return noise.NewSeeded(mix(seed, tagServer, round, 0)), noise.NewSeeded(mix(seed, tagServer, round, 1)),
		noise.NewSeeded(mix(seed, tagServer, round, 2))
}

// prio3SecAggSum runs one round through the real shared/secagg pipeline:
// every volunteer's Shard, the helper's and leader's preparation with the
// FLP validity proof, both servers' AddNoise and the leader's Unshard. An
// honest report that fails verification is an error.
func prio3SecAggSum(ctx context.Context, w *world, p secagg.Params, round uint64, users []int, updates [][]float64) (*secagg.Result, error) {
	r, err := secagg.NewRound(p, round)
	if err != nil {
		return nil, err
	}
	leaderShares := make([][]byte, len(updates))
	helperShares := make([][]byte, len(updates))
	err = w.forEach(ctx, len(updates), func(_, i int) error {
		src := noise.NewSeeded(mix(w.seed, tagClient, round, uint64(users[i])))
		var err error
		leaderShares[i], helperShares[i], err = r.Shard(updates[i], src)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("shard: %w", err)
	}
	lsrc, hsrc, ksrc := secaggStreams(w.seed, round)
	key := make([]byte, secagg.VerifyKeySize)
	for i := range key {
		key[i] = byte(ksrc.Uint64())
	}
	helper, err := secagg.NewHelper(r, key)
	if err != nil {
		return nil, err
	}
	leader, err := secagg.NewLeader(r, key)
	if err != nil {
		return nil, err
	}
	helper.SetWorkers(w.workers)
	leader.SetWorkers(w.workers)
	prepShares, rej, err := helper.Prepare(helperShares)
	if err != nil || len(rej) > 0 {
		return nil, fmt.Errorf("helper prepare: %d honest reports rejected (%v), err %v", len(rej), rej, err)
	}
	if rej, err = leader.Prepare(leaderShares); err != nil || len(rej) > 0 {
		return nil, fmt.Errorf("leader prepare: %d honest reports rejected (%v), err %v", len(rej), rej, err)
	}
	prepMsgs, rej, err := leader.Combine(prepShares)
	if err != nil || len(rej) > 0 {
		return nil, fmt.Errorf("leader combine: %d honest reports rejected (%v), err %v", len(rej), rej, err)
	}
	if rej, err = helper.Finish(prepMsgs); err != nil || len(rej) > 0 {
		return nil, fmt.Errorf("helper finish: %d honest reports rejected (%v), err %v", len(rej), rej, err)
	}
	ha, err := helper.AggregateShare()
	if err != nil {
		return nil, err
	}
	if p.Sigma > 0 { // Sigma = 0 only in tests of exact recovery
		if err := ha.AddNoise(hsrc); err != nil {
			return nil, err
		}
	}
	hmsg, err := ha.MarshalBinary()
	if err != nil {
		return nil, err
	}
	la, err := leader.AggregateShare()
	if err != nil {
		return nil, err
	}
	if p.Sigma > 0 {
		if err := la.AddNoise(lsrc); err != nil {
			return nil, err
		}
	}
	return leader.Unshard(la, hmsg)
}

// fastSecAggSum is the simulation's fast path of prio3SecAggSum: the
// same computation on the same seeded streams without the FLP proof and
// the field arithmetic. Each volunteer's update is quantized by
// secagg.Quantize (the first draws of its Shard stream, so the same q);
// the entries q_i + B are summed in int64; each server adds NoiseOffset +
// K per coordinate with K drawn by secagg.DiscreteGaussianNoise (the
// sampler of secagg's AddNoise, from the same stream, in coordinate
// order; the helper's first); the offsets n·B + 2·NoiseOffset are removed
// and the mean is Sum/(n·Scale), as Unshard does, which refuses a
// coordinate outside [0, 2^62) before the offsets are removed
// (ErrNoiseOverflow) exactly as this does. TestFastPathMatchesPrio3
// checks equality of Count, Sum and Mean on the same seeds. What it skips
// proves nothing about honest volunteers' privacy (the proof only rejects
// malformed reports).
func fastSecAggSum(ctx context.Context, w *world, p secagg.Params, round uint64, users []int, updates [][]float64) (*secagg.Result, error) {
	return fastSecAggSumWith(ctx, w, p, round, users, updates, 2, attackSpec{})
}

// fastSecAggSumWith is fastSecAggSum with noiseShares servers adding
// noise (2, the protocol; 1, the leader only: the trusted-aggregator
// counterfactual) and the malicious volunteers of atk: a flipping one
// quantizes -u scaled to norm C (the report is honest-looking); an edge
// one sends q_j = -B for u_j > 0 and B+1 otherwise, the edge of the
// range [0, 2^Bits) that SumVec's proof accepts (shared/secagg's
// TestProofBoundsEntriesNotNorm runs such a report through the real
// pipeline: accepted and summed).
func fastSecAggSumWith(ctx context.Context, w *world, p secagg.Params, round uint64, users []int, updates [][]float64, noiseShares int, atk attackSpec) (*secagg.Result, error) {
	if len(updates) == 0 {
		return nil, errors.New("secagg: no reports")
	}
	b := p.EntryBound()
	qs := make([][]int64, len(updates))
	err := w.forEach(ctx, len(updates), func(_, i int) error {
		src := noise.NewSeeded(mix(w.seed, tagClient, round, uint64(users[i])))
		x := updates[i]
		bad := atk.is(users[i])
		if bad && atk.Kind == attackEdge {
			q := make([]int64, len(x))
			for j, v := range x {
				q[j] = b + 1
				if v > 0 {
					q[j] = -b
				}
			}
			qs[i] = q
			return nil
		}
		if bad {
			x = flipped(x, p.Clip)
		}
		var err error
		qs[i], err = secagg.Quantize(p, x, src)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("quantize: %w", err)
	}
	total := make([]int64, p.Dim)
	for _, q := range qs {
		for j, v := range q {
			total[j] += v + b
		}
	}
	lsrc, hsrc, _ := secaggStreams(w.seed, round)
	shares := 0
	if p.Sigma > 0 {
		for k, src := range []noise.Source{hsrc, lsrc} {
			if noiseShares == 1 && k == 0 {
				continue
			}
			shares++
			z, err := secagg.DiscreteGaussianNoise(p.Sigma, p.Dim, src)
			if err != nil {
				return nil, err
			}
			off := int64(p.NoiseOffset)
			for j := range total {
				total[j] += off + z[j]
			}
		}
	}
	n := len(updates)
	res := &secagg.Result{Count: n, NoiseShares: shares, Sum: make([]int64, p.Dim), Mean: make([]float64, p.Dim)}
	offset := int64(n)*b + int64(shares)*int64(p.NoiseOffset)
	denom := float64(n) * p.Scale
	for j, u := range total {
		if u < 0 || u >= 1<<62 {
			return nil, fmt.Errorf("secagg: coordinate %d is %d: %w", j, u, secagg.ErrNoiseOverflow)
		}
		res.Sum[j] = u - offset
		res.Mean[j] = float64(res.Sum[j]) / denom
	}
	return res, nil
}
