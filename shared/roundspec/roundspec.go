// Package roundspec is the one derivation from a round's announced
// parameters (wire.Params) to everything the parties do with them: which
// coordinates a volunteer perturbs, at which per-coordinate budget, with
// which randomizer and blanket, how the report is laid out in messages, how
// the relay pads and what it does on overflow, how the aggregator debiases,
// which output values are admissible, and which privacy release the ledger
// charges. The volunteer's client, the relay, the aggregator and the
// experiment runner all build a Spec and ask it; none of them derives any
// of this on its own, so they cannot disagree (TestPartiesAgree).
//
// # Layouts and their proofs
//
// New refuses every parameter set whose charged ε is not a proven bound for
// the aggregator's whole view. For the shuffle protocols (SS-Simple,
// SS-Double, SS-Topk) that view is, per round: the batch header (round, d,
// width, n_p, report count), and n_p·d messages in a uniformly random order,
// each a plaintext dimension index and an independently HPKE-sealed value
// of fixed size. The argument, written out in docs/privacy.md, needs:
//
//   - width 1: one coordinate per sealed message. Every message is sealed
//     under a fresh encapsulation, so no two of a volunteer's coordinates
//     are linked by bytes, size or position; the view is then, per
//     dimension j, the multiset of the n_p values with index j, and the
//     per-dimension shuffle bound (package privacy's PLD of the
//     randomizer's dominating pair at n = n_p) composes over the
//     coordinates one volunteer can change (k for SS-Double, 2lk for
//     SS-Topk, d for SS-Simple). Wider messages link a volunteer's values
//     and void that argument, so they are refused (FLAME's own width-k
//     layout included);
//   - dummies that are reports of a virtual volunteer: every randomizer's
//     blanket ω is a mixture of its outputs R(x') over x' in [0,1] (Laplace
//     and Gaussian: R(1/2); R_{γ,b}: uniform x' on the grid), so a dummy in
//     dimension j is, for the analysis, one more volunteer's report;
//   - n_p that reveals nothing about the data: for SS-Simple and SS-Double
//     the index lists are data-independent, so the relay may raise n_p to
//     the largest count (it reveals a function of the random sampling
//     only); for SS-Topk the index lists are the volunteers' top-k sets, so
//     n_p stays the announced value and overflowing dimensions are
//     truncated uniformly (mechanism.OverflowTruncate);
//   - a bounded output range (randomizer.Bounded): clamping is
//     post-processing of each message and lets the aggregator reject any
//     value an honest volunteer could not have sent.
//
// APES and S-APES (apes.go) use the same width-1 layout with one more
// column, index D, for each volunteer's chosen level; their volunteers
// each randomize at their own budget (at most the announced EpsL), the
// relay's dummies are virtual volunteers at the largest level, and the
// charge is computed at the announced maximum (docs/privacy.md, "APES and
// S-APES").
package roundspec

import (
	"errors"
	"fmt"

	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/mechanism"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/randomizer"
	"github.com/blanket-fl/blanket/shared/secagg"
	"github.com/blanket-fl/blanket/shared/wire"
)

// ErrLayout is wrapped when announced parameters are well-formed but
// describe a layout whose privacy Blanket cannot prove.
var ErrLayout = errors.New("roundspec: layout without a privacy proof")

// Protocol is one announceable protocol. Adding a protocol means adding an
// implementation to the table in protocols.go; everything else in this
// package (and in the parties) dispatches through it.
type Protocol interface {
	// Wire is the protocol's identifier in announcements.
	Wire() wire.Protocol
	// Check refuses parameters whose layout the protocol's privacy
	// argument does not cover (wrapping ErrLayout); p already passed
	// wire.Params.Validate.
	Check(p wire.Params) error
	// Defaults fills the protocol's own parameters and server learning
	// rate for a model of d parameters and about n volunteers per round,
	// given the options (zero: default).
	Defaults(d, n int, o Options) (wire.Params, float64, error)
}

