// Package operator is the teacher's control of a running aggregator
// (docs/web.md): the form's configuration change (ConfigChange, ParseForm),
// its sane ranges, the derivation of the next rounds' parameters from it
// (Plan: the same params.Build as the command-line flags), and the
// password check of every control (Auth: session cookie, header or form
// field, compared in constant time; foreign origins refused). It holds no
// state: the server validates the planned parameters against the ledger
// and swaps them in between rounds.
package operator

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/params"
	"github.com/blanket-fl/blanket/shared/mechanism"
	"github.com/blanket-fl/blanket/shared/wire"
)

// MaxRoundTimeout bounds the round timeout an operator may set.
const MaxRoundTimeout = 24 * time.Hour

// Current is the configuration a change starts from.
type Current struct {
	Params    wire.Params
	ServerLR  float64
	Timeout   time.Duration
	ExpectedN int
	// Rounds is the rounds to run (0: until the budget); TargetEpsilon
	// and TargetDelta the ledger's target. A switch to secure summation
	// calibrates σ to them (params.SecAggSigma), or takes OfferedSigma,
	// the σ the page offered, when the check-in rate is unchanged.
	Rounds                     int
	TargetEpsilon, TargetDelta float64
	OfferedSigma               func() (float64, error)
}

// Plan derives the parameters, server learning rate and round timeout of
// the next rounds from the change c of cur. The parameters are rebuilt
// like the command-line flags (params.Build for a model of d parameters
// and cur.ExpectedN reports: width 1, l by FLAME Theorem 5 from n and
// n_p); the caller still validates them as a server configuration and
// against the privacy ledger.
func Plan(c ConfigChange, cur Current) (wire.Params, float64, time.Duration, error) {
	p := cur.Params
	for _, v := range []struct {
		name string
		v    float64
	}{{"eps_l", c.EpsL}, {"clip", c.Clip}, {"beta", c.Beta}, {"np_ratio", c.NPRatio}, {"check_in_p", c.CheckInP}, {"server_lr", c.ServerLR}} {
		if math.IsNaN(v.v) || math.IsInf(v.v, 0) || v.v < 0 {
			return wire.Params{}, 0, 0, fmt.Errorf("operator: %s must be a finite number >= 0, got %v", v.name, v.v)
		}
	}
	if c.K < 0 || c.MinBatch < 0 || c.RoundTimeout < 0 || c.RoundTimeout > MaxRoundTimeout {
		return wire.Params{}, 0, 0, fmt.Errorf("operator: k, min batch and round timeout must be >= 0 (timeout at most %v)", MaxRoundTimeout)
	}
	d := int(p.D)
	n := cur.ExpectedN
	if err := c.checkRanges(d, n); err != nil {
		return wire.Params{}, 0, 0, err
	}
	proto := p.Protocol
	if c.Protocol != "" {
		var err error
		if proto, err = wire.ParseProtocol(c.Protocol); err != nil {
			return wire.Params{}, 0, 0, fmt.Errorf("operator: %w", err)
		}
	}
	if proto != p.Protocol {
		// A new protocol starts from its own defaults: values the form
		// still shows from the old protocol (server learning rate d/k of
		// ss-topk, its k and padding) are not carried over.
		if c.ServerLR == cur.ServerLR {
			c.ServerLR = 0
		}
		if c.K == int(p.K) {
			c.K = 0
		}
		if p.NP > 0 && math.Abs(c.NPRatio-float64(n)/float64(p.NP)) < 1e-6 {
			c.NPRatio = 0
		}
		// Secure summation's clip is an L2 norm, the shuffle protocols' a
		// per-coordinate bound: a switch between them starts from the
		// new one's default.
		if (proto == wire.ProtocolSecAgg) != (p.Protocol == wire.ProtocolSecAgg) && c.Clip == p.Clip {
			c.Clip = 0
		}
	}
	f := params.Choice{Protocol: proto.String(), Randomizer: p.Randomizer.String(), Buckets: int(p.Buckets),
		MinBatch: int(p.MinBatch), EpsL: p.EpsL, DeltaL: p.DeltaL, Clip: p.Clip, CheckIn: p.CheckInP, ServerLR: c.ServerLR}
	if (proto == wire.ProtocolSecAgg) != (p.Protocol == wire.ProtocolSecAgg) {
		f.Clip = 0 // the other kind of clip: the new protocol's default
	}
	if p.Protocol == wire.ProtocolSecAgg && proto != wire.ProtocolSecAgg {
		f.Randomizer = wire.RandomizerLaplace.String()
	}
	if proto.IsAPES() != p.Protocol.IsAPES() && proto != wire.ProtocolSecAgg {
		// APES and S-APES use clip-laplace, the others never.
		f.Randomizer = wire.RandomizerLaplace.String()
		if proto.IsAPES() {
			f.Randomizer = wire.RandomizerClipLaplace.String()
		}
	}
	if proto == p.Protocol && proto != wire.ProtocolSSSimple {
		f.Quota = int(p.Quota)
	}
	if c.EpsL > 0 {
		f.EpsL = c.EpsL
	}
	if c.Clip > 0 {
		f.Clip = c.Clip
	}
	if c.CheckInP > 0 {
		f.CheckIn = c.CheckInP
	}
	if c.MinBatch > 0 {
		f.MinBatch = c.MinBatch
	}
	k := c.K
	if k == 0 && c.Beta > 0 {
		k = max(1, min(d-1, int(math.Round(c.Beta*float64(d)))))
	}
	f.K = k
	if proto == wire.ProtocolSecAgg {
		f.K, f.Bits, f.Sigma = 0, int(p.Bits), p.Sigma
		if p.Protocol != wire.ProtocolSecAgg {
			// Calibrated to the ledger's target over the configured
			// rounds at the new check-in rate (the budget check below
			// still refuses a round that would not fit).
			rounds := cur.Rounds
			if rounds == 0 {
				rounds = params.DefaultSecAggRounds
			}
			te, td := cur.TargetEpsilon, cur.TargetDelta
			var sigma float64
			var err error
			if f.CheckIn == p.CheckInP {
				// What the page offered (σ in grid units does not depend
				// on the clip: the scale is 2^(bits-1)-1 over it).
				sigma, err = cur.OfferedSigma()
			} else {
				sigma, err = params.SecAggSigma(d, n, f, rounds, te, td)
			}
			if err != nil {
				return wire.Params{}, 0, 0, fmt.Errorf("operator: %w", err)
			}
			f.Sigma = sigma
		}
	} else if proto != wire.ProtocolSSSimple && proto != wire.ProtocolSAPES { // S-APES pads nothing (roundspec)
		// Width is k (one message per group), so n_p must make d*n_p a
		// multiple of k: mechanism.FeasibleNP.
		width := k
		if width == 0 {
			width = max(1, int(math.Round(float64(d)/params.DefaultBetaInv)))
			if width >= d {
				width = d - 1
			}
		}
		ratio := c.NPRatio
		if ratio == 0 {
			ratio = params.DefaultNPRatio
		}
		// A small tolerance so that the ratio the form shows (n / n_p,
		// printed in full) gives back the same n_p.
		f.NP = mechanism.FeasibleNP(d, width, int(math.Ceil(float64(n)/ratio-1e-9)))
	}
	if f.Quota > 0 && f.Quota < f.MinBatch {
		f.Quota = 0
	}
	np, lr, err := params.Build(d, n, f)
	if err != nil {
		return wire.Params{}, 0, 0, fmt.Errorf("operator: configuration: %w", err)
	}
	timeout := cur.Timeout
	if c.RoundTimeout > 0 {
		timeout = c.RoundTimeout
	}
	return np, lr, timeout, nil
}

