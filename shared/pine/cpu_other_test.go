//go:build !linux && !js

package pine

// processCPU is not measured here; 0 means "not measured".
func processCPU() float64 { return 0 }
