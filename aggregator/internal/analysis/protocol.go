package analysis

import (
	"fmt"

	"github.com/blanket-fl/blanket/shared/mechanism"
	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/wire"
)

// Protocol is what the analyzer derives from the round parameters, all of
// it through roundspec (the derivation the clients and the relay use too).
type Protocol struct {
	Spec     *roundspec.Spec
	Analyzer *mechanism.Analyzer // nil for secure summation
	// Center is E[R(1/2)], the blanket mean: a message that fails to open
	// or opens to an inadmissible value is given this value, so it
	// contributes zero to the debiased sum in expectation (as a padding
	// dummy does; see mechanism.Analyzer).
	Center float64
	// LeaderSealed is the size of a sealed leader share (secure
	// summation only; docs/secagg.md).
	LeaderSealed int
}

// NewProtocol builds the analyzer for p (roundspec.New: refuses layouts
// without a privacy proof); for secure summation, the share sizes instead.
func NewProtocol(p wire.Params) (*Protocol, error) {
	spec, err := roundspec.New(p)
	if err != nil {
		return nil, fmt.Errorf("analysis: protocol: %w", err)
	}
	if !spec.IsShuffle() {
		leader, _, err := spec.SharesSizes()
		if err != nil {
			return nil, fmt.Errorf("analysis: secagg share sizes: %w", err)
		}
		return &Protocol{Spec: spec, LeaderSealed: leader}, nil
	}
	an, err := spec.Analyzer()
	if err != nil {
		return nil, fmt.Errorf("analysis: analyzer: %w", err)
	}
	return &Protocol{Spec: spec, Analyzer: an, Center: spec.Center()}, nil
}

// SecAgg reports whether the rounds are secure summation's
// (docs/secagg.md) rather than a shuffle protocol's.
func (p *Protocol) SecAgg() bool { return !p.Spec.IsShuffle() }

// Release returns the privacy.Release of a round with n reports padded to
// np (roundspec.Spec.Release). Check-in is not recorded in the release:
// privacy.Account does not amplify SS-* rounds by it, so leaving it out
// never under-counts; the history keeps the rate.
func (p *Protocol) Release(round, n, np int) privacy.Release {
	return p.Spec.Release(round, n, np)
}
