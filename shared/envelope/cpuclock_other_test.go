//go:build !js

package envelope

import "time"

var clockStart = time.Now()

// cpuNow is the monotonic wall clock natively: the per-thread CPU clock
// (getrusage) ticks too coarsely to time single operations of ~50 µs, and
// pairing the two halves op by op already cancels most load drift.
func cpuNow() time.Duration { return time.Since(clockStart) }

func lockThread()   {}
func unlockThread() {}
