package randomizer

import (
	"fmt"
	"math"
	"math/big"

	"github.com/blanket-fl/blanket/shared/noise"
)

// RGB is the privacy-blanket randomizer R_{gamma,b} of Balle, Bell, Gascón
// and Nissim, "The Privacy Blanket of the Shuffle Model" (CRYPTO 2019),
// as used by FLAME (Liu et al., AAAI 2021) Algorithm 1 with the analyzer's
// de-biasing of FLAME eq. (1), in a corrected, self-consistent form.
//
// Mechanism (x clamped to [0,1], b >= 1 buckets):
//
//	xbar = floor(x*b) + Ber(x*b - floor(x*b))       randomized rounding, xbar in {0..b}
//	with probability 1-gamma: y = xbar
//	with probability gamma:   y = Unif({0, 1, ..., b})   (the blanket)
//	report y/b in [0,1]
//
// Correction of the paper. FLAME Algorithm 1 draws the blanket from
// Unif({1..b}) with gamma = b/(e^eps + b - 1), but randomized rounding of
// x*b yields xbar in {0..b}. Taken literally, y = 0 has probability
// 1-gamma for x = 0 and 0 for x = 1: the privacy loss is infinite
// (TestRGBPaperLiteralViolatesLDP). Keeping gamma = b/(e^eps+b-1) but
// drawing the blanket from the b+1 values {0..b} gives the worst-case
// ratio 1 + (e^eps - 1)(b+1)/b > e^eps, which is eps'-LDP only for
// eps' = ln(1 + (e^eps-1)(b+1)/b) (also shown in that test). The
// consistent version is randomized response over the alphabet {0..b} of
// size k = b+1 (Balle et al.'s R^PH_{gamma,k} on {0..k}): for output v,
//
//	Pr[y = v | x] = (1-gamma) Pr[xbar = v | x] + gamma/(b+1),
//
// maximal at (1-gamma) + gamma/(b+1) when xbar = v surely and minimal at
// gamma/(b+1) when xbar != v surely (x = 0 versus x = 1 attain both), so
// the LDP ratio is 1 + (1-gamma)(b+1)/gamma. Setting it to e^eps gives
//
//	gamma = (b+1) / (e^eps + b),
//
// and the mechanism is exactly eps-LDP (TestRGBExactLDP enumerates the
// output probabilities). Because Ber(.) and Unif(.) are exact samplers
// (noise.Bernoulli, noise.Intn), the implemented output distribution is
// exactly PMF; NewRGB moves the float64 gamma up by ulps until the exact
// rational ratio 1 + (1-gamma)(b+1)/gamma is <= the float64 e^eps, so the
// implemented ratio never exceeds e^eps as represented in float64.
//
// Mean: E[xbar/b] = x and the blanket has mean 1/2, so
// E[R(x)] = gamma/2 + (1-gamma) x: affine with offset gamma/2 and slope
// 1-gamma, which is what FLAME eq. (1), z = (zhat - n gamma/2)/(1-gamma),
// inverts. The blanket distribution omega is Unif({0..b})/b (total
// blanket weight gamma). Shuffle accounting must use the alphabet size
// k = b+1 as well: Balle et al.'s amplification (FLAME Lemma 1) then reads
// eps_c = sqrt(14 ln(2/delta_c) k/((n-1) gamma)) =
// sqrt(14 ln(2/delta_c)(e^eps + b)/(n-1)), i.e. FLAME's e^eps + b - 1
// with b replaced by b+1.
type RGB struct {
	eps   float64
	b     int
	gamma float64
}

// NewRGB returns the eps-LDP randomizer R_{gamma,b} with
// gamma = (b+1)/(e^eps + b) (see RGB for the derivation). eps must be
// finite and > 0 and b in [1, 2^30]. See rgbBuckets and rgbBucketsLocal
// for choosing b.
func NewRGB(eps float64, b int) (*RGB, error) {
	if err := checkEpsilon(eps); err != nil {
		return nil, err
	}
	if b < 1 || b > 1<<30 {
		return nil, fmt.Errorf("randomizer: rgb buckets b=%d must be in [1, 2^30]", b)
	}
	ee := math.Exp(eps)
	if math.IsInf(ee, 0) || ee > 0x1p60 {
		return nil, fmt.Errorf("randomizer: rgb eps=%v too large (e^eps must be <= 2^60)", eps)
	}
	bf := float64(b)
	gamma := (bf + 1) / (ee + bf)
	// Nudge gamma up until the exact ratio is <= fl(e^eps); at most a few
	// ulps (usually 0 or 1).
	bound := new(big.Rat).SetFloat64(ee)
	for range 64 {
		if rgbRatio(gamma, b).Cmp(bound) <= 0 {
			break
		}
		gamma = math.Nextafter(gamma, 2)
	}
	if gamma > 1 {
		gamma = 1
	}
	return &RGB{eps: eps, b: b, gamma: gamma}, nil
}

// rgbRatio is the exact LDP ratio 1 + (1-gamma)(b+1)/gamma of the
// randomizer with the float64 gamma.
func rgbRatio(gamma float64, b int) *big.Rat {
	g := new(big.Rat).SetFloat64(gamma)
	one := big.NewRat(1, 1)
	num := new(big.Rat).Sub(one, g)
	num.Mul(num, big.NewRat(int64(b)+1, 1))
	num.Quo(num, g)
	return num.Add(num, one)
}

// Name returns "rgb".
func (r *RGB) Name() string { return "rgb" }

// Epsilon returns eps: R_{gamma,b} is eps-LDP.
func (r *RGB) Epsilon() float64 { return r.eps }

// Delta returns 0 (pure LDP).
func (r *RGB) Delta() float64 { return 0 }

// Buckets returns b; reports are multiples of 1/b.
func (r *RGB) Buckets() int { return r.b }

