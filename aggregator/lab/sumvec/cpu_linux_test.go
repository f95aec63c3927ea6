//go:build linux

package sumvec

import "syscall"

// processCPU returns the CPU time (user + system) of the whole test
// process: on the oversubscribed benchmark machine it shows the work a
// round needs independently of how long it waited for a core.
func processCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
