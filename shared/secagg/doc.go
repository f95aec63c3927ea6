// Package secagg holds the building blocks of Blanket's secure-summation
// protocol, secure summation through the relay. The product's rounds are
// PINE rounds (NewPineParams; shared/pine, draft-chen-cfrg-vdaf-pine over
// Field64, run per report by PineEngine): the proof bounds the L2 norm of
// every accepted report by Params.NormBound, which is the sensitivity the
// noise is calibrated to (docs/secagg.md, "Sensitivity and noise"). Rounds
// of Prio3 SumVec (NewParams; draft-irtf-cfrg-vdaf via
// github.com/cloudflare/circl/vdaf/prio3/sumvec) remain as the baseline of
// tests, benchmarks and the lab; the rest of this comment describes them
// where it speaks of Quantize, bits and Field128. The relay is the helper
// (aggregator 1) and the aggregator the leader (aggregator 0).
//
// A PINE round differs from the SumVec description below in: Shard clips
// the update to Clip and encodes it on PINE's grid (2^NumFracBits, round
// half to even) instead of Quantize; the helper's share is four 32-byte
// seeds; aggregate shares are Dim Field64 elements; the noise has no
// offset (the sum decodes as signed integers in (-q/2, q/2]); the batch
// API (Helper, Leader) runs through the Engine.
//
// # Flow of one round
//
//	volunteer: Round.Shard(update, noise.Secure()) -> leader share, helper share
//	           (the caller seals each to its server, bound to the round)
//	helper:    Helper.Prepare(helper shares)      -> 'P' message
//	leader:    Leader.Prepare(leader shares); Leader.Combine('P') -> 'M' message
//	helper:    Helper.Finish('M')
//	both:      AggregateShare(), AddNoise(noise.Secure())
//	helper:    AggregateShare.MarshalBinary()      -> 'A' message
//	leader:    Leader.Unshard(own share, 'A')      -> Result{Count, Sum, Mean}
//
// The servers run the same steps one report at a time through Engine
// (engine.go; PineEngine and SumVecEngine implement it, NewEngine picks
// the round's):
// PrepInit on arrival, Decide (leader) and Next (helper) per report, each
// accepted output share folded into a running Aggregate that persists
// (MarshalBinary, Round.ParseAggregate) and hands out its share once;
// Round.Unshard merges the two shares. The state machines around it are
// aggregator/internal/analysis (SecAggLeader) and relay/internal/helper.
//
// Shard clips the update to L2 norm Clip, scales it and quantizes it by
// conditional randomized rounding (Quantize), so that every honest
// quantized vector has ||q||_2 <= Params.Sensitivity() exactly; it then
// splits q + EntryBound() into two additive Field128 shares with a
// fully linear proof (FLP) that every entry lies in [0, 2^Bits). The two
// servers check the proof together without learning q; a report that
// fails, is malformed, bound to another round, replayed within the round
// or inconsistent between the servers is rejected with a Reason and never
// enters the sum. Each server adds discrete Gaussian noise N_Z(0, Sigma^2)
// plus a public offset to every coordinate of its aggregate share; each
// server's noise alone gives the released sum the privacy stated at
// AddNoise. The leader removes the offsets and returns the noisy integer
// sum and the dequantized mean.
//
// # What the validity proof does and does not bound
//
// The SumVec proof bounds every entry (L∞): the encoded entry is in
// [0, 2^Bits), i.e. q_i in [-B, B+1] with B = EntryBound(). It does not
// bound the L2 norm: a malicious volunteer can send any vector in that
// box, L2 norm up to (B+1) sqrt(d) (about 11,340 at d = 7850, 8 bits,
// against Sensitivity() ≈ 138 for honest ones). This does not weaken the
// privacy of honest volunteers (the noise protects each honest
// contribution; a malicious one only adds a data-independent vector), but
// it bounds poisoning only in L∞. An L2 bound in the proof needs an FLP
// with a norm check (not in circl).
//
// # Parameters Blanket uses (MNIST, NewParams(7850, C, 8, sigma, 1000))
//
// Bits = 8 (B = 127, Scale = 127/C), Beta = 2^-20, so Sensitivity() =
// 137.8 integer units, 1.085 times the clip norm (7 bits: 1.28, 6 bits:
// 1.86; 10 bits: 1.009 for 25% more bytes). ChunkLength = 2026
// (defaultChunkLength: 31 gadget calls). The leader's share is 1,070,762
// bytes (d*Bits Field128 elements plus a 2*ChunkLength-sized proof), the
// helper's 154; the helper's prep share is 64,896 bytes per report.
// NoiseOffset = minNoiseOffset(Sigma, d) (6.06 Sigma at d = 7850: 1818
// for Sigma = 300, tail probability 8.8e-13).
// BenchmarkShard, BenchmarkPrepareRound, BenchmarkChunkLength and
// BenchmarkBits measure the costs.
//
// All randomness comes from a noise.Source (noise.Secure() in production,
// noise.NewSeeded in tests). Nothing here panics on any input; every
// decoder is strict (one encoding per message) and fuzzed.
package secagg
