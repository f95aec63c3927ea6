//go:build linux

package pine

import "syscall"

// processCPU is the CPU time (user + system) of the whole test process:
// it also counts work a benchmark hands to other goroutines (secagg's
// preparation does), which the per-thread benchclock misses.
func processCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
