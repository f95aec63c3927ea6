// Package rdp implements Renyi differential privacy (Mironov 2017)
// accounting for Blanket: RDP curves and their composition, conversions
// between RDP and (eps, delta)-DP, subsampled RDP, the RDP of the Gaussian
// mechanism and of the shuffle dominating pairs of package amplify, and the
// shuffled check-in analysis of Liew, Hasegawa and Takahashi ("Shuffled
// check-in: privacy amplification towards practical distributed learning").
//
// Conventions. An RDP curve eps(alpha) bounds D_alpha(M(D) || M(D')) for
// every ordered pair of neighbouring datasets; orders alpha > 1. Every
// function states the neighbouring relation it assumes (replace-one or
// add/remove). Natural logarithms throughout.
//
// Conversions to (eps, delta)-DP, from loosest to tightest:
//
//   - MironovEpsilon: eps = min_alpha eps(alpha) + log(1/delta)/(alpha-1)
//     (Mironov 2017, Proposition 3).
//   - BalleEpsilon: the improved conversion of Balle et al. (AISTATS 2020,
//     Theorem 21) and Canonne, Kamath, Steinke (NeurIPS 2020, Proposition
//     12). This is Lemma 2 (Eq. 3) of the shuffled check-in paper.
//   - OptimalEpsilon / optimalDelta: the exact single-order conversion of
//     Asoodeh, Liao, Calmon, Kosut, Sankar (2021), optimised over orders. Its
//     formula is the one printed (garbled) as Lemma 3, Eq. 4, of the check-in
//     paper, where it is mislabelled as a DP-to-RDP conversion (see
//     convert.go).
package rdp
