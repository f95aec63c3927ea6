// Package pine implements PINE ("Private Inexpensive Norm Enforcement",
// draft-chen-cfrg-vdaf-pine, [ROCT23]): secure summation of real vectors
// whose L2 norm is bounded, verified by two aggregators on secret shares.
// It is built on the FLP of draft-irtf-cfrg-vdaf-11 (Section 7.3, with
// ParallelSum gadgets and multiple proofs, here over Field64 with circl's
// fp64) and Prio3-style sharding (Section 7.2: the helper's share is four
// 32-byte seeds, joint randomness from parts in the public share), with
// the XOF XofHmacSha256Aes128. The algorithms follow the draft's reference
// code (poc/vdaf_pine_poc, whose text the draft defers to), and every
// official Pine64HmacSha256Aes128 vector is reproduced byte for byte
// (vectors_test.go).
//
// # Flow of one report
//
//	client:   Shard(update, nonce, noise.Secure()) -> public, leader, helper
//	leader:   PrepInit(vk, 0, ...) -> state0, prep0
//	helper:   PrepInit(vk, 1, ...) -> state1, prep1 (sent to the leader)
//	leader:   PrepSharesToPrep(prep0, prep1) -> prep message (sent back)
//	both:     PrepNext(state, msg) -> out share; AggShare.Add(out)
//	collector: Unshard(leader agg, helper agg) -> sums in model units
//
// A rejected report returns a *RejectError whose Reason names the check.
//
// # What an accepted report guarantees
//
// Let x be the encoded gradient of an accepted report and x_i in
// (-q/2, q/2] the integers its field elements represent (q = 2^64 -
// 2^32 + 1). Then, over the integers,
//
//	sum_i x_i^2 <= L2NormBound^2, i.e. ||x||_2 <= Sensitivity() (fixed point)
//
// except with a probability bounded by Soundness(): in model units the
// update's norm is at most L2NormBound / 2^NumFracBits. The argument:
//
//   - the norm-equality proof shows that the client's v bits encode
//     sum x_i^2 mod q (draft Section 4.2.3);
//   - the main proof shows every bit-checked entry is a bit (4.2.2) and
//     v + u = L2NormBound^2 with v, u of bitlen(L2NormBound^2) bits; since
//     New requires q > 3 L2NormBound^2 + 2 this holds over the integers, so
//     sum x_i^2 mod q lies in [0, L2NormBound^2] ([ROCT23] Figure 1);
//   - the wraparound checks (draft Sections 3, 4.1.3, 4.2.4; [ROCT23]
//     Figure 2 and Lemma 3.3, whose field-size conditions New enforces)
//     rule out that sum x_i^2 wrapped around q: if it did, each check
//     (the dot product of x with a random {-1, 0, 1} vector, in
//     [-wr_check_bound + 1, wr_check_bound]) passes with probability at
//     most 1/2, and exactly NumWrSuccesses of NumWrChecks must pass.
//
// Soundness error (Soundness(), log2; for ForBlanket(7850, 1) see
// ExampleForBlanket and docs/pine.md):
//
//   - per report, not grindable (the gadget tests use query randomness
//     from the verify key): the larger over the two circuits of the
//     product over its proofs of 2P/(q - P) (BBCGGI19 Theorem 4.3; P the
//     padded number of gadget calls): 2^-114 for Blanket;
//   - per sharding attempt of a client that grinds the joint randomness
//     offline: P[Binomial(NumWrChecks, 1/2) >= NumWrSuccesses] (2^-100 for
//     100 of 100) plus ((bit_checked_len + NumWrChecks + 3)/q)^Proofs for
//     the random linear combinations of the main circuit (2^-158 with 3
//     proofs, as VDAF-11 Section 9.6 requires for Field64 with joint
//     randomness).
//
// # Honest clients
//
// An honest update whose fixed-point encoding has norm at most
// L2NormBound is never rejected. A wraparound check fails for it only if
// |<x, z>| >= wr_check_bound >= ceil(Alpha * L2NormBound) + 1; since
// z = b + b' - 1 with fair bits has E[exp(t z)] = cosh^2(t/2) <=
// exp(t^2/4), <x, z> is sub-Gaussian with variance proxy ||x||^2/2 and a
// check fails with probability at most 2 exp(-Alpha^2) (2^-108 at Alpha =
// 8.7, our derivation; [ROCT23] calls this the ZK error). Shard then
// re-shards with fresh randomness (draft Section 4.1.4): per attempt at
// most NumWrChecks * 2 exp(-Alpha^2) = 2^-101.6 (Soundness().HonestRetry),
// and conditioning on success moves the distribution of what the
// aggregators see by at most that much. TestHonestCheckRate measures the
// per-check rate against its exact value where it is not negligible
// (Alpha = 0.5).
//
// # Choices not fixed by the draft
//
// Two aggregators only. A failed wraparound check is sent with zero v
// bits (the reference raises; they are not checked when the success bit
// is 0). The AES-CTR counter of the XOF wraps modulo 2^64 inside the
// counter half, as the reference's PyCryptodome does. Encode rounds half
// to even (Python's round) and refuses NaN, infinities and subnormals.
package pine
