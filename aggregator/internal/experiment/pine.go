package experiment

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sort"
	"strings"
	"sync"

	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/pine"
	"github.com/blanket-fl/blanket/shared/secagg"
)

// Attacks a simulated malicious volunteer can mount on secure summation
// (the robust table, docs/experiments.md): it trains honestly to learn its
// update u and then sends, instead of it,
//
//   - attackFlip: -u scaled to L2 norm exactly C, the strongest update
//     any proof that bounds the L2 norm must accept (it is an honest
//     update's norm);
//   - attackEdge: every entry at ±C with the opposite sign of u (-C where
//     u_j = 0), L2 norm C sqrt(d), put into the leader's gradient share of
//     an honestly sharded flipped update (the client cannot make
//     shared/pine's honest Shard encode a vector above the bound): PINE
//     must reject it. (It is the vector a per-entry range proof such as
//     Prio3 SumVec's accepts: shared/secagg's TestProofBoundsEntriesNotNorm.)
const (
	attackNone = ""
	attackFlip = "flip"
	attackEdge = "edge"
)

// attackSpec says which volunteers attack and how.
type attackSpec struct {
	Kind  string
	Count int // malicious volunteers among the population
	Pop   int
}

// is reports whether volunteer u is malicious: Count volunteers spread
// evenly over the population (u = 0, Pop/Count, 2 Pop/Count, ...).
func (a attackSpec) is(u int) bool {
	if a.Kind == attackNone || a.Count <= 0 || a.Pop <= 0 {
		return false
	}
	step := max(a.Pop/a.Count, 1)
	return u%step == 0 && u/step < a.Count
}

// flipped returns -u scaled to L2 norm c (zero stays zero).
func flipped(u []float64, c float64) []float64 {
	n := 0.0
	for _, v := range u {
		n += v * v
	}
	out := make([]float64, len(u))
	if n = math.Sqrt(n); n == 0 {
		return out
	}
	for j, v := range u {
		out[j] = -v * c / n
	}
	return out
}

// pineModulus is Field64's q = 2^64 - 2^32 + 1 (the field of shared/pine's
// aggregate shares, which encode each element as 8 little-endian bytes in
// [0, q)).
const pineModulus = 1<<64 - 1<<32 + 1

// fieldOf maps an integer with |k| < 2^63 to Field64.
func fieldOf(k int64) uint64 {
	if k >= 0 {
		return uint64(k)
	}
	return pineModulus - uint64(-k)
}

// fieldAdd adds two elements of [0, q).
func fieldAdd(x, y uint64) uint64 {
	s, c := bits.Add64(x, y, 0)
	if c == 1 { // x + y = s + 2^64 in [2^64, 2q): subtract q
		return s + (1<<32 - 1)
	}
	if s >= pineModulus {
		return s - pineModulus
	}
	return s
}

// addFieldNoise adds the integers k (as Field64 elements) to the encoded
// aggregate share agg in place.
func addFieldNoise(agg []byte, k []int64) error {
	if len(agg) != 8*len(k) {
		return fmt.Errorf("aggregate share of %d bytes for %d coordinates", len(agg), len(k))
	}
	for i, v := range k {
		if v == math.MinInt64 {
			return errors.New("noise draw out of range")
		}
		x := binary.LittleEndian.Uint64(agg[8*i:])
		if x >= pineModulus {
			return fmt.Errorf("aggregate share element %d not canonical", i)
		}
		binary.LittleEndian.PutUint64(agg[8*i:], fieldAdd(x, fieldOf(v)))
	}
	return nil
}

// pineResult is one round of PINE: the noisy mean of the accepted reports
// in model units and what the servers rejected.
type pineResult struct {
	Mean     []float64
	Sum      []float64 // noisy sum in model units
	Accepted int
	Rejected map[string]int // by pine.Reason
}

