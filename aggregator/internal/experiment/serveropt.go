package experiment

import (
	"fmt"
	"math"
)

// Server optimisers of secure summation's noisy mean (-secagg-opt). Each
// round the server receives the noisy mean Δ of the clipped updates (the
// released, already private quantity) and moves the model by a function
// of Δ and of earlier rounds' Δ: post-processing of the releases, so the
// optimiser costs no privacy (the ledger's charge is the same for every
// optimiser; docs/experiments.md, "Features and server optimisation").
const (
	optSGD      = "sgd"      // x += η Δ (the product's: η = the round spec's server lr)
	optMomentum = "momentum" // FedAvgM (Hsu et al. 2019): m = β m + Δ, x += η m
	optAdam     = "adam"     // FedAdam (Reddi et al. 2021, Algorithm 2)
	optYogi     = "yogi"     // FedYogi (same, Yogi's second moment)
)

// serverOptParams are a server optimiser and its hyperparameters.
type serverOptParams struct {
	Kind string // optSGD (""), optMomentum, optAdam or optYogi
	// Beta1 is the momentum β (momentum) or the first-moment decay β1
	// (adam, yogi); Beta2 the second-moment decay β2; Tau the adaptivity
	// τ (Reddi et al.'s ε, also the initial √v).
	Beta1, Beta2, Tau float64
}

// withDefaults fills zero hyperparameters: β = 0.9 (momentum), β1 = 0.9,
// β2 = 0.99, τ = 1e-3 (Reddi et al.'s defaults; their grid is τ in
// {1e-5, ..., 1e-1}).
func (p serverOptParams) withDefaults() serverOptParams {
	if p.Kind == "" {
		p.Kind = optSGD
	}
	if p.Beta1 == 0 {
		p.Beta1 = 0.9
	}
	if p.Beta2 == 0 {
		p.Beta2 = 0.99
	}
	if p.Tau == 0 {
		p.Tau = 1e-3
	}
	return p
}

func (p serverOptParams) validate() error {
	switch p.Kind {
	case optSGD, optMomentum, optAdam, optYogi:
	default:
		return fmt.Errorf("server optimiser %q (want sgd, momentum, adam or yogi)", p.Kind)
	}
	if !(p.Beta1 >= 0 && p.Beta1 < 1) || !(p.Beta2 >= 0 && p.Beta2 < 1) || !(p.Tau > 0) {
		return fmt.Errorf("server optimiser %s: beta1 %v, beta2 %v, tau %v (want betas in [0, 1), tau > 0)", p.Kind, p.Beta1, p.Beta2, p.Tau)
	}
	return nil
}

// String names the optimiser and the hyperparameters it uses.
func (p serverOptParams) String() string {
	switch p.Kind {
	case optMomentum:
		return fmt.Sprintf("server momentum beta %g", p.Beta1)
	case optAdam, optYogi:
		return fmt.Sprintf("server %s beta1 %g beta2 %g tau %g", p.Kind, p.Beta1, p.Beta2, p.Tau)
	}
	return "server sgd"
}

// serverOpt is one run's optimiser state.
type serverOpt struct {
	p    serverOptParams
	lr   float64
	m, v []float64
}

func newServerOpt(p serverOptParams, lr float64) *serverOpt {
	return &serverOpt{p: p, lr: lr}
}

// step moves global by the optimiser's step for the round's noisy mean
// delta. Adam and Yogi follow Reddi et al. (2021), Algorithm 2: m_t =
// β1 m_{t-1} + (1-β1) Δ_t; v_t = β2 v_{t-1} + (1-β2) Δ_t² (Adam) or
// v_{t-1} - (1-β2) Δ_t² sign(v_{t-1} - Δ_t²) (Yogi); x += η m_t / (√v_t +
// τ), with m_0 = 0, v_0 = τ² and no bias correction.
func (o *serverOpt) step(global, delta []float64) {
	switch o.p.Kind {
	case optMomentum:
		if o.m == nil {
			o.m = make([]float64, len(delta))
		}
		for j, d := range delta {
			o.m[j] = o.p.Beta1*o.m[j] + d
			global[j] += o.lr * o.m[j]
		}
	case optAdam, optYogi:
		if o.m == nil {
			o.m, o.v = make([]float64, len(delta)), make([]float64, len(delta))
			for j := range o.v {
				o.v[j] = o.p.Tau * o.p.Tau
			}
		}
		b1, b2 := o.p.Beta1, o.p.Beta2
		for j, d := range delta {
			o.m[j] = b1*o.m[j] + (1-b1)*d
			d2 := d * d
			if o.p.Kind == optAdam {
				o.v[j] = b2*o.v[j] + (1-b2)*d2
			} else {
				s := 0.0
				if o.v[j] > d2 {
					s = 1
				} else if o.v[j] < d2 {
					s = -1
				}
				o.v[j] -= (1 - b2) * d2 * s
			}
			global[j] += o.lr * o.m[j] / (math.Sqrt(o.v[j]) + o.p.Tau)
		}
	default:
		for j, d := range delta {
			global[j] += o.lr * d
		}
	}
}
