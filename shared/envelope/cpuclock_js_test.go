package envelope

import (
	"syscall/js"
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

func lockThread()   {}
func unlockThread() {}