// Gamma returns the blanket probability gamma = (b+1)/(e^eps + b) (up to
// the conservative ulp adjustment described on RGB).
func (r *RGB) Gamma() float64 { return r.gamma }

// Randomize returns R_{gamma,b}(x) in {0, 1/b, ..., 1}: eps-LDP for any x
// (clamped to [0,1], NaN treated as 0). FLAME Algorithm 1, corrected as
// described on RGB.
func (r *RGB) Randomize(x float64, src noise.Source) float64 {
	if noise.Bernoulli(src, r.gamma) {
		return float64(noise.Intn(src, r.b+1)) / float64(r.b)
	}
	lo, frac := r.round(x)
	if noise.Bernoulli(src, frac) {
		lo++
	}
	return float64(lo) / float64(r.b)
}

// round returns floor(x*b) and the rounding-up probability for clamped x.
func (r *RGB) round(x float64) (int, float64) {
	x = clamp01(x)
	xb := x * float64(r.b)
	fl := math.Floor(xb)
	return int(fl), xb - fl
}

// Blanket draws from omega = Unif({0..b})/b, the blanket component of
// every output distribution (weight gamma), mean 1/2 = Expect(1/2).
func (r *RGB) Blanket(src noise.Source) float64 {
	return float64(noise.Intn(src, r.b+1)) / float64(r.b)
}

// Expect returns E[R(x)] = gamma/2 + (1-gamma) clamp(x).
func (r *RGB) Expect(x float64) float64 { return r.gamma/2 + (1-r.gamma)*clamp01(x) }

// Affine returns offset gamma/2 and slope 1-gamma (FLAME eq. (1)).
func (r *RGB) Affine() (offset, slope float64) { return r.gamma / 2, 1 - r.gamma }

// PMF returns Pr[Randomize(x) = k/b] for k in {0..b} (0 otherwise),
// computed with the same float64 operations the sampler uses.
func (r *RGB) PMF(x float64, k int) float64 {
	if k < 0 || k > r.b {
		return 0
	}
	lo, frac := r.round(x)
	var data float64
	switch k {
	case lo:
		data = 1 - frac
	case lo + 1:
		data = frac
	}
	return (1-r.gamma)*data + r.gamma/float64(r.b+1)
}

// rgbBuckets returns the number of buckets b that minimizes the mean
// squared error bound of the shuffled real-summation protocol of Balle et
// al. (2019) at central (epsC, deltaC)-DP over n users:
//
// with b buckets, Lemma 1 of FLAME (Balle et al. Thm 3.1) needs blanket
// probability gamma ≈ 14 b ln(2/deltaC)/((n-1) epsC^2); the blanket adds
// variance about gamma/12 per user and rounding at most 1/(4 b^2), so the
// sum's MSE is about (7/6) b ln(2/deltaC)/epsC^2 + n/(4 b^2), minimized at
//
//	b = (3 n epsC^2 / (7 ln(2/deltaC)))^(1/3),
//
// the n^(1/3) scaling of Balle et al. The result is rounded and at least 1.
func rgbBuckets(n int, epsC, deltaC float64) (int, error) {
	if n < 2 {
		return 0, fmt.Errorf("randomizer: rgb buckets need n >= 2 users, got %d", n)
	}
	if err := checkEpsilon(epsC); err != nil {
		return 0, err
	}
	if math.IsNaN(deltaC) || deltaC <= 0 || deltaC >= 1 {
		return 0, fmt.Errorf("randomizer: deltaC=%v must be in (0, 1)", deltaC)
	}
	b := math.Round(math.Cbrt(3 * float64(n) * epsC * epsC / (7 * math.Log(2/deltaC))))
	if b < 1 {
		b = 1
	}
	if b > 1<<30 {
		b = 1 << 30
	}
	return int(b), nil
}

// rgbBucketsLocal returns the b in [1, 4096] minimizing the worst-case
// (over x) variance of the de-biased single report (R(x) - gamma/2)/(1-gamma)
// at fixed local eps, i.e. the best b when the local budget is what is
// fixed (FLAME's eps_l per dimension). The variance of R(x) is
// (1-gamma) v(x) + gamma (b+2)/(12 b) + gamma(1-gamma)(x-1/2)^2 with
// v(x) <= 1/(4b^2) the rounding variance; we maximize over x on the
// endpoint/midpoint bounds and divide by (1-gamma)^2.
func rgbBucketsLocal(eps float64) (int, error) {
	if err := checkEpsilon(eps); err != nil {
		return 0, err
	}
	ee := math.Exp(eps)
	best, bestV := 1, math.Inf(1)
	for b := 1; b <= 4096; b++ {
		bf := float64(b)
		g := (bf + 1) / (ee + bf)
		if g >= 1 {
			continue
		}
		v := (1-g)/(4*bf*bf) + g*(bf+2)/(12*bf) + g*(1-g)/4
		v /= (1 - g) * (1 - g)
		if v < bestV {
			best, bestV = b, v
		}
	}
	return best, nil
}

// centerStd is the standard deviation of one output at x = 1/2 (and of a
// blanket sample at any x's mean 1/2 part): the output is the mixture, with
// weights 1-γ and γ, of the randomized rounding of b/2 (mean 1/2, variance
// f(1-f)/b² with f the fractional part of b/2) and Unif({0..b})/b (mean
// 1/2, variance (b+2)/(12b)); both means are 1/2, so the variance is
// (1-γ)f(1-f)/b² + γ(b+2)/(12b).
func (r *RGB) centerStd() float64 {
	b := float64(r.b)
	f := b/2 - math.Floor(b/2)
	return math.Sqrt((1-r.gamma)*f*(1-f)/(b*b) + r.gamma*(b+2)/(12*b))
}
