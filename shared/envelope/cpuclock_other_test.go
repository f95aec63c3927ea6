//go:build !js

package envelope

import "github.com/blanket-fl/blanket/shared/internal/benchclock"

// cpuClock reports cpu-ns/op: natively the CPU time of the benchmark's
// thread (shared/internal/benchclock).
type cpuClock = benchclock.Clock

// setBackend: natively there is one backend.
func setBackend(string) {}
