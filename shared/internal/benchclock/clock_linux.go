//go:build linux

package benchclock

import (
	"syscall"
	"testing"
)

// Clock measures the CPU time (user + system) of the whole benchmark
// process, as process.cpuUsage() does under js: work the benchmark hands
// to other goroutines (parallel sealing) and the garbage collector's
// background work are counted, time spent descheduled is not.
type Clock struct{ t0 int64 }

func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// Start starts the clock.
func (c *Clock) Start() { c.t0 = processCPU() }

// Report reports cpu-ns/op next to ns/op.
func (c *Clock) Report(b *testing.B) {
	b.ReportMetric(float64(processCPU()-c.t0)/float64(b.N), "cpu-ns/op")
}
