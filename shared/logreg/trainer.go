package logreg

import (
	"errors"
	"fmt"

	"github.com/blanket-fl/blanket/shared/internal/check"
	"github.com/blanket-fl/blanket/shared/noise"
)

// ErrDiverged reports that local training produced a non-finite parameter
// (the learning rate is too large for the data).
var ErrDiverged = errors.New("logreg: training diverged to a non-finite parameter")

// Trainer runs local minibatch SGD for one Shape and TrainConfig, reusing
// its scratch buffers across calls so that training allocates nothing per
// step. A Trainer is not safe for concurrent use: give each goroutine its
// own (NewTrainer is cheap), and the trainers then share no mutable state.
type Trainer struct {
	shape Shape
	cfg   TrainConfig
	ws    *workspace
	w     []float64 // working parameters
	perm  []int     // example order of the current epoch
}

// NewTrainer validates s and cfg and returns a Trainer for them.
func NewTrainer(s Shape, cfg TrainConfig) (*Trainer, error) {
	return newTrainer(s, cfg, defaultKernel)
}

func newTrainer(s Shape, cfg TrainConfig, k kernel) (*Trainer, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Trainer{
		shape: s,
		cfg:   cfg,
		ws:    newWorkspace(s, k, 0),
		w:     make([]float64, s.NumParams()),
	}, nil
}

// Shape returns the model shape the Trainer was built for.
func (t *Trainer) Shape() Shape { return t.shape }

// Config returns the training configuration.
func (t *Trainer) Config() TrainConfig { return t.cfg }

// Train runs Config().Epochs epochs of minibatch SGD on d starting from
// global and writes the trained parameters into dst, which it returns.
// Each epoch visits the examples in a fresh uniformly random order drawn
// from src (noise.Shuffle) and steps once per minibatch of BatchSize
// examples (the last one may be smaller), minimising the local objective
// of Objective. Given the same src stream the result is bit-for-bit
// reproducible on a given target (the native and js kernels round
// differently).
//
// dst may be nil (a new slice is allocated) or have NumParams entries; it
// may be global itself, which is then overwritten only after training.
// global must hold finite values; ErrDiverged is returned if training
// produces a non-finite one. Apart from writing dst, Train modifies neither
// global nor d.
func (t *Trainer) Train(dst, global []float64, d Dataset, src noise.Source) ([]float64, error) {
	out, err := dstFor(dst, t.shape.NumParams())
	if err != nil {
		return nil, err
	}
	if err := t.run(global, d, src); err != nil {
		return nil, err
	}
	copy(out, t.w)
	return out, nil
}

// Update is Train but writes the model update trained - global (what a
// federated client sends) into dst instead of the trained parameters.
// dst may be nil, global itself, or any NumParams-long slice.
func (t *Trainer) Update(dst, global []float64, d Dataset, src noise.Source) ([]float64, error) {
	out, err := dstFor(dst, t.shape.NumParams())
	if err != nil {
		return nil, err
	}
	if err := t.run(global, d, src); err != nil {
		return nil, err
	}
	for i, v := range t.w {
		out[i] = v - global[i]
	}
	return out, nil
}

// checkData validates a dataset and global vector against the trainer.
func (t *Trainer) checkData(global []float64, d Dataset) error {
	if err := d.check(); err != nil {
		return err
	}
	if d.shape != t.shape {
		return fmt.Errorf("%w: dataset shape %+v, trainer shape %+v", ErrShape, d.shape, t.shape)
	}
	return t.shape.checkParams("global", global)
}

