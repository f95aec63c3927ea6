package experiment

import (
	"context"
	"errors"
	"fmt"

	"github.com/blanket-fl/blanket/shared/dataset"
	"github.com/blanket-fl/blanket/shared/features"
)

// featured returns the world of secure summation's population with the
// feature map fm (shared/features) applied to every example as loaded
// (pixels in [0, 1]), before the preprocessing loadWorld does
// (standardization fitted on the mapped training part, as the
// volunteers' client.StandardizeSplit does on raw pixels), split into
// users of perUser examples by the same seeded partition as w's (the
// same volunteers hold the same digits whatever the map). Identity (or
// name "" / "identity") is w.repartition: bit-identical to the product's
// features.
//
// The map is a fixed public function applied per example (shared/features):
// it changes the model's dimension d, not what a volunteer's clipped
// update can reveal, so the accounting is unchanged.
func (w *world) featured(ctx context.Context, name string, perUser int, nonIID bool) (*world, error) {
	if name == "" || name == "identity" {
		return w.repartition(perUser, nonIID)
	}
	fm, err := features.Parse(name)
	if err != nil {
		return nil, err
	}
	if w.source == nil {
		return nil, errors.New("features: the world keeps no source data")
	}
	train, err := w.mapSet(ctx, fm, w.source.train)
	if err != nil {
		return nil, fmt.Errorf("features %s: train: %w", name, err)
	}
	test, err := w.mapSet(ctx, fm, w.source.test)
	if err != nil {
		return nil, fmt.Errorf("features %s: test: %w", name, err)
	}
	var nw *world
	if w.source.standardize {
		nw, err = standardizedWorld(train, test, perUser, nonIID, w.seed, w.workers)
	} else {
		nw, err = newWorld(train, test, perUser, nonIID, w.seed, w.workers)
	}
	if err != nil {
		return nil, fmt.Errorf("features %s: %w", name, err)
	}
	nw.source = w.source
	return nw, nil
}

// mapSet applies fm to every example of s (on w.workers goroutines).
func (w *world) mapSet(ctx context.Context, fm features.FeatureMap, s *dataset.Set) (*dataset.Set, error) {
	out, err := fm.Dim(s.Features)
	if err != nil {
		return nil, err
	}
	m := &dataset.Set{X: make([]float32, s.Len()*out), Y: append([]uint8(nil), s.Y...), Features: out, Classes: s.Classes}
	src := make([][]float64, w.workers)
	dst := make([][]float64, w.workers)
	for k := range src {
		src[k], dst[k] = make([]float64, s.Features), make([]float64, out)
	}
	err = w.forEach(ctx, s.Len(), func(worker, i int) error {
		x, y := src[worker], dst[worker]
		for j, v := range s.Row(i) {
			x[j] = float64(v)
		}
		if err := fm.Apply(y, x); err != nil {
			return fmt.Errorf("example %d: %w", i, err)
		}
		row := m.X[i*out : (i+1)*out]
		for j, v := range y {
			row[j] = float32(v)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}
