//go:build js

package pine

import "syscall/js"

// processCPU is Node's process.cpuUsage() (user + system, microseconds),
// so that wasm benchmarks report CPU time even when the machine is
// loaded and wall time is mostly waiting; 0 outside Node.
func processCPU() float64 {
	proc := js.Global().Get("process")
	if proc.IsUndefined() || proc.Get("cpuUsage").IsUndefined() {
		return 0
	}
	u := proc.Call("cpuUsage")
	return (u.Get("user").Float() + u.Get("system").Float()) / 1e6
}
