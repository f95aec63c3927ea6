package roundspec

import (
	"errors"
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/shared/mechanism"
	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/secagg"
	"github.com/blanket-fl/blanket/shared/wire"
)

// protocols is the protocol table: one implementation per announceable
// protocol.
var protocols = []Protocol{ssSimple{}, ssDouble{}, ssTopk{}, secAgg{}, apes{}, sapes{}}

// Protocols returns the announceable protocols in wire order.
func Protocols() []Protocol { return append([]Protocol(nil), protocols...) }

// ShuffleProtocols returns the announceable shuffle protocols (local
// randomizers, padding and shuffle by the relay) in wire order.
func ShuffleProtocols() []Protocol {
	var out []Protocol
	for _, p := range protocols {
		if _, ok := p.(shuffleProtocol); ok {
			out = append(out, p)
		}
	}
	return out
}

// lookup returns the implementation of an announced protocol.
func lookup(id wire.Protocol) (Protocol, error) {
	for _, p := range protocols {
		if p.Wire() == id {
			return p, nil
		}
	}
	return nil, fmt.Errorf("roundspec: unknown protocol %v", id)
}

// Options are the operator's choices for a round configuration; a zero
// field takes the protocol's default. Build turns them into Params.
type Options struct {
	Protocol   wire.Protocol   // default SS-Topk
	Randomizer wire.Randomizer // default Laplace
	// K (or Beta = k/d) is the number of perturbed coordinates of SS-Double
	// and SS-Topk; default round(d/50), FLAME's β = 1/50.
	K    int
	Beta float64
	// L is SS-Topk's number of groups; default the largest the padding
	// holds (FLAME Theorem 5, mechanism.TopkNu).
	L int
	// NP is the padding per dimension; default ceil(n/NPRatio) (SS-Double,
	// SS-Topk) with NPRatio default 3, FLAME's n/n_p; n for SS-Simple.
	NP      int
	NPRatio float64
	Buckets int // R_{γ,b}'s b (required for rgb)
	// MinBatch (default min(20, n)), Quota (default none).
	MinBatch, Quota int
	// EpsL (default DefaultEpsLFor(d): FLAME's 0.5 per coordinate at the
	// default k, 78.5 at d = 7850 where k = 157), DeltaL
	// (Gaussian only; default 1e-6), Clip (default 0.01, FLAME's C),
	// CheckInP (default 1).
	EpsL, DeltaL, Clip, CheckInP float64
	// ServerLR multiplies the estimated mean update (default d/k for
	// SS-Topk, as FLAME's code, 1 otherwise).
	ServerLR float64
	// Secure summation (PINE, secagg.NewPineParams): Bits must be 0
	// (PINE has no per-entry width; it is SumVec's, kept only as the
	// lab's baseline) and Sigma is each server's discrete Gaussian noise
	// in PINE's fixed-point units (required: see CalibrateSigma). Its Clip is the L2 norm of an update (default
	// DefaultSecAggClip) and Quota, the largest report count the field
	// arithmetic is sized for, defaults to 2n.
	Bits  int
	Sigma float64
}

// Defaults of Options.
const (
	// DefaultEpsL is DefaultEpsLFor(7850), the digits' default.
	DefaultEpsL = 78.5
	// DefaultCoordinateEpsilon is FLAME's budget per perturbed
	// coordinate (Section 6: eps_l = 78.5 over k = 157).
	DefaultCoordinateEpsilon = 0.5
	DefaultClip              = 0.01
	DefaultBetaInv           = 50
	DefaultNPRatio           = 3
	DefaultMinBatch          = 20
	// DefaultTargetDelta is the δ of a run's (ε, δ) target when the task
	// names none: both servers' ledgers compose at it.
	DefaultTargetDelta = 1e-5
	DefaultDeltaL      = 1e-6
	// Secure summation's defaults, tuned on the embedded digits for a
	// live class of about 230 volunteers (docs/experiments.md, "Secure
	// summation"): an L2 clip of 0.3 and a server learning rate of 8.
	// DefaultBits is the bits per entry of the Prio3 SumVec baseline the
	// lab can still run for comparison (Δ within 1% of the clip norm);
	// the product's secure summation is PINE and announces no bits.
	DefaultBits       = 10
	DefaultSecAggClip = 0.3
	DefaultSecAggLR   = 8
)

