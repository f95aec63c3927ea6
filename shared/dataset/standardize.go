package dataset

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/shared/internal/check"
)

// Standardizer maps each feature x_j to (x_j - Mean[j]) / Std[j]. It is
// fitted on a training set only and then applied unchanged to the test set
// and to every client's data, so no statistic of held-out data leaks into
// the features. The two slices are plain data so that a server can send
// them to a browser client (e.g. as JSON), which applies the same map.
type Standardizer struct {
	// Mean is the per-feature mean on the training set.
	Mean []float64
	// Std is the per-feature population standard deviation (divisor n,
	// as numpy.std and scikit-learn's StandardScaler) on the training
	// set, or 1 for a feature that is constant on it, so that such a
	// feature maps to x - Mean (0 on the training set) instead of
	// dividing by zero. Every Std is positive and finite.
	Std []float64
}

// FitStandardizer computes the per-feature mean and standard deviation of
// train (two passes in float64). This is the explicit preprocessing step
// that standardizes MNIST features before logistic regression (FLAME's
// experiment code does so, per the project's notes; the paper's text does
// not describe its preprocessing). Call it on the training part only.
func FitStandardizer(train *Set) (*Standardizer, error) {
	if err := train.Validate(); err != nil {
		return nil, fmt.Errorf("dataset: fit standardizer: %w", err)
	}
	n, d := train.Len(), train.Features
	if n == 0 {
		return nil, fmt.Errorf("dataset: fit standardizer: empty set: %w", ErrArgument)
	}
	mean := make([]float64, d)
	lo := make([]float32, d)
	hi := make([]float32, d)
	copy(lo, train.Row(0))
	copy(hi, train.Row(0))
	for i := range n {
		for j, v := range train.Row(i) {
			mean[j] += float64(v)
			lo[j] = min(lo[j], v)
			hi[j] = max(hi[j], v)
		}
	}
	for j := range mean {
		mean[j] /= float64(n)
	}
	std := make([]float64, d)
	for i := range n {
		for j, v := range train.Row(i) {
			dv := float64(v) - mean[j]
			std[j] += dv * dv
		}
	}
	for j := range std {
		if lo[j] == hi[j] {
			// Constant feature: exact mean, unit scale (see Std).
			mean[j], std[j] = float64(lo[j]), 1
			continue
		}
		std[j] = math.Sqrt(std[j] / float64(n))
	}
	z := &Standardizer{Mean: mean, Std: std}
	if err := z.Validate(); err != nil {
		// Only reachable with values near the float32 range, whose
		// squares overflow float64 sums.
		return nil, fmt.Errorf("dataset: fit standardizer: %w", err)
	}
	return z, nil
}

// Validate checks that Mean and Std have the same non-zero length, every
// Mean is finite and every Std positive and finite.
func (z *Standardizer) Validate() error {
	if z == nil || len(z.Mean) == 0 || len(z.Mean) != len(z.Std) {
		return fmt.Errorf("dataset: standardizer needs equal, non-zero numbers of means and stds: %w", ErrArgument)
	}
	for j := range z.Mean {
		if !check.Finite(z.Mean[j]) {
			return fmt.Errorf("dataset: standardizer: mean[%d] = %v: %w", j, z.Mean[j], ErrArgument)
		}
		if !(z.Std[j] > 0) || math.IsInf(z.Std[j], 0) {
			return fmt.Errorf("dataset: standardizer: std[%d] = %v, want positive and finite: %w", j, z.Std[j], ErrArgument)
		}
	}
	return nil
}

// Transform standardizes one feature vector in place.
func (z *Standardizer) Transform(row []float32) error {
	if err := z.Validate(); err != nil {
		return err
	}
	if len(row) != len(z.Mean) {
		return fmt.Errorf("dataset: standardize: row has %d features, standardizer %d: %w", len(row), len(z.Mean), ErrArgument)
	}
	z.transform(row)
	return nil
}

func (z *Standardizer) transform(row []float32) {
	for j, v := range row {
		row[j] = float32((float64(v) - z.Mean[j]) / z.Std[j])
	}
}

// Apply returns a standardized copy of s; s is unchanged.
func (z *Standardizer) Apply(s *Set) (*Set, error) {
	if err := z.Validate(); err != nil {
		return nil, err
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("dataset: standardize: %w", err)
	}
	if s.Features != len(z.Mean) {
		return nil, fmt.Errorf("dataset: standardize: set has %d features, standardizer %d: %w",
			s.Features, len(z.Mean), ErrArgument)
	}
	out := s.Clone()
	for i := range out.Len() {
		z.transform(out.Row(i))
	}
	return out, nil
}

// MarshalBinary encodes the standardizer for the browser (a volunteer that
// learns from its own drawings needs only this, not the digits): the
// feature count (u32 big-endian), then every Mean and every Std as IEEE-754
// binary64, big-endian.
func (z *Standardizer) MarshalBinary() ([]byte, error) {
	if z == nil || len(z.Mean) == 0 || len(z.Mean) != len(z.Std) {
		return nil, fmt.Errorf("dataset: standardizer with %d means and %d deviations", len(z.Mean), len(z.Std))
	}
	b := binary.BigEndian.AppendUint32(nil, uint32(len(z.Mean)))
	for _, v := range z.Mean {
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(v))
	}
	for _, v := range z.Std {
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(v))
	}
	return b, nil
}

// UnmarshalStandardizer decodes MarshalBinary's output for a model of
// features inputs, strictly: the exact length, the feature count, finite
// means and finite positive deviations.
func UnmarshalStandardizer(b []byte, features int) (*Standardizer, error) {
	if features < 1 || len(b) != 4+16*features || int64(binary.BigEndian.Uint32(b)) != int64(features) {
		return nil, fmt.Errorf("dataset: standardizer of %d bytes for %d features", len(b), features)
	}
	z := &Standardizer{Mean: make([]float64, features), Std: make([]float64, features)}
	for i := range features {
		z.Mean[i] = math.Float64frombits(binary.BigEndian.Uint64(b[4+8*i:]))
		z.Std[i] = math.Float64frombits(binary.BigEndian.Uint64(b[4+8*(features+i):]))
		if !check.Finite(z.Mean[i]) || !(z.Std[i] > 0) || math.IsInf(z.Std[i], 0) {
			return nil, fmt.Errorf("dataset: standardizer feature %d: mean %v, deviation %v", i, z.Mean[i], z.Std[i])
		}
	}
	return z, nil
}
