package sumvec

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/secagg"
	"github.com/cloudflare/circl/vdaf/prio3/sumvec"
)

// Benchmarks at the MNIST size (d = 7850, clip 1, sigma 300 per server, up
// to 1,000 reports; SumVec at 8 bits). Run natively with
//
//	go test -run '^$' -bench . -benchtime 1x ./aggregator/lab/sumvec/
//
// and in WebAssembly with
//
//	GOOS=js GOARCH=wasm go test -run '^$' -bench 'Shard' \
//	    -exec="$(go env GOROOT)/lib/wasm/go_js_wasm_exec" ./aggregator/lab/sumvec/

const benchDim, benchBits, benchSigma = 7850, 8, 300.0

// sharder is what BenchmarkShard compares: secagg.Round (PINE) and Round.
type sharder interface {
	Shard(x []float64, src noise.Source) (leader, helper []byte, err error)
}

// cpuClock reports the process CPU time per iteration (cpu-ns/op; 0
// where processCPU is not measured).
type cpuClock struct{ t0 float64 }

func (c *cpuClock) Start() { c.t0 = processCPU() }

func (c *cpuClock) Report(b *testing.B) {
	b.ReportMetric((processCPU()-c.t0)*1e9/float64(b.N), "cpu-ns/op")
}

func benchRound(b *testing.B, maxReports int) *Round {
	p, err := NewParams(benchDim, 1, benchBits, benchSigma, maxReports)
	if err != nil {
		b.Fatal(err)
	}
	r, err := NewRound(p, 1)
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// BenchmarkShard is the volunteer's cost per round, PINE (the product's,
// NewPineParams) next to the Prio3 SumVec baseline in one run: clip,
// encode (SumVec: conditional rounding), shard with the proofs, encode
// the two shares. It reports the bytes the volunteer sends (both shares,
// before sealing).
func BenchmarkShard(b *testing.B) {
	x := randomUpdate(noise.NewSeeded(1), benchDim, 0.05)
	pp, err := secagg.NewPineParams(benchDim, 1, benchSigma, 1000)
	if err != nil {
		b.Fatal(err)
	}
	pr, err := secagg.NewRound(pp, 1)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		r    sharder
	}{{"pine", pr}, {"sumvec", benchRound(b, 1000)}} {
		b.Run(c.name, func(b *testing.B) {
			src := noise.NewSeeded(2)
			var l, h []byte
			var err error
			var clk cpuClock
			clk.Start()
			for b.Loop() {
				l, h, err = c.r.Shard(x, src)
				if err != nil {
					b.Fatal(err)
				}
			}
			clk.Report(b)
			b.ReportMetric(float64(len(l)+len(h)), "bytes/volunteer")
			b.ReportMetric(float64(len(l)), "leader-bytes")
			b.ReportMetric(float64(len(h)), "helper-bytes")
		})
	}
}

// BenchmarkQuantize is the clip and conditional rounding alone.
func BenchmarkQuantize(b *testing.B) {
	r := benchRound(b, 1000)
	x := randomUpdate(noise.NewSeeded(1), benchDim, 0.05)
	src := noise.NewSeeded(2)
	var clk cpuClock
	clk.Start()
	for b.Loop() {
		if _, err := Quantize(r.p, x, src); err != nil {
			b.Fatal(err)
		}
	}
	clk.Report(b)
}

var (
	benchMu      sync.Mutex
	benchReports = map[int][][2][]byte{}
)

// shardMany shards n distinct reports using all cores (setup, not timed).
func shardMany(b *testing.B, r *Round, n int) [][2][]byte {
	benchMu.Lock()
	defer benchMu.Unlock()
	if reps, ok := benchReports[n]; ok {
		return reps
	}
	reps := make([][2][]byte, n)
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	errs := make([]error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				x := randomUpdate(noise.NewSeeded(uint64(i)), benchDim, 0.05)
				l, h, err := r.Shard(x, noise.NewSeeded(uint64(i)+1<<32))
				if err != nil {
					errs[w] = err
					return
				}
				reps[i] = [2][]byte{l, h}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	benchReports[n] = reps
	return reps
}

// BenchmarkPrepareRound runs a whole round for both servers on this
// machine (GOMAXPROCS cores shared by leader and helper, one after the
// other, each using all cores): helper Prepare, leader Prepare, Combine,
// Finish, aggregate, noise on both shares, Unshard. Reports s/round,
// ms/report, and the bytes exchanged between the servers.
func BenchmarkPrepareRound(b *testing.B) {
	for _, n := range []int{200, 1000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			if n > 200 && runtime.GOARCH == "wasm" {
				b.Skip("1 GB of leader shares does not fit comfortably in wasm32")
			}
			r := benchRound(b, 1000)
			reps := shardMany(b, r, n)
			ls := make([][]byte, n)
			hs := make([][]byte, n)
			for i, rep := range reps {
				ls[i], hs[i] = rep[0], rep[1]
			}
			var interServer int
			var helperT, leaderT time.Duration
			src := noise.NewSeeded(3)
			cpu0 := processCPU()
			for b.Loop() {
				helper, _ := NewHelper(r, testVK)
				leader, _ := NewLeader(r, testVK)
				t0 := time.Now()
				pmsg, _, err := helper.Prepare(hs)
				if err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if _, err := leader.Prepare(ls); err != nil {
					b.Fatal(err)
				}
				mmsg, rej, err := leader.Combine(pmsg)
				if err != nil || len(rej) != 0 {
					b.Fatalf("combine: %v, %d rejected", err, len(rej))
				}
				t2 := time.Now()
				if _, err := helper.Finish(mmsg); err != nil {
					b.Fatal(err)
				}
				ha, _ := helper.AggregateShare()
				if err := ha.AddNoise(src); err != nil {
					b.Fatal(err)
				}
				hb, _ := ha.MarshalBinary()
				t3 := time.Now()
				la, _ := leader.AggregateShare()
				if err := la.AddNoise(src); err != nil {
					b.Fatal(err)
				}
				res, err := leader.Unshard(la, hb)
				if err != nil || res.Count != n {
					b.Fatalf("unshard: %v", err)
				}
				t4 := time.Now()
				helperT += t1.Sub(t0) + t3.Sub(t2)
				leaderT += t2.Sub(t1) + t4.Sub(t3)
				interServer = len(pmsg) + len(mmsg) + len(hb)
			}
			it := float64(b.N)
			if cpu := processCPU() - cpu0; cpu > 0 {
				b.ReportMetric(cpu/it, "cpu-s/round")
			}
			total := (helperT + leaderT).Seconds() / it
			b.ReportMetric(total, "s/round")
			b.ReportMetric(1000*total/float64(n), "ms/report")
			b.ReportMetric(helperT.Seconds()/it, "helper-s")
			b.ReportMetric(leaderT.Seconds()/it, "leader-s")
			b.ReportMetric(float64(interServer), "inter-server-bytes")
		})
	}
}

