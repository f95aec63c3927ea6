package audit

import (
	"context"
	"errors"
	"fmt"

	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/wire"
)

// BoundConfidence is the confidence of LowerBound's bound: the probability,
// over the audit's own randomness, that the bound it reports is at most the
// mechanism's true ε (at BoundDelta) if the mechanism is that private.
const BoundConfidence = 0.95

// BoundDelta is the δ at which LowerBound states its bound. A lower bound at
// δ is a lower bound at every δ' ≤ δ (an (ε, δ')-DP mechanism is (ε, δ)-DP),
// so it compares with a ledger charge at any δ up to 1e-5.
const BoundDelta = 1e-5

// Bound is LowerBound's result: what the aggregator shows as the "audited
// lower bound" next to the charged ε of a round configuration.
type Bound struct {
	// Lower is the largest lower bound on the round's ε (at Delta) over the
	// attacks and neighbouring datasets audited; 0 when none proves
	// anything.
	Lower float64 `json:"lower"`
	// Confidence is the probability that Lower is a valid lower bound
	// (BoundConfidence; every attack and neighbour choice is accounted
	// for by a union bound).
	Confidence float64 `json:"confidence"`
	// Attack and Neighbours name the attack and the neighbouring datasets
	// that gave Lower (empty when Lower is 0).
	Attack     string     `json:"attack,omitempty"`
	Neighbours Neighbours `json:"neighbours,omitempty"`
	// Trials per hypothesis and phase (calibration, evaluation) and per
	// choice of neighbours.
	Trials int     `json:"trials"`
	Delta  float64 `json:"delta"`
	// Charged is the per-round ε the ledger charges for this configuration
	// with n reports (privacy.Account at Delta, at the n_p the audit's
	// rounds realized).
	Charged float64 `json:"charged"`
	NP      int     `json:"n_p"`
}

// LowerBound audits a round configuration as it runs live: n volunteers per
// round, the announced spec's encoder, padding and shuffle (Run without
// HPKE, whose sealed sizes TestAuditRealCrypto covers), every attack of
// this package, and for SS-Topk both choices of neighbouring datasets. It
// runs 4·trials simulated rounds per choice of neighbours and returns early
// with ctx's error.
//
// Guarantee. Lower is an empirical lower bound on the ε of one round at
// BoundDelta, valid with probability at least Confidence for the attacks
// implemented: each attack's threshold is chosen on calibration rounds and
// its true- and false-positive rates bounded by Clopper-Pearson intervals
// on fresh evaluation rounds (ε ≥ ln((TPR_lo - δ)/FPR_hi), Kairouz et al.
// 2015), each at level (1 - Confidence)/(2·attacks·neighbour choices) so
// that all of them hold together. It is never a proof of privacy: a bound
// below the charge says these attacks found no violation, not that none
// exists, and a bound above the charge means the round leaks more than the
// ledger records (or, with probability at most 1 - Confidence, bad luck).
//
// Cost: about 4·trials times the cost of simulating one round (every
// volunteer's encoding, the relay's padding, dummies and shuffle, and the
// attacks over d·n_p messages); see BenchmarkLowerBound and
// docs/privacy.md ("Audit") for measured times. It is meant to run in the
// background once per round configuration.
func LowerBound(ctx context.Context, spec *roundspec.Spec, n, trials int, seed uint64) (Bound, error) {
	if spec == nil || !spec.IsShuffle() {
		return Bound{}, fmt.Errorf("audit: lower bound: %w", roundspec.ErrNotShuffle)
	}
	if n < 2 || trials < 10 {
		return Bound{}, fmt.Errorf("audit: lower bound needs n >= 2 and trials >= 10, got n = %d, trials = %d", n, trials)
	}
	kinds := []Neighbours{NeighboursFlip}
	if spec.Params().Protocol == wire.ProtocolSSTopk {
		kinds = append(kinds, NeighboursIndexSet)
	}
	alpha := (1 - BoundConfidence) / float64(2*len(attacks)*len(kinds))
	b := Bound{Confidence: BoundConfidence, Trials: trials, Delta: BoundDelta}
	for i, kind := range kinds {
		res, err := RunContext(ctx, spec, Options{
			Volunteers: n, Trials: trials, Alpha: alpha, Delta: BoundDelta,
			Seed: seed ^ uint64(i)<<56, Neighbours: kind,
		})
		if err != nil {
			return Bound{}, err
		}
		b.Charged, b.NP = max(b.Charged, res.Charged), max(b.NP, res.NP)
		for _, f := range res.Findings {
			if f.EpsLower > b.Lower {
				b.Lower, b.Attack, b.Neighbours = f.EpsLower, f.Attack, kind
			}
		}
	}
	if !(b.Charged > 0) {
		return Bound{}, errors.New("audit: lower bound: no charge")
	}
	return b, nil
}
