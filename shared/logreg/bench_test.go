package logreg

import (
	"fmt"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/shared/internal/benchclock"

	"github.com/blanket-fl/blanket/shared/noise"
)

// mnistLike returns n MNIST-shaped examples with pixels uniform in [0, 1]
// (the speed of the kernels does not depend on the values).
func mnistLike(b *testing.B, n int) Dataset {
	src := noise.NewSeeded(uint64(n))
	x := make([]float32, n*MNISTFeatures)
	for i := range x {
		x[i] = float32(noise.Uniform(src))
	}
	y := make([]uint8, n)
	for i := range y {
		y[i] = uint8(i % mnistClasses)
	}
	d, err := NewDataset(MNIST, x, y)
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// warm runs op for about 100 ms (at least 3 times) before the timer starts.
// Under js/wasm, V8 first runs code from its baseline compiler and swaps in
// optimised code only once a function is hot; without this, short runs
// (scripts/bench.sh uses -benchtime 1x) would time the baseline code.
func warm(op func()) {
	start := time.Now()
	for i := 0; i < 3 || (i < 1000 && time.Since(start) < 100*time.Millisecond); i++ {
		op()
	}
}

// BenchmarkLocalEpoch times one local epoch of minibatch SGD on the MNIST
// shape (FLAME's client setting is 10 examples in batches of 7), with L2
// and the FedProx term on, for each kernel.
func BenchmarkLocalEpoch(b *testing.B) {
	for _, k := range kernels {
		for _, n := range []int{10, 100} {
			b.Run(fmt.Sprintf("%s/n=%d,batch=7", k.name, n), func(b *testing.B) {
				d := mnistLike(b, n)
				tr, err := newTrainer(MNIST, TrainConfig{Epochs: 1, BatchSize: 7, LearningRate: 0.05, L2: 0.001, ProxMu: 0.01}, k)
				if err != nil {
					b.Fatal(err)
				}
				global := make([]float64, MNISTParams)
				dst := make([]float64, MNISTParams)
				src := noise.NewSeeded(1)
				warm(func() { tr.Update(dst, global, d, src) })
				b.ReportAllocs()
				var clk benchclock.Clock
				b.ResetTimer()
				clk.Start()
				for range b.N {
					if _, err := tr.Update(dst, global, d, src); err != nil {
						b.Fatal(err)
					}
				}
				clk.Report(b)
			})
		}
	}
}

// BenchmarkLocalTraining times what the experiment runner does per user
// and round: 10 local epochs on 10 examples in batches of 7.
func BenchmarkLocalTraining(b *testing.B) {
	for _, k := range kernels {
		b.Run(k.name, func(b *testing.B) {
			d := mnistLike(b, 10)
			tr, err := newTrainer(MNIST, TrainConfig{Epochs: 10, BatchSize: 7, LearningRate: 0.05, L2: 0.001}, k)
			if err != nil {
				b.Fatal(err)
			}
			global := make([]float64, MNISTParams)
			dst := make([]float64, MNISTParams)
			src := noise.NewSeeded(1)
			warm(func() { tr.Update(dst, global, d, src) })
			b.ReportAllocs()
			var clk benchclock.Clock
			b.ResetTimer()
			clk.Start()
			for range b.N {
				if _, err := tr.Update(dst, global, d, src); err != nil {
					b.Fatal(err)
				}
			}
			clk.Report(b)
		})
	}
}

// BenchmarkGradient times the full-batch gradient on 100 MNIST-shaped
// examples for each kernel.
func BenchmarkGradient(b *testing.B) {
	for _, k := range kernels {
		b.Run(k.name+"/n=100", func(b *testing.B) {
			d := mnistLike(b, 100)
			ws := newWorkspace(MNIST, k, evalChunk)
			p := make([]float64, MNISTParams)
			for i := range p {
				p[i] = 0.001 * float64(i%17)
			}
			g := make([]float64, MNISTParams)
			warm(func() { ws.gradient(g, p, d, 0.001) })
			b.ReportAllocs()
			var clk benchclock.Clock
			b.ResetTimer()
			clk.Start()
			for range b.N {
				ws.gradient(g, p, d, 0.001)
			}
			clk.Report(b)
		})
	}
}
