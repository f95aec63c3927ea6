package pld

import "testing"

// BenchmarkGaussian1000 composes a Gaussian round (sigma = 40, the regime
// of DP-FL with a few epsilon after 1000 rounds) 1000 times by squaring.
func BenchmarkGaussian1000(b *testing.B) {
	for _, h := range []float64{1e-3, 1e-4} {
		g, err := Gaussian(40, 1, Options{Width: h, Method: ConnectDots})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmtWidth(h), func(b *testing.B) {
			for b.Loop() {
				if _, err := g.SelfCompose(1000); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSubsampledGaussian1000 composes a Poisson-subsampled Gaussian
// round (sigma = 1, rate = 0.01: DP-SGD-style) 1000 times; the PLD is
// asymmetric, so both directions are composed (concurrently).
func BenchmarkSubsampledGaussian1000(b *testing.B) {
	for _, h := range []float64{1e-3, 1e-4} {
		g, err := subsampledGaussian(1, 1, 0.01, Options{Width: h, Method: ConnectDots})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmtWidth(h), func(b *testing.B) {
			for b.Loop() {
				if _, err := g.SelfCompose(1000); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkConvolve measures one FFT convolution of two 2^16-point PLDs.
func BenchmarkConvolve(b *testing.B) {
	a := make([]float64, 1<<16)
	for i := range a {
		a[i] = 1.0 / float64(len(a))
	}
	for b.Loop() {
		convolve(a, a)
	}
}

func fmtWidth(h float64) string {
	if h == 1e-3 {
		return "h=1e-3"
	}
	return "h=1e-4"
}
