package privacy

import (
	"fmt"

	"github.com/blanket-fl/blanket/shared/internal/check"
)

// Release describes what one round released to the analyzer, with every
// number an accountant needs. It is what the aggregator's ledger persists
// per round and what a volunteer's browser composes over the rounds it took
// part in.
type Release struct {
	// Round is the round number (>= 1).
	Round int `json:"round"`
	// Protocol is one of the Protocol* constants.
	Protocol string `json:"protocol"`
	// Randomizer is one of the Randomizer* constants.
	Randomizer string `json:"randomizer"`
	// Eps0 and Delta0 are the local guarantee of each perturbed scalar
	// (per coordinate; for the vector randomizers of check-in, of the
	// whole report). Unused (0) for ProtocolCentralGaussian.
	Eps0   float64 `json:"eps0"`
	Delta0 float64 `json:"delta0"`
	// D is the model dimension, K the coordinates each client perturbs
	// (K = D for SS-Simple and APES), L the SS-Topk groups (0 or 1
	// otherwise).
	D int `json:"d"`
	K int `json:"k"`
	L int `json:"l,omitempty"`
	// N is the number of real reports delivered in the round, NP the
	// realized padding per dimension (0 when not padded).
	N  int `json:"n"`
	NP int `json:"n_p,omitempty"`
	// Buckets is b of R_{gamma,b} (0 for other randomizers).
	Buckets int `json:"buckets,omitempty"`
	// Population and CheckInRate describe shuffled check-in: each of
	// Population clients took part with probability CheckInRate (the
	// observed rate N/Population is the effective one). 0 when the round
	// had no check-in.
	Population  int     `json:"population,omitempty"`
	CheckInRate float64 `json:"check_in_rate,omitempty"`
	// PersonalEps lists the personalized per-dimension budgets of APES and
	// S-APES (shuffled, so in no particular order); SparseB is S-APES's b.
	PersonalEps []float64 `json:"personal_eps,omitempty"`
	SparseB     int       `json:"sparse_b,omitempty"`
	// NoiseMultiplier is sigma/sensitivity of a central Gaussian release
	// (DP-FL).
	NoiseMultiplier float64 `json:"noise_multiplier,omitempty"`
	// SecAggSigma and SecAggSensitivity describe a secure-aggregation
	// round (ProtocolSecAgg): the standard deviation parameter σ of the
	// discrete Gaussian noise N_Z(0, σ²)^d each server adds, and the L2
	// norm bound Δ of one volunteer's quantized vector, both in integer
	// grid units. The round's check-in rate q is CheckInRate (1 when
	// every volunteer takes part). See secagg.go for the guarantee.
	SecAggSigma       float64 `json:"secagg_sigma,omitempty"`
	SecAggSensitivity float64 `json:"secagg_sensitivity,omitempty"`
	// SecAggParts, for a joint secure-summation round (the update and
	// its count blocks, shared/counts), lists every part (the update
	// first) from which SecAggSigma, SecAggSensitivity and D were
	// derived by SecAggJoint: a record for the audit. The accountant
	// charges SecAggSigma and SecAggSensitivity, never the parts.
	SecAggParts []SecAggPart `json:"secagg_parts,omitempty"`
}

// Protocols a Release can describe.
const (
	ProtocolSSSimple        = "ss-simple"
	ProtocolSSDouble        = "ss-double"
	ProtocolSSTopk          = "ss-topk"
	ProtocolAPES            = "apes"
	ProtocolSAPES           = "s-apes"
	ProtocolLocal           = "ldp" // no shuffler: the local guarantee only
	ProtocolCheckIn         = "checkin"
	ProtocolCentralGaussian = "dp-gaussian"
	// ProtocolSecAgg is defined in secagg.go.
)

// Randomizers a Release can name.
const (
	RandomizerLaplace     = "laplace"
	RandomizerRGB         = "rgb"
	RandomizerClipLaplace = "clip-laplace"
	RandomizerGaussian    = "gaussian"
	RandomizerDuchi       = "duchi-l2"
	RandomizerGeneric     = "generic" // any eps0-LDP randomizer
)