// BenchmarkChunkLength measures SumVec's chunk-length trade-off at
// d = 7850, 8 bits for one report: leader plus helper PrepInit and the
// combination (ms), and the sizes that grow with the chunk (leader
// share, prep share). The calls column is the number of gadget calls;
// calls+1 a power of two avoids padding the interpolation.
func BenchmarkChunkLength(b *testing.B) {
	l := uint(benchDim * benchBits)
	for _, calls := range []uint{7, 15, 31, 63, 127, 255} {
		chunk := (l + calls - 1) / calls
		b.Run(fmt.Sprintf("chunk=%d/calls=%d", chunk, calls), func(b *testing.B) {
			v, err := sumvec.New(2, benchDim, benchBits, chunk, []byte("bench"))
			if err != nil {
				b.Fatal(err)
			}
			vp := v.Params()
			meas := make([]uint64, benchDim)
			for i := range meas {
				meas[i] = uint64(i * 7 % 255)
			}
			var nonce sumvec.Nonce
			rnd := make([]byte, vp.RandSize())
			fill(noise.NewSeeded(1), rnd)
			t0 := time.Now()
			pub, shares, err := v.Shard(meas, &nonce, rnd)
			if err != nil {
				b.Fatal(err)
			}
			shardT := time.Since(t0)
			var vk sumvec.VerifyKey
			var psLen int
			var clk cpuClock
			clk.Start()
			for b.Loop() {
				_, p0, err := v.PrepInit(&vk, &nonce, 0, pub, shares[0])
				if err != nil {
					b.Fatal(err)
				}
				_, p1, err := v.PrepInit(&vk, &nonce, 1, pub, shares[1])
				if err != nil {
					b.Fatal(err)
				}
				if _, err := v.PrepSharesToPrep([]sumvec.PrepShare{*p0, *p1}); err != nil {
					b.Fatal(err)
				}
				enc, _ := p1.MarshalBinary()
				psLen = len(enc)
			}
			clk.Report(b)
			ls, _ := shares[0].MarshalBinary()
			b.ReportMetric(float64(len(ls)), "leader-share-bytes")
			b.ReportMetric(float64(psLen), "prep-share-bytes")
			b.ReportMetric(shardT.Seconds()*1000, "shard-ms-1run")
		})
	}
}

// BenchmarkBits measures the bits-per-entry trade-off at d = 7850 with
// defaultChunkLength: leader plus helper preparation CPU per report, the
// leader's share, and how much conditional rounding inflates the
// sensitivity over the clip norm (Sensitivity / (Scale*Clip); the noise
// needed for a given privacy level grows by this factor relative to the
// signal).
func BenchmarkBits(b *testing.B) {
	for _, bits := range []uint{6, 7, 8, 10} {
		b.Run(fmt.Sprintf("bits=%d", bits), func(b *testing.B) {
			p, err := NewParams(benchDim, 1, bits, benchSigma, 1000)
			if err != nil {
				b.Fatal(err)
			}
			r, err := NewRound(p, 1)
			if err != nil {
				b.Fatal(err)
			}
			x := randomUpdate(noise.NewSeeded(1), benchDim, 0.05)
			l, h, err := r.Shard(x, noise.NewSeeded(2))
			if err != nil {
				b.Fatal(err)
			}
			cpu0 := processCPU()
			for b.Loop() {
				helper, _ := NewHelper(r, testVK)
				leader, _ := NewLeader(r, testVK)
				helper.SetWorkers(1)
				leader.SetWorkers(1)
				pmsg, _, err := helper.Prepare([][]byte{h})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := leader.Prepare([][]byte{l}); err != nil {
					b.Fatal(err)
				}
				if _, rej, err := leader.Combine(pmsg); err != nil || len(rej) != 0 {
					b.Fatalf("combine: %v %v", err, rej)
				}
			}
			if cpu := processCPU() - cpu0; cpu > 0 {
				b.ReportMetric(cpu*1000/float64(b.N), "cpu-ms/report")
			}
			b.ReportMetric(float64(len(l)), "leader-share-bytes")
			b.ReportMetric(p.Sensitivity()/p.ClipUnits(), "delta/clip")
		})
	}
}
