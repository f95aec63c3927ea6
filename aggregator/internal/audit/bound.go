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

// NoiseTestAlpha is the false-alarm probability of the live audit's
// variance test on the relay's noise (LowerBoundSecAgg): a flag says "stop
// the run and report it" on a classroom's projector, and the audit's seed
// is a function of the configuration (liveaudit), so a configuration
// unlucky at a looser level would raise the alarm at every run; at 1e-6
// the test still catches a relay adding σ/1.004 at least half the time
// at the live audit's 800,000 draws (NoiseTest.Factor: 1/sqrt(1 −
// 4.75·sqrt(2/800,000))).
const NoiseTestAlpha = 1e-6

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
	// Ceiling is the largest bound any attack could show with these
	// trials at this confidence (a perfect distinguisher's: power.go); a
	// charge at or above it cannot be shown too small.
	Ceiling float64 `json:"ceiling"`
	// Detectable is the smallest true ε (at Delta) of a Gaussian-shaped
	// leak that this run would have shown above the charge with
	// probability at least 1/2 (power.go: exact in shape for secure
	// summation, a yardstick for the shuffle protocols); 0 when none can
	// be (Ceiling <= Charged). DetectableFactor is Detectable/Charged: the
	// smallest under-charge the run could have caught.
	Detectable       float64 `json:"detectable,omitempty"`
	DetectableFactor float64 `json:"detectable_factor,omitempty"`
	// Mechanism says what was attacked when it is not the whole round
	// (secure summation: the credited server's noise).
	Mechanism string `json:"mechanism,omitempty"`
	// Noise is secure summation's variance test on the relay's noise
	// (NoiseTest; zero for the shuffle protocols): Noise.Flagged says the
	// relay adds less noise than the spec's σ, Noise.Factor the smallest
	// k such that σ/k is caught at least half the time.
	Noise NoiseTest `json:"noise,omitzero"`
}

// Flagged tells whether the audit found a leak: a lower bound above the
// charge, or (secure summation) noise below the announced σ.
func (b Bound) Flagged() bool { return b.Lower > b.Charged || b.Noise.Flagged }

// setPower fills Ceiling, Detectable and DetectableFactor for a run with
// trials evaluation trials per hypothesis at level alpha per bound.
func (b *Bound) setPower(trials int, alpha float64) {
	b.Ceiling = Ceiling(trials, alpha, b.Delta)
	if d, ok := Detectable(trials, alpha, b.Delta, b.Charged); ok && b.Charged > 0 {
		b.Detectable, b.DetectableFactor = d, d/b.Charged
	}
}

// LowerBound audits a round configuration as it runs live: n volunteers per
// round, the announced spec's encoder, padding and shuffle (Run without
// HPKE, whose sealed sizes TestAuditRealCrypto covers), every attack of
// this package (for APES and S-APES with their own: attacksFor, volunteers
// at mixed levels as apesNeighbours states), and for SS-Topk both choices
// of neighbouring datasets. It
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
	alpha := (1 - BoundConfidence) / float64(2*len(attacksFor(spec))*len(kinds))
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
	b.setPower(trials, alpha)
	return b, nil
}

// SecAggTrials is the number of trials per hypothesis and phase
// LowerBoundSecAgg runs by default: cheap (one coordinate of the relay's
// noise and one canary quantization per trial; about a second of CPU at
// d = 7,850 per 100,000), and enough that a per-round charge near 1.6
// (make run's) could be caught at about 1.6 times (Bound.DetectableFactor).
const SecAggTrials = 200_000

// LowerBoundSecAgg audits one round of a secure-summation configuration
// as it runs live (RunSecAgg with the relay's noise only, the noise the
// ledger credits; n reports; trials per hypothesis and phase, at least
// 10). The release audited is the noisy sum the aggregator learns if it
// subtracts its own noise; the attack is the likelihood-ratio test on the
// canary's coordinate (the Neyman-Pearson test of the replace-one pair:
// RunSecAgg).
//
// Guarantee: Lower is a lower bound on one round's ε at BoundDelta for
// replace-one, and an honest relay's noise passes the variance test
// (Noise), together with probability at least BoundConfidence (one
// attack, two one-sided Clopper-Pearson bounds at (1 − BoundConfidence −
// NoiseTestAlpha)/2 each and the variance test at NoiseTestAlpha: a
// union bound). A bound below the charge is no proof of
// privacy; Detectable says how large an under-charge the likelihood-ratio
// test could have caught, Noise.Factor how little noise the variance test
// would have caught (σ/Noise.Factor).
func LowerBoundSecAgg(ctx context.Context, spec *roundspec.Spec, n, trials int, seed uint64) (Bound, error) {
	if n < 1 || trials < 10 {
		return Bound{}, fmt.Errorf("audit: lower bound needs n >= 1 and trials >= 10, got n = %d, trials = %d", n, trials)
	}
	alpha := (1 - BoundConfidence - NoiseTestAlpha) / 2
	res, err := RunSecAgg(ctx, spec, SecAggOptions{Volunteers: n, Trials: trials, Alpha: alpha, NoiseAlpha: NoiseTestAlpha, Delta: BoundDelta, Seed: seed})
	if err != nil {
		return Bound{}, err
	}
	b := Bound{Lower: res.EpsLower, Confidence: BoundConfidence, Neighbours: NeighboursReplaceOne,
		Trials: trials, Delta: BoundDelta, Charged: res.Charged,
		Mechanism: "the relay's discrete Gaussian noise (the noise the ledger credits), real AddNoise path", Noise: res.Noise}
	if b.Lower > 0 {
		b.Attack = SecAggAttack
	}
	if !(b.Charged > 0) {
		return Bound{}, errors.New("audit: lower bound: no charge")
	}
	b.setPower(trials, alpha)
	return b, nil
}