// run trains into t.w.
func (t *Trainer) run(global []float64, d Dataset, src noise.Source) error {
	if err := t.checkData(global, d); err != nil {
		return err
	}
	if src == nil {
		return errors.New("logreg: nil noise.Source")
	}
	n := d.Len()
	f, nc := t.shape.Features, t.shape.Classes
	batch := min(t.cfg.BatchSize, n)
	t.ws.ensure(batch)
	if cap(t.perm) < n {
		t.perm = make([]int, n)
	}
	perm := t.perm[:n]
	lr, l2, mu := t.cfg.LearningRate, t.cfg.L2, t.cfg.ProxMu
	shrinkW := 1 - lr*(l2+mu) // in (0, 1] by TrainConfig.Validate
	shrinkB := 1 - lr*mu
	prox := lr * mu
	w := t.w
	copy(w, global)
	bias := t.shape.Biases(w)
	gbias := t.shape.Biases(global)
	swap := func(i, j int) { perm[i], perm[j] = perm[j], perm[i] }

	for e := 0; e < t.cfg.Epochs; e++ {
		for i := range perm {
			perm[i] = i
		}
		noise.Shuffle(src, n, swap)
		for lo := 0; lo < n; lo += batch {
			idx := perm[lo:min(lo+batch, n)]
			rows := len(idx)
			t.ws.gather(d, idx)
			t.ws.logits(w, rows)
			// Residuals scaled by the step: z_r ← -(α/|B|)(p_r - e_{y_r}).
			a := -lr / float64(rows)
			z := t.ws.z[:rows*nc]
			for r, i := range idx {
				zr := z[r*nc : (r+1)*nc]
				softmax(zr)
				zr[d.y[i]] -= 1
				for c := range zr {
					zr[c] *= a
				}
			}
			for c := range bias {
				s := 0.0
				for r := 0; r < rows; r++ {
					s += z[r*nc+c]
				}
				bias[c] = shrinkB*bias[c] + prox*gbias[c] + s
			}
			t.ws.k.update(f, nc, w, t.ws.xb, rows, z, shrinkW, prox, global)
		}
	}
	for _, v := range w {
		if !check.Finite(v) {
			return ErrDiverged
		}
	}
	return nil
}

// Objective returns the local objective that Train minimises at params:
// the mean cross-entropy on d plus (L2/2)||W||² plus (ProxMu/2)||params -
// global||² (package documentation, "Local training").
func (t *Trainer) Objective(params, global []float64, d Dataset) (float64, error) {
	if err := t.checkData(global, d); err != nil {
		return 0, err
	}
	if err := t.shape.checkParams("params", params); err != nil {
		return 0, err
	}
	t.ws.ensure(min(d.Len(), evalChunk))
	loss := t.ws.crossEntropy(params, d) + t.cfg.L2*halfSquaredWeights(t.shape, params)
	return loss + t.cfg.ProxMu*halfSquaredDistance(params, global), nil
}

// ObjectiveGradient writes the full-batch gradient of Objective into dst
// (nil, or NumParams entries not overlapping params) and returns it with
// the objective value. One Train epoch with BatchSize >= d.Len() is exactly
// the step params ← params - LearningRate·ObjectiveGradient.
func (t *Trainer) ObjectiveGradient(dst, params, global []float64, d Dataset) ([]float64, float64, error) {
	if err := t.checkData(global, d); err != nil {
		return nil, 0, err
	}
	if err := t.shape.checkParams("params", params); err != nil {
		return nil, 0, err
	}
	g, err := dstFor(dst, t.shape.NumParams())
	if err != nil {
		return nil, 0, err
	}
	if overlaps(g, params) || overlaps(g, global) {
		return nil, 0, errors.New("logreg: gradient destination overlaps its inputs")
	}
	t.ws.ensure(min(d.Len(), evalChunk))
	loss := t.ws.gradient(g, params, d, t.cfg.L2)
	if mu := t.cfg.ProxMu; mu != 0 {
		for i, v := range params {
			g[i] += mu * (v - global[i])
		}
		loss += mu * halfSquaredDistance(params, global)
	}
	return g, loss, nil
}

// halfSquaredDistance returns ||a - b||²/2.
func halfSquaredDistance(a, b []float64) float64 {
	b = b[:len(a)]
	var q float64
	for i, v := range a {
		e := v - b[i]
		q += e * e
	}
	return q / 2
}

// overlaps reports whether a and b start at the same element, which is how
// a caller aliases two parameter vectors by passing one slice twice.
func overlaps(a, b []float64) bool {
	return len(a) > 0 && len(b) > 0 && &a[0] == &b[0]
}
