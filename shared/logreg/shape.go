package logreg

import (
	"errors"
	"fmt"

	"github.com/blanket-fl/blanket/shared/internal/check"
)

// MNIST dimensions: 28×28 grey-scale images and 10 digit classes.
const (
	MNISTFeatures = 784
	mnistClasses  = 10
	// MNISTParams is the length of an MNIST parameter vector:
	// 784*10 weights followed by 10 biases.
	MNISTParams = MNISTFeatures*mnistClasses + mnistClasses
)

// maxClasses is the largest number of classes a Shape may have; labels are
// uint8.
const maxClasses = 256

// maxParams bounds C*F + C so that index arithmetic never overflows and a
// mistaken Shape cannot request an absurd allocation.
const maxParams = 1 << 30

// ErrShape reports an invalid Shape or a vector or dataset whose dimensions
// do not match the Shape in use.
var ErrShape = errors.New("logreg: shape mismatch")

// Shape gives the dimensions of a model: Features inputs and Classes
// outputs. See the package documentation for the parameter layout.
type Shape struct {
	Features int
	Classes  int
}

// MNIST is the shape of the MNIST model used by FLAME and APES (d = 7850).
var MNIST = Shape{Features: MNISTFeatures, Classes: mnistClasses}

// Validate reports whether s describes a usable model: at least one
// feature, between 2 and maxClasses classes, and fewer than 2^30
// parameters.
func (s Shape) Validate() error {
	if s.Features < 1 {
		return fmt.Errorf("%w: features must be at least 1, got %d", ErrShape, s.Features)
	}
	if s.Classes < 2 || s.Classes > maxClasses {
		return fmt.Errorf("%w: classes must be in [2, %d], got %d", ErrShape, maxClasses, s.Classes)
	}
	if s.Features > (maxParams-s.Classes)/s.Classes {
		return fmt.Errorf("%w: %d features × %d classes exceeds %d parameters",
			ErrShape, s.Features, s.Classes, maxParams)
	}
	return nil
}

// NumParams returns the length of a parameter vector, Classes*Features +
// Classes.
func (s Shape) NumParams() int { return s.Classes*s.Features + s.Classes }

// WeightIndex returns the position of the weight that connects feature j to
// class c: c*Features + j.
func (s Shape) WeightIndex(c, j int) int { return c*s.Features + j }

// BiasIndex returns the position of the bias of class c:
// Classes*Features + c.
func (s Shape) BiasIndex(c int) int { return s.Classes*s.Features + c }

// Weights returns the weights of class c as a subslice of params (no copy).
// params must have length NumParams and c must be in [0, Classes).
func (s Shape) Weights(params []float64, c int) []float64 {
	return params[c*s.Features : (c+1)*s.Features]
}

// Biases returns the Classes biases as a subslice of params (no copy).
func (s Shape) Biases(params []float64) []float64 {
	return params[s.Classes*s.Features : s.NumParams()]
}

// checkParams reports whether p is a parameter vector of shape s with only
// finite entries.
func (s Shape) checkParams(name string, p []float64) error {
	if len(p) != s.NumParams() {
		return fmt.Errorf("%w: %s has %d entries, want %d", ErrShape, name, len(p), s.NumParams())
	}
	for i, v := range p {
		if !check.Finite(v) {
			return fmt.Errorf("logreg: %s[%d] is not finite (%v)", name, i, v)
		}
	}
	return nil
}

// Dataset is a labelled set of examples of one Shape: n rows of Features
// float32 values stored row-major in X, and n labels in [0, Classes).
// It references, not copies, the slices given to NewDataset; they must not
// be modified while the Dataset is in use. The zero Dataset is invalid.
type Dataset struct {
	shape Shape
	x     []float32
	y     []uint8
}

// NewDataset checks and wraps n = len(y) examples: len(x) must equal
// n*s.Features, every x must be finite, every label below s.Classes, and n
// at least 1.
func NewDataset(s Shape, x []float32, y []uint8) (Dataset, error) {
	if err := s.Validate(); err != nil {
		return Dataset{}, err
	}
	n := len(y)
	if n == 0 {
		return Dataset{}, errors.New("logreg: dataset has no examples")
	}
	if len(x)/s.Features != n || len(x)%s.Features != 0 {
		return Dataset{}, fmt.Errorf("%w: %d labels need %d×%d = %d features, got %d",
			ErrShape, n, n, s.Features, n*s.Features, len(x))
	}
	for i, v := range x {
		if f := float64(v); !check.Finite(f) {
			return Dataset{}, fmt.Errorf("logreg: feature %d of example %d is not finite (%v)",
				i%s.Features, i/s.Features, v)
		}
	}
	for i, c := range y {
		if int(c) >= s.Classes {
			return Dataset{}, fmt.Errorf("logreg: label %d of example %d is not below %d classes", c, i, s.Classes)
		}
	}
	return Dataset{shape: s, x: x, y: y}, nil
}

// Len returns the number of examples.
func (d Dataset) Len() int { return len(d.y) }

// Shape returns the shape the dataset was checked against.
func (d Dataset) Shape() Shape { return d.shape }

// Row returns the features of example i (no copy).
func (d Dataset) Row(i int) []float32 {
	f := d.shape.Features
	return d.x[i*f : (i+1)*f]
}

// Label returns the label of example i.
func (d Dataset) Label(i int) uint8 { return d.y[i] }

// Slice returns examples [lo, hi) as a Dataset sharing storage with d,
// without re-checking them. It needs 0 <= lo < hi <= Len.
func (d Dataset) Slice(lo, hi int) (Dataset, error) {
	if lo < 0 || hi > d.Len() || lo >= hi {
		return Dataset{}, fmt.Errorf("logreg: slice [%d, %d) of a dataset of %d examples", lo, hi, d.Len())
	}
	f := d.shape.Features
	return Dataset{shape: d.shape, x: d.x[lo*f : hi*f], y: d.y[lo:hi]}, nil
}

// Subset returns a new Dataset holding copies of the examples idx of d, in
// that order (an index may repeat). Every index must be in [0, Len).
func (d Dataset) Subset(idx []int) (Dataset, error) {
	if err := d.check(); err != nil {
		return Dataset{}, err
	}
	if len(idx) == 0 {
		return Dataset{}, errors.New("logreg: empty subset")
	}
	f := d.shape.Features
	x := make([]float32, 0, len(idx)*f)
	y := make([]uint8, 0, len(idx))
	for _, i := range idx {
		if i < 0 || i >= d.Len() {
			return Dataset{}, fmt.Errorf("logreg: subset index %d outside a dataset of %d examples", i, d.Len())
		}
		x = append(x, d.x[i*f:(i+1)*f]...)
		y = append(y, d.y[i])
	}
	return Dataset{shape: d.shape, x: x, y: y}, nil
}

// check reports whether d is a valid dataset (not the zero value).
func (d Dataset) check() error {
	if d.Len() == 0 || d.shape.Features == 0 {
		return errors.New("logreg: empty or zero Dataset (use NewDataset)")
	}
	return nil
}

// ShapeOnly returns a Dataset of no examples that carries s: a model's
// shape where there is nothing to evaluate on (a task without a public
// holdout). Accuracy and Loss refuse it (it is empty), so nothing is ever
// computed on it.
func ShapeOnly(s Shape) (Dataset, error) {
	if err := s.Validate(); err != nil {
		return Dataset{}, err
	}
	return Dataset{shape: s}, nil
}
