package audit

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/secagg"
	"github.com/blanket-fl/blanket/shared/wire"
)

// Secure summation (docs/secagg.md, "Audit").
//
// What is audited. The ledger charges a secure-summation round for ONE
// server's discrete Gaussian noise (privacy/secagg.go: the aggregator may
// know its own), for replacing one volunteer's data (sensitivity 2Δ, or
// group privacy on add/remove), at check-in rate q. The audit attacks
// exactly that release: Σ_i q_i + K, K the relay's noise, drawn by the
// relay's own code path — its Engine's aggregate share of an empty
// round, AggregateShare.AddNoise, the 'A' message it sends (serverNoise) —
// so the sampler, its parameters and the encoding are the shipped ones.
// With SecAggOptions.BothServers the leader's noise is added as well (the
// release when both servers are honest, which the ledger does not credit).
//
// Neighbours (replace-one, the relation the ledger charges): the target's
// update is +C·e_j under H1 and −C·e_j under H0 (two full-norm clipped
// updates in opposite directions: the quantized vectors differ by 2c in
// coordinate j, c = Params.ClipUnits(), the largest change one volunteer
// can make in one direction), everyone else's updates fixed (n − 1
// full-norm updates in seeded random directions, encoded once by
// secagg.Encode, as Shard puts them in the sum (PINE's fixed-point grid):
// the adversary may know them, the worst case). Under
// Poisson check-in the target takes part with probability q under both
// hypotheses (its coin is not its data).
//
// Reduction to the canary coordinate, and why it is exact. The release is
// S = Σ_{i≠t} q_i + q_t + K with K's coordinates i.i.d. N_Z(0, σ²),
// independent of everything else. The two hypotheses differ only in
// coordinate j; every other coordinate of S has the same law under both
// and is independent of coordinate j, so coordinate j is sufficient and
// the likelihood ratio is a function of S_j − Σ_{i≠t} q_{i,j} alone (the
// others' sum is known); for one server's discrete Gaussian it is
// monotone in it (log ratio = 2c·(S_j − base_j)/σ² for a present target),
// so the threshold test on it is the Neyman-Pearson optimal test, and
// calibrate's choice of threshold and direction covers it. Over R rounds
// the sum of the R centred coordinates is the statistic (sufficient for
// the Gaussian shift). Hence each trial needs, per round, one coordinate
// of the relay's noise, and one relay noise vector of dimension d serves
// d trials (its coordinates are independent; below noiseDim coordinates
// the noise round is widened, see noiseDim). The VDAF's unsharded sum is
// exactly Σ q_i + K_relay + K_leader (TestSecAggPathMatchesVDAF runs the
// real Shard, Prepare, Combine, Finish, AddNoise and Unshard on a small d
// and checks equality with this path on the same seeds); what the VDAF
// adds beyond the integer sum — the validity proof, the field — only
// rejects malformed reports and changes no honest release.
//
// The canary's encoding: Encode of C·e_j at dimension d clips by the norm
// (C), scales and rounds each coordinate independently (PINE: round half
// to even, deterministic); the zero coordinates encode to 0, so q_j is the
// encoding of the one-coordinate vector (C) under the same parameters,
// which is what each trial runs.

// NeighboursReplaceOne names secure summation's neighbouring datasets: the
// target's full-norm update against its opposite.
const NeighboursReplaceOne Neighbours = "replace-one"

// SecAggAttack names the secure-summation audit's one attack.
const SecAggAttack = "likelihood ratio on the canary direction"

// SecAggOptions configure RunSecAgg. Zero fields take the defaults.
type SecAggOptions struct {
	// Volunteers is the number of reports per round, the target included
	// (default 30).
	Volunteers int
	// Trials per hypothesis and phase (calibration, evaluation); default
	// 100,000.
	Trials int
	// Rounds is the number of releases each trial composes (default 1:
	// one round against the per-round charge).
	Rounds int
	// Alpha is the one-sided error of each Clopper-Pearson bound (default
	// 1e-3); Delta the δ of the bound and the charge (default 1e-5).
	Alpha, Delta float64
	// NoiseAlpha is the variance test's false-alarm probability (0:
	// Alpha).
	NoiseAlpha float64
	// Seed seeds every random choice.
	Seed uint64
	// NoiseSigma, if positive, is the σ the servers actually add (tests:
	// an under-charged canary at Sigma/k); the charge stays the spec's.
	NoiseSigma float64
	// BothServers adds the leader's noise too (not credited by the
	// ledger; the release when both servers are honest).
	BothServers bool
}

