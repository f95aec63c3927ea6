package experiment

import (
	"context"
	"fmt"
	"slices"

	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/mechanism"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/randomizer"
)

// apesParams are APES's experimental settings ("Parameter Selection" and
// Table 3), scaled to the run's n.
type apesParams struct {
	C       float64 // clipping bound (APES Figure 3(a): best at C = 0.1)
	Range   float64 // Clip-Laplace output range A/C (1: A = C)
	B       int     // S-APES kept dimensions (0: d/5; Table 3: user-level 78.5..1570 = b*[0.05, 1], b = 1570 = 7850/5)
	DeltaS  float64 // shuffling delta (1e-8)
	DeltaUC float64 // slack of the user-level composition
	ProxMu  float64 // FedProx proximal term of local training
	// Scale multiplies every personalized budget (0 = 1, Table 2's
	// Uniform2 budgets as printed); the equal-epsilon table calibrates it.
	Scale float64
}

func defaultAPESParams() apesParams {
	return apesParams{C: 0.1, Range: 1, DeltaS: 1e-8, DeltaUC: 1e-5, ProxMu: 0.01}
}

// apesMethods builds APES's comparison (Table 3): Non-private (FedProx),
// LDP-Min, PLDP, UniS, APES and S-APES, with personalized per-dimension
// budgets from Table 2's Uniform2 distribution U(0.05, 1), assigned to users
// at random (seeded) and fixed for the whole run.
func apesMethods(p apesParams, w *world, d, n int, seed uint64) ([]*method, error) {
	if p.B == 0 {
		p.B = max(1, d/5) // the paper's b = 1570 at d = 7850
	}
	pop := len(w.users)
	budgets := privacy.Uniform2Budgets(pop)
	if p.Scale > 0 {
		for i := range budgets {
			budgets[i] *= p.Scale
		}
	}
	noise.Shuffle(noise.NewSeeded(mix(seed, tagBudget)), len(budgets), func(i, j int) { budgets[i], budgets[j] = budgets[j], budgets[i] })
	train := logreg.FLAMEConfig(10, 0.1)
	train.ProxMu = p.ProxMu
	laplace := mechanism.AffineFactory(randomizer.NewLaplace)
	epsOf := func(users []int) []float64 {
		e := make([]float64, len(users))
		for i, u := range users {
			e[i] = budgets[u]
		}
		return e
	}
	minEps := slices.Min(budgets)
	// One Laplace encoder per distinct budget (the budgets are fixed per
	// user, so there are at most pop of them).
	encoders := map[float64]*mechanism.Encoder{}
	for _, e := range append(slices.Clone(budgets), minEps) {
		if encoders[e] != nil {
			continue
		}
		enc, err := mechanism.NewEncoder(mechanism.FLAMEConfig{Protocol: mechanism.SSSimple, D: d, EpsL: e * float64(d), C: p.C, NewRandomizer: laplace})
		if err != nil {
			return nil, fmt.Errorf("apes baselines: %w", err)
		}
		encoders[e] = enc
	}
	// Laplace is affine with offset 0 and slope 1 at every epsilon, so one
	// analyzer debiases reports made with any mix of budgets.
	an, err := mechanism.NewAnalyzer(encoders[minEps].Config())
	if err != nil {
		return nil, fmt.Errorf("apes baselines: %w", err)
	}
	laplaceRound := func(fixed float64, shuffle bool) func(context.Context, *world, roundInput) (roundOutput, error) {
		return func(ctx context.Context, w *world, in roundInput) (roundOutput, error) {
			reports := make([][]mechanism.Message, len(in.updates))
			err := w.forEach(ctx, len(in.updates), func(_, i int) error {
				e := fixed
				if e == 0 {
					e = budgets[in.users[i]]
				}
				src := noise.NewSeeded(mix(w.seed, tagClient, uint64(in.round), uint64(in.users[i])))
				var err error
				reports[i], err = encoders[e].Encode(in.updates[i], src)
				return err
			})
			if err != nil {
				return roundOutput{}, fmt.Errorf("encode: %w", err)
			}
			all := slices.Concat(reports...)
			if shuffle {
				// UniS: the shuffler permutes the reports; the mean is
				// unchanged, the privacy claim is not.
				noise.Shuffle(noise.NewSeeded(mix(w.seed, tagRelay, uint64(in.round))), len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
			}
			batch, err := mechanism.Collect(d, all)
			if err != nil {
				return roundOutput{}, err
			}
			est, err := an.Estimate(batch, len(in.updates))
			return roundOutput{delta: est}, err
		}
	}
	apesRound := func(b int) (func(context.Context, *world, roundInput) (roundOutput, error), error) {
		cfg := mechanism.APESConfig{D: d, C: p.C, RangeRatio: p.Range, B: b}
		enc, err := mechanism.NewAPESEncoder(cfg)
		if err != nil {
			return nil, err
		}
		an, err := mechanism.NewAPESAnalyzer(cfg)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, w *world, in roundInput) (roundOutput, error) {
			reports := make([]mechanism.APESReport, len(in.updates))
			err := w.forEach(ctx, len(in.updates), func(_, i int) error {
				src := noise.NewSeeded(mix(w.seed, tagClient, uint64(in.round), uint64(in.users[i])))
				var err error
				reports[i], err = enc.Encode(in.updates[i], budgets[in.users[i]], src)
				return err
			})
			if err != nil {
				return roundOutput{}, fmt.Errorf("encode: %w", err)
			}
			batch, err := mechanism.ShuffleAPES(reports, d, noise.NewSeeded(mix(w.seed, tagRelay, uint64(in.round))))
			if err != nil {
				return roundOutput{}, fmt.Errorf("relay: %w", err)
			}
			est, err := an.Estimate(batch)
			return roundOutput{delta: est}, err
		}, nil
	}
	apesAgg, err := apesRound(0)
	if err != nil {
		return nil, fmt.Errorf("apes: %w", err)
	}
	sapesAgg, err := apesRound(p.B)
	if err != nil {
		return nil, fmt.Errorf("s-apes: %w", err)
	}
	mk := func(id, name, note string, agg func(context.Context, *world, roundInput) (roundOutput, error), claim func(*runResult) claimResult) *method {
		return &method{id: id, name: name, table: tableAPES, note: note, train: train, serverLR: 1, aggregate: agg, claim: claim}
	}
	clip := fmt.Sprintf("clip C = %g", p.C)
	return []*method{
		mk("apes-nonprivate", "Non-private", "FedProx (mu = 0.01), no clipping, no noise", plainMean, claimNone),
		mk("ldp-min", "LDP-Min", fmt.Sprintf("every user at min eps_i = %.3f per dimension, Laplace, %s, no shuffler", minEps, clip),
			laplaceRound(minEps, false), claimReleases(p.DeltaUC, apesRelease(d, privacy.ProtocolLocal, privacy.RandomizerLaplace, 0, func(u []int) []float64 { return []float64{minEps} }))),
		mk("pldp", "PLDP", "personalized eps_i per dimension, Laplace, "+clip+", no shuffler", laplaceRound(0, false),
			claimReleases(p.DeltaUC, apesRelease(d, privacy.ProtocolLocal, privacy.RandomizerLaplace, 0, epsOf))),
		mk("unis", "UniS", "PLDP plus shuffler", laplaceRound(0, true),
			claimReleases(p.DeltaUC, apesRelease(d, privacy.ProtocolAPES, privacy.RandomizerLaplace, 0, epsOf))),
		mk("apes", "APES", "Clip-Laplace (A = C) at eps_i, values shuffled per dimension, budgets shuffled apart, eq. (1) calibration", apesAgg,
			claimReleases(p.DeltaUC, apesRelease(d, privacy.ProtocolAPES, privacy.RandomizerClipLaplace, 0, epsOf))),
		mk("s-apes", "S-APES", fmt.Sprintf("APES with post-sparsification to b = %d dimensions", p.B), sapesAgg,
			claimReleases(p.DeltaUC, apesRelease(d, privacy.ProtocolSAPES, privacy.RandomizerClipLaplace, p.B, epsOf))),
	}, nil
}