// ConfigChange is an operator's new round configuration. Zero fields keep
// the current value, except K, Beta and ServerLR, whose zero means the
// default (k = d/50; server learning rate d/k for ss-topk, 1 otherwise).
type ConfigChange struct {
	Protocol     string  // ss-simple, ss-double, ss-topk or secagg
	EpsL         float64 // local budget of one report
	Clip         float64 // clipping bound C
	K            int     // coordinates per client (ss-double, ss-topk)
	Beta         float64 // k/d, used when K is 0
	NPRatio      float64 // n/n_p: n_p = ceil(ExpectedN/NPRatio) made feasible (0: params.DefaultNPRatio)
	CheckInP     float64
	RoundTimeout time.Duration
	MinBatch     int
	ServerLR     float64
}

// Sane ranges of the operator's values: a value outside them either
// stops training (a local budget whose first round exceeds the target),
// removes the protection it is there for (a batch of one or two reports
// hides nobody), or leaves a classroom waiting (a day-long round).
const (
	maxOperatorEpsL     = 1000
	maxOperatorClip     = 1
	minOperatorMinBatch = 3
	minOperatorTimeout  = 5 * time.Second
	maxOperatorTimeout  = time.Hour
	maxOperatorServerLR = 1000
	minOperatorNPRatio  = 0.25
	maxOperatorNPRatio  = 100
)