// pineSum runs one round of secure summation with PINE (shared/pine, the
// real protocol): every volunteer clips its update to L2 norm clip, encodes
// and shards it (Shard, with the nonce and randomness from its own seeded
// stream); both servers prepare every report (PrepInit with their
// aggregator id, the leader's PrepSharesToPrep, PrepNext; reports in
// parallel, one Verifier per worker and server), accepted output shares
// are folded into each server's AggShare; each server adds N_Z(0, sigma^2)
// per coordinate (secagg.DiscreteGaussianNoise, the sampler of secagg's
// AddNoise, on secaggStreams) to its encoded
// aggregate share as Field64 elements, and Unshard decodes the sum in
// model units (each sum in (-q/2, q/2] divided by 2^NumFracBits).
//
// Privacy: any accepted report's encoded gradient has L2 norm at most
// p.Sensitivity() fixed-point units (shared/pine, "What an accepted report
// guarantees"), so the integer sum has that sensitivity under add/remove
// of one report and each server's noise alone gives what
// secaggReleases accounts with SecAggSensitivity = p.Sensitivity() and
// SecAggSigma = sigma (both in fixed-point units). noiseShares is 2 (both
// servers, the protocol) or 1 (the leader only: what a trusted aggregator
// would add, the counterfactual of docs/experiments.md). An honest
// report that is rejected is an error; malicious ones (atk) are counted by
// reason.
func pineSum(ctx context.Context, w *world, p *pine.Pine, clip, sigma float64, noiseShares int, round uint64, users []int, updates [][]float64, atk attackSpec) (*pineResult, error) {
	n := len(updates)
	if n == 0 {
		return nil, errors.New("pine: no reports")
	}
	type report struct {
		nonce                  [16]byte
		public, leader, helper []byte
	}
	reps := make([]report, n)
	err := w.forEach(ctx, n, func(_, i int) error {
		src := noise.NewSeeded(mix(w.seed, tagClient, round, uint64(users[i])))
		r := &reps[i]
		for k := 0; k < 16; k += 8 {
			binary.LittleEndian.PutUint64(r.nonce[k:], src.Uint64())
		}
		x := clipL2(updates[i], clip)
		bad := atk.is(users[i])
		if bad {
			x = flipped(updates[i], clip)
		}
		var err error
		if r.public, r.leader, r.helper, err = p.Shard(x, r.nonce, src); err != nil {
			return fmt.Errorf("volunteer %d: shard: %w", users[i], err)
		}
		if bad && atk.Kind == attackEdge {
			return edgeTamper(p, r.leader, x, updates[i], clip)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	lsrc, hsrc, ksrc := secaggStreams(w.seed, round)
	vk := make([]byte, 32)
	for k := 0; k < len(vk); k += 8 {
		binary.LittleEndian.PutUint64(vk[k:], ksrc.Uint64())
	}
	leaderAgg, helperAgg := p.NewAggShare(), p.NewAggShare()
	verifiers := make([][2]*pine.Verifier, w.workers)
	for k := range verifiers {
		verifiers[k] = [2]*pine.Verifier{p.NewVerifier(), p.NewVerifier()}
	}
	var mu sync.Mutex
	rejected := map[string]int{}
	err = w.forEach(ctx, n, func(worker, i int) error {
		r := &reps[i]
		prep := func() (pine.OutShare, pine.OutShare, error) {
			var none pine.OutShare
			stL, prepL, err := verifiers[worker][0].PrepInit(vk, 0, r.nonce[:], r.public, r.leader)
			if err != nil {
				return none, none, err
			}
			stH, prepH, err := verifiers[worker][1].PrepInit(vk, 1, r.nonce[:], r.public, r.helper)
			if err != nil {
				return none, none, err
			}
			msg, err := p.PrepSharesToPrep(prepL, prepH)
			if err != nil {
				return none, none, err
			}
			outL, err := p.PrepNext(stL, msg)
			if err != nil {
				return none, none, err
			}
			outH, err := p.PrepNext(stH, msg)
			return outL, outH, err
		}
		outL, outH, err := prep()
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			if !atk.is(users[i]) {
				return fmt.Errorf("honest volunteer %d rejected: %w", users[i], err)
			}
			rejected[pine.ReasonOf(err).String()]++
			return nil
		}
		if err := leaderAgg.Add(outL); err != nil {
			return err
		}
		return helperAgg.Add(outH)
	})
	if err != nil {
		return nil, fmt.Errorf("pine prepare: %w", err)
	}
	accepted := leaderAgg.Count()
	if accepted == 0 || helperAgg.Count() != accepted {
		return nil, fmt.Errorf("pine: %d reports accepted by the leader, %d by the helper", accepted, helperAgg.Count())
	}
	return release(p, leaderAgg, helperAgg, sigma, noiseShares, hsrc, lsrc, accepted, rejected)
}

// release is the round's output from the two servers' aggregate shares:
// each server adds its discrete Gaussian noise (σ per coordinate; the
// helper draws from hsrc first, then the leader from lsrc; with
// noiseShares 1 only the leader, the trusted-aggregator counterfactual),
// and the shares are unsharded into the noisy sum and its mean over the
// accepted reports (pineSum and pineSumFast share it, so that their noise
// is drawn alike).
func release(p *pine.Pine, leaderAgg, helperAgg *pine.AggShare, sigma float64, noiseShares int, hsrc, lsrc noise.Source, accepted int, rejected map[string]int) (*pineResult, error) {
	d := p.Config().Dimension
	shares := [2][]byte{}
	for k, a := range []*pine.AggShare{leaderAgg, helperAgg} {
		var err error
		if shares[k], err = a.MarshalBinary(); err != nil {
			return nil, err
		}
	}
	for k, src := range []noise.Source{hsrc, lsrc} {
		if sigma == 0 || (noiseShares == 1 && k == 0) {
			continue
		}
		z, err := secagg.DiscreteGaussianNoise(sigma, d, src)
		if err != nil {
			return nil, err
		}
		if err := addFieldNoise(shares[1-k], z); err != nil {
			return nil, err
		}
	}
	sum, err := p.Unshard(shares[0], shares[1])
	if err != nil {
		return nil, err
	}
	res := &pineResult{Sum: sum, Mean: make([]float64, d), Accepted: accepted, Rejected: rejected}
	for j, v := range sum {
		res.Mean[j] = v / float64(accepted)
	}
	return res, nil
}

// edgeTamper turns the leader share of an honestly sharded update x into
// a share of the edge vector t (t_j = -C sign(u_j), -C where u_j = 0;
// L2 norm C sqrt(d)): it adds enc(t) - enc(x) to the leader's
// share of the gradient (the first d Field64 elements), which a malicious
// client can do to the bytes it sends. Everything else (the claimed norm,
// the proofs, the joint randomness parts) stays as sharded for x.
func edgeTamper(p *pine.Pine, leader []byte, x, u []float64, clip float64) error {
	ex, err := p.Encode(x)
	if err != nil {
		return err
	}
	scale := p.Scale()
	k := make([]int64, len(u))
	for j, v := range u {
		t := -clip
		if v < 0 {
			t = clip
		}
		k[j] = int64(math.RoundToEven(t*scale)) - ex[j]
	}
	return addFieldNoise(leader[:8*len(k)], k)
}

// noiseSharesNote describes who adds noise.
func noiseSharesNote(shares int) string {
	if shares == 1 {
		return "ONE server's noise only (the trusted-aggregator counterfactual, not the protocol)"
	}
	return "both servers add noise"
}

// fmtReasons prints rejection counts sorted by reason.
func fmtReasons(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// pineSumFast computes exactly what pineSum returns for honest volunteers,
// without the cryptography: an honest report's PINE proof always verifies
// (pineSum fails the run if one does not), so the servers' combined
// aggregate is the field sum of the volunteers' encodings
// (pine.Pine.Encode of the clipped update), to which each server adds
// its discrete Gaussian noise from the same seeded streams as pineSum.
// The result is bit-identical to pineSum's (TestPineSumFastIsExact); it
// is the runner's -secagg-fast for crowds where PINE's preparation would
// take hours, and refuses attackers (only the real pipeline rejects
// them).
func pineSumFast(ctx context.Context, w *world, p *pine.Pine, clip, sigma float64, noiseShares int, round uint64, updates [][]float64) (*pineResult, error) {
	n := len(updates)
	if n == 0 {
		return nil, errors.New("pine: no reports")
	}
	d := p.Config().Dimension
	parts := make([][]int64, w.workers)
	for k := range parts {
		parts[k] = make([]int64, d)
	}
	err := w.forEach(ctx, n, func(worker, i int) error {
		e, err := p.Encode(clipL2(updates[i], clip))
		if err != nil {
			return fmt.Errorf("report %d: %w", i, err)
		}
		s := parts[worker]
		for j, v := range e {
			s[j] += v
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	lsrc, hsrc, _ := secaggStreams(w.seed, round)
	leaderAgg, helperAgg := p.NewAggShare(), p.NewAggShare()
	for _, s := range parts {
		if err := leaderAgg.AddSigned(s); err != nil {
			return nil, err
		}
	}
	return release(p, leaderAgg, helperAgg, sigma, noiseShares, hsrc, lsrc, n, map[string]int{})
}
