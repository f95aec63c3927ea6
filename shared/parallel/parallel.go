// Package parallel runs a loop over [0, n) in chunks on up to GOMAXPROCS
// goroutines: the batch sealing of shared/envelope (SealEach) and the
// aggregator's batch opening (aggregator/internal/sealkey, OpenEach).
package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Chunks calls f on consecutive ranges [lo, hi) covering [0, n), in chunks
// of chunk indices claimed by up to GOMAXPROCS goroutines (on the calling
// goroutine alone when one worker suffices, as always under js/wasm).
// After a failure workers claim no new chunks; since chunks are claimed in
// increasing order and a claimed chunk always runs to its end, the error
// returned is that of the lowest-numbered failing chunk. chunk must be
// positive.
func Chunks(n, chunk int, f func(lo, hi int) error) error {
	chunks := (n + chunk - 1) / chunk
	workers := min(runtime.GOMAXPROCS(0), chunks)
	if workers <= 1 {
		for lo := 0; lo < n; lo += chunk {
			if err := f(lo, min(lo+chunk, n)); err != nil {
				return err
			}
		}
		return nil
	}
	var (
		next    atomic.Int64
		stop    atomic.Bool
		wg      sync.WaitGroup
		mu      sync.Mutex
		errAt   = chunks
		firstEr error
	)
	for range workers {
		wg.Go(func() {
			for !stop.Load() {
				c := int(next.Add(1) - 1)
				if c >= chunks {
					return
				}
				lo := c * chunk
				if err := f(lo, min(lo+chunk, n)); err != nil {
					stop.Store(true)
					mu.Lock()
					if c < errAt {
						errAt, firstEr = c, err
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return firstEr
}