// shuffleProtocol is a protocol whose volunteers randomize every reported
// coordinate locally and whose relay pads and shuffles width-1 messages
// (SS-Simple, SS-Double, SS-Topk).
type shuffleProtocol interface {
	Protocol
	// Perturbed is the number of coordinates of one report that carry the
	// volunteer's data (the per-coordinate budget is EpsL / Perturbed).
	Perturbed(p wire.Params) int
	// Changed is the number of coordinates (dimensions) in which two
	// neighbouring volunteers' reports can differ: the number of
	// per-dimension shuffle releases a neighbour's privacy loss composes
	// over.
	Changed(p wire.Params) int
	// Mechanism is the client encoding of package mechanism.
	Mechanism() mechanism.Protocol
	// Release is the privacy.Release protocol name.
	Release() string
	// Overflow is what the relay does with a dimension holding more than
	// n_p real entries.
	Overflow() mechanism.OverflowPolicy
}

// ErrNotShuffle is wrapped by the shuffle-only derivations (encoder,
// analyzer, padding) of a secure-summation spec, and ErrNotSecAgg by the
// secure-summation ones of a shuffle spec.
var (
	ErrNotShuffle = errors.New("roundspec: not a shuffle protocol")
	ErrNotSecAgg  = errors.New("roundspec: not secure summation")
)

// Spec is a round's parameters with everything derived from them. It is
// immutable and safe for concurrent use.
type Spec struct {
	p     wire.Params
	proto Protocol
	// Shuffle protocols:
	shuffle shuffleProtocol
	rz      *randomizer.Bounded
	cfg     mechanism.FLAMEConfig
	// Secure summation:
	sa *secagg.Params
	// APES and S-APES (apes.go): shuffle is set, rz is nil.
	ap *apesSpec
}

// New validates p (wire.Params.Validate and the protocol's layout check) and
// derives everything else. For a shuffle protocol: the round's randomizer at
// the per-coordinate budget p.EpsL/Perturbed (and, for the Gaussian,
// δ = p.DeltaL/Perturbed, so the report is (EpsL, DeltaL)-LDP by basic
// composition, FLAME Lemma 2), bounded as randomizer.NewBounded states. For
// secure summation: the secagg parameters (secagg.NewPineParams with the
// announced d, clip, sigma and quota as the largest report count: PINE's
// fixed point and norm bound derived from d and the clip).
func New(p wire.Params) (*Spec, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	proto, err := lookup(p.Protocol)
	if err != nil {
		return nil, err
	}
	if err := proto.Check(p); err != nil {
		return nil, err
	}
	if ap, ok := proto.(apesProtocol); ok {
		return newAPES(p, ap)
	}
	sh, ok := proto.(shuffleProtocol)
	if !ok {
		sp, err := secagg.NewPineParams(int(p.D), p.Clip, p.Sigma, int(p.Quota))
		if err != nil {
			return nil, fmt.Errorf("roundspec: secagg: %w", err)
		}
		s := &Spec{p: p, proto: proto, sa: &sp}
		if err := s.buildCounts(); err != nil {
			return nil, err
		}
		return s, nil
	}
	coords := sh.Perturbed(p)
	if coords < 1 {
		return nil, fmt.Errorf("roundspec: %v perturbs %d coordinates", p.Protocol, coords)
	}
	eps := p.EpsL / float64(coords)
	var base randomizer.Affine
	switch p.Randomizer {
	case wire.RandomizerLaplace:
		base, err = randomizer.NewLaplace(eps)
	case wire.RandomizerRGB:
		base, err = randomizer.NewRGB(eps, int(p.Buckets))
	case wire.RandomizerGaussian:
		base, err = randomizer.NewGaussian(eps, p.DeltaL/float64(coords))
	default:
		return nil, fmt.Errorf("roundspec: unknown randomizer %v", p.Randomizer)
	}
	if err != nil {
		return nil, fmt.Errorf("roundspec: %v randomizer at epsilon %v per coordinate: %w", p.Randomizer, eps, err)
	}
	rz, err := randomizer.NewBounded(base, randomizer.Reach(base))
	if err != nil {
		return nil, fmt.Errorf("roundspec: %w", err)
	}
	s := &Spec{p: p, proto: proto, shuffle: sh, rz: rz}
	s.cfg = mechanism.FLAMEConfig{
		Protocol: sh.Mechanism(), D: int(p.D), K: int(p.K), L: int(p.L),
		EpsL: p.EpsL, C: p.Clip, Width: int(p.Width),
		NewRandomizer: func(float64) (randomizer.Affine, error) { return rz, nil },
	}
	if _, err := mechanism.NewEncoder(s.cfg); err != nil {
		return nil, fmt.Errorf("roundspec: %w", err)
	}
	return s, nil
}

