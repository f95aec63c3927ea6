package experiment

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/blanket-fl/blanket/aggregator/internal/params"
	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/pine"
	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/secagg"
	"github.com/blanket-fl/blanket/shared/wire"
)

// tableSecAgg is the table of the secure-summation method run alone.
const tableSecAgg = "secagg"

// secaggParams configure the simulated secure summation, which is the
// product's (PINE, docs/pine.md and docs/secagg.md): every round each of
// Pop volunteers checks in with probability Q by its own coin (Q = 1, the
// product's: every volunteer every round), trains locally, clips its update
// to L2 norm Clip, encodes and shards it with PINE, both servers verify
// the L2-norm proof and add N_Z(0, σ²) per coordinate to their aggregate
// shares, and the model moves by ServerLR times the unsharded mean. The
// PINE instance, σ and the charge come from the round spec the aggregator
// would announce for these choices (secaggSpec).
type secaggParams struct {
	Pop int // simulated population (0 = defaultSecAggParams' 400)
	// PerUser is the training examples each volunteer holds: 0 deals the
	// training set evenly to the Pop volunteers, as make run does
	// (scripts/runlocal: 8,000 digits over 400 volunteers, 20 each).
	PerUser  int
	Q        float64 // check-in rate
	Rounds   int     // planned rounds (the calibration composes all of them)
	Clip     float64 // L2 clip C in model units
	Eps      float64 // target ε over the whole run, replace-one, at Delta (used when Sigma = 0)
	Delta    float64
	Sigma    float64 // per-server σ in PINE's fixed-point units; 0 = calibrate to Eps
	ServerLR float64
	Epochs   int // local epochs (FLAME's SGD, batch 7, lr 0.1, L2 0.001: the volunteers' own)
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
	// Replicate allows a population larger than the training part's
	// shards: volunteer u then trains on the shard of user u mod the
	// shards, so each row is trained by several volunteers and the ε is
	// per volunteer, not per row. Without it such a run is refused.
	Replicate bool
	// Fast computes each round's aggregate without PINE's cryptography
	// (pineSumFast: bit-identical for honest volunteers); refused with
	// attackers.
	Fast bool
	// Features names the fixed feature map every volunteer applies to
	// each example before training (shared/features.Parse: "identity",
	// the product's, "pool2", "scatter", ...); the model's d is the
	// map's output dimension times the classes, plus the biases.
	Features string
	// Opt is the server's optimiser of the noisy mean (post-processing;
	// serveropt.go), sgd by default, the product's.
	Opt serverOptParams
	// LocalLR is the volunteers' local SGD learning rate (0 means 0.1,
	// the volunteers' own).
	LocalLR float64
}

// noiseShares is NoiseShares with its default.
func (sp secaggParams) noiseShares() int {
	if sp.NoiseShares == 1 {
		return 1
	}
	return 2
}

// defaultSecAggParams are `make run`'s secure-summation settings
// (scripts/runlocal with its defaults and the aggregator it starts): 400
// volunteers sharing the training set (20 digits each on the embedded
// digits), every one in every round (-check-in 1), 5 rounds, σ calibrated
// to replace-one ε = 4 at δ = 1e-5 over the 5 rounds, the round spec's
// clip and server learning rate (roundspec.DefaultSecAggClip,
// DefaultSecAggLR), the volunteers' 10 local epochs at local lr 0.1, the
// identity feature map and server SGD.
func defaultSecAggParams() secaggParams {
	return secaggParams{Pop: 400, Q: 1, Rounds: 5, Clip: roundspec.DefaultSecAggClip, Eps: 4, Delta: 1e-5,
		ServerLR: roundspec.DefaultSecAggLR, Epochs: 10, LocalLR: defaultLocalLR, Opt: serverOptParams{}.withDefaults()}
}

// withDefaults fills zero fields from defaultSecAggParams (Sigma = 0 and
// PerUser = 0 stay: calibrate, and deal the training set evenly).
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
	if sp.Eps == 0 {
		sp.Eps = d.Eps
	}
	if sp.Delta == 0 {
		sp.Delta = d.Delta
	}
	if sp.ServerLR == 0 {
		sp.ServerLR = d.ServerLR
	}
	if sp.Epochs == 0 {
		sp.Epochs = d.Epochs
	}
	if sp.LocalLR == 0 {
		sp.LocalLR = defaultLocalLR
	}
	sp.Opt = sp.Opt.withDefaults()
	return sp
}

// defaultLocalLR is the volunteers' local SGD learning rate
// (logreg.FLAMEConfig's, as shared/client trains).
const defaultLocalLR = 0.1

// settingsNote describes the non-default settings of a run: the feature
// map, the server optimiser and the local learning rate.
func (sp secaggParams) settingsNote() string {
	f := sp.Features
	if f == "" {
		f = "identity"
	}
	return fmt.Sprintf("features %s, %s, local lr %g", f, sp.Opt, sp.LocalLR)
}

