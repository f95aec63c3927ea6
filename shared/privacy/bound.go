package privacy

import (
	"errors"
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/shared/internal/check"
)

// ErrInvalidParameter is wrapped by every error caused by a malformed
// parameter: NaN, ±Inf, or a value outside the parameter's domain
// (a negative epsilon, a delta outside (0,1), a count below 1).
var ErrInvalidParameter = errors.New("invalid parameter")

// ErrOutsideValidity is wrapped by every error caused by well-formed
// parameters that lie outside the validity conditions of the theorem being
// applied. The bound would return a number there, but not a proven one.
var ErrOutsideValidity = errors.New("outside the validity conditions of the bound")

// Bound is one method's central (ε, δ)-DP guarantee, the common row type of
// the comparison tables. Epsilon and Delta are meaningful only when Valid;
// otherwise Reason says why the method does not apply.
type Bound struct {
	Method   string  // short human-readable name of the method
	Epsilon  float64 // central ε (NaN when not Valid)
	Delta    float64 // central δ (NaN when not Valid)
	Valid    bool    // whether the inputs satisfy the method's conditions
	Reason   string  // why the bound is not valid; empty when Valid
	Citation string  // paper and theorem/equation implemented
}

// String formats the bound as one table row.
func (b Bound) String() string {
	if !b.Valid {
		return fmt.Sprintf("%s: not applicable (%s) [%s]", b.Method, b.Reason, b.Citation)
	}
	return fmt.Sprintf("%s: (%.6g, %.3g)-DP [%s]", b.Method, b.Epsilon, b.Delta, b.Citation)
}

// makeBound fills a Bound from a computation's result and error.
//
// A result that is not a certified number (NaN, ±Inf or negative ε, or a
// δ outside [0, 1)) becomes an invalid row, never a number: numerical
// methods that overflow must refuse, not report a small ε.
func makeBound(method, citation string, eps, delta float64, err error) Bound {
	if err == nil && (!check.Finite(eps) || eps < 0 || !check.Finite(delta) || delta < 0 || delta >= 1) {
		err = fmt.Errorf("%w: uncertified result (epsilon %v, delta %v)", ErrUncertified, eps, delta)
	}
	if err != nil {
		return Bound{Method: method, Epsilon: math.NaN(), Delta: math.NaN(), Reason: err.Error(), Citation: citation}
	}
	return Bound{Method: method, Epsilon: eps, Delta: delta, Valid: true, Citation: citation}
}

// ErrUncertified is wrapped by every error caused by a numerical method
// that could not certify its result (overflow, a bisection that did not
// bracket, a NaN): the row is invalid and a charge that would rest on it
// is refused.
var ErrUncertified = errors.New("result could not be certified numerically")

// invalid returns an error wrapping ErrInvalidParameter.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidParameter, fmt.Sprintf(format, args...))
}

// outside returns an error wrapping ErrOutsideValidity.
func outside(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrOutsideValidity, fmt.Sprintf(format, args...))
}