// IsShuffle reports whether the spec is a shuffle protocol's (its
// volunteers randomize locally and the relay pads and shuffles).
func (s *Spec) IsShuffle() bool { return s.shuffle != nil }

// SecAgg returns secure summation's parameters (ErrNotSecAgg for a shuffle
// protocol).
func (s *Spec) SecAgg() (secagg.Params, error) {
	if s.sa == nil {
		return secagg.Params{}, ErrNotSecAgg
	}
	return *s.sa, nil
}

// Params returns the announced parameters.
func (s *Spec) Params() wire.Params { return s.p }

// Protocol returns the protocol implementation.
func (s *Spec) Protocol() Protocol { return s.proto }

// Perturbed is the number of coordinates of a report carrying data (0 for
// secure summation, whose volunteers add no noise).
func (s *Spec) Perturbed() int {
	if s.shuffle == nil {
		return 0
	}
	return s.shuffle.Perturbed(s.p)
}

// Randomizer is the per-coordinate randomizer every party uses: the
// volunteers' reports, the relay's dummies (its Blanket), the aggregator's
// debiasing (its Affine mean) and admissible values (its Support). Nil for
// secure summation and for APES (whose volunteers each use Clip-Laplace at
// their own budget: see Encoder, Blanket and Dummy).
func (s *Spec) Randomizer() *randomizer.Bounded { return s.rz }

// Mechanism returns the mechanism configuration (the encoder's and
// analyzer's common input).
func (s *Spec) Mechanism() mechanism.FLAMEConfig { return s.cfg }

// Encoder returns the volunteer's encoder. personal in (0, 1) is the
// fraction of the announced budget the volunteer chose: each perturbed
// coordinate then reports its datum with probability
// mechanism.KeepFor(eps_c, personal) and a blanket sample otherwise, which
// lowers this volunteer's per-coordinate guarantee to personal·eps_c (for
// an (ε, δ) randomizer, δ·q too) and leaves everyone else's unchanged (see
// mechanism.KeepFor). Other values of personal select the announced level.
//
// APES and S-APES: personal is the volunteer's level f directly: every
// coordinate gets Clip-Laplace at f·EpsL/D, so its report is f·EpsL-LDP
// (mechanism.NewAPESWireEncoder), and the budget column carries f.
func (s *Spec) Encoder(personal float64) (*mechanism.Encoder, error) {
	if s.shuffle == nil {
		return nil, ErrNotShuffle
	}
	if s.ap != nil {
		return mechanism.NewAPESWireEncoder(s.ap.cfg, s.ap.epsMax, apesLevel(personal))
	}
	cfg := s.cfg
	if personal > 0 && personal < 1 {
		q, err := mechanism.KeepFor(s.rz.Epsilon(), personal)
		if err != nil {
			return nil, fmt.Errorf("roundspec: personal level: %w", err)
		}
		cfg.Keep = q
	}
	return mechanism.NewEncoder(cfg)
}

// Analyzer returns the aggregator's estimator of a shuffle round (APES and
// S-APES: mechanism.NewAPESWireAnalyzer, which reads and range-checks the
// budget column and calibrates per APES eq. (1)).
func (s *Spec) Analyzer() (*mechanism.Analyzer, error) {
	if s.shuffle == nil {
		return nil, ErrNotShuffle
	}
	if s.ap != nil {
		return mechanism.NewAPESWireAnalyzer(s.ap.cfg, s.ap.epsMax)
	}
	return mechanism.NewAnalyzer(s.cfg)
}

