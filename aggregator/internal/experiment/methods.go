package experiment

import (
	"context"
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/mechanism"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/randomizer"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/wire"
)

// roundInput is what a method sees in one round: the users that took part
// and their local updates (trained - global).
type roundInput struct {
	round   int
	users   []int
	updates [][]float64
}

// roundOutput is the aggregated update the server adds to the global model
// (after multiplying by the method's server learning rate) and what the
// round released, for the accountant.
type roundOutput struct {
	delta []float64
	// np is the realized padding size of a padded shuffle round (0 when
	// the method does not pad).
	np int
	// raised is set when the relay had to raise n_p (OverflowRaise).
	raised bool
	// truncated counts the real entries the relay dropped from
	// overflowing dimensions (OverflowTruncate).
	truncated int
	// rejected counts the reports the servers rejected, by reason
	// (secure summation with PINE).
	rejected map[string]int
}

// method is one row of a comparison table.
type method struct {
	id    string // flag name, e.g. "ss-topk"
	name  string
	table string
	// note explains the method in the table's footnotes.
	note string
	// train is the local training configuration.
	train logreg.TrainConfig
	// serverLR multiplies the aggregated update (FLAME's code scales
	// SS-Topk's estimate by d/k: "enlarge the learning rate when Top-k is
	// applied").
	serverLR float64
	// newStep, when set, returns a run's server step (global += f(delta),
	// with its own state: secure summation's -secagg-opt) instead of
	// global += serverLR * delta.
	newStep func() func(global, delta []float64)
	// checkInP > 0 selects shuffled check-in: each user of the whole
	// population takes part in a round with probability checkInP by its own
	// coin; otherwise rounds take disjoint groups of Users in turn.
	checkInP float64
	// pop is the simulated check-in population (0 = the world's users);
	// volunteer u trains on the shard of user u mod len(w.users), which
	// run refuses unless replicate is set (-secagg-replicate).
	pop       int
	replicate bool
	// rounds overrides the run's round count when > 0.
	rounds int
	// world, when set, is the partition the method trains on instead of
	// the run's (secure summation's population of make run's shares).
	world *world
	// aggregate turns one round's updates into the model delta.
	aggregate func(ctx context.Context, w *world, in roundInput) (roundOutput, error)
	// claim computes the central privacy the run claims (see claims.go).
	claim func(run *runResult) claimResult
}

// flameParams are FLAME's experimental settings (FLAME, "Evaluations"; the
// authors' code for what the paper leaves out), scaled to the run's n.
type flameParams struct {
	EpsL    float64 // epsilon_l of one report (78.5: 0.01 per coordinate for SS-Simple)
	C       float64 // per-coordinate clip (0.01)
	Beta    float64 // k/d (1/50)
	NPRatio float64 // n/n_p (3)
	DPClip  float64 // L2 clip of DP-FL (0.886)
	DPEps   float64 // DP-FL's central epsilon per epoch (0.24, SS-Double/Topk's claim)
	Delta   float64 // central delta (5e-6)
	Nu      float64 // SS-Topk index privacy target; 0 = strongest allowed by n_p (Theorem 5)
	// DPMultiplier, when > 0, fixes DP-FL's noise multiplier sigma/(2 DPClip)
	// instead of calibrating it to (DPEps, Delta) per round (the
	// equal-epsilon table calibrates the whole run instead).
	DPMultiplier float64
}

func defaultFLAMEParams() flameParams {
	return flameParams{EpsL: 78.5, C: 0.01, Beta: 1.0 / 50, NPRatio: 3, DPClip: 0.886, DPEps: 0.24, Delta: 5e-6}
}

