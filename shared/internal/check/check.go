// Package check is the one definition of the parameter checks the shared
// packages validate their inputs with: what "finite", "positive", "a
// probability" and "a count" mean. Each check that fails returns an error
// wrapping the caller's sentinel (kind), so every package keeps its own
// errors.Is contract, worded the same way everywhere:
//
//	<kind>: <name> = <value>, want <condition>
//
// A nil kind leaves the prefix out.
package check

import (
	"fmt"
	"math"
)

// Finite reports whether v is neither NaN nor ±Inf.
func Finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// Positive requires a finite v > 0.
func Positive(kind error, name string, v float64) error {
	if !Finite(v) || v <= 0 {
		return fail(kind, "%s = %v, want a finite value > 0", name, v)
	}
	return nil
}

// NonNegative requires a finite v >= 0.
func NonNegative(kind error, name string, v float64) error {
	if !Finite(v) || v < 0 {
		return fail(kind, "%s = %v, want a finite value >= 0", name, v)
	}
	return nil
}

// OpenUnit requires 0 < v < 1 (a δ, or a sampling rate below 1).
func OpenUnit(kind error, name string, v float64) error {
	if !Finite(v) || v <= 0 || v >= 1 {
		return fail(kind, "%s = %v, want 0 < %s < 1", name, v, name)
	}
	return nil
}

// DeltaOrZero requires 0 <= v < 1 (a δ that may be zero).
func DeltaOrZero(kind error, name string, v float64) error {
	if !Finite(v) || v < 0 || v >= 1 {
		return fail(kind, "%s = %v, want 0 <= %s < 1", name, v, name)
	}
	return nil
}

// Probability requires 0 <= v <= 1.
func Probability(kind error, name string, v float64) error {
	if !Finite(v) || v < 0 || v > 1 {
		return fail(kind, "%s = %v, want 0 <= %s <= 1", name, v, name)
	}
	return nil
}

// Count requires an integer v >= min.
func Count(kind error, name string, v, min int) error {
	if v < min {
		return fail(kind, "%s = %d, want >= %d", name, v, min)
	}
	return nil
}

func fail(kind error, format string, args ...any) error {
	if kind == nil {
		return fmt.Errorf(format, args...)
	}
	return fmt.Errorf("%w: %s", kind, fmt.Sprintf(format, args...))
}
