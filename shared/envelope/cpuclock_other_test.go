//go:build !js

package envelope

import (
	"time"

	"github.com/blanket-fl/blanket/shared/internal/benchclock"
)

var clockStart = time.Now()

// cpuNow is the monotonic wall clock natively: the per-thread CPU clock
// (getrusage) ticks too coarsely to time single operations of ~50 µs, and
// pairing the two halves op by op already cancels most load drift.
func cpuNow() time.Duration { return time.Since(clockStart) }

func lockThread()   {}
func unlockThread() {}

// cpuClock reports cpu-ns/op: natively the CPU time of the benchmark's
// thread (shared/internal/benchclock).
type cpuClock = benchclock.Clock
