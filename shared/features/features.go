// Package features holds fixed, data-independent feature maps that a
// volunteer applies to each of its examples before local training:
// Identity, AvgPool (average pooling of square images) and Scattering
// (the 2-D wavelet scattering transform of Bruna and Mallat, with the
// filter bank of Kymatio, as used by Tramer and Boneh, "Differentially
// Private Learning Needs Better Features (or Much More Data)", ICLR 2021).
//
// Privacy: every map here is a fixed public function. Its parameters (the
// pooling window, the wavelets) are built in code from public constants,
// never from data, and it is applied to one example at a time. A
// volunteer's model update is then a function of its own examples only,
// exactly as before, and the update is clipped to L2 norm C before it is
// encoded, so the sensitivity of the secure sum (and every ε the ledger
// charges) is unchanged: the clip, not the features, bounds a
// volunteer's contribution (docs/experiments.md, "Features and server
// optimisation"). Only the model's dimension d changes, which changes the
// PINE instance (pine.ForBlanket(d, clip)) but not the calibration of σ
// (the sensitivity is the clip).
//
// The package is pure Go and builds for js/wasm (the volunteers' client).
package features

import (
	"errors"
	"fmt"
	"math"
)

// FeatureMap is a fixed function from an input vector (one example's
// features, e.g. the 784 pixels of a 28x28 image in row-major order) to
// its feature vector.
type FeatureMap interface {
	// Dim returns the output length for an input of length in, or an
	// error when the map does not accept inputs of that length.
	Dim(in int) (int, error)
	// Apply writes the features of src into dst, whose length must be
	// Dim(len(src)). It is safe for concurrent use.
	Apply(dst, src []float64) error
}

// errNonFinite is returned for NaN or infinite inputs.
var errNonFinite = errors.New("features: non-finite input")

// checkIO validates src and dst against m.Dim.
func checkIO(m FeatureMap, dst, src []float64) error {
	out, err := m.Dim(len(src))
	if err != nil {
		return err
	}
	if len(dst) != out {
		return fmt.Errorf("features: destination of length %d, want %d for an input of %d", len(dst), out, len(src))
	}
	for _, v := range src {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return errNonFinite
		}
	}
	return nil
}

// Identity is the map x -> x (the product's features today). It is
// data-independent: it costs no privacy (see the package comment).
type Identity struct{}

// Dim returns in for every in >= 1.
func (Identity) Dim(in int) (int, error) {
	if in < 1 {
		return 0, fmt.Errorf("features: identity of an input of length %d", in)
	}
	return in, nil
}

// Apply copies src into dst.
func (m Identity) Apply(dst, src []float64) error {
	if err := checkIO(m, dst, src); err != nil {
		return err
	}
	copy(dst, src)
	return nil
}

// Chain applies its maps in order (Chain{a, b} is b after a). It is
// data-independent when each of its maps is.
type Chain []FeatureMap

// Dim is the output length of the last map.
func (c Chain) Dim(in int) (int, error) {
	if len(c) == 0 {
		return 0, errors.New("features: empty chain")
	}
	d := in
	for i, m := range c {
		if m == nil {
			return 0, fmt.Errorf("features: chain map %d is nil", i)
		}
		var err error
		if d, err = m.Dim(d); err != nil {
			return 0, fmt.Errorf("features: chain map %d: %w", i, err)
		}
	}
	return d, nil
}

// Apply runs every map in turn.
func (c Chain) Apply(dst, src []float64) error {
	if err := checkIO(c, dst, src); err != nil {
		return err
	}
	cur := src
	for i, m := range c {
		d, _ := m.Dim(len(cur)) // checked by checkIO
		out := dst
		if i < len(c)-1 {
			out = make([]float64, d)
		}
		if err := m.Apply(out, cur); err != nil {
			return fmt.Errorf("features: chain map %d: %w", i, err)
		}
		cur = out
	}
	return nil
}

// isqrt returns s with s*s == n, or false.
func isqrt(n int) (int, bool) {
	if n < 1 {
		return 0, false
	}
	s := int(math.Sqrt(float64(n)))
	for s*s > n {
		s--
	}
	for (s+1)*(s+1) <= n {
		s++
	}
	return s, s*s == n
}