// serverStep is the method's server step for sp.Opt (nil for sgd, the
// runner's own global += lr * delta).
func (sp secaggParams) serverStep(lr float64) func() func(global, delta []float64) {
	if sp.Opt.Kind == optSGD || sp.Opt.Kind == "" {
		return nil
	}
	return func() func(global, delta []float64) { return newServerOpt(sp.Opt, lr).step }
}

// perVolunteer is the examples each volunteer holds for a training set of
// trainLen examples: PerUser, or the set dealt evenly to the population.
func (sp secaggParams) perVolunteer(trainLen int) int {
	if sp.PerUser > 0 {
		return sp.PerUser
	}
	return max(1, trainLen/max(sp.Pop, 1))
}

// SecAggDefaults are the experiment runner's secure-summation defaults,
// `make run`'s (defaultSecAggParams), as the aggregator would announce
// them for the embedded digits (d = 7,850).
type SecAggDefaults struct {
	Population int
	Q          float64
	Rounds     int
	Clip       float64
	ServerLR   float64
	Eps, Delta float64
	// Spec is the round spec of every round (σ calibrated by the
	// aggregator's params.SecAggSigma); Params is its secagg.Params.
	Spec   *roundspec.Spec
	Params secagg.Params
}

// MakeRunSecAgg returns the runner's secure-summation defaults with the
// round spec the aggregator derives for them (secaggSpec).
func MakeRunSecAgg() (SecAggDefaults, error) {
	sp := defaultSecAggParams()
	spec, _, err := secaggSpec(sp, logreg.MNISTParams, sp.Pop)
	if err != nil {
		return SecAggDefaults{}, err
	}
	p, err := spec.SecAgg()
	if err != nil {
		return SecAggDefaults{}, err
	}
	return SecAggDefaults{Population: sp.Pop, Q: sp.Q, Rounds: sp.Rounds, Clip: sp.Clip, ServerLR: sp.ServerLR,
		Eps: sp.Eps, Delta: sp.Delta, Spec: spec, Params: p}, nil
}

// SecAggReplaceOne is secaggReplaceOne: the replace-one ε at total δ of
// secure-summation releases, and the accountant row that gave it.
func SecAggReplaceOne(rs []privacy.Release, delta float64) (float64, string, error) {
	return secaggReplaceOne(rs, delta)
}

// secaggSpec returns the round spec the aggregator announces for secure
// summation at sp over a population of pop volunteers, and its server
// learning rate, through the aggregator's own code path (aggregator
// main.go): params.SecAggSigma calibrates each server's σ (PINE
// fixed-point units) so that sp.Rounds rounds at check-in rate sp.Q meet
// replace-one ε <= sp.Eps at δ = sp.Delta in privacy.Account, the ledger's
// accountant (unless sp.Sigma gives σ), and params.Build and roundspec.New
// derive the round (secagg.NewPineParams: PINE's fixed point and L2 norm
// bound from d and the clip, pine.ForBlanket). The field arithmetic is
// sized for pop reports.
func secaggSpec(sp secaggParams, d, pop int) (*roundspec.Spec, float64, error) {
	if !(sp.Q > 0 && sp.Q <= 1) {
		return nil, 0, fmt.Errorf("check-in rate %v outside (0, 1]", sp.Q)
	}
	n := max(1, int(math.Round(sp.Q*float64(pop))))
	c := params.Choice{Protocol: wire.ProtocolSecAgg.String(), Randomizer: wire.RandomizerLaplace.String(), Clip: sp.Clip, CheckIn: sp.Q, Quota: pop, ServerLR: sp.ServerLR, Sigma: sp.Sigma}
	if c.Sigma == 0 {
		s, err := params.SecAggSigma(d, n, c, sp.Rounds, sp.Eps, sp.Delta)
		if err != nil {
			return nil, 0, err
		}
		c.Sigma = s
	}
	wp, lr, err := params.Build(d, n, c)
	if err != nil {
		return nil, 0, err
	}
	spec, err := roundspec.New(wp)
	if err != nil {
		return nil, 0, err
	}
	return spec, lr, nil
}

// secaggReleases are the ledger's releases of a run: the spec's Release
// of every round with the round's participants (roundspec.Spec.Release:
// one server's σ, PINE's norm bound as the sensitivity, the announced
// check-in rate).
func secaggReleases(spec *roundspec.Spec, participants []int) []privacy.Release {
	out := make([]privacy.Release, len(participants))
	for i, n := range participants {
		out[i] = spec.Release(i+1, n, 0)
	}
	return out
}