// Validate rejects a Release an accountant cannot trust: unknown names,
// negative, zero-where-invalid, NaN or infinite parameters, and
// inconsistent sizes.
func (r Release) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: round %d: %s", ErrInvalidParameter, r.Round, fmt.Sprintf(format, args...))
	}
	if r.Round < 1 {
		return bad("round must be >= 1, got %d", r.Round)
	}
	switch r.Protocol {
	case ProtocolSSSimple, ProtocolSSDouble, ProtocolSSTopk, ProtocolAPES, ProtocolSAPES, ProtocolLocal, ProtocolCheckIn, ProtocolCentralGaussian, ProtocolSecAgg:
	default:
		return bad("unknown protocol %q", r.Protocol)
	}
	switch r.Randomizer {
	case RandomizerLaplace, RandomizerRGB, RandomizerClipLaplace, RandomizerGaussian, RandomizerDuchi, RandomizerGeneric, RandomizerDiscreteGaussian:
	default:
		return bad("unknown randomizer %q", r.Randomizer)
	}
	if (r.Protocol == ProtocolSecAgg) != (r.Randomizer == RandomizerDiscreteGaussian) {
		return bad("protocol %q and randomizer %q do not go together (secure aggregation uses discrete Gaussian noise)", r.Protocol, r.Randomizer)
	}
	if r.Protocol == ProtocolSecAgg {
		if !(r.SecAggSigma > 0) || !check.Finite(r.SecAggSigma) || !(r.SecAggSensitivity > 0) || !check.Finite(r.SecAggSensitivity) {
			return bad("secure aggregation needs a positive finite sigma and sensitivity, got %v and %v", r.SecAggSigma, r.SecAggSensitivity)
		}
		if !(r.CheckInRate > 0 && r.CheckInRate <= 1) {
			return bad("secure aggregation needs a check-in rate in (0, 1], got %v", r.CheckInRate)
		}
	} else if r.SecAggSigma != 0 || r.SecAggSensitivity != 0 {
		return bad("secure-aggregation fields set on a %q release", r.Protocol)
	}
	if r.Protocol == ProtocolCentralGaussian {
		if !(r.NoiseMultiplier > 0) || !check.Finite(r.NoiseMultiplier) {
			return bad("noise multiplier must be positive and finite, got %v", r.NoiseMultiplier)
		}
	} else if r.Protocol == ProtocolSecAgg {
		// No local guarantee: eps0 unused.
	} else if r.Protocol != ProtocolAPES && r.Protocol != ProtocolSAPES {
		if !(r.Eps0 > 0) || !check.Finite(r.Eps0) {
			return bad("eps0 must be positive and finite, got %v", r.Eps0)
		}
	}
	if !(r.Delta0 >= 0 && r.Delta0 < 1) {
		return bad("delta0 must be in [0, 1), got %v", r.Delta0)
	}
	if r.D < 1 || r.K < 0 || r.K > r.D || r.L < 0 || r.N < 1 || r.NP < 0 || r.Buckets < 0 || r.Population < 0 || r.SparseB < 0 {
		return bad("sizes out of range (d=%d k=%d l=%d n=%d n_p=%d b=%d population=%d sparse_b=%d)", r.D, r.K, r.L, r.N, r.NP, r.Buckets, r.Population, r.SparseB)
	}
	if r.NP > 0 && r.NP < r.N*r.K*max(r.L, 1)/r.D {
		return bad("n_p = %d is below the average real count per dimension", r.NP)
	}
	if !(r.CheckInRate >= 0 && r.CheckInRate <= 1) {
		return bad("check-in rate must be in [0, 1], got %v", r.CheckInRate)
	}
	if r.Protocol == ProtocolAPES || r.Protocol == ProtocolSAPES {
		if len(r.PersonalEps) == 0 {
			return bad("apes needs the personalized budgets")
		}
		for _, e := range r.PersonalEps {
			if !(e > 0) || !check.Finite(e) {
				return bad("personalized budget %v must be positive and finite", e)
			}
		}
	}
	return nil
}