// AvgPool averages non-overlapping K x K windows of each of Channels
// square images (the input is Channels images of side s, each row-major,
// one after the other; Channels 0 means 1). When K does not divide s the
// last window of a row or column is cut at the border and averages the
// pixels it holds, so the output side is ceil(s/K).
//
// AvgPool is linear and data-independent (a fixed public averaging per
// example): it costs no privacy (see the package comment).
type AvgPool struct {
	K        int
	Channels int
}

func (p AvgPool) channels() int {
	if p.Channels == 0 {
		return 1
	}
	return p.Channels
}

// side returns the input and output side for an input of length in.
func (p AvgPool) side(in int) (s, o int, err error) {
	if p.K < 1 || p.Channels < 0 {
		return 0, 0, fmt.Errorf("features: pooling window %d, channels %d", p.K, p.Channels)
	}
	ch := p.channels()
	if in < 1 || in%ch != 0 {
		return 0, 0, fmt.Errorf("features: pooling an input of length %d over %d channels", in, ch)
	}
	s, ok := isqrt(in / ch)
	if !ok {
		return 0, 0, fmt.Errorf("features: pooling needs square images, got %d values per channel", in/ch)
	}
	if p.K > s {
		return 0, 0, fmt.Errorf("features: pooling window %d larger than the image side %d", p.K, s)
	}
	return s, (s + p.K - 1) / p.K, nil
}

// Dim returns Channels * ceil(s/K)^2 for Channels images of side s.
func (p AvgPool) Dim(in int) (int, error) {
	_, o, err := p.side(in)
	if err != nil {
		return 0, err
	}
	return p.channels() * o * o, nil
}

// Apply writes the window averages into dst.
func (p AvgPool) Apply(dst, src []float64) error {
	if err := checkIO(p, dst, src); err != nil {
		return err
	}
	s, o, _ := p.side(len(src))
	for c := 0; c < p.channels(); c++ {
		img := src[c*s*s : (c+1)*s*s]
		out := dst[c*o*o : (c+1)*o*o]
		for oi := 0; oi < o; oi++ {
			r0, r1 := oi*p.K, min((oi+1)*p.K, s)
			for oj := 0; oj < o; oj++ {
				c0, c1 := oj*p.K, min((oj+1)*p.K, s)
				sum := 0.0
				for r := r0; r < r1; r++ {
					for q := c0; q < c1; q++ {
						sum += img[r*s+q]
					}
				}
				out[oi*o+oj] = sum / float64((r1-r0)*(c1-c0))
			}
		}
	}
	return nil
}

// Parse returns the named map for square images of side 28 (the digits):
// "identity", "pool2", "pool4" (AvgPool with K 2 or 4), "scatter"
// (Scattering J = 2, L = 8, orders 0 to 2: 81 x 7 x 7), "scatter1"
// (orders 0 and 1 only: 17 x 7 x 7), and "scatter-pool" and
// "scatter1-pool" (the scattering followed by AvgPool K 2 on its 7 x 7
// maps: 4 x 4 per channel).
func Parse(name string) (FeatureMap, error) {
	switch name {
	case "", "identity":
		return Identity{}, nil
	case "pool2":
		return AvgPool{K: 2}, nil
	case "pool4":
		return AvgPool{K: 4}, nil
	case "scatter", "scatter1", "scatter-pool", "scatter1-pool":
		order := 2
		if name == "scatter1" || name == "scatter1-pool" {
			order = 1
		}
		sc, err := NewScattering(28, 2, 8, order)
		if err != nil {
			return nil, err
		}
		if name == "scatter" || name == "scatter1" {
			return sc, nil
		}
		return Chain{sc, AvgPool{K: 2, Channels: sc.Channels()}}, nil
	}
	return nil, fmt.Errorf("features: unknown map %q (want identity, pool2, pool4, scatter, scatter1, scatter-pool or scatter1-pool)", name)
}

// Names are the maps Parse knows.
var Names = []string{"identity", "pool2", "pool4", "scatter", "scatter1", "scatter-pool", "scatter1-pool"}