// secaggClaimFunc is the claim of a secure-summation run: the run's
// releases (secaggReleases) accounted by claimSecAgg.
func secaggClaimFunc(spec *roundspec.Spec, delta float64) func(*runResult) claimResult {
	return func(run *runResult) claimResult {
		parts := make([]int, len(run.Rounds))
		for i, rec := range run.Rounds {
			parts[i] = rec.Participants
		}
		c, err := claimSecAgg(secaggReleases(spec, parts), delta)
		if err != nil {
			return claimResult{PerEpoch: math.NaN(), Total: math.NaN(), Delta: math.NaN(), Accountant: err.Error()}
		}
		if math.IsNaN(c.AddRemove) { // not applicable: no add/remove ε is claimed
			return claimResult{PerEpoch: math.NaN(), Total: c.ReplaceOne, Delta: delta,
				Accountant: fmt.Sprintf("replace-one: %s; add/remove: not applicable (privacy.Account: the exact count of accepted reports is released)", c.Route)}
		}
		return claimResult{PerEpoch: math.NaN(), Total: c.ReplaceOne, Delta: delta, AddRemove: c.AddRemove,
			Accountant: fmt.Sprintf("replace-one: %s; add/remove %.4g: %s", c.Route, c.AddRemove, c.Method)}
	}
}

