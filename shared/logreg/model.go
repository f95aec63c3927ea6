package logreg

import (
	"errors"
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/shared/internal/check"
)

// evalChunk is the number of rows the evaluation functions convert and
// multiply at a time.
const evalChunk = 64

// workspace holds the scratch of one forward/backward pass: a block of rows
// converted to float64 and their logits. It is not safe for concurrent use.
type workspace struct {
	s  Shape
	k  kernel
	xb []float64 // rows×Features, row-major
	z  []float64 // rows×Classes: logits, then probabilities, then residuals
}

func newWorkspace(s Shape, k kernel, rows int) *workspace {
	ws := &workspace{s: s, k: k}
	ws.ensure(rows)
	return ws
}

// ensure grows the buffers to hold rows rows.
func (ws *workspace) ensure(rows int) {
	if n := rows * ws.s.Features; len(ws.xb) < n {
		ws.xb = make([]float64, n)
	}
	if n := rows * ws.s.Classes; len(ws.z) < n {
		ws.z = make([]float64, n)
	}
}

// gather converts the examples idx of d into ws.xb.
func (ws *workspace) gather(d Dataset, idx []int) {
	f := ws.s.Features
	for r, i := range idx {
		dst := ws.xb[r*f : (r+1)*f]
		src := d.x[i*f : (i+1)*f]
		for j, v := range src {
			dst[j] = float64(v)
		}
	}
}

// gatherRange converts the examples [lo, hi) of d into ws.xb.
func (ws *workspace) gatherRange(d Dataset, lo, hi int) {
	f := ws.s.Features
	src := d.x[lo*f : hi*f]
	dst := ws.xb[:len(src)]
	for j, v := range src {
		dst[j] = float64(v)
	}
}

// logits fills ws.z[:rows*C] with the logits of the gathered rows.
func (ws *workspace) logits(params []float64, rows int) {
	nc := ws.s.Classes
	z := ws.z[:rows*nc]
	ws.k.logits(ws.s.Features, nc, params, ws.xb, rows, z)
	bias := ws.s.Biases(params)
	for r := 0; r < rows; r++ {
		zr := z[r*nc : (r+1)*nc]
		for c, b := range bias {
			zr[c] += b
		}
	}
}

// softmax replaces the logits z by softmax(z) and returns
// logsumexp(z), computed as max + log Σ exp(z_c - max) so no exponent
// overflows.
func softmax(z []float64) float64 {
	m := z[0]
	for _, v := range z[1:] {
		if v > m {
			m = v
		}
	}
	var s float64
	for c, v := range z {
		e := math.Exp(v - m)
		z[c] = e
		s += e
	}
	inv := 1 / s
	for c := range z {
		z[c] *= inv
	}
	return m + math.Log(s)
}

// argmax returns the index of the largest entry, the first on ties.
func argmax(z []float64) int {
	best := 0
	for c, v := range z {
		if v > z[best] {
			best = c
		}
	}
	return best
}

// halfSquaredWeights returns ||W||²/2 over the weights (not the biases).
func halfSquaredWeights(s Shape, params []float64) float64 {
	var q float64
	for _, v := range params[:s.Classes*s.Features] {
		q += v * v
	}
	return q / 2
}

// crossEntropy returns the mean cross-entropy of params on d.
func (ws *workspace) crossEntropy(params []float64, d Dataset) float64 {
	n := d.Len()
	nc := ws.s.Classes
	var sum float64
	for lo := 0; lo < n; lo += evalChunk {
		hi := min(lo+evalChunk, n)
		rows := hi - lo
		ws.gatherRange(d, lo, hi)
		ws.logits(params, rows)
		for r := 0; r < rows; r++ {
			zr := ws.z[r*nc : (r+1)*nc]
			zy := zr[d.y[lo+r]]
			sum += softmax(zr) - zy
		}
	}
	return sum / float64(n)
}

// gradient writes the gradient of the mean cross-entropy plus
// (l2/2)||W||² into g and returns that loss. It uses ws.xb and ws.z as
// scratch, with chunks of at most evalChunk rows.
func (ws *workspace) gradient(g, params []float64, d Dataset, l2 float64) float64 {
	n := d.Len()
	nc := ws.s.Classes
	f := ws.s.Features
	clear(g)
	gb := ws.s.Biases(g)
	inv := 1 / float64(n)
	var sum float64
	for lo := 0; lo < n; lo += evalChunk {
		hi := min(lo+evalChunk, n)
		rows := hi - lo
		ws.gatherRange(d, lo, hi)
		ws.logits(params, rows)
		for r := 0; r < rows; r++ {
			zr := ws.z[r*nc : (r+1)*nc]
			y := d.y[lo+r]
			zy := zr[y]
			sum += softmax(zr) - zy
			zr[y] -= 1
			for c := range zr {
				zr[c] *= inv
				gb[c] += zr[c]
			}
		}
		ws.k.update(f, nc, g, ws.xb, rows, ws.z, 1, 0, nil)
	}
	loss := sum * inv
	if l2 != 0 {
		for i, v := range params[:nc*f] {
			g[i] += l2 * v
		}
		loss += l2 * halfSquaredWeights(ws.s, params)
	}
	return loss
}

