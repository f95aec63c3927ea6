// Package audit attacks Blanket's own shuffle protocols and reports an
// empirical lower bound on ε next to the ε the ledger charges.
//
// For one announceable round spec it runs what ships — the volunteers'
// encoder (roundspec.Spec.Encoder), the relay's padding and shuffle
// (roundspec.Spec.Pad through Spec.Shuffle, the rule relay/internal/shuffler
// applies), and, with RealCrypto, HPKE sealing and opening of every message
// (shared/envelope) — on two neighbouring datasets that differ in one
// volunteer's update (the worst case the package constructs: see
// neighbours), and applies distinguishing attacks to what the aggregator
// receives: the batch header, every message's index, position and sealed
// size, and every opened value — among them the likelihood-ratio tests of
// lrModel, the most powerful test of one dimension's multiset and their sum
// over the dimensions the neighbours differ in. APES and S-APES (apes.go)
// are audited with volunteers at mixed levels, Clip-Laplace likelihood
// ratios whose cover the budget column gives, and a far-values probe.
//
// Each attack's statistic is thresholded on a first set of trials (the
// threshold and direction that look best there) and evaluated on fresh
// trials, so the Clopper-Pearson bounds on its true- and false-positive
// rates are valid; ε_lower = ln((TPR_lo - δ)/FPR_hi) (Kairouz et al. 2015's
// hypothesis-testing characterization of (ε, δ)-DP; Jagielski et al. 2020,
// Nasr et al. 2021 for auditing). If the mechanism is (ε, δ)-DP, every
// attack's ε_lower exceeds ε with probability at most 2·Alpha (a union
// bound over the attacks for the largest). It is an empirical lower bound
// for the attacks implemented, never a proof of privacy; LowerBound is the
// entry point for the live system (docs/privacy.md, "Audit").
//
// Secure summation (secagg.go) is audited too: the relay's discrete
// Gaussian noise — the noise the ledger credits — drawn by its real
// AddNoise path, against the replace-one canary pair ±C·e_j, with the
// likelihood-ratio test on the canary's coordinate (RunSecAgg,
// LowerBoundSecAgg). Every result states what its run could have caught
// (power.go: Ceiling, Detectable), so that a bound below the charge is
// read next to the smallest under-charge the run would have shown.
package audit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/blanket-fl/blanket/aggregator/internal/sealkey"
	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/mechanism"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/randomizer"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/wire"
)

// Options configure a run. Zero fields take the defaults.
type Options struct {
	// Volunteers is the number of reports per round (default 30).
	Volunteers int
	// Trials per hypothesis and phase (calibration, evaluation); default
	// 2,000.
	Trials int
	// Alpha is the one-sided error of each Clopper-Pearson bound (default
	// 1e-3).
	Alpha float64
	// Delta is the δ at which the lower bound and the charge are stated
	// (default 1e-5).
	Delta float64
	// Seed seeds every random choice (noise.NewSeeded): runs are
	// reproducible.
	Seed uint64
	// RealCrypto seals every message to a fresh key and opens it, as the
	// relay and the aggregator do, instead of passing values in the clear;
	// slower, and it adds the sealed bytes' features to the attacks.
	RealCrypto bool
	// Pipeline replaces the relay's round (tests use it to check that the
	// attacks catch known leaks); nil: roundspec.Spec.Shuffle.
	Pipeline func(spec *roundspec.Spec, real []mechanism.Message, src noise.Source) (mechanism.Batch, error)
	// Encoder replaces the volunteers' encoder (tests use it for a
	// client that randomizes at a larger ε than the spec charges); nil:
	// roundspec.Spec.Encoder at the announced level. The likelihood-ratio
	// attacks model the encoder's randomizer: the adversary knows the code
	// it attacks. APES and S-APES: the target's encoder only (the others
	// keep Spec.Encoder at their levels; see apesNeighbours), modelled at
	// its CoordinateEpsilon.
	Encoder *mechanism.Encoder
	// Neighbours chooses the neighbouring datasets (see neighbours);
	// NeighboursDefault: the protocol's worst case.
	Neighbours Neighbours
}