// Build returns the round parameters and server learning rate that o
// describes for a model of d parameters and about n volunteers per round,
// validated by New (so only layouts with a privacy proof come out).
func Build(d, n int, o Options) (wire.Params, float64, error) {
	if d < 2 || n < 1 {
		return wire.Params{}, 0, fmt.Errorf("roundspec: build needs d >= 2 and n >= 1, got d=%d n=%d", d, n)
	}
	if o.Protocol == 0 {
		o.Protocol = wire.ProtocolSSTopk
	}
	if o.Randomizer == 0 {
		o.Randomizer = wire.RandomizerLaplace
		if o.Protocol.IsAPES() {
			o.Randomizer = wire.RandomizerClipLaplace
		}
	}
	for _, v := range []struct {
		name string
		v    int
	}{{"k", o.K}, {"l", o.L}, {"n_p", o.NP}, {"buckets", o.Buckets}, {"min batch", o.MinBatch}, {"quota", o.Quota}, {"bits", o.Bits}} {
		if v.v < 0 || v.v > math.MaxUint32 {
			return wire.Params{}, 0, fmt.Errorf("roundspec: %s must be in [0, %d], got %d", v.name, uint32(math.MaxUint32), v.v)
		}
	}
	for _, v := range []struct {
		name string
		v    float64
	}{{"beta", o.Beta}, {"n/n_p ratio", o.NPRatio}, {"eps_l", o.EpsL}, {"delta_l", o.DeltaL}, {"clip", o.Clip}, {"check-in rate", o.CheckInP}, {"server learning rate", o.ServerLR}, {"sigma", o.Sigma}} {
		if math.IsNaN(v.v) || math.IsInf(v.v, 0) || v.v < 0 {
			return wire.Params{}, 0, fmt.Errorf("roundspec: %s must be finite and >= 0, got %v", v.name, v.v)
		}
	}
	proto, err := lookup(o.Protocol)
	if err != nil {
		return wire.Params{}, 0, err
	}
	p, lr, err := proto.Defaults(d, n, o)
	if err != nil {
		return wire.Params{}, 0, err
	}
	p.Protocol, p.Randomizer, p.D = o.Protocol, o.Randomizer, uint32(d)
	p.CheckInP = orF(o.CheckInP, 1)
	p.MinBatch = uint32(min(max(o.MinBatch, 0), math.MaxUint32))
	if p.MinBatch == 0 {
		p.MinBatch = uint32(min(DefaultMinBatch, n))
	}
	if p.Protocol == wire.ProtocolSecAgg {
		p.Randomizer = wire.RandomizerDiscreteGaussian
		p.Clip = orF(o.Clip, DefaultSecAggClip)
		if o.ServerLR > 0 {
			lr = o.ServerLR
		}
		if _, err := New(p); err != nil {
			return wire.Params{}, 0, err
		}
		return p, lr, nil
	}
	p.EpsL = orF(o.EpsL, DefaultEpsLFor(d))
	p.Clip = orF(o.Clip, DefaultClip)
	if p.Randomizer == wire.RandomizerGaussian {
		p.DeltaL = orF(o.DeltaL, DefaultDeltaL)
	}
	if p.Randomizer == wire.RandomizerRGB {
		p.Buckets = uint32(o.Buckets)
	}
	p.Quota = uint32(o.Quota)
	if o.ServerLR > 0 {
		lr = o.ServerLR
	}
	if _, err := New(p); err != nil {
		return wire.Params{}, 0, err
	}
	return p, lr, nil
}

func orF(v, def float64) float64 {
	if v == 0 {
		return def
	}
	return v
}

