package parallel

import (
	"errors"
	"runtime"
	"testing"
)

const chunk = 64

// sizes straddle the chunk size so that both the single-worker path and
// the worker pool run, with a partial last chunk.
var sizes = []int{0, 1, chunk - 1, chunk, 3*chunk + 5}

// Chunks visits every index once, in ranges of at most chunk, and reports
// the first failed chunk's error whatever the number of workers.
func TestChunks(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 2, 7} {
		runtime.GOMAXPROCS(procs)
		for _, n := range sizes {
			hits := make([]int, n)
			err := Chunks(n, chunk, func(lo, hi int) error {
				if lo < 0 || hi > n || hi-lo > chunk || lo >= hi {
					t.Errorf("procs %d n %d: range [%d, %d)", procs, n, lo, hi)
				}
				for i := lo; i < hi; i++ {
					hits[i]++
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for i, h := range hits {
				if h != 1 {
					t.Fatalf("procs %d n %d: index %d visited %d times", procs, n, i, h)
				}
			}
		}
		errFirst, errLater := errors.New("first"), errors.New("later")
		err := Chunks(10*chunk, chunk, func(lo, hi int) error {
			switch lo / chunk {
			case 2:
				return errFirst
			case 3, 9:
				return errLater
			}
			return nil
		})
		// Chunks are claimed in order and a claimed chunk always runs, so
		// the lowest failing chunk is always reached and wins.
		if err != errFirst {
			t.Fatalf("procs %d: err = %v", procs, err)
		}
	}
}