func (o SecAggOptions) withDefaults() (SecAggOptions, error) {
	if o.Volunteers == 0 {
		o.Volunteers = 30
	}
	if o.Trials == 0 {
		o.Trials = 100_000
	}
	if o.Rounds == 0 {
		o.Rounds = 1
	}
	if o.Alpha == 0 {
		o.Alpha = 1e-3
	}
	if o.Delta == 0 {
		o.Delta = 1e-5
	}
	if o.NoiseAlpha == 0 {
		o.NoiseAlpha = o.Alpha
	}
	if !(o.NoiseAlpha > 0 && o.NoiseAlpha < 0.5) {
		return o, fmt.Errorf("audit: invalid secagg options %+v", o)
	}
	if o.Volunteers < 1 || o.Trials < 10 || o.Rounds < 1 || !(o.Alpha > 0 && o.Alpha < 0.5) || !(o.Delta > 0 && o.Delta < 1) || o.NoiseSigma < 0 {
		return o, fmt.Errorf("audit: invalid secagg options %+v", o)
	}
	return o, nil
}

// SecAggResult is RunSecAgg's outcome.
type SecAggResult struct {
	// Charged is the ε the ledger charges for Rounds rounds of the spec
	// (privacy.Account's tightest proven row: replace-one) at Delta.
	Charged float64 `json:"charged"`
	Rounds  int     `json:"rounds"`
	Delta   float64 `json:"delta"`
	Trials  int     `json:"trials"`
	// Sigma is the σ of the noise added (the spec's unless NoiseSigma),
	// Shift the canary pair's difference in the canary coordinate (2c,
	// integer units), CheckIn the target's check-in probability,
	// Servers how many servers' noise the release carries (1: the
	// credited relay's).
	Sigma   float64 `json:"sigma"`
	Shift   float64 `json:"shift"`
	CheckIn float64 `json:"check_in"`
	Servers int     `json:"servers"`
	// TPR and FPR are the evaluation trials' rates at the threshold
	// chosen on the calibration trials; EpsLower the lower bound.
	TPR      float64 `json:"tpr"`
	FPR      float64 `json:"fpr"`
	EpsLower float64 `json:"eps_lower"`
	// Ceiling and Detectable (power.go): the largest bound these trials
	// can show, and the smallest true ε of a Gaussian-shaped leak this
	// run would have shown above the charge with probability >= 1/2
	// (0 when none: Ceiling <= Charged).
	Ceiling    float64 `json:"ceiling"`
	Detectable float64 `json:"detectable,omitempty"`
	// Noise is the variance test on the same noise draws (NoiseTest).
	Noise NoiseTest `json:"noise"`
}

