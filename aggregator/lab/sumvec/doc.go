// Package sumvec is the Prio3 SumVec baseline of Blanket's secure
// summation (draft-irtf-cfrg-vdaf via github.com/cloudflare/circl/vdaf/
// prio3/sumvec), kept for comparisons only: the lab, benchmarks and the
// tests that set PINE (shared/pine, shared/secagg, the product's VDAF)
// against it. Nothing the relay, the aggregator or the browser client
// links imports it (TestNotInTheProduct), so circl's Prio3 stays out of
// the product.
//
// It is the batch protocol shared/secagg ran before PINE: Round.Shard
// quantizes an update by conditional randomized rounding (Quantize) and
// splits q + EntryBound() into two additive Field128 shares with a fully
// linear proof that every entry lies in [0, 2^Bits); Helper.Prepare,
// Leader.Prepare, Leader.Combine and Helper.Finish decide every proof;
// each server's AggregateShare.AddNoise adds NoiseOffset + N_Z(0, Sigma^2)
// per coordinate; Leader.Unshard removes the offsets. Verdicts and errors
// are shared/secagg's (Reason, Rejection, ErrProtocol).
//
// # Flow of one round
//
//	volunteer: Round.Shard(update, noise.Secure()) -> leader share, helper share
//	helper:    Helper.Prepare(helper shares)      -> 'P' message
//	leader:    Leader.Prepare(leader shares); Leader.Combine('P') -> 'M' message
//	helper:    Helper.Finish('M')
//	both:      AggregateShare(), AddNoise(noise.Secure())
//	helper:    AggregateShare.MarshalBinary()      -> 'A' message
//	leader:    Leader.Unshard(own share, 'A')      -> Result{Count, Sum, Mean}
//
// # What the validity proof does and does not bound
//
// The SumVec proof bounds every entry (L∞): the encoded entry is in
// [0, 2^Bits), i.e. q_i in [-B, B+1] with B = EntryBound(). It does not
// bound the L2 norm: a malicious volunteer can send any vector in that
// box, L2 norm up to (B+1) sqrt(d) (about 11,340 at d = 7850, 8 bits,
// against Sensitivity() ≈ 138 for honest ones; TestProofBoundsEntriesNotNorm).
// The privacy of honest volunteers is unaffected (the noise protects each
// honest contribution), but poisoning is bounded only in L∞; this is why
// the product uses PINE, whose proof bounds the L2 norm.
//
// # Parameters (MNIST, NewParams(7850, C, 8, sigma, 1000))
//
// Bits = 8 (B = 127, Scale = 127/C), Beta = 2^-20, so Sensitivity() =
// 137.8 integer units, 1.085 times the clip norm (7 bits: 1.28, 6 bits:
// 1.86; 10 bits: 1.009 for 25% more bytes). ChunkLength = 2026
// (defaultChunkLength: 31 gadget calls). The leader's share is 1,070,762
// bytes (d*Bits Field128 elements plus a 2*ChunkLength-sized proof), the
// helper's 154; the helper's prep share is 64,896 bytes per report.
// NoiseOffset = minNoiseOffset(Sigma, d) (6.06 Sigma at d = 7850: 1818
// for Sigma = 300, tail probability 8.8e-13). BenchmarkShard,
// BenchmarkPrepareRound, BenchmarkChunkLength and BenchmarkBits measure
// the costs.
//
// All randomness comes from a noise.Source (noise.Secure() for anything
// beyond a test, noise.NewSeeded in tests). Nothing here panics on any
// input; every decoder is strict (one encoding per message) and fuzzed.
package sumvec