// DefaultEpsLFor is the default local budget of one report for a model of
// d parameters: DefaultCoordinateEpsilon per coordinate of the default k
// (chooseK: round(d/50), at least 1), so that a task of any d starts from
// FLAME's per-coordinate budget; 78.5 at d = 7850 (DefaultEpsL), 0.5 for
// d < 75.
func DefaultEpsLFor(d int) float64 {
	return DefaultCoordinateEpsilon * float64(chooseK(d, Options{}))
}

// chooseK is o.K, or round(Beta·d), or round(d/50), within [1, d-1].
func chooseK(d int, o Options) int {
	k := o.K
	if k == 0 && o.Beta > 0 {
		k = int(math.Round(o.Beta * float64(d)))
	}
	if k == 0 {
		k = int(math.Round(float64(d) / DefaultBetaInv))
	}
	return max(1, min(d-1, k))
}

// chooseNP is o.NP or ceil(n/ratio).
func chooseNP(n int, o Options) int {
	if o.NP > 0 {
		return o.NP
	}
	ratio := orF(o.NPRatio, DefaultNPRatio)
	// A small tolerance so that a ratio printed in full gives back the
	// same n_p.
	return max(1, int(math.Ceil(float64(n)/ratio-1e-9)))
}

// checkWidth1 is the layout check of every shuffle protocol: see the
// package documentation.
func checkWidth1(p wire.Params) error {
	if p.Width != 1 {
		return fmt.Errorf("%w: %v with messages of width %d links a volunteer's coordinates after the shuffle; only width 1 is covered by the per-dimension shuffle bound", ErrLayout, p.Protocol, p.Width)
	}
	return nil
}

// ssSimple: every volunteer reports all d coordinates at EpsL/d (FLAME
// "Simple Protocol"). Index lists are data-independent (every dimension
// once), so every dimension holds exactly n real entries and raising n_p to
// n reveals only n.
type ssSimple struct{}

func (ssSimple) Wire() wire.Protocol                { return wire.ProtocolSSSimple }
func (ssSimple) Check(p wire.Params) error          { return checkWidth1(p) }
func (ssSimple) Perturbed(p wire.Params) int        { return int(p.D) }
func (ssSimple) Changed(p wire.Params) int          { return int(p.D) }
func (ssSimple) Mechanism() mechanism.Protocol      { return mechanism.SSSimple }
func (ssSimple) Release() string                    { return privacy.ProtocolSSSimple }
func (ssSimple) Overflow() mechanism.OverflowPolicy { return mechanism.OverflowRaise }
func (ssSimple) Defaults(d, n int, o Options) (wire.Params, float64, error) {
	np := o.NP
	if np == 0 {
		np = n
	}
	return wire.Params{K: uint32(d), L: 1, Width: 1, NP: uint32(np)}, 1, nil
}

// ssDouble: k of d coordinates sampled uniformly without replacement,
// independently of the data, each at EpsL/k (FLAME "Double
// Amplification"). The counts per dimension are a function of that sampling
// only, so raising n_p reveals nothing about the data.
type ssDouble struct{}

func (ssDouble) Wire() wire.Protocol                { return wire.ProtocolSSDouble }
func (ssDouble) Check(p wire.Params) error          { return checkWidth1(p) }
func (ssDouble) Perturbed(p wire.Params) int        { return int(p.K) }
func (ssDouble) Changed(p wire.Params) int          { return int(p.K) }
func (ssDouble) Mechanism() mechanism.Protocol      { return mechanism.SSDouble }
func (ssDouble) Release() string                    { return privacy.ProtocolSSDouble }
func (ssDouble) Overflow() mechanism.OverflowPolicy { return mechanism.OverflowRaise }
func (ssDouble) Defaults(d, n int, o Options) (wire.Params, float64, error) {
	return wire.Params{K: uint32(chooseK(d, o)), L: 1, Width: 1, NP: uint32(chooseNP(n, o))}, 1, nil
}

// ssTopk: the top k coordinates by magnitude at EpsL/k each, hidden among
// k(l-1) decoys carrying blanket samples (FLAME Algorithm 4). The index
// lists depend on the data, so n_p never moves (truncation), and a
// neighbour can change up to 2lk dimensions (its whole index set).
type ssTopk struct{}