// secaggClaim is the run's privacy under both relations.
type secaggClaim struct {
	// AddRemove is privacy.Account's add/remove row for the run's
	// releases at δ: NaN, not applicable (addRemoveEps).
	AddRemove float64
	// ReplaceOne is the ledger's charge (secaggReplaceOne), at total δ.
	ReplaceOne float64
	// Route names the accountant row that gave ReplaceOne.
	Route string
	// Method is the add/remove row's name.
	Method string
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
// charges (shared/ledger composes the same releases and takes
// the same row).
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

// claimSecAgg accounts a secure-summation run: add/remove is
// privacy.Account's add/remove row of the releases (not applicable);
// replace-one is secaggReplaceOne of the same releases.
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

// secaggRun is a secure-summation run's PINE instance, per-server σ and
// sensitivity (fixed-point units), from its round spec.
type secaggRun struct {
	spec  *roundspec.Spec
	pn    *pine.Pine
	sigma float64
	sens  float64
	lr    float64
}

// newSecAggRun derives the run's round spec (secaggSpec) and the PINE
// instance of its rounds (roundspec.Spec.SecAggRound's, the one the
// volunteers and both servers use).
func newSecAggRun(sp secaggParams, d, pop int) (*secaggRun, error) {
	spec, lr, err := secaggSpec(sp, d, pop)
	if err != nil {
		return nil, err
	}
	r, err := spec.SecAggRound(1)
	if err != nil {
		return nil, err
	}
	p, err := spec.SecAgg()
	if err != nil {
		return nil, err
	}
	if r.Pine() == nil {
		return nil, errors.New("the round spec's secure summation is not PINE")
	}
	return &secaggRun{spec: spec, pn: r.Pine(), sigma: p.Sigma, sens: p.Sensitivity(), lr: lr}, nil
}

// secaggMethod builds the "secagg" method (PINE, the product's secure
// summation) over a population of pop volunteers.
func secaggMethod(sp secaggParams, d, pop int, table string) (*method, error) {
	if sp.Rounds < 1 || sp.Epochs < 1 || !(sp.ServerLR > 0) || !(sp.LocalLR > 0) {
		return nil, fmt.Errorf("secagg: rounds %d, local epochs %d, server lr %v, local lr %v", sp.Rounds, sp.Epochs, sp.ServerLR, sp.LocalLR)
	}
	if err := sp.Opt.validate(); err != nil {
		return nil, fmt.Errorf("secagg: %w", err)
	}
	sr, err := newSecAggRun(sp, d, pop)
	if err != nil {
		return nil, fmt.Errorf("secagg: %w", err)
	}
	p := sr.pn
	target := "sigma given"
	if sp.Sigma == 0 {
		target = fmt.Sprintf("sigma calibrated by the aggregator's params.SecAggSigma to replace-one eps %g at delta %g over %d rounds", sp.Eps, sp.Delta, sp.Rounds)
	}
	shares := sp.noiseShares()
	atk := attackSpec{Kind: sp.Attack, Count: sp.Attackers, Pop: pop}
	m := &method{
		id: "secagg", name: "PINE", table: table, train: logreg.FLAMEConfig(sp.Epochs, sp.LocalLR), serverLR: sr.lr,
		newStep: sp.serverStep(sr.lr), checkInP: sp.Q, pop: pop, replicate: sp.Replicate, rounds: sp.Rounds,
		note: fmt.Sprintf("%d volunteers, check-in q = %.4g, d = %d, L2 clip %g, PINE ForBlanket (num_frac_bits %d, l2_norm_bound %.0f units = sensitivity %.5f model units = %.5f C), per-server discrete Gaussian sigma %.1f units (%.3f x sensitivity; %s), %s, server lr %g, %d local epochs, %s; real shared/pine pipeline (Shard, both servers' PrepInit/PrepSharesToPrep/PrepNext, AggShare, noise on each aggregate share, Unshard)",
			pop, sp.Q, d, sp.Clip, p.Config().NumFracBits, sr.sens, sr.sens/p.Scale(), sr.sens/p.Scale()/sp.Clip, sr.sigma, sr.sigma/sr.sens, target, noiseSharesNote(shares), sr.lr, sp.Epochs, sp.settingsNote()),
	}
	if sp.Fast && sp.Attackers > 0 {
		return nil, errors.New("secagg: -secagg-fast computes honest volunteers' sums only; attackers need the real pipeline")
	}
	if sp.Fast {
		m.note = strings.Replace(m.note, "real shared/pine pipeline (Shard, both servers' PrepInit/PrepSharesToPrep/PrepNext, AggShare, noise on each aggregate share, Unshard)",
			"-secagg-fast: the sum of PINE's encodings of the clipped updates (what the real pipeline outputs for honest volunteers, bit for bit), noise on each aggregate share, Unshard", 1)
	}
	m.aggregate = func(ctx context.Context, w *world, in roundInput) (roundOutput, error) {
		if sp.Fast {
			res, err := pineSumFast(ctx, w, p, sp.Clip, sr.sigma, shares, uint64(in.round+1), in.updates)
			if err != nil {
				return roundOutput{}, err
			}
			return roundOutput{delta: res.Mean, rejected: res.Rejected}, nil
		}
		res, err := pineSum(ctx, w, p, sp.Clip, sr.sigma, shares, uint64(in.round+1), in.users, in.updates, atk)
		if err != nil {
			return roundOutput{}, err
		}
		return roundOutput{delta: res.Mean, rejected: res.Rejected}, nil
	}
	m.claim = secaggClaimFunc(sr.spec, sp.Delta)
	return m, nil
}

// secaggNPID is the non-private reference of secure summation's
// settings (-protocols secagg-np).
const secaggNPID = "secagg-np"

// secaggNPMethod is the non-private reference of a secure-summation run:
// the same population, feature map, rounds, local training, L2 clip C,
// server learning rate and server optimiser, without the noise (and
// without PINE's encoding): the server moves by the exact mean of the
// clipped updates. The gap to the PINE row is what the privacy noise
// costs at these settings. It claims no privacy.
func secaggNPMethod(sp secaggParams, d, pop int) (*method, error) {
	if sp.Rounds < 1 || sp.Epochs < 1 || !(sp.LocalLR > 0) || !(sp.ServerLR > 0) || !(sp.Clip > 0) {
		return nil, fmt.Errorf("secagg-np: rounds %d, local epochs %d, local lr %v, server lr %v, clip %v", sp.Rounds, sp.Epochs, sp.LocalLR, sp.ServerLR, sp.Clip)
	}
	if err := sp.Opt.validate(); err != nil {
		return nil, fmt.Errorf("secagg-np: %w", err)
	}
	clip := sp.Clip
	return &method{
		id: secaggNPID, name: "non-private", table: tableSecAgg, train: logreg.FLAMEConfig(sp.Epochs, sp.LocalLR), serverLR: sp.ServerLR,
		newStep: sp.serverStep(sp.ServerLR), checkInP: sp.Q, pop: pop, replicate: sp.Replicate, rounds: sp.Rounds,
		note: fmt.Sprintf("non-private reference: %d volunteers, check-in q = %.4g, d = %d, exact mean of the updates clipped to L2 norm %g, no noise, server lr %g, %d local epochs, %s",
			pop, sp.Q, d, sp.Clip, sp.ServerLR, sp.Epochs, sp.settingsNote()),
		aggregate: func(ctx context.Context, w *world, in roundInput) (roundOutput, error) {
			clipped := roundInput{round: in.round, users: in.users, updates: make([][]float64, len(in.updates))}
			for i, u := range in.updates {
				clipped.updates[i] = clipL2(u, clip)
			}
			return plainMean(ctx, w, clipped)
		},
		claim: claimNone,
	}, nil
}

// Seeded streams of a simulated secure-summation round: volunteer u's
// Shard draws from mix(seed, tagClient, round, u); the helper's noise
// from mix(seed, tagServer, round, 1), the leader's from mix(seed,
// tagServer, round, 0), the servers' verify key from mix(seed, tagServer,
// round, 2).
func secaggStreams(seed, round uint64) (leader, helper, key noise.Source) {
	return noise.NewSeeded(mix(seed, tagServer, round, 0)), noise.NewSeeded(mix(seed, tagServer, round, 1)),
		noise.NewSeeded(mix(seed, tagServer, round, 2))
}
