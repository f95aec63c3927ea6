// Package mechanism implements the three stages of Blanket's shuffle-model
// protocols as pure functions (no network): the client encoding, the relay
// (shuffler) and the analyzer, for FLAME's SS-Simple, SS-Double and SS-Topk
// (Liu et al., AAAI 2021), for APES and S-APES (Liu et al., AAAI 2023), and
// for shuffled check-in (Liu et al., "Shuffled Check-in").
//
// # Stages
//
// Client. The clipper clips an update to [-C, C] and normalizes it to [0, 1]
// (FLAME Algorithm 2 lines 8-9). An Encoder, built from a validated
// FLAMEConfig, turns one update into a report of Shape().Messages messages
// of Shape().Width entries (Message: plaintext indices and randomized
// values). The shape depends only on the configuration, never on the data:
//
//   - SS-Simple: all D coordinates, randomizer at EpsL/D.
//   - SS-Double: K coordinates sampled uniformly without replacement,
//     randomizer at EpsL/K.
//   - SS-Topk (Algorithm 4): the top K by magnitude at EpsL/K plus K(L-1)
//     decoys drawn uniformly from the other coordinates carrying blanket
//     samples, the K*L entries permuted uniformly. TopkL (Proposition 2)
//     and TopkNu (Theorem 5) choose L from the index-privacy level nu.
//
// APESEncoder perturbs every coordinate with Clip-Laplace at the client's
// personalized budget and returns an APESReport whose budget travels apart
// from the values; with APESConfig.B it applies S-APES post-sparsification
// (keep the B largest perturbed magnitudes, replace the rest by blanket
// draws).
//
// Relay. Relay.Process validates a round's messages, pads every dimension
// to exactly n_p entries with dummy messages of the same shape as real ones
// (FLAME Algorithm 3; planDummies gives the packing and its feasibility
// proof), and permutes all messages uniformly. D*n_p must be a multiple of
// the message width (checked by NewRelay; FeasibleNP finds the next valid
// n_p). A dimension with more than n_p real entries is an overflow, handled
// by RelayConfig.Overflow: OverflowError aborts the round with a
// *dimensionOverflowError, OverflowRaise raises n_p to the smallest
// feasible value and records it in Batch.NP and RelayStats, which the
// analyzer and the accountant must use. Collect is the LDP-FL path (no
// padding, no shuffle). ShuffleAPES shuffles each dimension's values and,
// separately, the budgets; collectAPES is the PLDP path.
//
// Analyzer. Analyzer.Estimate debiases each dimension by subtracting
// n_p(offset + slope/2) from its sum and dividing by the slope, without
// knowing which messages are dummies, then rescales to the mean update
// (by D/K for SS-Double); see Analyzer for the derivation. It is unbiased
// for the clipped mean under SS-Simple and SS-Double, and for the top-K
// sparsified clipped mean (topkClippedMean) under SS-Topk.
// APESAnalyzer.Estimate calibrates the per-dimension means with the
// shuffled budgets (APES eq. (1), randomizer.ClipLaplaceCalibrator).
// simulateFLAME runs all three stages in process for the experiment runner.
//
// Check-in. CheckIn.Decide is a client's own Bernoulli(p) coin;
// CheckIn.Simulate and RoundStats record the realized count (the n the
// analyzer divides by) and the empirical check-in rate, pooled by
// empiricalRate.
//
// # Privacy notes
//
// Randomness for sampling, noise and shuffling comes only from a
// noise.Source (noise.Secure in production). Entries of one message stay
// linked after the shuffle: FLAME's Theorems 1 and 4 compose per-dimension
// shuffle bounds, which matches message width 1 exactly; wider messages are
// the paper's layout. SS-Topk index lists are data-dependent: they give
// nu-index privacy against the relay (Definition 3), not LDP.
//
// # Corrections to the papers
//
// The extracted FLAME text prints Theorem 5 as floor(n_p/eps_lk); we read
// floor(n_p/(n*beta)), which follows from the padding constraint and
// reproduces the paper's example (l = 16, nu = 3.125). Algorithm 4 ranks by
// |x~|, the normalized value; we rank by update magnitude |x|. Algorithm
// 4's upper bound ceil(1/beta) on l is capped at floor(D/K) so the K*L
// indices can be distinct. See topk.go and flame.go for the derivations.
package mechanism