// checkEval validates the common arguments of the evaluation functions.
func checkEval(params []float64, d Dataset) error {
	if err := d.check(); err != nil {
		return err
	}
	return d.shape.checkParams("params", params)
}

func checkL2(l2 float64) error {
	if !check.Finite(l2) || l2 < 0 {
		return fmt.Errorf("logreg: L2 must be finite and non-negative, got %v", l2)
	}
	return nil
}

// dstFor returns dst if it has n entries, a new slice if dst is nil, and an
// error otherwise.
func dstFor(dst []float64, n int) ([]float64, error) {
	if dst == nil {
		return make([]float64, n), nil
	}
	if len(dst) != n {
		return nil, fmt.Errorf("%w: destination has %d entries, want %d", ErrShape, len(dst), n)
	}
	return dst, nil
}

// Loss returns the mean cross-entropy of the model params on d plus the
// weight penalty (l2/2)||W||² (pass l2 = 0 for the plain cross-entropy).
func Loss(params []float64, d Dataset, l2 float64) (float64, error) {
	if err := checkEval(params, d); err != nil {
		return 0, err
	}
	if err := checkL2(l2); err != nil {
		return 0, err
	}
	ws := newWorkspace(d.shape, defaultKernel, min(d.Len(), evalChunk))
	return ws.crossEntropy(params, d) + l2*halfSquaredWeights(d.shape, params), nil
}

// gradient writes into dst the full-batch gradient of Loss(params, d, l2)
// with respect to params (same layout as params) and returns it together
// with the loss. dst may be nil (a new slice is allocated); otherwise it
// must have NumParams entries and must not overlap params.
func gradient(dst, params []float64, d Dataset, l2 float64) ([]float64, float64, error) {
	if err := checkEval(params, d); err != nil {
		return nil, 0, err
	}
	if err := checkL2(l2); err != nil {
		return nil, 0, err
	}
	g, err := dstFor(dst, d.shape.NumParams())
	if err != nil {
		return nil, 0, err
	}
	if overlaps(g, params) {
		return nil, 0, errors.New("logreg: gradient destination overlaps params")
	}
	ws := newWorkspace(d.shape, defaultKernel, min(d.Len(), evalChunk))
	loss := ws.gradient(g, params, d, l2)
	return g, loss, nil
}

// Accuracy returns the fraction of examples of d whose label is the
// model's most probable class (ties go to the lower class index).
func Accuracy(params []float64, d Dataset) (float64, error) {
	if err := checkEval(params, d); err != nil {
		return 0, err
	}
	n := d.Len()
	nc := d.shape.Classes
	ws := newWorkspace(d.shape, defaultKernel, min(n, evalChunk))
	correct := 0
	for lo := 0; lo < n; lo += evalChunk {
		hi := min(lo+evalChunk, n)
		ws.gatherRange(d, lo, hi)
		ws.logits(params, hi-lo)
		for r := 0; r < hi-lo; r++ {
			if argmax(ws.z[r*nc:(r+1)*nc]) == int(d.y[lo+r]) {
				correct++
			}
		}
	}
	return float64(correct) / float64(n), nil
}

// Predict writes the most probable class of each row of x (row-major,
// s.Features values per row, all finite) into dst and returns it. dst may
// be nil; otherwise it must have one entry per row.
func Predict(dst []uint8, s Shape, params []float64, x []float32) ([]uint8, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if err := s.checkParams("params", params); err != nil {
		return nil, err
	}
	if len(x)%s.Features != 0 {
		return nil, fmt.Errorf("%w: %d values is not a whole number of %d-feature rows", ErrShape, len(x), s.Features)
	}
	n := len(x) / s.Features
	if dst == nil {
		dst = make([]uint8, n)
	} else if len(dst) != n {
		return nil, fmt.Errorf("%w: destination has %d entries for %d rows", ErrShape, len(dst), n)
	}
	for i, v := range x {
		if !check.Finite(float64(v)) {
			return nil, fmt.Errorf("logreg: feature %d of row %d is not finite (%v)", i%s.Features, i/s.Features, v)
		}
	}
	if n == 0 {
		return dst, nil
	}
	d := Dataset{shape: s, x: x} // labels unused by gatherRange and logits
	ws := newWorkspace(s, defaultKernel, min(n, evalChunk))
	for lo := 0; lo < n; lo += evalChunk {
		hi := min(lo+evalChunk, n)
		ws.gatherRange(d, lo, hi)
		ws.logits(params, hi-lo)
		for r := 0; r < hi-lo; r++ {
			dst[lo+r] = uint8(argmax(ws.z[r*s.Classes : (r+1)*s.Classes]))
		}
	}
	return dst, nil
}
