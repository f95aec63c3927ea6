// Package logreg implements multinomial (softmax) logistic regression, the
// model every Blanket client trains locally (FLAME and APES both evaluate on
// MNIST with d = 784*10 + 10 = 7850 parameters).
//
// # Parameter layout
//
// A model of Shape{Features: F, Classes: C} is one flat []float64 of length
// C*F + C:
//
//	params[c*F : (c+1)*F]  weights of class c   (row c of W, C×F row-major)
//	params[C*F + c]        bias of class c
//
// For the MNIST shape (F = 784, C = 10) the weights of class c are
// params[c*784 : (c+1)*784] and its bias is params[7840+c]. The clients clip,
// randomize and send exactly this vector (or the difference of two of them),
// so the layout is part of the wire format: Shape.WeightIndex and
// Shape.BiasIndex are the only sanctioned way to address it.
//
// # Model
//
// For an example x in R^F the logits are z_c = <W_c, x> + b_c and the class
// probabilities p = softmax(z), computed stably as exp(z_c - max z) / sum.
// The loss of a labelled set {(x_i, y_i)}, i = 1..n, is the mean
// cross-entropy plus an optional L2 penalty on the weights (not the biases):
//
//	F(w) = (1/n) sum_i [logsumexp(z(x_i)) - z_{y_i}(x_i)] + (λ/2) ||W||²
//
// with gradient dF/dW_c = (1/n) sum_i (p_c(x_i) - 1[y_i = c]) x_i + λ W_c and
// dF/db_c = (1/n) sum_i (p_c(x_i) - 1[y_i = c]). The penalty convention,
// (λ/2)||W||² on the weights only, is TensorFlow's l2_regularizer(λ) on a
// dense layer's kernel (λ·Σw²/2); the project issue gives λ = 0.001 as the
// setting of FLAME's code. A reference that wrote λ||W||² differs by a
// factor 2 in λ. Examples are stored as float32 and converted to float64;
// all arithmetic is in float64.
//
// # Local training
//
// A Trainer runs minibatch SGD for TrainConfig.Epochs passes over the local
// data, reshuffling the order each epoch with an injected noise.Source. With
// TrainConfig.ProxMu = μ > 0 it minimises the FedProx local objective used by
// APES (Li et al. 2020; APES, Sec. "Convergence Analysis"):
//
//	h(w; w_g) = F(w) + (μ/2) ||w - w_g||²
//
// where w_g is the global model the round started from and, as in FedProx's
// definition, the proximal term covers the whole parameter vector, biases
// included. One SGD step on a minibatch B is
//
//	W ← (1 - αλ - αμ) W + αμ W_g - (α/|B|) sum_{i∈B} (p(x_i) - e_{y_i}) x_iᵀ
//	b ← (1 - αμ) b + αμ b_g - (α/|B|) sum_{i∈B} (p(x_i) - e_{y_i})
//
// which is w - α ∇h evaluated at the pre-step w, rearranged so the shrinkage
// is one multiply per weight.
//
// # Kernels
//
// The two matrix products of a step (the logits X Wᵀ and the rank-|B|
// update Dᵀ X) run on one of two kernels: a hand-written pure-Go kernel
// (kernel_pure.go) and one on gonum's BLAS (kernel_gonum.go). Build tags
// pick the faster per target: gonum natively (kernel_native.go), pure Go
// under GOOS=js (kernel_js.go), whose comments give the measurements. Both
// are compiled on every target so the tests check, and the benchmarks time,
// each of them everywhere; they agree to rounding, not bit for bit.
//
// On the 2-core development machine one client round as the experiment
// runner does it (10 epochs on 10 MNIST examples, batch 7) takes about
// 0.6 ms of CPU natively and 4.6 ms under Node.js, and allocates nothing.
//
// # Concurrency
//
// A Trainer owns scratch buffers and is not safe for concurrent use. Give
// each goroutine its own Trainer (they are cheap: a few buffers sized by the
// batch) and they run fully in parallel; the package has no shared mutable
// state. The package-level functions (Loss, gradient, Accuracy, Predict)
// allocate their own scratch and are safe to call concurrently. No function
// modifies the parameter vectors or datasets it reads.
package logreg
