package pine

import (
	"bytes"
	"math"
	"testing"

	"github.com/blanket-fl/blanket/shared/internal/benchclock"
	"github.com/blanket-fl/blanket/shared/noise"
)

// Benchmarks at the MNIST size (d = 7850, clip 1), PINE with ForBlanket
// (aggregator/lab/sumvec's BenchmarkShard puts PINE and the Prio3 SumVec
// baseline side by side in one run). Natively:
//
//	go test -run '^$' -bench . -benchtime 20x ./shared/pine
//
// and in WebAssembly (Node):
//
//	GOOS=js GOARCH=wasm go test -run '^$' -bench . -benchtime 5x \
//	    -exec="$(go env GOROOT)/lib/wasm/go_js_wasm_exec" ./shared/pine
//
// cpu-ns/op is the benchmark thread's CPU time, proc-cpu-ns/op the whole
// process's (secagg prepares on worker goroutines the thread clock does
// not see; the process clock also counts the garbage collector). Both
// are Linux only; under js there is one thread and ns/op is the CPU time.

const benchDim = 7850

func benchUpdate(seed uint64) []float64 {
	src := noise.NewSeeded(seed)
	x := make([]float64, benchDim)
	var n2 float64
	for i := range x {
		x[i] = 2*noise.Uniform(src) - 1
		n2 += x[i] * x[i]
	}
	// Clipped to norm exactly about 1: the worst honest case.
	s := 1 / math.Sqrt(n2)
	for i := range x {
		x[i] *= s
	}
	return x
}

func benchPine(b *testing.B) *Pine {
	p, err := ForBlanket(benchDim, 1)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

var benchVK = bytes.Repeat([]byte{7}, verifyKeySize)

// BenchmarkShard is the volunteer's cost per round and its upload
// (bytes/volunteer: everything the volunteer sends, before sealing).
func BenchmarkShard(b *testing.B) {
	x := benchUpdate(1)
	b.Run("pine", func(b *testing.B) {
		p := benchPine(b)
		src := noise.NewSeeded(2)
		var pub, l, h []byte
		var err error
		var clk benchclock.Clock
		cpu0 := processCPU()
		clk.Start()
		for b.Loop() {
			pub, l, h, err = p.Shard(x, [16]byte{1}, src)
			if err != nil {
				b.Fatal(err)
			}
		}
		clk.Report(b)
		reportProcessCPU(b, cpu0)
		b.ReportMetric(float64(len(pub)+len(l)+len(h)+nonceSize), "bytes/volunteer")
	})
}

// BenchmarkPrep is the preparation of ONE report by both servers
// together, one after the other on one thread: PrepInit of the leader and
// the helper, PrepSharesToPrep, PrepNext of both and the aggregation of
// the two output shares (for SumVec: aggregator/lab/sumvec's
// Helper.Prepare, Leader.Prepare and Leader.Combine on a batch of one,
// one worker each).
func BenchmarkPrep(b *testing.B) {
	x := benchUpdate(1)
	b.Run("pine", func(b *testing.B) {
		p := benchPine(b)
		nonce := [16]byte{1}
		pub, l, h, err := p.Shard(x, nonce, noise.NewSeeded(2))
		if err != nil {
			b.Fatal(err)
		}
		aggs := [2]*AggShare{p.NewAggShare(), p.NewAggShare()}
		lv, hv := p.NewVerifier(), p.NewVerifier()
		var clk benchclock.Clock
		cpu0 := processCPU()
		clk.Start()
		for b.Loop() {
			s0, p0, err := lv.PrepInit(benchVK, 0, nonce[:], pub, l)
			if err != nil {
				b.Fatal(err)
			}
			s1, p1, err := hv.PrepInit(benchVK, 1, nonce[:], pub, h)
			if err != nil {
				b.Fatal(err)
			}
			msg, err := p.PrepSharesToPrep(p0, p1)
			if err != nil {
				b.Fatal(err)
			}
			for i, s := range []*PrepState{s0, s1} {
				o, err := p.PrepNext(s, msg)
				if err != nil {
					b.Fatal(err)
				}
				if err := aggs[i].Add(o); err != nil {
					b.Fatal(err)
				}
			}
		}
		clk.Report(b)
		reportProcessCPU(b, cpu0)
		b.ReportMetric(float64(p.PrepShareSize()+p.PrepMsgSize()), "inter-server-bytes")
	})
}

// reportProcessCPU reports the process CPU time per op (Linux only).
func reportProcessCPU(b *testing.B, cpu0 float64) {
	if cpu := processCPU() - cpu0; cpu > 0 {
		b.ReportMetric(cpu*1e9/float64(b.N), "proc-cpu-ns/op")
	}
}

// BenchmarkShardParts splits the volunteer's cost at d = 7850 into its
// parts, for profiling under js where pprof is unavailable: the XOF
// output sharding draws (290 KB: helper share, wraparound vectors,
// proof share), HMAC-SHA256 over both shares (the joint randomness
// parts, 290 KB), the five proofs, and the 100 wraparound dot products
// (including their 196 KB of XOF output, also part of the 290 KB).
func BenchmarkShardParts(b *testing.B) {
	p := benchPine(b)
	g, err := p.encodeField(benchUpdate(1))
	if err != nil {
		b.Fatal(err)
	}
	run := func(b *testing.B, f func()) {
		cpu0 := processCPU()
		var clk benchclock.Clock
		clk.Start()
		for b.Loop() {
			f()
		}
		clk.Report(b)
		reportProcessCPU(b, cpu0)
	}
	b.Run("xof-290KB", func(b *testing.B) {
		buf := make([]byte, 290_000)
		run(b, func() {
			x, _ := newXof(make([]byte, seedSize), []byte("bench"))
			x.read(buf)
		})
	})
	b.Run("hmac-290KB", func(b *testing.B) {
		v := make([]fp, 290_000/elemSize)
		run(b, func() {
			m := newMac(make([]byte, seedSize), []byte("bench"))
			macVec(m, v)
			_, _ = xofFromMac(m)
		})
	})
	b.Run("proofs", func(b *testing.B) {
		meas := make([]fp, p.flpMeasLen)
		copy(meas, g)
		pr := make([]fp, max(p.flpNE.proveRand, p.flp.proveRand))
		jr := make([]fp, 3)
		run(b, func() {
			for range p.cfg.ProofsNormEquality {
				_, _ = p.flpNE.prove(meas, pr[:p.flpNE.proveRand], nil)
			}
			for range p.cfg.Proofs {
				_, _ = p.flp.prove(meas, pr[:p.flp.proveRand], jr)
			}
		})
	})
	b.Run("wr-checks", func(b *testing.B) {
		res := make([]fp, p.cfg.NumWrChecks)
		run(b, func() {
			x, _ := newXof(make([]byte, seedSize), []byte("bench"))
			p.runWrChecks(res, g, x, nil, nil)
		})
	})
}
