//go:build !linux

package sumvec

// processCPU is unavailable here (js/wasm runs on one thread, so wall
// time is the CPU time); 0 means "not measured".
func processCPU() float64 { return 0 }
