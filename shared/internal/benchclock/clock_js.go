//go:build js

package benchclock

import (
	"syscall/js"
	"testing"
	"time"
)

// Clock measures the CPU time (user + system) of the Node.js process that
// runs the wasm benchmark, from process.cpuUsage() (microsecond
// resolution). Node runs the Go program on one thread; its background
// compiler and GC threads are counted too, which is what a volunteer's
// browser pays. Time spent descheduled is not counted, so on a loaded
// machine it varies far less than wall time.
type Clock struct{ t0 time.Duration }

func processCPU() time.Duration {
	u := js.Global().Get("process").Call("cpuUsage")
	return time.Duration(u.Get("user").Float()+u.Get("system").Float()) * time.Microsecond
}

// Start starts the clock.
func (c *Clock) Start() { c.t0 = processCPU() }

// Report reports cpu-ns/op next to ns/op.
func (c *Clock) Report(b *testing.B) {
	b.ReportMetric(float64((processCPU()-c.t0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}