// RunSecAgg audits Rounds rounds of a secure-summation spec (see the
// comment above): Trials calibration and Trials evaluation trials per
// hypothesis, the relay's real noise path, the likelihood-ratio test on
// the canary coordinate with its threshold chosen on the calibration
// trials, and ε_lower = ln((TPR_lo − δ)/FPR_hi) with one-sided
// Clopper-Pearson bounds at Alpha each on the evaluation trials. On the
// same 4·Trials·Rounds noise draws it runs the variance test (NoiseTest,
// noiseVarianceTest) against the spec's σ at level NoiseAlpha.
//
// Guarantee: if the release the ledger credits is (ε, δ)-DP for
// replace-one with ε = Charged, EpsLower exceeds Charged with probability
// at most 2·Alpha (Kairouz et al. 2015's hypothesis-testing
// characterization); if the servers add the spec's σ, Noise.Flagged is
// true with probability at most NoiseAlpha (up to the normal approximation,
// see noiseVarianceTest). With NoiseSigma set the mechanism audited is
// not the spec's, and EpsLower is a lower bound on that mechanism's ε.
func RunSecAgg(ctx context.Context, spec *roundspec.Spec, opts SecAggOptions) (SecAggResult, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return SecAggResult{}, err
	}
	if spec == nil || spec.Params().Protocol != wire.ProtocolSecAgg {
		return SecAggResult{}, errors.New("audit: not a secure-summation spec")
	}
	p, err := spec.SecAgg()
	if err != nil {
		return SecAggResult{}, fmt.Errorf("audit: %w", err)
	}
	np := p
	if opts.NoiseSigma > 0 && opts.NoiseSigma != p.Sigma {
		if np, err = p.Resize(p.Dim, opts.NoiseSigma); err != nil {
			return SecAggResult{}, fmt.Errorf("audit: noise parameters: %w", err)
		}
	}
	// The canary's one-coordinate parameters (see the comment above).
	p1, err := p.Resize(1, p.Sigma)
	if err != nil {
		return SecAggResult{}, fmt.Errorf("audit: canary parameters: %w", err)
	}
	qIn := spec.Params().CheckInP
	res := SecAggResult{Rounds: opts.Rounds, Delta: opts.Delta, Trials: opts.Trials, Sigma: np.Sigma, CheckIn: qIn, Servers: 1}
	if opts.BothServers {
		res.Servers = 2
	}
	base, err := othersSum(p, opts.Volunteers-1, opts.Seed)
	if err != nil {
		return SecAggResult{}, err
	}
	ns, err := newNoiseStream(np, opts.Seed, opts.BothServers)
	if err != nil {
		return SecAggResult{}, err
	}
	src := noise.NewSeeded(opts.Seed ^ 0xca2a)
	var m2 secondMoment       // the variance test's draws (every k of the trials)
	var stats [2][2][]float64 // [phase][hypothesis][trial]
	var canary [2]int64
	for phase := range 2 {
		for h := range 2 {
			stats[phase][h] = make([]float64, opts.Trials)
			sign := float64(2*h - 1) // H1: +C, H0: −C
			for t := range opts.Trials {
				if t%4096 == 0 {
					if err := ctx.Err(); err != nil {
						return SecAggResult{}, fmt.Errorf("audit: %w", err)
					}
				}
				s := 0.0
				for range opts.Rounds {
					k, j, err := ns.next(ctx)
					if err != nil {
						return SecAggResult{}, err
					}
					m2.add(k)
					var q int64
					if qIn >= 1 || noise.Bernoulli(src, qIn) {
						qs, err := secagg.Encode(p1, []float64{sign * p.Clip})
						if err != nil {
							return SecAggResult{}, fmt.Errorf("audit: canary: %w", err)
						}
						q = qs[0]
						canary[h] = q
					}
					// The released coordinate, then centred by the
					// known sum of everyone else's.
					// (j modulo d: a widened noise round, see noiseDim.)
					b := base[j%len(base)]
					release := b + q + k
					s += float64(release - b)
				}
				stats[phase][h][t] = s
			}
		}
	}
	res.Shift = float64(canary[1] - canary[0])
	thr, dir := calibrate(stats[0][0], stats[0][1], opts.Alpha, opts.Delta)
	tp, fp := 0, 0
	for t := range opts.Trials {
		if dir*stats[1][1][t] > dir*thr {
			tp++
		}
		if dir*stats[1][0][t] > dir*thr {
			fp++
		}
	}
	res.TPR, res.FPR = float64(tp)/float64(opts.Trials), float64(fp)/float64(opts.Trials)
	res.EpsLower = epsLower(tp, fp, opts.Trials, opts.Alpha, opts.Delta)
	if res.Charged, err = secAggCharge(spec, opts.Volunteers, opts.Rounds, opts.Delta); err != nil {
		return SecAggResult{}, err
	}
	res.Ceiling = Ceiling(opts.Trials, opts.Alpha, opts.Delta)
	res.Detectable, _ = Detectable(opts.Trials, opts.Alpha, opts.Delta, res.Charged)
	// The variance test holds the servers to the σ the spec announces
	// (and the ledger charges), whatever NoiseSigma they used.
	if res.Noise, err = noiseVarianceTest(m2, p.Sigma, res.Servers, opts.NoiseAlpha); err != nil {
		return SecAggResult{}, err
	}
	return res, nil
}

// secAggCharge is the ledger's charge for rounds rounds of spec at n
// reports: privacy.Account's tightest proven row.
func secAggCharge(spec *roundspec.Spec, n, rounds int, delta float64) (float64, error) {
	rs := make([]privacy.Release, rounds)
	for r := range rs {
		rs[r] = spec.Release(r+1, n, 0)
	}
	rep, err := privacy.Account(rs, delta)
	if err != nil {
		return 0, fmt.Errorf("audit: charge: %w", err)
	}
	if rep.Tightest < 0 {
		return 0, errors.New("audit: the accountant has no proven bound for this spec")
	}
	return rep.Rows[rep.Tightest].Epsilon, nil
}