// Neighbours names a choice of neighbouring datasets.
type Neighbours string

// The neighbouring datasets Run can audit.
const (
	// NeighboursDefault is NeighboursFlip.
	NeighboursDefault Neighbours = ""
	// NeighboursFlip: the target's update is +C under H0 and -C under H1
	// on the coordinates it reports (for SS-Topk: the same top-k set
	// under both), everyone else's fixed.
	NeighboursFlip Neighbours = "flip"
	// NeighboursIndexSet (SS-Topk only): the target's top-k set is the
	// first k coordinates under H0 and the next k under H1, values +C.
	NeighboursIndexSet Neighbours = "index-set"
)

func (o Options) withDefaults() (Options, error) {
	if o.Volunteers == 0 {
		o.Volunteers = 30
	}
	if o.Trials == 0 {
		o.Trials = 2000
	}
	if o.Alpha == 0 {
		o.Alpha = 1e-3
	}
	if o.Delta == 0 {
		o.Delta = 1e-5
	}
	if o.Volunteers < 2 || o.Trials < 10 || !(o.Alpha > 0 && o.Alpha < 0.5) || !(o.Delta > 0 && o.Delta < 1) {
		return o, fmt.Errorf("audit: invalid options %+v", o)
	}
	return o, nil
}

// Finding is one attack's result.
type Finding struct {
	Attack string `json:"attack"`
	// TPR and FPR are the evaluation trials' rates at the chosen
	// threshold.
	TPR float64 `json:"tpr"`
	FPR float64 `json:"fpr"`
	// EpsLower is the (1 - 2 Alpha)-confidence lower bound on ε (0 when
	// the attack proves nothing).
	EpsLower float64 `json:"eps_lower"`
}

// Result is a run's outcome for one spec.
type Result struct {
	Params     wire.Params `json:"-"`
	Protocol   string      `json:"protocol"`
	Random     string      `json:"randomizer"`
	Neighbours Neighbours  `json:"neighbours"`
	// Charged is the per-round ε the ledger charges for this spec at
	// Options.Delta (privacy.Account's tightest proven row), NP the
	// realized n_p it was charged at.
	Charged float64 `json:"charged"`
	NP      int     `json:"n_p"`
	Delta   float64 `json:"delta"`
	Trials  int     `json:"trials"`
	// EpsLower is the largest lower bound over the attacks.
	EpsLower float64   `json:"eps_lower"`
	Findings []Finding `json:"findings"`
	// Ceiling is the largest bound any attack could show with these
	// trials at Alpha; Detectable the smallest true ε of a
	// Gaussian-shaped leak the run would have shown above the charge with
	// probability >= 1/2 (0: none, Ceiling <= Charged). See power.go.
	Ceiling    float64 `json:"ceiling"`
	Detectable float64 `json:"detectable,omitempty"`
}

// Run audits one round of spec (RunContext without a deadline).
func Run(spec *roundspec.Spec, opts Options) (Result, error) {
	return RunContext(context.Background(), spec, opts)
}

