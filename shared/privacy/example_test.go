package privacy_test

import (
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/shared/privacy"
)

// The per-dimension amplification of FLAME's SS-Double: 333 padded Laplace
// reports at ε_lk = 0.5, δ_ck = 50·δ_c/315 with δ_c = 0.01/1000^1.1.
func ExampleBennettEpsilon() {
	deltaCK := 50 * 0.01 / math.Pow(1000, 1.1) / 315
	eps, err := privacy.BennettEpsilon(privacy.LaplaceMechanism(), 0.5, 333, deltaCK)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("eps_ck = %.4f\n", eps)
	// Output: eps_ck = 0.1331
}

// FLAME's SS-Simple round (d = 7850, n = 1000, ε_l = 78.5) with the
// corrected Bennett bound; the paper printed 0.91 from the pre-correction
// bound.
func ExampleSSSimple() {
	cfg := privacy.FLAMEConfig{EpsLocal: 78.5, D: 7850, K: 7850, N: 1000, DeltaC: 0.01 / math.Pow(1000, 1.1)}
	b, err := privacy.SSSimple(cfg, privacy.BennettAmplifier{Mech: privacy.LaplaceMechanism()})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("(%.3f, %.1e)-DP\n", b.Epsilon, b.Delta)
	// Output: (0.928, 5.0e-06)-DP
}

// FLAME's SS-Double/SS-Topk round (β = 1/50, n_p = 333); the paper printed
// 0.24 from the pre-correction bound.
func ExampleSSDouble() {
	cfg := privacy.FLAMEConfig{EpsLocal: 78.5, D: 7850, K: 157, N: 1000, NPad: 333, DeltaC: 0.01 / math.Pow(1000, 1.1)}
	b, err := privacy.SSDouble(cfg, privacy.BennettAmplifier{Mech: privacy.LaplaceMechanism()})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("(%.3f, %.1e)-DP\n", b.Epsilon, b.Delta)
	// Output: (0.305, 5.0e-06)-DP
}

// Out-of-range inputs are refused rather than answered.
func ExampleBlanketLemma1() {
	eps, err := privacy.BlanketLemma1(1, 2, 100000, 1e-6)
	fmt.Printf("%.4f %v\n", eps, err)
	_, err = privacy.BlanketLemma1(1, 2, 100, 1e-6)
	fmt.Println(err)
	// Output:
	// 0.0869 <nil>
	// outside the validity conditions of the bound: BBGN'19 Theorem 3.1 needs eps <= 1, the formula gives 2.76205 (n too small or gamma too small)
}

// APES's setting: 10,000 users with budgets spread over U(0.05, 1).
func ExampleCompareAPES() {
	for _, b := range privacy.CompareAPES(privacy.Uniform2Budgets(10000), 1e-8) {
		fmt.Printf("%-58s eps = %.4f\n", b.Method, b.Epsilon)
	}
	// Output:
	// PLDP (no amplification)                                    eps = 1.0000
	// APES UniS (FMT'22 closed form at max eps_i)                eps = 0.2408
	// APES EoN (worst-case user, Lemma 4 divergence)             eps = 0.2635
	// APES EoN (worst-case user, exact Clip-Laplace divergence)  eps = 0.2128
}
