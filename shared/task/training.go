package task

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/blanket-fl/blanket/shared/features"
	"github.com/blanket-fl/blanket/shared/logreg"
)

// Server optimisers of the noisy mean (Training.ServerOptimizer). Both are
// post-processing of the released mean, so neither costs privacy.
const (
	// OptimizerSGD moves the model by the server learning rate times the
	// noisy mean: x += η Δ.
	OptimizerSGD = "sgd"
	// OptimizerMomentum is FedAvgM (Hsu et al. 2019): m = β m + Δ,
	// x += η m, with the momentum m kept by the aggregator between rounds.
	OptimizerMomentum = "momentum"
)

// ImagePixels is the input a fixed feature map accepts: one 28 x 28 image
// (a numeric feature of count 784), the digits' layout (shared/features'
// maps are built for that side).
const ImagePixels = 28 * 28

// Limits of the training section.
const (
	maxClip        = 1000
	maxServerLR    = 1000
	maxLocalEpochs = 1000
	maxLocalLR     = 100
)

// Training is a task's training recipe, every field optional (the zero
// value of a field means "the default": Recipe). Every field is public:
// the clip and the server's step are in the round spec, the local
// training and the feature map are what every volunteer's device runs.
type Training struct {
	// Clip is the L2 bound C every update is clipped to before it is
	// encoded (the sensitivity every ε is charged for).
	Clip float64 `json:"clip,omitempty"`
	// ServerOptimizer is OptimizerSGD or OptimizerMomentum.
	ServerOptimizer string `json:"server_optimizer,omitempty"`
	// ServerMomentum is the momentum β in (0, 1) (momentum only).
	ServerMomentum float64 `json:"server_momentum,omitempty"`
	// ServerLR is the server learning rate η.
	ServerLR float64 `json:"server_lr,omitempty"`
	// LocalEpochs and LocalLR are each volunteer's local SGD (batch 7,
	// L2 0.001: logreg.FLAMEConfig).
	LocalEpochs int     `json:"local_epochs,omitempty"`
	LocalLR     float64 `json:"local_lr,omitempty"`
	// FeatureMap names a fixed, data-independent map of shared/features
	// (features.Parse: "identity", "pool2", "scatter1", ...) each volunteer
	// applies to every example before training; only for a task whose
	// features are one 28 x 28 image (ImagePixels numeric columns).
	FeatureMap string `json:"feature_map,omitempty"`
}

// Recipe is a task's resolved training recipe: its Training with every
// absent field filled by the default rule (docs/tasks.md, "Training
// recipe").
type Recipe struct {
	Clip            float64
	ServerOptimizer string
	// ServerMomentum is β (0 for sgd).
	ServerMomentum float64
	ServerLR       float64
	LocalEpochs    int
	LocalLR        float64
	// FeatureMap is the map's name ("identity" when none).
	FeatureMap string
}

// Train is the volunteers' local training configuration of r.
func (r Recipe) Train() logreg.TrainConfig { return logreg.FLAMEConfig(r.LocalEpochs, r.LocalLR) }

// String names the recipe in one line (logs, the round's announcement).
func (r Recipe) String() string {
	opt := r.ServerOptimizer
	if r.ServerOptimizer == OptimizerMomentum {
		opt = fmt.Sprintf("momentum %g", r.ServerMomentum)
	}
	return fmt.Sprintf("features %s, clip %g, server %s at lr %g, %d local epochs at lr %g",
		r.FeatureMap, r.Clip, opt, r.ServerLR, r.LocalEpochs, r.LocalLR)
}

// ImageScale is the d from which DefaultRecipe uses the image models'
// server step: the tabular tasks have d below 100 (62 and 65 shipped), the
// 28 x 28 image models d = 500 to 39,700 (docs/experiments.md).
const ImageScale = 1000

// DefaultRecipe is the recipe of a task without a training section, chosen
// from public information only, the model's parameter count d; the rule
// and the runs behind it are in docs/tasks.md, "Training recipe":
//
//   - C = 0.3 and local SGD of 10 epochs at lr 0.1 for every task (on the
//     tabular example neither C = 1 nor 1 or 3 local epochs for its one
//     row per volunteer did better: the rows per volunteer, the other
//     public input, did not change the choice);
//   - d >= ImageScale: server momentum β = 0.9 at lr 2 (FedAvgM: the
//     digits' tuning, +10 points at ε = 4 with scatter1 over sgd's 8);
//   - d < ImageScale: plain sgd at lr 8 (on the tabular example momentum
//     at lr 2 was 0 to 3.5 points below it over 3 seeds).
func DefaultRecipe(d int) Recipe {
	r := Recipe{Clip: 0.3, ServerOptimizer: OptimizerSGD, ServerLR: 8, LocalEpochs: 10, LocalLR: 0.1, FeatureMap: "identity"}
	if d >= ImageScale {
		r.ServerOptimizer, r.ServerMomentum, r.ServerLR = OptimizerMomentum, 0.9, 2
	}
	return r
}

