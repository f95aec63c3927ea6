package privacy_test

import (
	"fmt"

	"github.com/blanket-fl/blanket/shared/privacy"
)

// The smallest per-server discrete Gaussian σ (integer units) for
// ε ≤ 4 at δ = 1e-5 over 100 rounds, check-in rate 0.1, L2 sensitivity
// Δ = 8 integer units, and the ε it certifies.
func ExampleCalibrateSecAggSigma() {
	sigma, err := privacy.CalibrateSecAggSigma(4, 1e-5, 100, 0.1, 8)
	if err != nil {
		fmt.Println(err)
		return
	}
	eps, _ := privacy.SecAggEpsilon(sigma, 8, 0.1, 100, 1e-5)
	fmt.Printf("sigma = %.2f, eps = %.4f\n", sigma, eps)
	// Output: sigma = 15.74, eps = 4.0000
}
