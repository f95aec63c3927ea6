package params

import (
	"errors"
	"fmt"
	"sync"

	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/wire"
)

// SecAggSigma returns σ for a secure-summation configuration of a model of
// d parameters and about n reports per round when sigma is 0: the smallest
// per-server σ with which `rounds` rounds at check-in rate q fit the
// ledger's target (eps, delta). It starts from roundspec.CalibrateSigma
// (replace-one, the relation the ledger charges; docs/accounting.md §4,
// discrete Gaussian RDP by Canonne-Kamath-Steinke 2020 Prop. 5) and,
// should the ledger's own accountant (privacy.Account's tightest proven
// row, which admits rounds) still need more, raises σ by bisection until
// `rounds` releases of the built spec fit it, so that the rounds
// calibrated for are the rounds the ledger admits.
func SecAggSigma(d, n int, f Choice, rounds int, eps, delta float64) (float64, error) {
	if f.Sigma > 0 {
		return f.Sigma, nil
	}
	if rounds < 1 {
		return 0, errors.New("secagg: give -sigma, or -rounds to calibrate sigma to the privacy target")
	}
	// The calibration takes seconds; its inputs repeat (every operator
	// page of a run, every server of a test binary).
	key := sigmaKey{d: d, n: n, rounds: rounds, bits: f.Bits, quota: f.Quota, q: f.CheckIn, clip: f.Clip, eps: eps, delta: delta}
	if v, ok := sigmaMemo.Load(key); ok {
		return v.(float64), nil
	}
	sigma, err := calibrateSecAggSigma(d, n, f, rounds, eps, delta)
	if err == nil {
		sigmaMemo.Store(key, sigma)
	}
	return sigma, err
}

// sigmaKey is what SecAggSigma's result depends on. The clip is part of
// it: PINE's fixed-point unit is 2^-num_frac_bits with num_frac_bits
// chosen from the clip's binary exponent, so σ in those units (PINE's
// norm bound times a factor) changes with the clip (0.3: 39,367 units;
// 0.886: 58,111).
type sigmaKey struct {
	d, n, rounds, bits, quota int
	q, clip, eps, delta       float64
}

var sigmaMemo sync.Map // sigmaKey -> float64

func calibrateSecAggSigma(d, n int, f Choice, rounds int, eps, delta float64) (float64, error) {
	q := f.CheckIn
	if q == 0 {
		q = 1
	}
	sigma, err := roundspec.CalibrateSigma(d, roundspec.Options{Protocol: wire.ProtocolSecAgg, Clip: f.Clip, Bits: f.Bits, Quota: f.Quota},
		rounds, q, eps, delta)
	if err != nil {
		return 0, fmt.Errorf("secagg: calibrating sigma: %w", err)
	}
	fits := func(sigma float64) (bool, error) {
		g := f
		g.Protocol, g.Sigma = wire.ProtocolSecAgg.String(), sigma
		p, _, err := Build(d, n, g)
		if err != nil {
			return false, err
		}
		spec, err := roundspec.New(p)
		if err != nil {
			return false, err
		}
		rels := make([]privacy.Release, rounds)
		for r := range rels {
			rels[r] = spec.Release(r+1, n, 0)
		}
		rep, err := privacy.Account(rels, delta)
		if err != nil {
			return false, err
		}
		if rep.Tightest < 0 || rep.Tightest >= len(rep.Rows) {
			return false, errors.New("no valid accounting method without caveat")
		}
		return rep.Rows[rep.Tightest].Epsilon <= eps, nil
	}
	ok, err := fits(sigma)
	if err != nil {
		return 0, fmt.Errorf("secagg: checking sigma against the ledger's accountant: %w", err)
	}
	if ok {
		return sigma, nil
	}
	lo, hi := sigma, sigma
	for i := 0; !ok; i++ {
		if i == 64 {
			return 0, fmt.Errorf("secagg: no sigma fits %d rounds in epsilon %g", rounds, eps)
		}
		lo, hi = hi, 2*hi
		if ok, err = fits(hi); err != nil {
			return 0, fmt.Errorf("secagg: checking sigma against the ledger's accountant: %w", err)
		}
	}
	for hi-lo > 1e-4*hi { // σ to 0.01%: the last bisection step costs 0.01% of accuracy at most
		mid := (lo + hi) / 2
		ok, err := fits(mid)
		if err != nil {
			return 0, fmt.Errorf("secagg: checking sigma against the ledger's accountant: %w", err)
		}
		if ok {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, nil
}