// Recipe resolves t's training section: every field the definition sets,
// and DefaultRecipe(t.D()) for the others (d with the feature map). A
// momentum β absent with the momentum optimiser is 0.9; an optimiser
// absent with a β given is momentum; an optimiser given without a server
// lr takes that optimiser's default lr (2 for momentum, 8 for sgd).
func (t *Task) Recipe() Recipe {
	r := DefaultRecipe(t.D())
	tr := t.Training
	if tr.Clip > 0 {
		r.Clip = tr.Clip
	}
	switch {
	case tr.ServerOptimizer == OptimizerSGD:
		if r.ServerOptimizer != OptimizerSGD {
			r.ServerLR = 8
		}
		r.ServerOptimizer, r.ServerMomentum = OptimizerSGD, 0
	case tr.ServerOptimizer == OptimizerMomentum || tr.ServerMomentum > 0:
		if r.ServerOptimizer != OptimizerMomentum {
			r.ServerLR, r.ServerMomentum = 2, 0.9
		}
		r.ServerOptimizer = OptimizerMomentum
		if tr.ServerMomentum > 0 {
			r.ServerMomentum = tr.ServerMomentum
		}
	}
	if tr.ServerLR > 0 {
		r.ServerLR = tr.ServerLR
	}
	if tr.LocalEpochs > 0 {
		r.LocalEpochs = tr.LocalEpochs
	}
	if tr.LocalLR > 0 {
		r.LocalLR = tr.LocalLR
	}
	if tr.FeatureMap != "" {
		r.FeatureMap = tr.FeatureMap
	}
	return r
}

// isImage reports whether t's features are one 28 x 28 image: a single
// numeric feature of ImagePixels columns.
func (t *Task) isImage() bool {
	return len(t.Features) == 1 && t.Features[0].Type == TypeNumeric && t.Features[0].Count == ImagePixels
}

// validate checks the training section (t's layout is built: the feature
// map's input is checked against it). It fills t.fmap and t.mapDim.
func (tr *Training) validate(t *Task, layoutOK bool) error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, invalid("training."+field, format, a...))
	}
	positive := func(field string, v, limit float64) {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > limit {
			bad(field, "%v: want a positive number at most %v (or leave it out for the default)", v, limit)
		}
	}
	positive("clip", tr.Clip, maxClip)
	positive("server_lr", tr.ServerLR, maxServerLR)
	positive("local_lr", tr.LocalLR, maxLocalLR)
	if tr.LocalEpochs < 0 || tr.LocalEpochs > maxLocalEpochs {
		bad("local_epochs", "%d: want 1 to %d (or leave it out for the default)", tr.LocalEpochs, maxLocalEpochs)
	}
	switch tr.ServerOptimizer {
	case "", OptimizerMomentum:
		if b := tr.ServerMomentum; math.IsNaN(b) || b < 0 || b >= 1 {
			bad("server_momentum", "%v: want a momentum in (0, 1), e.g. 0.9", b)
		}
	case OptimizerSGD:
		if tr.ServerMomentum != 0 {
			bad("server_momentum", "%v: plain %q has no momentum; remove it or choose %q", tr.ServerMomentum, OptimizerSGD, OptimizerMomentum)
		}
	default:
		bad("server_optimizer", "%q: want %q (x += lr·mean) or %q (FedAvgM, with server_momentum)", tr.ServerOptimizer, OptimizerSGD, OptimizerMomentum)
	}
	t.fmap, t.mapDim = nil, 0
	switch name := tr.FeatureMap; {
	case name == "" || name == "identity":
	case !slices.Contains(features.Names, name):
		bad("feature_map", "%q: want one of %s", name, strings.Join(features.Names, ", "))
	case !layoutOK:
		// The features are refused already; the map cannot be checked.
	case !t.isImage():
		bad("feature_map", "%q maps one 28 x 28 image (a numeric feature of count %d); this task's features are %d columns of %d features", name, ImagePixels, t.Inputs(), len(t.Features))
	default:
		m, err := features.Parse(name)
		if err != nil {
			bad("feature_map", "%v", err)
			break
		}
		dim, err := m.Dim(t.Inputs())
		if err != nil {
			bad("feature_map", "%v", err)
			break
		}
		t.fmap, t.mapDim = m, dim
	}
	return errors.Join(errs...)
}

// DigitsRecipe is the built-in digits task's recipe (Digits().Recipe(),
// which TestDigitsRecipe checks), for the browser: it decodes the digits
// task without encoding/json, so it has no Task of the digits unless the
// page gives it one.
func DigitsRecipe() Recipe {
	return Recipe{Clip: 0.3, ServerOptimizer: OptimizerMomentum, ServerMomentum: 0.9, ServerLR: 2, LocalEpochs: 10, LocalLR: 0.1, FeatureMap: "scatter1"}
}
