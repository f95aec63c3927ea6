package logreg

import (
	"math"
	"testing"

	"github.com/blanket-fl/blanket/shared/noise"
)

// fdCheck compares grad[i] with the central difference
// (f(p + h e_i) - f(p - h e_i)) / 2h of the naive reference objective for
// each i in coords. With h = 1e-5 the truncation error is O(h² · third derivative) ≲ 1e-9
// for these small smooth objectives and the rounding error about
// 2·1e-16·f/h ≈ 1e-10, so 1e-7 (relative to max(1,|g|)) leaves a wide margin
// while any real error in a formula (a missing 1/n, a wrong sign, a
// transposed index) is off by far more.
func fdCheck(t *testing.T, name string, f func([]float64) float64, p, grad []float64, coords []int) {
	t.Helper()
	const h = 1e-5
	q := append([]float64(nil), p...)
	for _, i := range coords {
		q[i] = p[i] + h
		up := f(q)
		q[i] = p[i] - h
		down := f(q)
		q[i] = p[i]
		fd := (up - down) / (2 * h)
		if e := math.Abs(fd - grad[i]); e > 1e-7*math.Max(1, math.Abs(grad[i])) {
			t.Errorf("%s: coordinate %d gradient %.12g, finite difference %.12g", name, i, grad[i], fd)
		}
	}
}

func allCoords(n int) []int {
	c := make([]int, n)
	for i := range c {
		c[i] = i
	}
	return c
}

// TestGradientFiniteDifferences checks every coordinate of the gradient of
// the regularised cross-entropy on a small shape, for both kernels, with
// more rows than one evaluation chunk.
func TestGradientFiniteDifferences(t *testing.T) {
	s := Shape{Features: 7, Classes: 4}
	d := synth(t, s, evalChunk+9, 11, 2)
	p := randomParams(s, 12, 1)
	const l2 = 0.05
	ref := func(q []float64) float64 { return naiveLoss(s, q, d, l2, 0, nil) }
	for _, k := range kernels {
		ws := newWorkspace(s, k, evalChunk)
		g := make([]float64, s.NumParams())
		loss := ws.gradient(g, p, d, l2)
		if want := ref(p); math.Abs(loss-want) > 1e-12*want {
			t.Errorf("%s: loss %.17g, reference %.17g", k.name, loss, want)
		}
		fdCheck(t, k.name, ref, p, g, allCoords(s.NumParams()))
	}
	g, _, err := gradient(nil, p, d, l2)
	if err != nil {
		t.Fatal(err)
	}
	fdCheck(t, "Gradient", ref, p, g, allCoords(s.NumParams()))
}

// TestObjectiveGradientFiniteDifferences checks the gradient of the full
// local objective, FedProx term included, on every coordinate.
func TestObjectiveGradientFiniteDifferences(t *testing.T) {
	s := Shape{Features: 5, Classes: 3}
	d := synth(t, s, 9, 13, 2)
	p := randomParams(s, 14, 1)
	global := randomParams(s, 15, 1)
	cfg := TrainConfig{Epochs: 1, BatchSize: 4, LearningRate: 0.1, L2: 0.01, ProxMu: 0.7}
	ref := func(q []float64) float64 { return naiveLoss(s, q, d, cfg.L2, cfg.ProxMu, global) }
	for _, k := range kernels {
		tr, err := newTrainer(s, cfg, k)
		if err != nil {
			t.Fatal(err)
		}
		g, obj, err := tr.ObjectiveGradient(nil, p, global, d)
		if err != nil {
			t.Fatal(err)
		}
		if want := ref(p); math.Abs(obj-want) > 1e-12*want {
			t.Errorf("%s: objective %.17g, reference %.17g", k.name, obj, want)
		}
		if o, err := tr.Objective(p, global, d); err != nil || math.Abs(o-obj) > 1e-12*obj {
			t.Errorf("%s: Objective %v (%v), ObjectiveGradient %v", k.name, o, err, obj)
		}
		fdCheck(t, k.name, ref, p, g, allCoords(s.NumParams()))
	}
}

// TestGradientMNISTShape checks 24 random weight coordinates and all 10
// biases of the full 7850-parameter model on 5 examples.
func TestGradientMNISTShape(t *testing.T) {
	s := MNIST
	d := synth(t, s, 5, 21, 1)
	p := randomParams(s, 22, 0.05)
	const l2 = 0.001
	ref := func(q []float64) float64 { return naiveLoss(s, q, d, l2, 0, nil) }
	src := noise.NewSeeded(23)
	var coords []int
	for range 24 {
		coords = append(coords, noise.Intn(src, s.Classes*s.Features))
	}
	for c := 0; c < s.Classes; c++ {
		coords = append(coords, s.BiasIndex(c))
	}
	for _, k := range kernels {
		ws := newWorkspace(s, k, evalChunk)
		g := make([]float64, s.NumParams())
		ws.gradient(g, p, d, l2)
		fdCheck(t, k.name, ref, p, g, coords)
	}
}