// Center is E[ω], the blanket mean: a value that must be neutralized (it
// failed to open, or lies outside the support) is replaced by it, so it
// adds zero to the debiased sum in expectation, as a dummy does. For APES
// it is 1/2, Clip-Laplace's centre (the mean output of a zero update) and,
// in the budget column, a level in (0, 1].
func (s *Spec) Center() float64 {
	if s.ap != nil {
		return 0.5
	}
	if s.rz == nil {
		return 0
	}
	offset, slope := s.rz.Affine()
	return offset + slope/2
}

// Admissible reports whether v is a value an honest volunteer or a dummy
// can carry (randomizer.Bounded.Contains). For APES: a finite value in
// Clip-Laplace's output range [0, 1] (APESRangeRatio 1), which holds every
// value and every level in (0, 1]; the analyzer range-checks the budget
// column further (mechanism.APESLevelOrCentre).
func (s *Spec) Admissible(v float64) bool {
	if s.ap != nil {
		lo, hi := s.ap.top.Bounds()
		return v >= lo && v <= hi
	}
	return s.rz != nil && s.rz.Contains(v)
}

// Overflow is the relay's overflow policy for this protocol (OverflowError
// for secure summation, which pads nothing).
func (s *Spec) Overflow() mechanism.OverflowPolicy {
	if s.shuffle == nil {
		return mechanism.OverflowError
	}
	return s.shuffle.Overflow()
}

// Release returns the privacy.Release the ledger charges for a round with
// n reports whose batch held np admissible values in every dimension (the
// aggregator counts np itself: the smallest per-dimension count of values
// that opened and lie in the support; the relay's declared report count
// does not enter the charge).
//
// Guarantee (docs/privacy.md): against replacement of one volunteer's
// update, the round is (ε, δ)-DP for the composition over Changed
// coordinates of the per-dimension shuffle bound with np messages, each
// Eps0 = EpsL/Perturbed (δ0 = DeltaL/Perturbed) LDP; privacy.Account
// computes it. For SS-Simple every dimension holds the same np messages
// (the volunteers' and the relay's), so the release's shuffle population N
// is np.
func (s *Spec) Release(round, n, np int) privacy.Release {
	if s.shuffle == nil {
		// Secure summation (docs/privacy.md, docs/secagg.md): the released
		// sum carries one server's discrete Gaussian noise, σ = Sigma,
		// against one accepted report of L2 norm at most Sensitivity =
		// PINE's NormBound (what the proof enforces on EVERY accepted
		// report, fixed-point rounding included);
		// volunteers took part by their own coin at rate CheckInP (Poisson
		// check-in). privacy.Account states it for add/remove one
		// volunteer (privacy/secagg.go). n_p does not apply.
		r := privacy.Release{
			Round: round, Protocol: privacy.ProtocolSecAgg, Randomizer: privacy.RandomizerDiscreteGaussian,
			D: int(s.p.D), K: int(s.p.D), N: max(n, 1),
			SecAggSigma: s.sa.Sigma, SecAggSensitivity: s.sa.Sensitivity(), CheckInRate: s.p.CheckInP,
		}
		// With count blocks: the joint release (countsRelease).
		return s.countsRelease(r)
	}
	if s.ap != nil {
		return s.apesRelease(round, np)
	}
	r := privacy.Release{
		Round: round, Protocol: s.shuffle.Release(), Randomizer: s.rz.Name(),
		Eps0: s.rz.Epsilon(), Delta0: s.rz.Delta(),
		D: int(s.p.D), K: int(s.p.K), L: int(s.p.L), N: n, NP: np,
	}
	if s.p.Randomizer == wire.RandomizerRGB {
		r.Buckets = int(s.p.Buckets)
	}
	switch s.p.Protocol {
	case wire.ProtocolSSSimple:
		r.K, r.L, r.N, r.NP = int(s.p.D), 0, np, 0
	case wire.ProtocolSSDouble:
		r.L = 0
	}
	return r
}

