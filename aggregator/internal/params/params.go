// Package params turns the aggregator's parameter choices — the serve
// command's flags, or the operator form's values — into announceable round
// parameters (wire.Params) and the server learning rate. Every layout comes
// from roundspec.Build, the one place protocol defaults are chosen, so only
// layouts with a privacy proof come out. It also calibrates secure
// summation's noise σ to the ledger's target (SecAggSigma).
package params

import (
	"fmt"

	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/task"
	"github.com/blanket-fl/blanket/shared/wire"
)

// Defaults for MNIST logistic regression (d = 784*10 + 10 = 7850) and
// about 200 clients per round; the protocol defaults themselves live in
// roundspec (Options).
const (
	DefaultExpectedClients = 200
	DefaultEpsL            = roundspec.DefaultEpsL
	DefaultClip            = roundspec.DefaultClip
	DefaultBetaInv         = roundspec.DefaultBetaInv
	// DefaultNPRatio is n/n_p of a live round: 10, where FLAME (and the
	// experiment runner) use 3. Width-1 messages make a padded round cost
	// d·n_p HPKE openings at the aggregator (and seals of the dummies at
	// the relay): at n = 200 and d = 7850, 157,000 per round at ratio 10
	// against 525,950 at ratio 3 — about 10 s against 35 s of two cores
	// here. A smaller n_p weakens the per-dimension amplification, and the
	// ledger charges exactly what the realized n_p gives.
	DefaultNPRatio       = 10
	DefaultMinBatch      = roundspec.DefaultMinBatch
	DefaultTargetEpsilon = 750
	DefaultTargetDelta   = roundspec.DefaultTargetDelta
	// DefaultSecAggRounds is the number of rounds the operator page
	// calibrates secure summation's σ for when the server runs until the
	// budget (Config.Rounds = 0): the experiments' live default.
	DefaultSecAggRounds = 20
)

// Choice is what the operator chose (flags or form); zero values take
// roundspec's defaults.
type Choice struct {
	Protocol, Randomizer                  string
	K, L, Width, NP, Buckets, MinBatch    int
	Quota                                 int
	EpsL, DeltaL, Clip, CheckIn, ServerLR float64
	// Secure summation: bits per entry and each server's sigma.
	Bits  int
	Sigma float64
}

// Build turns c into round parameters for a model of d parameters and
// about n clients per round, and the server learning rate:
// roundspec.Build, the one place protocol defaults are chosen (so only
// layouts with a privacy proof come out; a width other than 1 is refused).
func Build(d, n int, c Choice) (wire.Params, float64, error) {
	proto, err := wire.ParseProtocol(c.Protocol)
	if err != nil {
		return wire.Params{}, 0, err
	}
	rz, err := wire.ParseRandomizer(c.Randomizer)
	if err != nil {
		return wire.Params{}, 0, err
	}
	if n < 1 {
		return wire.Params{}, 0, fmt.Errorf("expected n must be >= 1, got %d", n)
	}
	if c.Width != 0 && c.Width != 1 {
		return wire.Params{}, 0, fmt.Errorf("-width %d: %w (only width 1 is announceable)", c.Width, roundspec.ErrLayout)
	}
	o := roundspec.Options{
		Protocol: proto, Randomizer: rz, K: c.K, L: c.L, NP: c.NP, Buckets: c.Buckets,
		MinBatch: c.MinBatch, Quota: c.Quota, EpsL: c.EpsL, DeltaL: c.DeltaL, Clip: c.Clip, CheckInP: c.CheckIn,
		ServerLR: c.ServerLR, NPRatio: DefaultNPRatio, Bits: c.Bits, Sigma: c.Sigma,
	}
	if proto == wire.ProtocolSSSimple && c.Quota == 0 {
		// Every client reports every coordinate: a quota of n_p keeps
		// dimensions from overflowing.
		o.Quota = max(c.NP, n)
	}
	return roundspec.Build(d, n, o)
}

// DefaultParams returns SS-Topk with the Laplace randomizer for a model of
// d parameters and about n clients per round (roundspec.Build with the live
// n/n_p ratio DefaultNPRatio): FLAME's settings scaled to n, k = round(d/50),
// width 1 (one coordinate per sealed message, the layout the accountant's
// per-dimension shuffle bound covers), n_p = ceil(n/10), l = the largest l
// the padding holds (FLAME Theorem 5, mechanism.TopkNu), eps_l = 78.5 (0.5
// per reported coordinate), C = 0.01, every connected client checks in, min
// batch 20. For d = 7850 and n = 200: k = 157, n_p = 20, l = 5, 785
// messages per client, 157,000 per batch.
func DefaultParams(d, n int) (wire.Params, error) {
	p, _, err := roundspec.Build(d, n, roundspec.Options{NPRatio: DefaultNPRatio})
	if err != nil {
		return wire.Params{}, fmt.Errorf("params: default params: %w", err)
	}
	return p, nil
}

// SecAggRecipe fills the secure-summation choices the operator did not
// set (clipSet, lrSet: the -clip and -server-lr flags were given) from
// the task's training recipe (task.Task.Recipe): the L2 clip C and the
// server learning rate. The clip is the sensitivity σ is calibrated for
// (SecAggSigma reads c.Clip), so call it before SecAggSigma. The
// shuffle protocols' clip and step are theirs (roundspec's defaults) and
// are not touched: call it for secure summation only.
func SecAggRecipe(c *Choice, r task.Recipe, clipSet, lrSet bool) {
	if !clipSet {
		c.Clip = r.Clip
	}
	if !lrSet {
		c.ServerLR = r.ServerLR
	}
}
