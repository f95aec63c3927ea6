package logreg

import (
	"errors"
	"fmt"

	"github.com/blanket-fl/blanket/shared/internal/check"
)

// ErrConfig reports an invalid TrainConfig.
var ErrConfig = errors.New("logreg: invalid training configuration")

// TrainConfig holds the hyper-parameters of local training. The zero value
// is invalid; NewTrainer validates it.
type TrainConfig struct {
	// Epochs is the number of passes over the local data (at least 1).
	Epochs int
	// BatchSize is the minibatch size (at least 1). The last minibatch of
	// an epoch holds the remaining n mod BatchSize examples when BatchSize
	// does not divide n; a BatchSize of n or more gives full-batch
	// gradient descent.
	BatchSize int
	// LearningRate is the SGD step size α (finite, > 0).
	LearningRate float64
	// L2 is the weight penalty λ of (λ/2)||W||² (finite, >= 0); biases are
	// not penalised. FLAME's experiments use 0.001.
	L2 float64
	// ProxMu is the FedProx proximal coefficient μ of (μ/2)||w - w_g||²
	// (finite, >= 0; 0 disables the term). APES trains with FedProx.
	ProxMu float64
}

// FLAMEConfig returns the local-training setting of the FLAME code's MNIST
// experiments, batch size 7 and L2 0.001, with the epoch count and learning
// rate the caller supplies.
func FLAMEConfig(epochs int, learningRate float64) TrainConfig {
	return TrainConfig{Epochs: epochs, BatchSize: 7, LearningRate: learningRate, L2: 0.001}
}

// Validate reports whether c is usable: Epochs and BatchSize at least 1,
// LearningRate finite and positive, L2 and ProxMu finite and non-negative,
// and LearningRate*(L2+ProxMu) < 1 so the per-step shrink factor
// 1 - α(λ+μ) stays in (0, 1] (a larger product overshoots the quadratic
// terms and oscillates or diverges).
func (c TrainConfig) Validate() error {
	if c.Epochs < 1 {
		return fmt.Errorf("%w: epochs must be at least 1, got %d", ErrConfig, c.Epochs)
	}
	if c.BatchSize < 1 {
		return fmt.Errorf("%w: batch size must be at least 1, got %d", ErrConfig, c.BatchSize)
	}
	if !check.Finite(c.LearningRate) || c.LearningRate <= 0 {
		return fmt.Errorf("%w: learning rate must be finite and positive, got %v", ErrConfig, c.LearningRate)
	}
	if !check.Finite(c.L2) || c.L2 < 0 {
		return fmt.Errorf("%w: L2 must be finite and non-negative, got %v", ErrConfig, c.L2)
	}
	if !check.Finite(c.ProxMu) || c.ProxMu < 0 {
		return fmt.Errorf("%w: proximal mu must be finite and non-negative, got %v", ErrConfig, c.ProxMu)
	}
	if p := c.LearningRate * (c.L2 + c.ProxMu); !(p < 1) {
		return fmt.Errorf("%w: learning rate × (L2 + mu) = %v must be below 1", ErrConfig, p)
	}
	return nil
}
