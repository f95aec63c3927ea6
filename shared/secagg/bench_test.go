package secagg

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/shared/internal/benchclock"
	"github.com/blanket-fl/blanket/shared/noise"
)

// Benchmarks at the MNIST size (d = 7850, clip 1, sigma 300 per server, up
// to 1,000 reports; PINE, NewPineParams). The Prio3 SumVec baseline's
// benchmarks, and BenchmarkShard with both VDAFs side by side, are
// aggregator/lab/sumvec's. Run natively with
//
//	go test -run '^$' -bench . -benchtime 1x ./shared/secagg/
//
// and in WebAssembly with
//
//	GOOS=js GOARCH=wasm go test -run '^$' -bench 'Shard' \
//	    -exec="$(go env GOROOT)/lib/wasm/go_js_wasm_exec" ./shared/secagg/

const benchDim, benchSigma = 7850, 300.0

func benchRound(b *testing.B, maxReports int) *Round {
	p, err := NewPineParams(benchDim, 1, benchSigma, maxReports)
	if err != nil {
		b.Fatal(err)
	}
	r, err := NewRound(p, 1)
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// BenchmarkShard is the volunteer's cost per round: clip, encode on
// PINE's grid, shard with the proofs, encode the two shares. It reports
// the bytes the volunteer sends (both shares, before sealing).
func BenchmarkShard(b *testing.B) {
	x := randomUpdate(noise.NewSeeded(1), benchDim, 0.05)
	r := benchRound(b, 1000)
	src := noise.NewSeeded(2)
	var l, h []byte
	var err error
	var clk benchclock.Clock
	clk.Start()
	for b.Loop() {
		l, h, err = r.Shard(x, src)
		if err != nil {
			b.Fatal(err)
		}
	}
	clk.Report(b)
	b.ReportMetric(float64(len(l)+len(h)), "bytes/volunteer")
	b.ReportMetric(float64(len(l)), "leader-bytes")
	b.ReportMetric(float64(len(h)), "helper-bytes")
}

// BenchmarkEngine is the preparation of one report by both servers
// through their Engines (PrepInit of both, Decide, Next, both folds), one
// after the other on one thread.
func BenchmarkEngine(b *testing.B) {
	r, le, he, l, h := benchReport(b)
	la, ha := le.NewAggregate(), he.NewAggregate()
	var clk benchclock.Clock
	clk.Start()
	for b.Loop() {
		hp := he.PrepInit(h)
		m, out := le.Decide(le.PrepInit(l), hp.Entry)
		if out == nil {
			b.Fatalf("rejected: %v", m.Reason)
		}
		hout, err := he.Next(hp, m)
		if err != nil {
			b.Fatal(err)
		}
		if la.Fold(out) != nil || ha.Fold(hout) != nil {
			b.Fatal("fold")
		}
	}
	clk.Report(b)
	b.ReportMetric(float64(r.prepShareLen+r.prepMsgLen), "inter-server-bytes")
}

// benchReport is one report of the MNIST size and both servers' engines.
func benchReport(b *testing.B) (r *Round, le, he Engine, l, h []byte) {
	x := randomUpdate(noise.NewSeeded(1), benchDim, 0.05)
	r = benchRound(b, 1<<20)
	vk := make([]byte, VerifyKeySize)
	l, h, err := r.Shard(x, noise.NewSeeded(2))
	if err != nil {
		b.Fatal(err)
	}
	le, _ = NewEngine(r, true, vk)
	he, _ = NewEngine(r, false, vk)
	return r, le, he, l, h
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

// BenchmarkHelperSteps splits the helper's cost per report into its steps
// (docs/deploy.md, "Relay replicas that prepare"): init (PrepInit: what a
// relay prep-worker does), state (MarshalHelperPrep and ParseHelperPrep:
// the preparation carried to the owner), finish (Next and the fold: what
// the owner keeps). Run with
//
//	go test -run '^$' -bench HelperSteps -benchtime 200x ./shared/secagg/
func BenchmarkHelperSteps(b *testing.B) {
	r, le, he, l, h := benchReport(b)
	m, out := le.Decide(le.PrepInit(l), he.PrepInit(h).Entry)
	if out == nil {
		b.Fatalf("rejected: %v", m.Reason)
	}
	b.Run("init", func(b *testing.B) {
		var clk benchclock.Clock
		clk.Start()
		for b.Loop() {
			he.PrepInit(h)
		}
		clk.Report(b)
	})
	// state and finish stop the timer for PrepInit: their ns/op is the
	// step's own (no cpu-ns/op: the process's CPU clock does not stop).
	b.Run("state", func(b *testing.B) {
		n := 0
		for b.Loop() {
			b.StopTimer()
			p := he.PrepInit(h)
			b.StartTimer()
			enc, err := r.MarshalHelperPrep(p)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := r.ParseHelperPrep(enc); err != nil {
				b.Fatal(err)
			}
			n = len(enc)
		}
		b.ReportMetric(float64(n), "state-bytes")
	})
	b.Run("finish", func(b *testing.B) {
		agg := he.NewAggregate()
		for b.Loop() {
			b.StopTimer()
			p := he.PrepInit(h)
			b.StartTimer()
			o, err := he.Next(p, m)
			if err != nil || agg.Fold(o) != nil {
				b.Fatal("finish", err)
			}
		}
	})
}
