package analysis

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/sealkey"
	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/parallel"
	"github.com/blanket-fl/blanket/shared/secagg"
)

// peakHeap samples the live heap every millisecond while f runs and
// returns the largest sample above the heap before f, in bytes.
func peakHeap(f func()) uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	base := s[0].Value.Uint64()
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > base && v-base > peak.Load() {
				peak.Store(v - base)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	})
	f()
	close(stop)
	wg.Wait()
	return peak.Load()
}

// BenchmarkLeaderBatchVsStream compares, at the MNIST size (d = 7850,
// PINE), the aggregator's preparation of n reports as main did it
// (every leader share opened into a copy in parallel, secagg.Leader.
// Prepare on all of them, then Combine: all at the close) with the
// streamed path (SecAggLeader.PrepareChunk per chunk of 8 as chunks
// arrive), at n = 24, 48 and 96 reports. It reports the peak heap
// (live and not yet collected objects) above the batch's sealed bytes
// (peak-MiB), the work left at the close (close-s: everything for the
// batch; the last chunk for the stream) and the CPU per report.
//
//	go test -run '^$' -bench LeaderBatchVsStream -benchtime 1x ./aggregator/internal/analysis/
func BenchmarkLeaderBatchVsStream(b *testing.B) {
	const d, maxN, chunk = 7850, 96, 8
	p, err := secagg.NewPineParams(d, 1, 300, maxN)
	if err != nil {
		b.Fatal(err)
	}
	r, err := secagg.NewRound(p, 1)
	if err != nil {
		b.Fatal(err)
	}
	key, _ := sealkey.DeriveKey([32]byte{1})
	vk := make([]byte, secagg.VerifyKeySize)
	he, _ := secagg.NewEngine(r, false, vk)
	sealed := make([][]byte, maxN)
	entries := make([]secagg.Entry, maxN)
	src := noise.NewSeeded(1)
	for i := range maxN {
		x := make([]float64, d)
		for j := range x {
			x[j] = (noise.Uniform(src) - 0.5) * 0.01
		}
		l, h, err := r.Shard(x, noise.NewSeeded(uint64(i)))
		if err != nil {
			b.Fatal(err)
		}
		if sealed[i], err = envelope.SealShare(key.Public().HPKE, 1, envelope.ShareLeader, saConsent, l); err != nil {
			b.Fatal(err)
		}
		entries[i] = he.PrepInit(h).Entry
	}
	workers := runtime.GOMAXPROCS(0)
	for _, n := range []int{24, 48, 96} {
		benchLeaderPaths(b, r, key, vk, sealed[:n], entries[:n], chunk, workers)
	}
}

func benchLeaderPaths(b *testing.B, r *secagg.Round, key *sealkey.PrivateKey, vk []byte, sealed [][]byte, entries []secagg.Entry, chunk, workers int) {
	n := len(sealed)
	prep, err := r.MarshalPrep(entries)
	if err != nil {
		b.Fatal(err)
	}
	b.Run(fmt.Sprintf("batch/n=%d", n), func(b *testing.B) {
		for b.Loop() {
			var took time.Duration
			peak := peakHeap(func() {
				start := time.Now()
				shares := make([][]byte, n)
				_ = parallel.Chunks(n, 4, func(lo, hi int) error {
					for i := lo; i < hi; i++ {
						pt, err := key.OpenLeaderShare(1, saConsent, sealed[i], r.LeaderShareSize())
						if err != nil {
							pt = sealed[i]
						}
						shares[i] = pt
					}
					return nil
				})
				l, err := secagg.NewLeader(r, vk)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := l.Prepare(shares); err != nil {
					b.Fatal(err)
				}
				if _, _, err := l.Combine(prep); err != nil {
					b.Fatal(err)
				}
				took = time.Since(start)
				runtime.KeepAlive(shares)
			})
			b.ReportMetric(float64(peak)/(1<<20), "peak-MiB")
			b.ReportMetric(took.Seconds(), "close-s")
		}
	})
	b.Run(fmt.Sprintf("stream/n=%d/chunk=%d", n, chunk), func(b *testing.B) {
		for b.Loop() {
			var last time.Duration
			peak := peakHeap(func() {
				le, _ := secagg.NewEngine(r, true, vk)
				l, err := NewSecAggLeader(key, saConsent, r, le)
				if err != nil {
					b.Fatal(err)
				}
				for lo := 0; lo < n; lo += chunk {
					hi := min(lo+chunk, n)
					cp, err := r.MarshalPrep(entries[lo:hi])
					if err != nil {
						b.Fatal(err)
					}
					start := time.Now()
					if _, err := l.PrepareChunk(sealed[lo:hi], cp, workers); err != nil {
						b.Fatal(err)
					}
					last = time.Since(start)
				}
			})
			b.ReportMetric(float64(peak)/(1<<20), "peak-MiB")
			b.ReportMetric(last.Seconds(), "close-s")
		}
	})
}