// flameMethods builds FLAME's comparison (Figure 5): NP-FL, DP-FL, LDP-FL
// (Gaussian and Laplace), SS-Simple, SS-Double and SS-Topk, for rounds of n
// users.
func flameMethods(p flameParams, d, n int, train logreg.TrainConfig) ([]*method, error) {
	k := int(math.Round(p.Beta * float64(d)))
	if k < 1 || k > d {
		return nil, fmt.Errorf("beta %v gives k = %d for d = %d", p.Beta, k, d)
	}
	np := int(math.Ceil(float64(n)/p.NPRatio - 1e-9))
	_, l, err := mechanism.TopkNu(n, np, d, k)
	if err != nil {
		return nil, fmt.Errorf("ss-topk groups: %w", err)
	}
	if p.Nu > 0 {
		if l, err = mechanism.TopkL(p.Nu, d, k); err != nil {
			return nil, fmt.Errorf("ss-topk groups for nu = %v: %w", p.Nu, err)
		}
	}
	laplace := mechanism.AffineFactory(randomizer.NewLaplace)
	perCoordDelta := 1e-3 / float64(d)
	gauss := func(eps float64) (randomizer.Affine, error) { return randomizer.NewGaussian(eps, perCoordDelta) }

	var ms []*method
	ms = append(ms, &method{
		id: "np-fl", name: "NP-FL", table: tableFLAME, train: train, serverLR: 1,
		note:      "federated averaging of raw updates, no clipping, no noise",
		aggregate: plainMean,
		claim:     claimNone,
	})
	ms = append(ms, dpFL(p, d, train))
	for _, c := range []struct {
		id, name, note string
		cfg            mechanism.FLAMEConfig
	}{
		{id: "ldp-fl-gauss", name: "LDP-FL (Gaussian)", note: fmt.Sprintf("Gaussian per coordinate at (eps_l/d, %.1e), no shuffler", perCoordDelta),
			cfg: mechanism.FLAMEConfig{Protocol: mechanism.SSSimple, D: d, EpsL: p.EpsL, C: p.C, NewRandomizer: gauss}},
		{id: "ldp-fl-laplace", name: "LDP-FL (Laplace)", note: "Laplace per coordinate at eps_l/d, no shuffler",
			cfg: mechanism.FLAMEConfig{Protocol: mechanism.SSSimple, D: d, EpsL: p.EpsL, C: p.C, NewRandomizer: laplace}},
	} {
		m, err := ldpMethod(c.id, c.name, c.note, c.cfg, train)
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	// The shuffled protocols are built exactly as the aggregator announces
	// them (roundspec.Build and roundspec.New): width-1 messages, the
	// protocol's overflow policy, the bounded randomizer.
	for _, c := range []struct {
		id, name, note string
		opts           roundspec.Options
	}{
		{id: "ss-simple", name: "SS-Simple", note: "Laplace at eps_l/d on all d coordinates, one per message, shuffled",
			opts: roundspec.Options{Protocol: wire.ProtocolSSSimple, NP: n}},
		{id: "ss-double", name: "SS-Double", note: fmt.Sprintf("k = %d sampled coordinates at eps_l/k, one per message, padded to n_p >= %d, shuffled", k, np),
			opts: roundspec.Options{Protocol: wire.ProtocolSSDouble, K: k, NP: np}},
		{id: "ss-topk", name: "SS-Topk", note: fmt.Sprintf("top k = %d at eps_l/k among k(l-1) decoys, l = %d, one per message, padded to n_p = %d (overflow truncated), shuffled; server lr d/k as FLAME's code", k, l, np),
			opts: roundspec.Options{Protocol: wire.ProtocolSSTopk, K: k, L: l, NP: np}},
	} {
		o := c.opts
		o.EpsL, o.Clip, o.MinBatch = p.EpsL, p.C, 1
		params, lr, err := roundspec.Build(d, n, o)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		spec, err := roundspec.New(params)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		m, err := shuffleMethod(c.id, c.name, c.note, spec, train, p.Delta)
		if err != nil {
			return nil, err
		}
		m.serverLR = lr
		ms = append(ms, m)
	}
	return ms, nil
}

// ldpMethod is LDP-FL: FLAME's client encoding (in parallel over users)
// without shuffler, and the analyzer's estimator with each dimension's own
// count.
func ldpMethod(id, name, note string, cfg mechanism.FLAMEConfig, train logreg.TrainConfig) (*method, error) {
	enc, err := mechanism.NewEncoder(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	an, err := mechanism.NewAnalyzer(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	m := &method{id: id, name: name, table: tableFLAME, note: note, train: train, serverLR: 1}
	m.aggregate = func(ctx context.Context, w *world, in roundInput) (roundOutput, error) {
		all, err := encodeAll(ctx, w, in, enc)
		if err != nil {
			return roundOutput{}, err
		}
		batch, err := mechanism.Collect(cfg.D, all)
		if err != nil {
			return roundOutput{}, fmt.Errorf("collect: %w", err)
		}
		est, err := an.Estimate(batch, len(in.updates))
		if err != nil {
			return roundOutput{}, fmt.Errorf("analyzer: %w", err)
		}
		return roundOutput{delta: est}, nil
	}
	r := enc.Randomizer()
	m.claim = claimReleases(defaultFLAMEParams().Delta, func(_ *runResult, rec roundRecord) privacy.Release {
		return privacy.Release{Round: rec.Round, Protocol: privacy.ProtocolLocal, Randomizer: r.Name(), Eps0: r.Epsilon(), Delta0: r.Delta(),
			D: cfg.D, K: cfg.D, N: rec.Participants}
	})
	return m, nil
}

// encodeAll runs the clients' encoder over every update in parallel, each
// with its own seeded source, and concatenates the messages.
func encodeAll(ctx context.Context, w *world, in roundInput, enc *mechanism.Encoder) ([]mechanism.Message, error) {
	reports := make([][]mechanism.Message, len(in.updates))
	err := w.forEach(ctx, len(in.updates), func(_, i int) error {
		src := noise.NewSeeded(mix(w.seed, tagClient, uint64(in.round), uint64(in.users[i])))
		msgs, err := enc.Encode(in.updates[i], src)
		reports[i] = msgs
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	var all []mechanism.Message
	for _, r := range reports {
		all = append(all, r...)
	}
	return all, nil
}

// shuffleMethod runs one announceable shuffle protocol as the parties do:
// the clients' encoder, the relay's padding and shuffle and the analyzer,
// all from the round's spec, and the release the ledger would charge.
func shuffleMethod(id, name, note string, spec *roundspec.Spec, train logreg.TrainConfig, delta float64) (*method, error) {
	enc, err := spec.Encoder(0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	an, err := spec.Analyzer()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	m := &method{id: id, name: name, table: tableFLAME, note: note, train: train, serverLR: 1}
	m.aggregate = func(ctx context.Context, w *world, in roundInput) (roundOutput, error) {
		all, err := encodeAll(ctx, w, in, enc)
		if err != nil {
			return roundOutput{}, err
		}
		batch, _, err := spec.Shuffle(all, noise.NewSeeded(mix(w.seed, tagRelay, uint64(in.round))))
		if err != nil {
			return roundOutput{}, fmt.Errorf("relay: %w", err)
		}
		est, err := an.Estimate(batch, len(in.updates))
		if err != nil {
			return roundOutput{}, fmt.Errorf("analyzer: %w", err)
		}
		return roundOutput{delta: est, np: batch.NP, raised: batch.Stats.Raised, truncated: batch.Stats.Truncated}, nil
	}
	m.claim = claimReleases(delta, func(_ *runResult, rec roundRecord) privacy.Release {
		return spec.Release(rec.Round, rec.Participants, rec.NP)
	})
	return m, nil
}

// dpFL is DP-FL (FLAME's baseline, after Abadi et al.): every update clipped
// to L2 norm DPClip, summed, plus central Gaussian noise calibrated to
// (DPEps, Delta)-DP per round with the analytic Gaussian mechanism (Balle and
// Wang 2018) at sensitivity 2*DPClip: FLAME doubles the sensitivity for
// replace-one (bounded) DP. FLAME's code used the classic
// sqrt(2 ln(1.25/delta))/eps calibration, which is looser (more noise).
func dpFL(p flameParams, d int, train logreg.TrainConfig) *method {
	m := &method{
		id: "dp-fl", name: fmt.Sprintf("DP-FL (%.2f)", p.DPEps), table: tableFLAME, train: train, serverLR: 1,
		note: fmt.Sprintf("L2 clip %.3f, central Gaussian for (%.2f, %.0e)-DP per round, sensitivity doubled (replace-one)", p.DPClip, p.DPEps, p.Delta),
	}
	sigma, sigmaErr := randomizer.GaussianSigma(p.DPEps, p.Delta, 2*p.DPClip)
	if p.DPMultiplier > 0 {
		sigma, sigmaErr = p.DPMultiplier*2*p.DPClip, nil
		m.name = fmt.Sprintf("DP-FL (m=%.3g)", p.DPMultiplier)
		m.note = fmt.Sprintf("L2 clip %.3f, central Gaussian with noise multiplier sigma/(2C) = %.4g (sensitivity doubled: replace-one)", p.DPClip, p.DPMultiplier)
	}
	m.aggregate = func(ctx context.Context, w *world, in roundInput) (roundOutput, error) {
		if sigmaErr != nil {
			return roundOutput{}, fmt.Errorf("dp-fl sigma: %w", sigmaErr)
		}
		g, err := noise.NewGaussian(sigma, 2*p.DPClip)
		if err != nil {
			return roundOutput{}, fmt.Errorf("dp-fl noise: %w", err)
		}
		sum := make([]float64, d)
		for _, u := range in.updates {
			norm := 0.0
			for _, v := range u {
				norm += v * v
			}
			scale := 1.0
			if norm = math.Sqrt(norm); norm > p.DPClip {
				scale = p.DPClip / norm
			}
			for j, v := range u {
				sum[j] += scale * v
			}
		}
		src := noise.NewSeeded(mix(w.seed, tagServer, uint64(in.round)))
		n := float64(len(in.updates))
		for j := range sum {
			sum[j] = g.Add(sum[j], src) / n
		}
		return roundOutput{delta: sum}, nil
	}
	m.claim = claimReleases(p.Delta, dpflRelease(d, sigma/(2*p.DPClip)))
	return m
}

// plainMean is federated averaging without privacy.
func plainMean(_ context.Context, _ *world, in roundInput) (roundOutput, error) {
	d := len(in.updates[0])
	mean := make([]float64, d)
	for _, u := range in.updates {
		for j, v := range u {
			mean[j] += v
		}
	}
	inv := 1 / float64(len(in.updates))
	for j := range mean {
		mean[j] *= inv
	}
	return roundOutput{delta: mean}, nil
}
