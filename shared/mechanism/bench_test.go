package mechanism

import (
	"fmt"
	"testing"

	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/randomizer"
)

// FLAME's MNIST logistic regression: d = 7850, k = d/50 = 157, and l = 16
// from nu = 3.125 (TopkL), the paper's n/n_p = 3 setting.
const benchD, benchK = 7850, 157

func benchConfig(b *testing.B, p Protocol) FLAMEConfig {
	cfg := FLAMEConfig{Protocol: p, D: benchD, EpsL: 78.5, C: 0.05, NewRandomizer: AffineFactory(randomizer.NewLaplace)}
	switch p {
	case SSDouble:
		cfg.K = benchK
	case SSTopk:
		l, err := TopkL(3.125, benchD, benchK)
		if err != nil {
			b.Fatal(err)
		}
		cfg.K, cfg.L = benchK, l
	}
	return cfg
}

func BenchmarkEncode(b *testing.B) {
	for _, p := range []Protocol{SSSimple, SSDouble, SSTopk} {
		b.Run(p.String(), func(b *testing.B) {
			enc, err := NewEncoder(benchConfig(b, p))
			if err != nil {
				b.Fatal(err)
			}
			src := noise.NewSeeded(1)
			x := randomUpdate(benchD, 0.1, src)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := enc.Encode(x, src); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkEncodeAPES(b *testing.B) {
	for _, bb := range []int{0, benchD / 5} {
		name := "apes"
		if bb > 0 {
			name = fmt.Sprintf("s-apes-b%d", bb)
		}
		b.Run(name, func(b *testing.B) {
			enc, err := NewAPESEncoder(APESConfig{D: benchD, C: 0.05, RangeRatio: 1, B: bb})
			if err != nil {
				b.Fatal(err)
			}
			src := noise.NewSeeded(2)
			x := randomUpdate(benchD, 0.1, src)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := enc.Encode(x, 0.5, src); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// roundMessages encodes n random updates once, outside the timer.
func roundMessages(b *testing.B, enc *Encoder, n int) []Message {
	src := noise.NewSeeded(3)
	msgs := make([]Message, 0, n*enc.Shape().Messages)
	for i := 0; i < n; i++ {
		m, err := enc.Encode(randomUpdate(benchD, 0.1, src), src)
		if err != nil {
			b.Fatal(err)
		}
		msgs = append(msgs, m...)
	}
	return msgs
}

// BenchmarkRelay pads and shuffles one round of n = 10,000 clients. n_p is
// 1.5x the expected count per dimension (SS-Double: 300; SS-Topk: 4800,
// raised if a popular dimension overflows).
func BenchmarkRelay(b *testing.B) {
	const n = 10000
	for _, p := range []Protocol{SSDouble, SSTopk} {
		b.Run(p.String(), func(b *testing.B) {
			enc, err := NewEncoder(benchConfig(b, p))
			if err != nil {
				b.Fatal(err)
			}
			msgs := roundMessages(b, enc, n)
			exp, _ := expectedCount(enc.Config(), n)
			np := FeasibleNP(benchD, enc.Shape().Width, int(1.5*exp))
			relay, err := NewRelay(RelayConfig{D: benchD, NP: np, Width: enc.Shape().Width, Blanket: enc.Randomizer(), Overflow: OverflowRaise})
			if err != nil {
				b.Fatal(err)
			}
			src := noise.NewSeeded(4)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := relay.Process(msgs, src); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEstimate runs the analyzer on a padded SS-Double round of
// n = 10,000 clients (d*n_p = 2.355M values).
func BenchmarkEstimate(b *testing.B) {
	const n = 10000
	cfg := benchConfig(b, SSDouble)
	enc, _ := NewEncoder(cfg)
	an, err := NewAnalyzer(cfg)
	if err != nil {
		b.Fatal(err)
	}
	relay, _ := NewRelay(RelayConfig{D: benchD, NP: 300, Width: benchK, Blanket: enc.Randomizer(), Overflow: OverflowRaise})
	batch, err := relay.Process(roundMessages(b, enc, n), noise.NewSeeded(5))
	if err != nil {
		b.Fatal(err)
	}
	dst := make([]float64, benchD)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := an.EstimateInto(dst, batch, n); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAPESRound shuffles and calibrates an APES round of n = 1,000
// clients (7.85M values) with 20 distinct budget levels.
func BenchmarkAPESRound(b *testing.B) {
	const n = 1000
	cfg := APESConfig{D: benchD, C: 0.05, RangeRatio: 1}
	enc, _ := NewAPESEncoder(cfg)
	an, _ := NewAPESAnalyzer(cfg)
	src := noise.NewSeeded(6)
	reports := make([]APESReport, n)
	for i := range reports {
		var err error
		reports[i], err = enc.Encode(randomUpdate(benchD, 0.1, src), 0.05*float64(1+i%20), src)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.Run("shuffle", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ShuffleAPES(reports, benchD, src); err != nil {
				b.Fatal(err)
			}
		}
	})
	batch, _ := ShuffleAPES(reports, benchD, src)
	b.Run("estimate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := an.Estimate(batch); err != nil {
				b.Fatal(err)
			}
		}
	})
}