// othersSum is Σ q_i over n others: full-norm updates in seeded random
// directions, each encoded by secagg.Encode.
func othersSum(p secagg.Params, n int, seed uint64) ([]int64, error) {
	src := noise.NewSeeded(seed ^ 0x07e5)
	sum := make([]int64, p.Dim)
	x := make([]float64, p.Dim)
	for range n {
		for j := range x {
			x[j] = 2*noise.Uniform(src) - 1
		}
		// Encode clips to norm Clip: scale up so that it does.
		for j := range x {
			x[j] *= 1e3 * p.Clip
		}
		q, err := secagg.Encode(p, x)
		if err != nil {
			return nil, fmt.Errorf("audit: others: %w", err)
		}
		for j, v := range q {
			sum[j] += v
		}
	}
	return sum, nil
}

// noiseStream hands out the relay's noise one coordinate at a time, with
// the coordinate's index: a fresh noise vector (serverNoise on a new
// round) every Dim draws.
type noiseStream struct {
	r     *secagg.Round
	seed  uint64
	both  bool
	buf   []int64
	i     int
	round uint64
}

// noiseDim is the smallest dimension of the rounds noiseStream draws
// from: a small model's round is widened to it (Params.Resize: same Clip
// and σ), so that the per-round setup is paid for thousands of
// coordinates. The law of each coordinate's K does not depend on the
// dimension.
const noiseDim = 4096

func newNoiseStream(p secagg.Params, seed uint64, both bool) (*noiseStream, error) {
	if p.Dim < noiseDim {
		var err error
		if p, err = p.Resize(noiseDim, p.Sigma); err != nil {
			return nil, fmt.Errorf("audit: noise round: %w", err)
		}
	}
	r, err := secagg.NewRound(p, 1)
	if err != nil {
		return nil, fmt.Errorf("audit: noise round: %w", err)
	}
	return &noiseStream{r: r, seed: seed, both: both}, nil
}

func (s *noiseStream) next(ctx context.Context) (k int64, j int, err error) {
	if s.i == len(s.buf) {
		if err := ctx.Err(); err != nil {
			return 0, 0, fmt.Errorf("audit: %w", err)
		}
		s.round++
		if s.buf, err = serverNoise(s.r, false, noise.NewSeeded(s.seed^s.round<<24^0x2e1a)); err != nil {
			return 0, 0, err
		}
		if s.both {
			l, err := serverNoise(s.r, true, noise.NewSeeded(s.seed^s.round<<24^0x1ead))
			if err != nil {
				return 0, 0, err
			}
			for i := range s.buf {
				s.buf[i] += l[i]
			}
		}
		s.i = 0
	}
	k, j = s.buf[s.i], s.i
	s.i++
	return k, j, nil
}

// serverNoise runs one server's noise step on an empty aggregate of round
// r, as the relay (leader false: relay/internal/helper) or the aggregator
// (leader true) does at the end of a real round: the server's Engine
// hands out its running aggregate's share (Aggregate.Share),
// AddNoise(src) adds K_i to every coordinate, and MarshalBinary encodes
// the 'A' message. Since the aggregate is empty the share is zero, so the
// message's coordinates are exactly K_i mod q (Field64); serverNoise
// decodes them as signed integers in (-q/2, q/2] and returns K. The same
// src gives the same K as the server's AddNoise in a round with reports.
func serverNoise(r *secagg.Round, leader bool, src noise.Source) ([]int64, error) {
	key := make([]byte, secagg.VerifyKeySize)
	eng, err := secagg.NewEngine(r, leader, key)
	if err != nil {
		return nil, fmt.Errorf("audit: noise: %w", err)
	}
	share, err := eng.NewAggregate().Share()
	if err != nil {
		return nil, fmt.Errorf("audit: noise: %w", err)
	}
	if err := share.AddNoise(src); err != nil {
		return nil, fmt.Errorf("audit: noise: %w", err)
	}
	msg, err := share.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("audit: noise: %w", err)
	}
	p := r.Params()
	// ... | count (4) = 0 | noised (1) = 1 | Dim x Field64 (little-endian).
	const q = 0xffffffff00000001
	body := len(msg) - 8*p.Dim
	if body < 5 || binary.BigEndian.Uint32(msg[body-5:]) != 0 || msg[body-1] != 1 {
		return nil, errors.New("audit: noise: unexpected aggregate share encoding")
	}
	out := make([]int64, p.Dim)
	for i := range out {
		v := binary.LittleEndian.Uint64(msg[body+8*i:])
		switch {
		case v >= q:
			return nil, errors.New("audit: noise: non-canonical field element")
		case v > q/2:
			out[i] = -int64(q - v)
		default:
			out[i] = int64(v)
		}
	}
	return out, nil
}