// RunContext audits one round of spec; it stops with ctx's error between
// trials.
func RunContext(ctx context.Context, spec *roundspec.Spec, opts Options) (Result, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return Result{}, err
	}
	if !spec.IsShuffle() {
		return Result{}, fmt.Errorf("audit: %v: %w", spec.Params().Protocol, roundspec.ErrNotShuffle)
	}
	p := spec.Params()
	run, err := newRunner(spec, opts)
	if err != nil {
		return Result{}, err
	}
	pair := run.pair
	if opts.RealCrypto {
		if err := run.initCrypto(); err != nil {
			return Result{}, err
		}
	}
	res := Result{Params: p, Protocol: p.Protocol.String(), Random: p.Randomizer.String(), Neighbours: pair.kind, Delta: opts.Delta, Trials: opts.Trials}
	// Calibration and evaluation: each hypothesis's trials, every attack's
	// statistic per trial.
	var stats [2][2][][]float64 // [phase][hypothesis][attack][trial]
	for phase := range 2 {
		for h := range 2 {
			stats[phase][h] = make([][]float64, len(run.attacks))
			for t := range opts.Trials {
				if err := ctx.Err(); err != nil {
					return Result{}, fmt.Errorf("audit: %w", err)
				}
				src := noise.NewSeeded(opts.Seed ^ uint64(phase)<<62 ^ uint64(h)<<61 ^ uint64(t)<<20 ^ 0x5eed)
				v, err := run.trial(h, src)
				if err != nil {
					return Result{}, err
				}
				if res.NP == 0 {
					res.NP = v.np
				}
				v.llrOne, v.llrAll = pair.lr.llr(v)
				for a, at := range run.attacks {
					stats[phase][h][a] = append(stats[phase][h][a], at.stat(v, pair))
				}
			}
		}
	}
	for a, at := range run.attacks {
		thr, dir := calibrate(stats[0][0][a], stats[0][1][a], opts.Alpha, opts.Delta)
		tp, fp := 0, 0
		for t := range opts.Trials {
			if dir*stats[1][1][a][t] > dir*thr {
				tp++
			}
			if dir*stats[1][0][a][t] > dir*thr {
				fp++
			}
		}
		f := Finding{Attack: at.name, TPR: float64(tp) / float64(opts.Trials), FPR: float64(fp) / float64(opts.Trials)}
		f.EpsLower = epsLower(tp, fp, opts.Trials, opts.Alpha, opts.Delta)
		res.Findings = append(res.Findings, f)
		res.EpsLower = max(res.EpsLower, f.EpsLower)
	}
	rep, err := privacy.Account([]privacy.Release{spec.Release(1, opts.Volunteers, res.NP)}, opts.Delta)
	if err != nil {
		return Result{}, fmt.Errorf("audit: charge: %w", err)
	}
	if rep.Tightest < 0 {
		return Result{}, errors.New("audit: the accountant has no proven bound for this spec")
	}
	res.Charged = rep.Rows[rep.Tightest].Epsilon
	res.Ceiling = Ceiling(opts.Trials, opts.Alpha, opts.Delta)
	res.Detectable, _ = Detectable(opts.Trials, opts.Alpha, opts.Delta, res.Charged)
	return res, nil
}

// calibrate returns the threshold and direction (+1: reject H0 when the
// statistic is above, -1: below) whose lower bound (epsLower at alpha and
// delta) is largest on the calibration trials; ties (in particular when no
// threshold proves anything at alpha) to the larger bound at the milder
// level calibrateAlpha, then to the larger log((TP+1)/(FP+1)). The
// milder level prefers thresholds with enough events on both sides to be
// confirmed by the evaluation trials over a tail threshold that happened
// to catch three true and no false positives. Only calibration trials are
// looked at, so the evaluation's bounds stay valid.
// calibrateAlpha is calibrate's milder level.
const calibrateAlpha = 0.05

func calibrate(h0, h1 []float64, alpha, delta float64) (thr, dir float64) {
	a, b := slices.Clone(h0), slices.Clone(h1)
	slices.Sort(a)
	slices.Sort(b)
	all := slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(a), b...))))
	// above returns how many of the sorted xs are > t; below how many < t.
	above := func(xs []float64, t float64) float64 {
		i, _ := slices.BinarySearch(xs, math.Nextafter(t, math.Inf(1)))
		return float64(len(xs) - i)
	}
	below := func(xs []float64, t float64) float64 {
		i, _ := slices.BinarySearch(xs, t)
		return float64(i)
	}
	n := len(h0)
	bestLB, bestMild, best := -1.0, -1.0, math.Inf(-1)
	thr, dir = math.Inf(1), 1
	consider := func(tp, fp float64, t, d float64) {
		lb := epsLower(int(tp), int(fp), n, alpha, delta)
		if lb < bestLB {
			return
		}
		mild := epsLower(int(tp), int(fp), n, max(alpha, calibrateAlpha), delta)
		s := math.Log((tp + 1) / (fp + 1))
		if lb > bestLB || mild > bestMild || (mild == bestMild && s > best) {
			bestLB, bestMild, best, thr, dir = lb, mild, s, t, d
		}
	}
	for i, t := range all {
		if !calibrateCandidate(i, len(all)) {
			continue
		}
		consider(above(b, t), above(a, t), t, 1)
		consider(below(b, t), below(a, t), t, -1)
	}
	return thr, dir
}

