package sealkey

import (
	"crypto/hpke"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/shared/envelope"
)

// Sizes: 1 = a width-1 message, 157 = one SS-Double/Topk report chunk
// scale, 7850 = a full MNIST logistic-regression model (784*10 + 10) in
// one message (as shared/envelope's benchmarks).
var benchSizes = []int{1, 157, 7850}

// eachSizes: an SS-Double/Topk volunteer's 157 messages, and a batch of
// 1024 (per-message costs are linear beyond).
var eachSizes = []int{157, 1024}

func BenchmarkOpenValues(b *testing.B) {
	k := testKey(b, 1)
	for _, n := range benchSizes {
		sealed, err := envelope.SealValues(k.Public().HPKE, 1, testValues(n))
		if err != nil {
			b.Fatal(err)
		}
		dst := make([]float64, n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.SetBytes(int64(8 * n))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := k.OpenValues(1, sealed, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRawHPKEOpen is the floor OpenValues is compared with: crypto/hpke
// Open of the same ciphertext with a precomputed info.
func BenchmarkRawHPKEOpen(b *testing.B) {
	_, kdf, aead := envelope.Suite()
	k := testKey(b, 1)
	for _, n := range benchSizes {
		sealed, err := envelope.SealValues(k.Public().HPKE, 1, testValues(n))
		if err != nil {
			b.Fatal(err)
		}
		in := envelope.ValuesInfo(1)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.SetBytes(int64(8 * n))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := hpke.Open(k.hpke, kdf, aead, in, sealed); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkOpenOverhead interleaves OpenValues and raw hpke.Open of the same
// ciphertext op by op and reports their wall-time ratio (open/raw): on a
// shared machine, load drifts between separate benchmarks but hits both
// halves of a pair alike.
func BenchmarkOpenOverhead(b *testing.B) {
	_, kdf, aead := envelope.Suite()
	k := testKey(b, 1)
	for _, n := range benchSizes {
		sealed, err := envelope.SealValues(k.Public().HPKE, 1, testValues(n))
		if err != nil {
			b.Fatal(err)
		}
		dst := make([]float64, n)
		in := envelope.ValuesInfo(1)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			var raw, open time.Duration
			for b.Loop() {
				t0 := time.Now()
				if _, err := hpke.Open(k.hpke, kdf, aead, in, sealed); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if _, err := k.OpenValues(1, sealed, dst); err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				raw += t1.Sub(t0)
				open += t2.Sub(t1)
			}
			b.ReportMetric(float64(open)/float64(raw), "open/raw")
			b.ReportMetric(float64(raw.Nanoseconds())/float64(b.N), "raw-ns/op")
			b.ReportMetric(float64(open.Nanoseconds())/float64(b.N), "open-ns/op")
		})
	}
}

// BenchmarkOpenEach opens width-1 messages in one call (natively on every
// core); ns/msg is the wall time per message.
func BenchmarkOpenEach(b *testing.B) {
	k := testKey(b, 1)
	for _, n := range eachSizes {
		sealed, err := envelope.SealEach(k.Public().HPKE, 1, testValues(n))
		if err != nil {
			b.Fatal(err)
		}
		dst := make([]float64, n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			t0 := time.Now()
			for b.Loop() {
				if _, errs := k.OpenEach(1, sealed, dst); errs != nil {
					b.Fatal(errors.Join(errs...))
				}
			}
			b.ReportMetric(float64(time.Since(t0).Nanoseconds())/float64(b.N*n), "ns/msg")
		})
	}
}
