package audit

import (
	"errors"
	"fmt"
	"math"
	"math/bits"

	"gonum.org/v1/gonum/stat/distuv"
)

// The secure-summation audit's variance test.
//
// The likelihood-ratio test on the canary (RunSecAgg) sees an under-noised
// relay only through the ε it leaks, so it catches σ/k only once the
// leak at σ/k exceeds Detectable: about k = 2 at its default trials. The
// noise itself is a far more sensitive witness. Each trial draws one
// coordinate K of the relay's aggregate-share noise through the relay's
// own code path (serverNoise: Engine, AddNoise, the 'A' message), and
// honest K are i.i.d. discrete Gaussian N_Z(0, σ²) with σ the spec's. With
// the mean known (0), the second moment M = (1/N) Σ K² is unbiased for
// v = Var K and has variance (μ4 − v²)/N, μ4 = E K⁴ (both computed exactly
// for N_Z(0, σ²) by dgMoments). The test flags
//
//	z = (M − v) / sqrt((μ4 − v²)/N) < −z_α,    z_α = Φ⁻¹(1 − α),
//
// one-sided: less noise than announced is what under-charges; more only
// wastes accuracy. By the central limit theorem (N is in the hundreds of
// thousands, K² has all moments) an honest relay is flagged with
// probability α up to the normal approximation's error (Berry-Esseen:
// below C·E|K²−v|³/((μ4−v²)^{3/2} √N) ≈ 0.5·6/√N, under 0.005 at N =
// 400,000). With both servers' noise, K = K₁ + K₂: v = 2v₁, μ4 = 2μ4₁ +
// 6v₁².
//
// Power. A relay adding σ/k has M concentrated at v/k² with standard
// deviation about (v/k²)·sqrt((μ4 − v²)/v²/N). The test flags it with
// probability at least 1/2 once v/k² ≤ v − z_α·sd₀, sd₀ = sqrt((μ4 −
// v²)/N), i.e. for every k ≥ Factor = 1/sqrt(1 − z_α·sd₀/v). For a
// Gaussian (μ4 = 3v²) at N = 400,000 (RunSecAgg's default 100,000 trials)
// and α = 1e-3, Factor = 1.0035: a relay adding σ/1.0035 or less is caught
// at least half the time, σ/1.01 essentially always (TestNoiseTestPower).

// NoiseTest is the variance test's outcome (see the comment above).
type NoiseTest struct {
	// Draws is N, the noise coordinates tested.
	Draws int `json:"draws"`
	// Z is the test statistic; Flagged is Z < −Threshold, Threshold =
	// Φ⁻¹(1 − Alpha), so an honest relay is flagged with probability
	// Alpha.
	Z         float64 `json:"z"`
	Threshold float64 `json:"threshold"`
	Alpha     float64 `json:"alpha"`
	Flagged   bool    `json:"flagged"`
	// Ratio is M/v, the measured variance over the announced one (1/k²
	// for a relay adding σ/k).
	Ratio float64 `json:"ratio"`
	// Factor is the smallest k such that a relay adding σ/k is flagged
	// with probability at least 1/2.
	Factor float64 `json:"factor"`
}

// secondMoment accumulates Σ K² (exactly, in 128 bits: |K| < 2^62) and N.
type secondMoment struct {
	hi, lo uint64
	n      int
}

func (m *secondMoment) add(k int64) {
	a := uint64(k)
	if k < 0 {
		a = uint64(-k)
	}
	// a² fits in 128 bits; add it to (hi, lo).
	ph, pl := bits.Mul64(a, a)
	lo := m.lo + pl
	carry := uint64(0)
	if lo < m.lo {
		carry = 1
	}
	m.lo, m.hi = lo, m.hi+ph+carry
	m.n++
}

func (m secondMoment) sum() float64 { return float64(m.hi)*0x1p64 + float64(m.lo) }

// dgMoments returns v = E K² and μ4 = E K⁴ of the discrete Gaussian
// N_Z(0, σ²) (mass ∝ exp(−k²/(2σ²)) on the integers): exact sums over |k| ≤
// 12σ (the rest has relative mass below e^{−72}) for σ ≤ 2^22, and the
// continuous Gaussian's σ² and 3σ⁴ above, where the difference is of
// relative order exp(−2π²σ²) (Poisson summation), far below float64.
func dgMoments(sigma float64) (v, m4 float64, err error) {
	if !(sigma >= 1) || math.IsInf(sigma, 0) {
		return 0, 0, fmt.Errorf("audit: noise test: sigma %v", sigma)
	}
	if sigma > 1<<22 {
		s2 := sigma * sigma
		return s2, 3 * s2 * s2, nil
	}
	lim := int(math.Ceil(12 * sigma))
	z, s2, s4 := 1.0, 0.0, 0.0
	for k := lim; k >= 1; k-- { // small terms first
		x := float64(k)
		w := 2 * math.Exp(-x*x/(2*sigma*sigma))
		z += w
		s2 += w * x * x
		s4 += w * x * x * x * x
	}
	return s2 / z, s4 / z, nil
}

// noiseVarianceTest runs the variance test on m's draws against servers
// servers' N_Z(0, σ²) noise at level alpha (see the comment above).
func noiseVarianceTest(m secondMoment, sigma float64, servers int, alpha float64) (NoiseTest, error) {
	if m.n < 2 {
		return NoiseTest{}, errors.New("audit: noise test: fewer than 2 draws")
	}
	v1, m41, err := dgMoments(sigma)
	if err != nil {
		return NoiseTest{}, err
	}
	v, m4 := v1, m41
	if servers == 2 {
		v, m4 = 2*v1, 2*m41+6*v1*v1
	}
	n := float64(m.n)
	sd := math.Sqrt((m4 - v*v) / n)
	zc := distuv.UnitNormal.Quantile(1 - alpha)
	t := NoiseTest{Draws: m.n, Alpha: alpha, Threshold: zc, Ratio: m.sum() / n / v}
	t.Z = (m.sum()/n - v) / sd
	t.Flagged = t.Z < -zc
	if x := 1 - zc*sd/v; x > 0 {
		t.Factor = 1 / math.Sqrt(x)
	}
	return t, nil
}