// calibrateCandidate reports whether calibrate tries the i-th of n
// distinct values as a threshold: all of them up to calibrateAll; beyond,
// the calibrateTail smallest and largest (where the thresholds of large
// bounds lie) and about calibrateAll − 2·calibrateTail evenly spaced ones
// between (each try costs two Beta quantiles; secure summation's
// statistic takes tens of thousands of distinct values). Any threshold
// chosen on calibration trials leaves the evaluation's bounds valid; the
// thinning can only make the choice less good.
func calibrateCandidate(i, n int) bool {
	if n <= calibrateAll || i < calibrateTail || i >= n-calibrateTail {
		return true
	}
	step := (n - 2*calibrateTail) / (calibrateAll - 2*calibrateTail)
	return (i-calibrateTail)%max(step, 1) == 0
}

const (
	calibrateAll  = 4000
	calibrateTail = 1000
)

// epsLower is ln((TPR_lo - delta)/FPR_hi) with one-sided Clopper-Pearson
// bounds at level alpha each (0 when not positive).
func epsLower(tp, fp, trials int, alpha, delta float64) float64 {
	tprLo := 0.0
	if tp > 0 {
		tprLo = distuv.Beta{Alpha: float64(tp), Beta: float64(trials - tp + 1)}.Quantile(alpha)
	}
	fprHi := 1.0
	if fp < trials {
		fprHi = distuv.Beta{Alpha: float64(fp + 1), Beta: float64(trials - fp)}.Quantile(1 - alpha)
	}
	if tprLo-delta <= 0 || fprHi <= 0 {
		return 0
	}
	return max(0, math.Log((tprLo-delta)/fprHi))
}

// pair is the neighbouring datasets: the target's update under each
// hypothesis and the fixed updates of everyone else; a and b are the
// dimensions the simple attacks look at (the target's large coordinates
// under hypothesis 0 and 1: their side is +1 and -1), lr the
// likelihood-ratio attacks' model of the view.
type pair struct {
	kind   Neighbours
	target [2][]float64
	others [][]float64
	a, b   []bool
	lr     *lrModel
	apes   *apesModel // APES and S-APES only
}

