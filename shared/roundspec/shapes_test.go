package roundspec

import (
	"fmt"
	"testing"

	"github.com/blanket-fl/blanket/shared/task"
	"github.com/blanket-fl/blanket/shared/wire"
)

// taskShapes are the d of the shipped tasks (docs/tasks.md) and a small
// synthetic one: a few dozen parameters up to the digits' 7850.
func taskShapes(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{"synthetic 5x4": (5 + 1) * 4}
	for _, f := range []string{"", "../../tasks/breast-cancer/task.json", "../../tasks/class-survey/task.json"} {
		tk, _, err := task.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		out[tk.Name] = tk.D()
	}
	return out
}

// TestPartiesAgreeOnTaskShapes: every protocol runs on any task's d. For
// each shipped task's d (and a small synthetic one) and every announceable
// shuffle protocol and randomizer, the parameters the aggregator builds
// from d alone (Build) are announceable and the encoder, the relay and the
// aggregator agree on them (checkAgree: TestPartiesAgree's checks, the
// extreme inputs' encodings admissible, every one of the d dimensions
// padded to n_p, the ledger's release valid). For secure summation, the
// calibrated σ, the secagg parameters' length and the fixed share sizes
// all follow from d, and a larger d never gives a smaller frame. (-short
// skips the shuffle checks at the digits' d = 8,340.)
func TestPartiesAgreeOnTaskShapes(t *testing.T) {
	shapes := taskShapes(t)
	if shapes["digits"] != 8340 || shapes["breast-cancer"] != 62 {
		t.Fatalf("task shapes %v", shapes)
	}
	for name, d := range shapes {
		if testing.Short() && d > 1000 {
			continue // the digits' shuffle checks take seconds under wasm; natively they always run
		}
		for _, proto := range ShuffleProtocols() {
			rzs := []wire.Randomizer{wire.RandomizerLaplace, wire.RandomizerRGB, wire.RandomizerGaussian}
			if proto.Wire().IsAPES() {
				rzs = []wire.Randomizer{wire.RandomizerClipLaplace}
			}
			for _, rz := range rzs {
				o := Options{Protocol: proto.Wire(), Randomizer: rz, MinBatch: 1}
				if rz == wire.RandomizerRGB {
					o.Buckets = 6
				}
				if rz == wire.RandomizerGaussian {
					o.DeltaL = 1e-6
				}
				p, _, err := Build(d, 30, o)
				if err != nil {
					t.Fatalf("%s (d %d) %v/%v: %v", name, d, proto.Wire(), rz, err)
				}
				if int(p.D) != d {
					t.Fatalf("%s: built d %d, want %d", name, p.D, d)
				}
				checkAgree(t, fmt.Sprintf("%s (d %d) %v/%v", name, d, p.Protocol, p.Randomizer), p)
			}
		}
	}
	// Secure summation: a frame's size is a function of d only.
	prev, prevD := 0, 0
	for _, d := range []int{shapes["synthetic 5x4"], shapes["breast-cancer"], shapes["class-survey"], shapes["digits"]} {
		sigma := 2000.0 // grid units; calibrating takes seconds, done once below
		p, _, err := Build(d, 30, Options{Protocol: wire.ProtocolSecAgg, Sigma: sigma, MinBatch: 1})
		if err != nil {
			t.Fatalf("secagg d %d: %v", d, err)
		}
		spec, err := New(p)
		if err != nil {
			t.Fatalf("secagg d %d: %v", d, err)
		}
		sa, err := spec.SecAgg()
		if err != nil || sa.Dim != d || int(p.D) != d {
			t.Fatalf("secagg d %d: announced %d, secagg dimension %d: %v", d, p.D, sa.Dim, err)
		}
		if err := spec.Release(1, 30, 0).Validate(); err != nil {
			t.Fatalf("secagg d %d: release: %v", d, err)
		}
		leader, helper, err := spec.SharesSizes()
		if err != nil || leader <= 0 || helper <= 0 {
			t.Fatalf("secagg d %d: share sizes %d, %d: %v", d, leader, helper, err)
		}
		if d > prevD && leader+helper < prev {
			t.Errorf("secagg: d %d gives %d bytes of shares, d %d gave %d", d, leader+helper, prevD, prev)
		}
		prev, prevD = leader+helper, d
	}
	// σ calibrated to a budget from a small task's d: the tabular example's
	// 62 parameters at ε = 4 over 5 rounds.
	d := shapes["breast-cancer"]
	sigma, err := CalibrateSigma(d, Options{Protocol: wire.ProtocolSecAgg}, 5, 1, 4, 1e-5)
	if err != nil || !(sigma > 1) {
		t.Fatalf("d %d: sigma %v: %v", d, sigma, err)
	}
	if _, _, err := Build(d, 30, Options{Protocol: wire.ProtocolSecAgg, Sigma: sigma, MinBatch: 1}); err != nil {
		t.Fatalf("secagg d %d, calibrated sigma %v: %v", d, sigma, err)
	}
}