// LocalRelease describes one report for the volunteer's own local-model
// accountant (privacy.AccountLocal): Perturbed coordinates at the
// per-coordinate guarantee, lowered by a personal level as Encoder states.
//
// Secure summation has no local noise: its LocalRelease is the round's own
// release at n = 1 (the volunteer's guarantee rests on one honest server's
// noise, not on its device), to be accounted with privacy.Account.
func (s *Spec) LocalRelease(personal float64) privacy.Release {
	if s.shuffle == nil {
		return s.Release(1, 1, 0)
	}
	if s.ap != nil {
		// The volunteer's own level: D coordinates at f·ε*.
		return privacy.Release{
			Protocol: privacy.ProtocolLocal, Randomizer: privacy.RandomizerClipLaplace,
			Eps0: apesLevel(personal) * s.ap.epsMax, D: int(s.p.D), K: int(s.p.D), L: 1, N: 1,
		}
	}
	eps, delta := s.rz.Epsilon(), s.rz.Delta()
	if personal > 0 && personal < 1 {
		if q, err := mechanism.KeepFor(eps, personal); err == nil {
			eps, delta = mechanism.KeptEpsilon(eps, q), delta*q
		}
	}
	return privacy.Release{
		Protocol: privacy.ProtocolLocal, Randomizer: s.rz.Name(), Eps0: eps, Delta0: delta,
		D: int(s.p.D), K: s.Perturbed(), L: 1, N: 1,
	}
}

// NoiseStd returns the standard deviation of one debiased reported
// coordinate at the centre of the range, in update units.
//
// Derivation. The analyzer maps a randomized value y of a normalized
// coordinate x~ back by z = (y - offset)/slope and then to update units by
// C(2z - 1) (mechanism.clipper.Denormalize), so noise of standard deviation
// sd on y becomes 2C·sd/slope, with sd the bounded randomizer's output
// standard deviation at x~ = 1/2 (randomizer.Bounded.Std: the clamped
// Laplace or Gaussian noise, R_{γ,b}'s mixture of randomized rounding and
// uniform) and slope its Affine slope (the clamped mean's tangent).
//
// Secure summation: the standard deviation, in update units, of one
// server's noise on a coordinate of the summed update (σ/Scale).
func (s *Spec) NoiseStd() (float64, error) {
	if s.shuffle == nil {
		return s.sa.Sigma / s.sa.Scale, nil
	}
	if s.ap != nil {
		return s.apesNoiseStd(), nil
	}
	_, slope := s.rz.Affine()
	return 2 * s.p.Clip * s.rz.Std() / slope, nil
}

// Padding is the relay's plan for one round of width-1 messages: which real
// messages it keeps, the n_p every dimension is padded to, and the dimension
// of every dummy it adds.
type Padding struct {
	// NP is the realized n_p: the announced one, or (OverflowRaise) the
	// largest real count when that is larger.
	NP int
	// Keep marks the real messages kept (nil: all of them).
	Keep []bool
	// Dummies lists the dimension of each dummy message, in dimension order
	// (the order is erased by the shuffle that follows).
	Dummies []uint32
	// Overflowed counts the dimensions whose real count exceeded the
	// announced n_p; Truncated the real messages dropped
	// (OverflowTruncate). Neither is ever sent to the aggregator.
	Overflowed, Truncated int
}

