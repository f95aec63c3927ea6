// Package paper reproduces closed-form bounds and validity conditions from
// the papers Blanket's accountant builds on (FLAME, APES, BBGN'19, and
// textbook composition) that the product does not charge: per-dimension
// theorems the accountant replaces with tighter or composed forms,
// asymptotic corollaries' validity conditions, index-privacy
// parameters, and comparison tables. The research tools and the
// reproduction tests use them; the ledger charges only what
// shared/privacy's Account and Session compute.
//
// Every function keeps its paper's statement, citation and correction in
// its doc comment. Errors wrap privacy.ErrInvalidParameter (a parameter
// outside its domain) or privacy.ErrOutsideValidity (the bound's
// conditions fail), as the accountant's do.
package paper

import (
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/shared/privacy"
)

// invalid returns an error wrapping privacy.ErrInvalidParameter.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", privacy.ErrInvalidParameter, fmt.Sprintf(format, args...))
}

// outside returns an error wrapping privacy.ErrOutsideValidity.
func outside(format string, args ...any) error {
	return fmt.Errorf("%w: %s", privacy.ErrOutsideValidity, fmt.Sprintf(format, args...))
}

// makeBound is a comparison row: valid with (eps, delta) when err is nil,
// otherwise invalid with err as the reason.
func makeBound(method, citation string, eps, delta float64, err error) privacy.Bound {
	if err != nil {
		return privacy.Bound{Method: method, Epsilon: math.NaN(), Delta: math.NaN(), Reason: err.Error(), Citation: citation}
	}
	return privacy.Bound{Method: method, Epsilon: eps, Delta: delta, Valid: true, Citation: citation}
}