func (ssTopk) Wire() wire.Protocol                { return wire.ProtocolSSTopk }
func (ssTopk) Check(p wire.Params) error          { return checkWidth1(p) }
func (ssTopk) Perturbed(p wire.Params) int        { return int(p.K) }
func (ssTopk) Changed(p wire.Params) int          { return int(min(uint64(p.D), 2*uint64(p.L)*uint64(p.K))) }
func (ssTopk) Mechanism() mechanism.Protocol      { return mechanism.SSTopk }
func (ssTopk) Release() string                    { return privacy.ProtocolSSTopk }
func (ssTopk) Overflow() mechanism.OverflowPolicy { return mechanism.OverflowTruncate }
func (ssTopk) Defaults(d, n int, o Options) (wire.Params, float64, error) {
	k := chooseK(d, o)
	np := chooseNP(n, o)
	l := o.L
	if l == 0 {
		var err error
		if _, l, err = mechanism.TopkNu(n, np, d, k); err != nil {
			return wire.Params{}, 0, fmt.Errorf("roundspec: ss-topk groups: %w", err)
		}
	}
	return wire.Params{K: uint32(k), L: uint32(l), Width: 1, NP: uint32(np)}, float64(d) / float64(k), nil
}

// secAgg: secure summation through the relay (PINE rounds, shared/secagg
// and shared/pine: the proof bounds each report's L2 norm) with discrete
// Gaussian noise from both servers. One report per volunteer
// (two sealed input shares); no local noise, no padding, no shuffle. Its
// privacy rests on one honest server's noise (docs/privacy.md).
type secAgg struct{}

func (secAgg) Wire() wire.Protocol { return wire.ProtocolSecAgg }

// Check: the layout is fixed by wire.Params.Validate (one report of two
// shares); the parameters must also make valid secagg parameters (field
// arithmetic sized for Quota reports), which New checks.
func (secAgg) Check(wire.Params) error { return nil }

func (secAgg) Defaults(d, n int, o Options) (wire.Params, float64, error) {
	if o.Sigma <= 0 {
		return wire.Params{}, 0, errors.New("roundspec: secagg needs sigma (CalibrateSigma gives the smallest for a budget)")
	}
	if o.Bits != 0 {
		return wire.Params{}, 0, fmt.Errorf("roundspec: secagg is PINE (an L2-norm proof, no bits per entry); bits = %d, want 0", o.Bits)
	}
	quota := o.Quota
	if quota == 0 {
		quota = 2 * n
	}
	p := wire.Params{K: 1, L: 1, Width: 1, Sigma: o.Sigma, Quota: uint32(quota)}
	return p, DefaultSecAggLR, nil
}

// CalibrateSigma returns the smallest per-server noise σ (grid units) with
// which `rounds` rounds of secure summation at check-in rate q, with the
// update clip and bits of o (defaults as Build's) for a model of d
// parameters, are (eps, delta)-DP for replacing one volunteer's data — the
// relation the ledger charges for every protocol
// (privacy.CalibrateSecAggSigmaReplaceOne: the better of group privacy on
// the add/remove guarantee under Poisson check-in and sensitivity 2Δ
// without amplification; discrete Gaussian RDP; certified bisection).
func CalibrateSigma(d int, o Options, rounds int, q, eps, delta float64) (float64, error) {
	if o.Bits != 0 {
		return 0, fmt.Errorf("roundspec: calibrate: secagg is PINE, bits = %d, want 0", o.Bits)
	}
	// The sensitivity does not depend on sigma or the report count: PINE's
	// NormBound, the L2 bound on every accepted report (rounding included).
	sp, err := secagg.NewPineParams(d, orF(o.Clip, DefaultSecAggClip), 0, max(o.Quota, 2))
	if err != nil {
		return 0, fmt.Errorf("roundspec: calibrate: %w", err)
	}
	return privacy.CalibrateSecAggSigmaReplaceOne(eps, delta, rounds, q, sp.Sensitivity())
}