// Pad plans the padding of a round whose real messages have the single
// indices dims, by the protocol's overflow policy (see the package
// documentation, "n_p that reveals nothing about the data"): after it,
// every dimension holds exactly NP messages (APES: every column, budget
// column included). It is the one padding rule the
// relay (relay/internal/shuffler), the experiment runner and the privacy
// audit apply; src draws the truncation (crypto randomness in production).
func (s *Spec) Pad(dims []uint32, src noise.Source) (Padding, error) {
	if s.shuffle == nil {
		return Padding{}, ErrNotShuffle
	}
	d, target := int(s.p.Columns()), int(s.p.NP)
	counts := make([]int, d)
	hi := 0
	for i, j := range dims {
		if int64(j) >= int64(d) {
			return Padding{}, fmt.Errorf("roundspec: message %d: index %d >= d=%d", i, j, d)
		}
		counts[j]++
		hi = max(hi, counts[j])
	}
	pad := Padding{NP: target}
	for _, c := range counts {
		if c > target {
			pad.Overflowed++
		}
	}
	switch s.shuffle.Overflow() {
	case mechanism.OverflowRaise:
		pad.NP = max(target, hi)
	case mechanism.OverflowTruncate:
		if pad.Overflowed > 0 {
			keep, dropped, err := mechanism.KeepAtMost(dims, d, target, src)
			if err != nil {
				return Padding{}, fmt.Errorf("roundspec: %w", err)
			}
			pad.Keep, pad.Truncated = keep, dropped
			for i, j := range dims {
				if !keep[i] {
					counts[j]--
				}
			}
		}
	default:
		return Padding{}, fmt.Errorf("roundspec: overflow policy %v", s.shuffle.Overflow())
	}
	total := 0
	for _, c := range counts {
		total += pad.NP - c
	}
	pad.Dummies = make([]uint32, 0, total)
	for j, c := range counts {
		for range pad.NP - c {
			pad.Dummies = append(pad.Dummies, uint32(j))
		}
	}
	return pad, nil
}

// Shuffle is the relay's round on plaintext width-1 messages, for the
// experiment runner and the privacy audit: Pad, then dummies carrying
// Dummy values (blanket samples of Randomizer; APES: virtual volunteers at
// the largest level), then a uniform permutation of all messages
// (noise.Shuffle) — the law of the batch the aggregator opens from the real
// relay (relay/internal/shuffler, which seals the same dummies). The
// result aliases the kept real messages.
func (s *Spec) Shuffle(real []mechanism.Message, src noise.Source) (mechanism.Batch, Padding, error) {
	dims := make([]uint32, len(real))
	for i, m := range real {
		if len(m.Indices) != 1 || len(m.Values) != 1 {
			return mechanism.Batch{}, Padding{}, fmt.Errorf("roundspec: message %d has %d entries, want 1", i, len(m.Indices))
		}
		dims[i] = m.Indices[0]
	}
	pad, err := s.Pad(dims, src)
	if err != nil {
		return mechanism.Batch{}, Padding{}, err
	}
	out := make([]mechanism.Message, 0, len(real)+len(pad.Dummies))
	for i, m := range real {
		if pad.Keep == nil || pad.Keep[i] {
			out = append(out, m)
		}
	}
	kept := len(out)
	idx := make([]uint32, len(pad.Dummies))
	vals := make([]float64, len(pad.Dummies))
	for t, j := range pad.Dummies {
		idx[t], vals[t] = j, s.Dummy(j, src)
		out = append(out, mechanism.Message{Indices: idx[t : t+1 : t+1], Values: vals[t : t+1 : t+1]})
	}
	noise.Shuffle(src, len(out), func(a, b int) { out[a], out[b] = out[b], out[a] })
	st := mechanism.RelayStats{RealMessages: kept, DummyMessages: len(pad.Dummies), RealEntries: kept, DummyEntries: len(pad.Dummies),
		TargetNP: int(s.p.NP), RealizedNP: pad.NP, Raised: pad.NP != int(s.p.NP), Truncated: pad.Truncated}
	return mechanism.Batch{D: int(s.p.Columns()), NP: pad.NP, Messages: out, Stats: st}, pad, nil
}

// SecAggRound returns the secagg round of an announced secure-summation
// round (its sharding, share sizes and message formats), or ErrNotSecAgg.
func (s *Spec) SecAggRound(round uint64) (*secagg.Round, error) {
	if s.sa == nil {
		return nil, ErrNotSecAgg
	}
	return secagg.NewRound(*s.sa, round)
}

// SharesSizes returns the sizes of a secure-summation report's sealed
// leader and helper shares (envelope.ShareSealedLen of the secagg share
// sizes), which fix the Shares frame's size (wire.SharesSize).
func (s *Spec) SharesSizes() (leader, helper int, err error) {
	r, err := s.SecAggRound(1)
	if err != nil {
		return 0, 0, err
	}
	return envelope.ShareSealedLen(r.LeaderShareSize()), envelope.ShareSealedLen(r.HelperShareSize()), nil
}
