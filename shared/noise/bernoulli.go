package noise

import "math"

// Bernoulli returns true with probability exactly p, where p is the
// float64 value passed in (every float64 in [0,1] is a dyadic rational, so
// "exactly" is meaningful). It compares a lazily generated uniform real
// U = 0.w1 w2 w3 ... (64 random bits per word) with the binary expansion of
// p and stops at the first differing word, so
//
//	Pr[Bernoulli(s, p)] = Pr[U < p] = p
//
// with no rounding at all, including for subnormal p. This is what makes
// the samplers built on it (geometric, twoSidedGeometric, Laplace,
// Gaussian) exact up to the floating-point evaluation of exp() in their
// acceptance probabilities. Cost: one word when p >= 2^-11, two words in
// the worst case for larger p, and about 1 + (-log2 p)/64 words for tiny p.
//
// p <= 0 and NaN return false, p >= 1 returns true.
func Bernoulli(s Source, p float64) bool {
	if !(p > 0) {
		return false
	}
	if p >= 1 {
		return true
	}
	frac, exp := math.Frexp(p) // p = frac * 2^exp, frac in [1/2, 1), exp <= 0
	m := uint64(frac * (1 << 53))
	// p = m * 2^-(z+53) with m a 53-bit integer whose top bit is set: the
	// first z bits after the binary point of p are zero.
	z := -exp
	for z >= 64 {
		// p < 2^-64 here: any nonzero bit in this word makes U > p.
		if s.Uint64() != 0 {
			return false
		}
		z -= 64
	}
	w := s.Uint64()
	if z <= 11 {
		// p * 2^64 = m << (11-z) is an integer: Pr[w < it] = p exactly.
		return w < m<<(11-z)
	}
	hi := m >> (z - 11) // the bits of p that fall into this word
	if w != hi {
		return w < hi
	}
	// Tie on this word: the remaining z-11 bits of m fall into the next
	// word, left-aligned; every later bit of p is zero.
	lo := (m & (1<<(z-11) - 1)) << (75 - z)
	return s.Uint64() < lo
}
