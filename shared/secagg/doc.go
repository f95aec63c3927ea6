// Package secagg holds the building blocks of Blanket's secure-summation
// protocol, secure summation through the relay, with PINE
// (draft-chen-cfrg-vdaf-pine over Field64, shared/pine) as its VDAF. The
// relay is the helper (aggregator 1) and the aggregator the leader
// (aggregator 0). The Prio3 SumVec baseline that preceded PINE lives in
// aggregator/lab/sumvec, out of the product.
//
// # Flow of one round
//
//	volunteer: Round.Shard(update, noise.Secure()) -> leader share, helper share
//	           (the caller seals each to its server, bound to the round)
//	both:      e := NewEngine(round, leader, verify key)
//	helper:    e.PrepInit(helper share)          -> 'P' entry (prep share)
//	leader:    e.PrepInit(leader share); e.Decide(own, 'P' entry) -> 'M' entry,
//	           output share
//	helper:    e.Next(own, 'M' entry)            -> output share
//	both:      Aggregate.Fold(output share); Aggregate.Share(); AddNoise(noise.Secure())
//	helper:    AggregateShare.MarshalBinary()    -> 'A' message
//	leader:    Round.Unshard(own share, 'A')     -> Result{Count, Sum, Mean}
//
// The servers run these steps one report at a time (engine.go): PrepInit
// on arrival, Decide (leader) and Next (helper) per report, each accepted
// output share folded into a running Aggregate that persists
// (MarshalBinary, Round.ParseAggregate) and hands out its share once. The
// state machines around it are aggregator/internal/analysis
// (SecAggLeader) and relay/internal/helper. The batch API (Helper,
// Leader: Prepare, Combine, Finish, Unshard) runs the same Engine over a
// whole batch for tests, benchmarks and examples.
//
// Shard clips the update to L2 norm Clip and encodes it on PINE's
// fixed-point grid (2^NumFracBits per model unit, round half to even;
// Encode), then shards it with PINE's proofs: the L2 norm of the encoded
// vector is at most Params.NormBound, checked by the two servers together
// without learning it, with PINE's wraparound checks (pine.Pine.Soundness
// states the probability that an over-norm report passes). A report that
// fails, is malformed, bound to another round, replayed within the round
// or inconsistent between the servers is rejected with a Reason and never
// enters the sum. Each server adds discrete Gaussian noise N_Z(0, Sigma^2)
// to every coordinate of its aggregate share; each server's noise alone
// gives the released sum the privacy stated at AddNoise, with sensitivity
// Params.Sensitivity() = NormBound (docs/secagg.md, "Sensitivity and
// noise"). The leader returns the noisy integer sum (signed: Field64
// values in (-q/2, q/2]) and the mean in model units.
//
// Sizes at MNIST's d = 7850: the Shares frame a volunteer uploads is
// 89,566 bytes (shared/roundspec's ExampleSpec_SharesSizes); BenchmarkShard
// and BenchmarkPrepareRound measure the costs (`make bench-round`).
//
// All randomness comes from a noise.Source (noise.Secure() in production,
// noise.NewSeeded in tests). Nothing here panics on any input; every
// decoder is strict (one encoding per message) and fuzzed.
package secagg