// neighbours builds the worst-case pair this package can construct for enc
// (the volunteers' encoder; its randomizer is the lr model's) and the
// relay's blanket rz:
//
//   - SS-Simple and SS-Double: the target's update is +C on every
//     coordinate under H0 and -C under H1 (the largest change of every
//     reported value: normalized 1 against 0), and everyone else's is -C
//     everywhere, the target's H1 value. Under H1 the target is then one
//     more copy of the others' law and under H0 the only report centred at
//     1: the cover for the H0 report is thinnest (the others give no
//     probability to "a value near 1" beyond their noise; for SS-Double the
//     relay's dummies at ω = R(1/2) are the rest of the cover, which no
//     choice of data moves).
//   - SS-Topk, NeighboursFlip (default): the target's top-k set is the
//     first k coordinates under both hypotheses, its values there +10C
//     under H0 and -10C under H1 (normalized 1 against 0); everyone else's
//     update is 0 on those coordinates (never in their top k, so the only
//     cover there is blanket samples: dummies and decoys) and fixed,
//     uniform in [-C/2, C/2], elsewhere.
//   - SS-Topk, NeighboursIndexSet: the top-k set is the first k
//     coordinates under H0 and the next k under H1, values +10C; zero for
//     everyone else on all 2k. Fewer dimensions change per unit of signal
//     (each by normalized 1/2 against the blanket's centre), but the index
//     multiset changes too: the canary of recognizable dummies needs it.
//
// (The adversary may choose everyone else's data: the charged ε is a
// bound for every pair of neighbouring datasets.)
func neighbours(spec *roundspec.Spec, enc *mechanism.Encoder, opts Options) (pair, error) {
	p := spec.Params()
	d, k, c := int(p.D), int(p.K), p.Clip
	kind := opts.Neighbours
	if kind == NeighboursDefault {
		kind = NeighboursFlip
	}
	if kind != NeighboursFlip && (kind != NeighboursIndexSet || p.Protocol != wire.ProtocolSSTopk) {
		return pair{}, fmt.Errorf("audit: neighbours %q do not apply to %v", kind, p.Protocol)
	}
	pr := pair{kind: kind, a: make([]bool, d), b: make([]bool, d)}
	rz, ok := enc.Randomizer().(*randomizer.Bounded)
	if !ok {
		return pair{}, errors.New("audit: the encoder's randomizer is not bounded")
	}
	logf, _, err := logDensity(rz)
	if err != nil {
		return pair{}, err
	}
	_, logw, err := logDensity(spec.Randomizer())
	if err != nil {
		return pair{}, err
	}
	m := &lrModel{logf: logf, logw: logw, xo: make([]float64, d), use: make([]bool, d)}
	for h := range 2 {
		pr.target[h] = make([]float64, d)
		m.p[h], m.x[h] = make([]float64, d), make([]float64, d)
	}
	n := opts.Volunteers
	src := noise.NewSeeded(opts.Seed ^ 0x07e5)
	switch p.Protocol {
	case wire.ProtocolSSTopk:
		if 2*k > d {
			return pair{}, fmt.Errorf("audit: ss-topk needs 2k <= d, got k = %d, d = %d", k, d)
		}
		for j := range k {
			pr.a[j] = true
			m.use[j] = true
			m.p[0][j], m.x[0][j] = 1, 1
			pr.target[0][j] = 10 * c
			if kind == NeighboursFlip {
				pr.target[1][j] = -10 * c
				m.p[1][j], m.x[1][j] = 1, 0
			} else {
				pr.target[1][k+j] = 10 * c
				pr.b[k+j], m.use[k+j] = true, true
				m.p[1][k+j], m.x[1][k+j] = 1, 1
			}
		}
		for range n - 1 {
			x := make([]float64, d)
			for j := range x {
				if !m.use[j] {
					x[j] = c * (2*noise.Uniform(src) - 1) / 2
				}
			}
			pr.others = append(pr.others, x)
		}
		m.one = 0
	default:
		// Every coordinate is reported with probability Perturbed/d.
		q := float64(spec.Perturbed()) / float64(d)
		for j := range d {
			pr.target[0][j], pr.target[1][j] = c, -c
			pr.a[j], m.use[j] = true, true
			m.p[0][j], m.p[1][j] = q, q
			m.x[0][j], m.x[1][j] = 1, 0
		}
		m.other = float64(n-1) * q
		for range n - 1 {
			x := make([]float64, d)
			for j := range x {
				x[j] = -c
			}
			pr.others = append(pr.others, x)
		}
	}
	pr.lr = m
	return pr, nil
}

// view is what the aggregator receives in one trial.
type view struct {
	np, messages int
	perVolunteer int // messages per report
	index        []uint32
	value        []float64
	sealed       []int // sealed sizes (RealCrypto), else nil
	// The likelihood-ratio statistics of the view (lrModel.llr).
	llrOne, llrAll float64
}

