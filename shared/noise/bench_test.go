package noise

import (
	"fmt"
	"math"
	"testing"
)

// Benchmarks. Compare BenchmarkLaplaceAdd with BenchmarkNaiveLaplace for
// the cost of floating-point safety (the ratio is what matters: the
// experiment runner draws ~8 million Laplace samples per round).

var sink float64

// naiveLaplace is the textbook inverse-CDF sampler, NOT safe against
// floating-point attacks; it exists only as a speed baseline.
func naiveLaplace(s Source, x, scale float64) float64 {
	u := Uniform(s) - 0.5
	if u < 0 {
		return x + scale*math.Log1p(2*u)
	}
	return x - scale*math.Log1p(-2*u)
}

func BenchmarkNaiveLaplace(b *testing.B) {
	s := NewSeeded(1)
	for i := 0; i < b.N; i++ {
		sink += naiveLaplace(s, 0.3, 2)
	}
}

func BenchmarkLaplaceAdd(b *testing.B) {
	for _, eps := range []float64{0.01, 0.5, 5} {
		b.Run(fmtEps(eps), func(b *testing.B) {
			l, err := NewLaplace(eps, 1)
			if err != nil {
				b.Fatal(err)
			}
			s := NewSeeded(1)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				sink += l.Add(0.3, s)
			}
		})
	}
}

func BenchmarkLaplaceAddSecure(b *testing.B) {
	l, err := NewLaplace(0.5, 1)
	if err != nil {
		b.Fatal(err)
	}
	s := Secure()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		sink += l.Add(0.3, s)
	}
}

func BenchmarkTruncatedLaplace(b *testing.B) {
	for _, eps := range []float64{0.05, 1, 10} {
		b.Run(fmtEps(eps), func(b *testing.B) {
			l, err := NewLaplace(eps, 1)
			if err != nil {
				b.Fatal(err)
			}
			t, err := l.Truncate(-0.5, 0.5)
			if err != nil {
				b.Fatal(err)
			}
			s := NewSeeded(1)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				sink += t.Add(0.2, s)
			}
		})
	}
}

func BenchmarkGaussianAdd(b *testing.B) {
	g, err := NewGaussian(3, 1)
	if err != nil {
		b.Fatal(err)
	}
	s := NewSeeded(1)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		sink += g.Add(0.3, s)
	}
}

func BenchmarkBernoulli(b *testing.B) {
	s := NewSeeded(1)
	n := 0
	for i := 0; i < b.N; i++ {
		if Bernoulli(s, 0.3) {
			n++
		}
	}
	sink += float64(n)
}

func BenchmarkUint64ChaCha8(b *testing.B) {
	s := NewSeeded(1)
	var x uint64
	for i := 0; i < b.N; i++ {
		x += s.Uint64()
	}
	sink += float64(x)
}

func BenchmarkIntn(b *testing.B) {
	s := NewSeeded(1)
	b.ReportAllocs()
	n := 0
	for i := 0; i < b.N; i++ {
		n += Intn(s, 1000)
	}
	sink += float64(n)
}

func fmtEps(eps float64) string {
	switch eps {
	case 0.01:
		return "eps=0.01"
	case 0.05:
		return "eps=0.05"
	case 0.5:
		return "eps=0.5"
	case 1:
		return "eps=1"
	case 5:
		return "eps=5"
	case 10:
		return "eps=10"
	}
	return "eps"
}

// BenchmarkSecureBlock draws words from crypto/rand-backed sources reading
// 512 bytes and 8 KiB at a time, side by side (Secure uses 512 natively and
// 8 KiB under js, where each read is a call out to getRandomValues).
func BenchmarkSecureBlock(b *testing.B) {
	for _, n := range []int{512, 8 << 10} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s := newSecureSource(n)
			var x uint64
			for b.Loop() {
				x += s.Uint64()
			}
			sink += float64(x & 1)
		})
	}
}
