// Package noise provides the random sources and the floating-point-safe
// samplers that every privacy mechanism in Blanket draws from.
//
// Samplers (each documents its exact guarantee):
//   - Bernoulli: exact for every float64 probability (lazy uniform);
//   - geometricSampler / geometric and DiscreteLaplace / twoSidedGeometric:
//     exact up to the <1 ulp rounding of exp(), no truncation;
//   - Laplace: Laplace mechanism on a power-of-two grid (input snapped,
//     discrete Laplace noise), epsilon-DP with no discretization overhead
//     in epsilon, immune to floating-point attacks (Mironov 2012); its
//     Truncate gives the exact truncated (Clip-Laplace) law;
//   - Gaussian: Gaussian mechanism as a discrete Gaussian on a
//     power-of-two grid (Canonne, Kamath and Steinke 2020).
//
// Production code uses Secure, which reads crypto/rand. Tests and the
// reproducible experiment runner inject NewSeeded, a ChaCha8 stream from
// math/rand/v2 with a fixed seed; nothing in Blanket uses the global
// math/rand generators or gonum's samplers for privacy noise.
package noise

import (
	cryptorand "crypto/rand"
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
)

// Source is a stream of independent, uniformly distributed 64-bit words.
// It is satisfied by *rand.ChaCha8 and by the crypto/rand-backed source
// returned by Secure. A Source is not safe for concurrent use unless its
// documentation says so.
type Source interface {
	Uint64() uint64
}

// secureSource reads crypto/rand in blocks of secureBufSize bytes to
// amortize the cost of a read: a system call natively (512-byte blocks),
// a call out of WebAssembly to crypto.getRandomValues under js (8 KiB
// blocks: each call costs a few microseconds there, 5-10x more than
// drawing the 64 words of a 512-byte block). Every word is crypto/rand
// output used once; nothing is expanded in user space.
type secureSource struct {
	buf []byte
	off int
}

// Secure returns a Source backed by crypto/rand. It is the only source
// production code may use for privacy noise, sampling and shuffling.
// The returned Source is not safe for concurrent use; create one per
// goroutine.
func Secure() Source { return newSecureSource(secureBufSize) }

// newSecureSource returns a secureSource reading n bytes at a time (n a
// positive multiple of 8; others are rounded up).
func newSecureSource(n int) *secureSource {
	n = max(8, (n+7)&^7)
	return &secureSource{buf: make([]byte, n), off: n}
}

func (s *secureSource) Uint64() uint64 {
	if s.off+8 > len(s.buf) {
		// crypto/rand.Read never returns an error since Go 1.24 (it
		// crashes the program irrecoverably instead), so there is no
		// error to propagate here.
		cryptorand.Read(s.buf)
		s.off = 0
	}
	v := binary.LittleEndian.Uint64(s.buf[s.off:])
	s.off += 8
	return v
}

// NewSeeded returns a deterministic ChaCha8 Source for tests and for
// reproducible simulations. It must never be used for production noise.
func NewSeeded(seed uint64) Source {
	var k [32]byte
	binary.LittleEndian.PutUint64(k[:], seed)
	copy(k[8:], "blanket-seeded-source-v1")
	return rand.NewChaCha8(k)
}

// Uniform returns a uniform float64 in [0, 1) with 53 random bits.
func Uniform(s Source) float64 {
	return float64(s.Uint64()>>11) * 0x1p-53
}

// Intn returns a uniform integer in [0, n) without modulo bias. For
// n <= 1 it returns 0 (shared packages never panic). It draws exactly the
// same words and returns the same values as math/rand/v2's Uint64N on the
// same stream, without allocating.
func Intn(s Source, n int) int {
	if n <= 1 {
		return 0
	}
	return int(uint64n(s, uint64(n)))
}

// Shuffle permutes n elements uniformly at random (Fisher-Yates) using s,
// calling swap(i, j) for each exchange.
func Shuffle(s Source, n int, swap func(i, j int)) {
	for i := n - 1; i > 0; i-- {
		j := int(uint64n(s, uint64(i+1)))
		swap(i, j)
	}
}

// uint64n returns a uniform integer in [0, n) for n >= 1 by Lemire's
// multiply-and-reject method (exactly uniform: the rejected low words make
// every outcome equally likely). Powers of two are masked directly, as
// math/rand/v2 does, so seeded streams match Uint64N.
func uint64n(s Source, n uint64) uint64 {
	if n&(n-1) == 0 {
		return s.Uint64() & (n - 1)
	}
	hi, lo := bits.Mul64(s.Uint64(), n)
	if lo < n {
		thresh := -n % n
		for lo < thresh {
			hi, lo = bits.Mul64(s.Uint64(), n)
		}
	}
	return hi
}
