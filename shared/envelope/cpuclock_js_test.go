package envelope

import (
	"syscall/js"
	"testing"
	"time"
)

// cpuNow returns the CPU time (user + system) the Node.js process running
// the wasm benchmark has used, from process.cpuUsage() (microsecond
// resolution). Node runs the Go program on one thread, so on a loaded
// machine this varies far less than wall time: time spent descheduled is
// not counted.
func cpuNow() time.Duration {
	u := js.Global().Get("process").Call("cpuUsage")
	return time.Duration(u.Get("user").Float()+u.Get("system").Float()) * time.Microsecond
}

// cpuClock reports cpu-ns/op: under js the Node process's CPU time per op.
type cpuClock struct{ t0 time.Duration }

// Start starts the clock.
func (c *cpuClock) Start() { c.t0 = cpuNow() }

// Report reports cpu-ns/op.
func (c *cpuClock) Report(b *testing.B) {
	b.ReportMetric(float64((cpuNow()-c.t0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}
