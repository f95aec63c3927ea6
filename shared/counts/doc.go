// Package counts releases volunteers' counts through secure summation: the
// correct and evaluated rows of the current model on each volunteer's own
// data (issue 27, item 1) and one-hot answers to survey questions (item
// 2), each bounded by its own proof, noised by both servers, charged with
// the round's update, and estimated with their uncertainty. Pure Go,
// builds for js/wasm, no panics. docs/counts.md has the design, the
// numbers and the servers' integration plan.
//
// # The measurement and its bound
//
// Each count vector is a Block: its own small PINE instance
// (shared/pine, the vetted VDAF of the update, with Blanket's 100 of 100
// wraparound checks and 3 + 2 proofs, under its own algorithm identifier)
// whose proof bounds the block's L2 norm independently of the update, so
// no volunteer can trade update norm for a count. The block's encoding is
// the honest value minus the circumcentre of the honest values, so that
// the enforced L2 ball is the smallest ball holding every honest value:
//
//   - evaluation (c, e), 0 ≤ c ≤ e ≤ R: y = (2c − R, 2e − R), ‖y‖ ≤ √2·R;
//     an accepted cheater adds to each count between −0.207R and 1.207R
//     (honest: 0 to R), never more: Block.Influence, by Cauchy-Schwarz;
//   - a question of k options (K = 2^⌈log2 k⌉): answer j is column j of
//     the Sylvester-Hadamard matrix H_K without its all-ones row, ±1
//     entries, ‖y‖ = √(K−1); a cheater adds to any option between 2/K − 1
//     and 1 vote (so never more than one vote, and at k = 2 exactly an
//     honest vote), and its K options always sum to one vote.
//
// Options considered (docs/counts.md, "Options"): (a) this, a second PINE
// instance per block; (b) a per-entry range-check FLP circuit on
// shared/pine's FLP machinery (exact ranges, but the FLP, circuits and
// sharding of shared/pine are unexported and written for PINE's two
// circuits: a new circuit means a new Prio3-style VDAF with no official
// test vectors, since the VDAF drafts' Prio3 vectors need TurboSHAKE128,
// which no dependency exports); (c) appending the counts to the update's
// PINE vector (rejected: with one bound B² = B_u² + B_c², a volunteer
// that sends a zero update can give its counts the norm B instead of B_c,
// B/B_c times an honest volunteer's largest count — 100 times if the
// counts get 1% of the norm, and more of the norm costs the update's
// accuracy; and every count coordinate would carry the update's σ).
//
// # The noise and the charge
//
// Each server adds N_Z(0, σ_i²) per coordinate of block i (Aggregate.AddNoise,
// shared/secagg's sampler). The round's release (update sum, counts) is
// one Gaussian mechanism on the concatenation; privacy.SecAggJoint gives
// the single Release (σ, Δ_eff, d) that every ledger row charges at least
// the joint cost, (Δ_eff/σ_u)² = Σ_j (Δ_j/σ_j)² under replace-one, and
// privacy.CalibrateSecAggExtra (Spec.Calibrate) the σ_i for an extra ε.
//
// # Estimators
//
// Accuracy (delta method: row sampling plus the known noise), Count and
// Block.Histogram (± the known noise), NoiseDominates (public parameters
// only).
package counts