type runner struct {
	spec *roundspec.Spec
	opts Options
	pair pair
	enc  *mechanism.Encoder // the target's (and, unless encs is set, everyone's) encoder
	// encs, if set, is every volunteer's encoder (APES: mixed levels),
	// encs[0] the target's.
	encs    []*mechanism.Encoder
	attacks []attack
	key     *sealkey.PrivateKey
}

func newRunner(spec *roundspec.Spec, opts Options) (*runner, error) {
	if _, _, ok := spec.APES(); ok {
		pr, encs, err := apesNeighbours(spec, opts)
		if err != nil {
			return nil, err
		}
		return &runner{spec: spec, opts: opts, pair: pr, enc: encs[0], encs: encs, attacks: attacksFor(spec)}, nil
	}
	enc := opts.Encoder
	if enc == nil {
		var err error
		if enc, err = spec.Encoder(0); err != nil {
			return nil, fmt.Errorf("audit: %w", err)
		}
	}
	pr, err := neighbours(spec, enc, opts)
	if err != nil {
		return nil, err
	}
	return &runner{spec: spec, opts: opts, pair: pr, enc: enc, attacks: attacksFor(spec)}, nil
}

func (r *runner) initCrypto() error {
	k, err := sealkey.DeriveKey([32]byte{0xa0, 0xd1, 0x7})
	if err != nil {
		return fmt.Errorf("audit: key: %w", err)
	}
	r.key = k
	return nil
}

// trial runs one round under hypothesis h and returns the aggregator's view.
func (r *runner) trial(h int, src noise.Source) (view, error) {
	all := make([]mechanism.Message, 0, r.opts.Volunteers*r.enc.Shape().Messages)
	for i := range r.opts.Volunteers {
		x := r.pair.target[h]
		if i > 0 {
			x = r.pair.others[i-1]
		}
		enc := r.enc
		if r.encs != nil {
			enc = r.encs[i]
		}
		msgs, err := enc.Encode(x, src)
		if err != nil {
			return view{}, fmt.Errorf("audit: encode: %w", err)
		}
		all = append(all, msgs...)
	}
	pipe := r.opts.Pipeline
	if pipe == nil {
		pipe = func(spec *roundspec.Spec, real []mechanism.Message, src noise.Source) (mechanism.Batch, error) {
			b, _, err := spec.Shuffle(real, src)
			return b, err
		}
	}
	b, err := pipe(r.spec, all, src)
	if err != nil {
		return view{}, fmt.Errorf("audit: relay: %w", err)
	}
	v := view{np: b.NP, messages: len(b.Messages), perVolunteer: r.enc.Shape().Messages, index: make([]uint32, len(b.Messages)), value: make([]float64, len(b.Messages))}
	for i, m := range b.Messages {
		v.index[i], v.value[i] = m.Indices[0], m.Values[0]
	}
	if r.key != nil {
		if err := r.seal(&v); err != nil {
			return view{}, err
		}
	}
	return v, nil
}

// seal passes every value through HPKE as the relay forwards and the
// aggregator opens it, records the sealed sizes, and checks that no two
// messages share an encapsulated key (which would link them).
func (r *runner) seal(v *view) error {
	pub := r.key.Public().HPKE
	seen := make(map[[32]byte]bool, len(v.value))
	v.sealed = make([]int, len(v.value))
	for i, x := range v.value {
		s, err := envelope.SealValues(pub, 1, []float64{x})
		if err != nil {
			return fmt.Errorf("audit: seal: %w", err)
		}
		var enc [32]byte
		copy(enc[:], s)
		if seen[enc] {
			return errors.New("audit: two messages share an encapsulated key: they are linkable")
		}
		seen[enc] = true
		out, err := r.key.OpenValues(1, s, nil)
		if err != nil || len(out) != 1 {
			return fmt.Errorf("audit: open: %w", err)
		}
		v.value[i], v.sealed[i] = out[0], len(s)
	}
	return nil
}