// checkRanges refuses values outside the sane ranges (zero keeps the
// current value or the default) for a model of d parameters and n
// expected reports per round.
func (c ConfigChange) checkRanges(d, n int) error {
	var errs []error
	out := func(name string, v any, lo, hi any) {
		errs = append(errs, fmt.Errorf("%s = %v is outside [%v, %v]", name, v, lo, hi))
	}
	if c.EpsL != 0 && c.EpsL > maxOperatorEpsL {
		out("local budget ε_l", c.EpsL, "> 0", maxOperatorEpsL)
	}
	if c.Clip != 0 && c.Clip > maxOperatorClip {
		out("clipping bound C", c.Clip, "> 0", maxOperatorClip)
	}
	if c.K != 0 && (c.K < 1 || c.K > d/2) {
		out("k", c.K, 1, d/2)
	}
	if c.Beta != 0 && c.Beta > 0.5 {
		out("β = k/d", c.Beta, "> 0", 0.5)
	}
	if c.NPRatio != 0 && (c.NPRatio < minOperatorNPRatio || c.NPRatio > maxOperatorNPRatio) {
		out("n / n_p", c.NPRatio, minOperatorNPRatio, maxOperatorNPRatio)
	}
	if c.CheckInP > 1 {
		out("check-in probability p", c.CheckInP, "> 0", 1)
	}
	if c.RoundTimeout != 0 && (c.RoundTimeout < minOperatorTimeout || c.RoundTimeout > maxOperatorTimeout) {
		out("round timeout", c.RoundTimeout, minOperatorTimeout, maxOperatorTimeout)
	}
	if c.MinBatch != 0 && (c.MinBatch < minOperatorMinBatch || c.MinBatch > max(n, minOperatorMinBatch)) {
		out("minimum batch", c.MinBatch, minOperatorMinBatch, max(n, minOperatorMinBatch))
	}
	if c.ServerLR > maxOperatorServerLR {
		out("server learning rate", c.ServerLR, "> 0", maxOperatorServerLR)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("operator: %w", err)
	}
	return nil
}

// ParseForm reads the operator form; empty fields are zero.
func ParseForm(f url.Values) (ConfigChange, error) {
	var c ConfigChange
	var errs []error
	fl := func(name string) float64 {
		v := strings.TrimSpace(f.Get(name))
		if v == "" {
			return 0
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			errs = append(errs, fmt.Errorf("%s: %q is not a finite number", name, v))
		}
		return x
	}
	in := func(name string) int {
		v := strings.TrimSpace(f.Get(name))
		if v == "" {
			return 0
		}
		x, err := strconv.Atoi(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %q is not an integer", name, v))
		}
		return x
	}
	c.Protocol = strings.TrimSpace(f.Get("protocol"))
	c.EpsL, c.Clip, c.K, c.Beta = fl("eps_l"), fl("clip"), in("k"), fl("beta")
	c.NPRatio, c.CheckInP, c.MinBatch, c.ServerLR = fl("np_ratio"), fl("check_in_p"), in("min_batch"), fl("server_lr")
	if secs := fl("round_timeout"); secs < 0 || secs > MaxRoundTimeout.Seconds() {
		errs = append(errs, fmt.Errorf("round_timeout: %v s is outside (0, %v]", secs, MaxRoundTimeout.Seconds()))
	} else {
		c.RoundTimeout = time.Duration(secs * float64(time.Second))
	}
	return c, errors.Join(errs...)
}
