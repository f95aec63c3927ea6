package counts

import (
	"fmt"

	"github.com/blanket-fl/blanket/shared/privacy"
)

// Parts returns the blocks' parts of a joint secure-summation release at
// per-server σ sigmas[i] (fixed-point units): Δ = Sensitivity(), d =
// Dim() (privacy.SecAggPart).
func (s *Spec) Parts(sigmas []float64) ([]privacy.SecAggPart, error) {
	if len(sigmas) != len(s.blocks) {
		return nil, fmt.Errorf("counts: %d sigmas for %d blocks", len(sigmas), len(s.blocks))
	}
	out := make([]privacy.SecAggPart, len(s.blocks))
	for i, b := range s.blocks {
		out[i] = privacy.SecAggPart{Sigma: sigmas[i], Sensitivity: b.Sensitivity(), D: b.Dim()}
	}
	return out, nil
}

// Calibrate returns each block's per-server σ (fixed-point units) so that
// releasing the blocks' noisy sums in every one of `rounds` rounds, next
// to the update's (per-server σ updateSigma, sensitivity updateSens, d
// coordinates, check-in rate q), raises the ledger's replace-one charge at
// δ by at most extraEps (privacy.CalibrateSecAggExtra: every block gets
// the same noise multiplier σ_i/Δ_i, the smallest that fits, certified).
func (s *Spec) Calibrate(updateSigma, updateSens float64, d int, q float64, rounds int, delta, extraEps float64) ([]float64, error) {
	parts, err := s.Parts(make4(len(s.blocks)))
	if err != nil {
		return nil, err
	}
	_, sigmas, err := privacy.CalibrateSecAggExtra(privacy.SecAggPart{Sigma: updateSigma, Sensitivity: updateSens, D: d}, parts, q, rounds, delta, extraEps)
	if err != nil {
		return nil, fmt.Errorf("counts: calibrating the blocks' noise: %w", err)
	}
	return sigmas, nil
}

func make4(n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = 4
	}
	return s
}

// Release returns the σ, sensitivity and dimension to record in the
// round's privacy.Release (SecAggSigma, SecAggSensitivity, D) when the
// round releases the update (updateSigma, updateSens, d) and these blocks
// at sigmas: privacy.SecAggJoint, whose guarantee it is. Every row of the
// ledger then charges the joint release.
func (s *Spec) Release(updateSigma, updateSens float64, d int, sigmas []float64) (sigma, sensitivity float64, dim int, err error) {
	parts, err := s.Parts(sigmas)
	if err != nil {
		return 0, 0, 0, err
	}
	all := append([]privacy.SecAggPart{{Sigma: updateSigma, Sensitivity: updateSens, D: d}}, parts...)
	sigma, sensitivity, dim, err = privacy.SecAggJoint(all)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("counts: joint release: %w", err)
	}
	return sigma, sensitivity, dim, nil
}
