package client

import (
	"context"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/shared/envelope/envelopetest"
	"github.com/blanket-fl/blanket/shared/internal/benchclock"
	"github.com/blanket-fl/blanket/shared/roundspec"

	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/wire"
)

// discard is a Transport that drops what is sent.
type discard struct{ bytes int }

func (d *discard) Send(_ context.Context, f []byte) error { d.bytes += len(f); return nil }
func (d *discard) Recv(context.Context) ([]byte, error)   { select {} }
func (d *discard) Close() error                           { return nil }

// BenchmarkRoundMNIST is one volunteer's round on the MNIST model (d =
// 7850, 10 examples, 10 epochs of batch 7): verify, coin, train, SS-Double
// encode (k = 157, Laplace), seal 157 values in messages of width 1,
// build and send the frames.
func BenchmarkRoundMNIST(b *testing.B) {
	{
		b.Run("width1", func(b *testing.B) {
			k := testKey(b, 1)
			src := noise.NewSeeded(1)
			x := make([]float32, 10*logreg.MNISTFeatures)
			y := make([]uint8, 10)
			for i := range x {
				x[i] = float32(noise.Uniform(src))
			}
			for i := range y {
				y[i] = uint8(i)
			}
			data, err := logreg.NewDataset(logreg.MNIST, x, y)
			if err != nil {
				b.Fatal(err)
			}
			c, err := New(Config{Pinned: k.Public(), Data: data, Train: logreg.FLAMEConfig(10, 0.1), Source: src})
			if err != nil {
				b.Fatal(err)
			}
			p := wire.Params{Protocol: wire.ProtocolSSDouble, Randomizer: wire.RandomizerLaplace, D: logreg.MNISTParams,
				K: 157, L: 1, Width: 1, NP: 100, MinBatch: 1, EpsL: 1, Clip: 0.1, CheckInP: 1}
			frames := make([][]byte, b.N)
			for i := range frames {
				frames[i] = announce(b, k, uint64(i+1), p)
			}
			tr := &discard{}
			var clk benchclock.Clock
			b.ResetTimer()
			clk.Start()
			for i := range b.N {
				if err := c.handleAnnouncement(context.Background(), tr, frames[i]); err != nil {
					b.Fatal(err)
				}
			}
			clk.Report(b)
			b.ReportMetric(float64(tr.bytes)/float64(b.N), "B/round")
		})
	}
}

// BenchmarkRoundSecAgg is one volunteer's secure-summation round on the
// MNIST model at make run's size (d = 7850, 20 examples, 10 epochs; 400
// volunteers, 8 bits): verify, coin, check in, train, clip, quantize,
// shard, seal both shares and send.
func BenchmarkRoundSecAgg(b *testing.B) {
	k := testKey(b, 1)
	helper, err := envelopetest.GenerateHelperKey()
	if err != nil {
		b.Fatal(err)
	}
	src := noise.NewSeeded(1)
	x := make([]float32, 20*logreg.MNISTFeatures)
	y := make([]uint8, 20)
	for i := range x {
		x[i] = float32(noise.Uniform(src))
	}
	for i := range y {
		y[i] = uint8(i % 10)
	}
	data, err := logreg.NewDataset(logreg.MNIST, x, y)
	if err != nil {
		b.Fatal(err)
	}
	c, err := New(Config{Pinned: k.Public(), Data: data, Train: logreg.FLAMEConfig(10, 0.1), Source: src})
	if err != nil {
		b.Fatal(err)
	}
	p, _, err := roundspec.Build(logreg.MNISTParams, 400, roundspec.Options{Protocol: wire.ProtocolSecAgg, Sigma: 100, MinBatch: 1})
	if err != nil {
		b.Fatal(err)
	}
	frames := make([][]byte, b.N)
	first := time.Now().Add(time.Hour)
	for i := range frames {
		// Each a millisecond after the last: a client acts only on a later deadline.
		a := &wire.Announcement{Round: uint64(i + 1), Deadline: first.Add(time.Duration(i) * time.Millisecond), Params: p, HPKEPub: k.Public().HPKE,
			RelayPub: helper.Public(), Model: make([]float64, logreg.MNISTParams)}
		if err := a.Sign(k); err != nil {
			b.Fatal(err)
		}
		if frames[i], err = a.MarshalBinary(); err != nil {
			b.Fatal(err)
		}
	}
	tr := &discard{}
	var clk benchclock.Clock
	b.ReportAllocs()
	b.ResetTimer()
	clk.Start()
	for i := range b.N {
		if err := c.handleAnnouncement(context.Background(), tr, frames[i]); err != nil {
			b.Fatal(err)
		}
	}
	clk.Report(b)
	b.ReportMetric(float64(tr.bytes)/float64(b.N), "B/round")
}
