package params

import (
	"testing"

	"github.com/blanket-fl/blanket/shared/wire"
)

// TestSecAggSigmaMemoPerClip: PINE's σ (fixed-point units) depends on the
// clip, so the memo must not hand one clip's σ to another: after
// calibrating for clip 0.886, clip 0.3 gets its own calibration (the
// unmemoized one), which is smaller (its norm bound is 39,367 units
// against 58,111).
func TestSecAggSigmaMemoPerClip(t *testing.T) {
	const d, n, rounds, eps, delta = 7850, 800, 12, 4.0, 1e-5
	c := Choice{Protocol: wire.ProtocolSecAgg.String(), Randomizer: wire.RandomizerLaplace.String(), CheckIn: 1, Clip: 0.886}
	big, err := SecAggSigma(d, n, c, rounds, eps, delta)
	if err != nil {
		t.Fatal(err)
	}
	c.Clip = 0.3
	small, err := SecAggSigma(d, n, c, rounds, eps, delta)
	if err != nil {
		t.Fatal(err)
	}
	want, err := calibrateSecAggSigma(d, n, c, rounds, eps, delta)
	if err != nil {
		t.Fatal(err)
	}
	if small != want || !(small < big) {
		t.Errorf("sigma at clip 0.3 after clip 0.886: %v, want its own %v (below %v)", small, want, big)
	}
}
