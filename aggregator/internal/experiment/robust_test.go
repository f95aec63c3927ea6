package experiment

import (
	"context"
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/blanket-fl/blanket/shared/dataset/sample"
	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/mechanism"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/wire"
)

// attackIndices is the boundary attacker's fixed target: every class bias,
// then class 0's weights, then the other classes' weights, with sign +1 on
// class 0's parameters and -1 on the others' (it pushes every prediction
// towards class 0). It returns the first m indices and their signs.
func attackIndices(s logreg.Shape, m int) ([]uint32, []float64) {
	f, c := s.Features, s.Classes
	var idx []uint32
	var sign []float64
	add := func(j int, cls int) {
		idx = append(idx, uint32(j))
		if cls == 0 {
			sign = append(sign, 1)
		} else {
			sign = append(sign, -1)
		}
	}
	for cls := range c {
		add(c*f+cls, cls)
	}
	for cls := range c {
		for p := range f {
			add(cls*f+p, cls)
		}
	}
	return idx[:m], sign[:m]
}

// boundaryReport is one malicious volunteer's report: Shape().Messages
// width-1 messages on the attack indices, each carrying the largest (sign
// +1) or smallest (sign -1) admissible value of the spec.
func boundaryReport(spec *roundspec.Spec, s logreg.Shape, messages int) []mechanism.Message {
	lo, hi := spec.Randomizer().Support()
	idx, sign := attackIndices(s, messages)
	out := make([]mechanism.Message, messages)
	for t := range out {
		v := hi
		if sign[t] < 0 {
			v = lo
		}
		out[t] = mechanism.Message{Indices: idx[t : t+1], Values: []float64{v}}
	}
	return out
}

// attackRun trains rounds rounds of n honest volunteers (disjoint groups, as
// run does) plus attackers boundary attackers, every party built from spec
// as the deployment builds them (encoder, Shuffle, Admissible, Analyzer),
// and returns the final test accuracy.
func attackRun(ctx context.Context, w *world, spec *roundspec.Spec, lr float64, n, attackers, rounds int) (float64, error) {
	enc, err := spec.Encoder(0)
	if err != nil {
		return 0, err
	}
	an, err := spec.Analyzer()
	if err != nil {
		return 0, err
	}
	train := logreg.FLAMEConfig(10, 0.1)
	global := make([]float64, w.shape.NumParams())
	groups := len(w.users) / n
	for r := range rounds {
		users := make([]int, n)
		for i := range users {
			users[i] = (r%groups)*n + i
		}
		updates, err := w.localUpdates(ctx, global, users, train, r, tagTrain)
		if err != nil {
			return 0, err
		}
		all, err := encodeAll(ctx, w, roundInput{round: r, users: users, updates: updates}, enc)
		if err != nil {
			return 0, err
		}
		for range attackers {
			all = append(all, boundaryReport(spec, w.shape, enc.Shape().Messages)...)
		}
		batch, _, err := spec.Shuffle(all, noise.NewSeeded(mix(w.seed, tagRelay, uint64(r))))
		if err != nil {
			return 0, err
		}
		for _, m := range batch.Messages {
			if !spec.Admissible(m.Values[0]) {
				m.Values[0] = spec.Center()
			}
		}
		est, err := an.Estimate(batch, n+attackers)
		if err != nil {
			return 0, err
		}
		for j, v := range est {
			global[j] += lr * v
		}
	}
	return logreg.Accuracy(global, w.test)
}

// attackRatio is the shift one boundary attacker causes in each coordinate
// it reports, in standard deviations of the honest per-coordinate estimate
// at n_p values per dimension: (hi - center)/(sd·sqrt(n_p)) with sd the
// per-value noise standard deviation (NoiseStd in value units).
func attackRatio(spec *roundspec.Spec, np int) (float64, error) {
	sd, err := spec.NoiseStd()
	if err != nil {
		return 0, err
	}
	_, hi := spec.Randomizer().Support()
	_, slope := spec.Randomizer().Affine()
	sdValue := sd * slope / (2 * spec.Params().Clip)
	return (hi - spec.Center()) / (sdValue * math.Sqrt(float64(np))), nil
}

// TestBoundaryAttackSweep prints, for every shuffle protocol and randomizer
// at the runner's settings, the attack ratio and the accuracy after the
// given rounds with and without one boundary attacker. Measurement only:
// BLANKET_ATTACK_SWEEP=1 runs it (BLANKET_ATTACK_ONLY=200/ss-topk/laplace
// one row).
func TestBoundaryAttackSweep(t *testing.T) {
	if os.Getenv("BLANKET_ATTACK_SWEEP") == "" {
		t.Skip("measurement: set BLANKET_ATTACK_SWEEP=1")
	}
	ctx := context.Background()
	w, err := loadWorld(sample.Name, "", 10, false, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	d := w.shape.NumParams()
	for _, n := range []int{20, 200} {
		for _, proto := range []wire.Protocol{wire.ProtocolSSSimple, wire.ProtocolSSDouble, wire.ProtocolSSTopk} {
			for _, rz := range []wire.Randomizer{wire.RandomizerLaplace, wire.RandomizerRGB, wire.RandomizerGaussian} {
				if only := os.Getenv("BLANKET_ATTACK_ONLY"); only != "" && only != fmt.Sprintf("%d/%v/%v", n, proto, rz) {
					continue
				}
				o := roundspec.Options{Protocol: proto, Randomizer: rz, MinBatch: 1}
				if rz == wire.RandomizerRGB {
					o.Buckets = 16
				}
				p, lr, err := roundspec.Build(d, n, o)
				if err != nil {
					t.Fatal(err)
				}
				spec, err := roundspec.New(p)
				if err != nil {
					t.Fatal(err)
				}
				ratio, err := attackRatio(spec, int(p.NP))
				if err != nil {
					t.Fatal(err)
				}
				lo, hi := spec.Randomizer().Support()
				clean, err := attackRun(ctx, w, spec, lr, n, 0, 10)
				if err != nil {
					t.Fatal(err)
				}
				bad, err := attackRun(ctx, w, spec, lr, n, 1, 10)
				if err != nil {
					t.Fatal(err)
				}
				fmt.Printf("n=%d %s/%s np=%d eps0=%.3g support=[%.3g,%.3g] shift/sd=%.2f acc clean=%.4f attacked=%.4f\n",
					n, proto, rz, p.NP, spec.Randomizer().Epsilon(), lo, hi, ratio, clean, bad)
			}
		}
	}
}

// TestBoundaryAttacker: one malicious volunteer among n = 200 honest ones
// sends, every round, the largest admissible value on class 0's parameters
// and the smallest on the others' (every bias first), on as many
// coordinates as a report has messages; everything else is the deployment's
// path from the round's spec (encoder, relay padding and shuffle,
// Admissible, Analyzer). After 10 rounds (seed 1, the runner's defaults:
// ε_l 78.5, C 0.01, k = d/50, n_p = n/3, SS-Topk's server lr d/k; SS-Simple
// and SS-Double at ε0 = 5 so that they learn), the test accuracy with the
// attacker is within a stated margin of the run without it: 3 points for
// SS-Simple, 6 for SS-Double, 15 for SS-Topk, with the Laplace and the
// Gaussian randomizer (R_{γ,b} is bounded to [0,1] by construction and its
// attacker moves a coordinate least: docs/threat-model.md).
//
// The runs are deterministic (fixed seeds), so the test fails only if the
// code changes; the margins leave 1.3 points or more over the drops
// measured (accuracy without → with the attacker, at reach 1 for Laplace
// and 2 for the Gaussian; in brackets the former support, a 1e-6 tail,
// reach 9.77 and 4.89):
//
//	ss-simple/laplace   80.1 → 80.0  (80.2 → 79.5)
//	ss-simple/gaussian  80.3 → 79.5  (80.2 → 78.6)
//	ss-double/laplace   71.8 → 71.4  (71.7 → 66.0)
//	ss-double/gaussian  45.2 → 40.6  (44.8 → 37.9: fails)
//	ss-topk/laplace     67.8 → 54.6  (64.0 → 26.4: fails)
//	ss-topk/gaussian    32.8 → 26.1  (28.1 → 22.6)
//
// At ε0 = 5 an honest report's noise is small next to [0,1], so in
// SS-Simple the attacker is little more than an honest volunteer at the
// clip; SS-Topk is where the support matters.
func TestBoundaryAttacker(t *testing.T) {
	if testing.Short() {
		t.Skip("trains 12 runs of 10 rounds")
	}
	const n, rounds = 200, 10
	margin := map[wire.Protocol]float64{wire.ProtocolSSSimple: 0.03, wire.ProtocolSSDouble: 0.06, wire.ProtocolSSTopk: 0.15}
	ctx := context.Background()
	w, err := loadWorld(sample.Name, "", 10, false, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	d := w.shape.NumParams()
	for _, proto := range []wire.Protocol{wire.ProtocolSSSimple, wire.ProtocolSSDouble, wire.ProtocolSSTopk} {
		for _, rz := range []wire.Randomizer{wire.RandomizerLaplace, wire.RandomizerGaussian} {
			o := roundspec.Options{Protocol: proto, Randomizer: rz, MinBatch: 1}
			if proto != wire.ProtocolSSTopk {
				// ε0 = 5 per coordinate, so that the run without the
				// attacker learns (at ε_l 78.5 SS-Simple and SS-Double
				// stay near chance in 10 rounds: nothing to lose).
				o.EpsL = 5 * float64(d)
				if proto == wire.ProtocolSSDouble {
					o.EpsL = 5 * math.Round(float64(d)/roundspec.DefaultBetaInv)
				}
			}
			p, lr, err := roundspec.Build(d, n, o)
			if err != nil {
				t.Fatal(err)
			}
			spec, err := roundspec.New(p)
			if err != nil {
				t.Fatal(err)
			}
			clean, err := attackRun(ctx, w, spec, lr, n, 0, rounds)
			if err != nil {
				t.Fatal(err)
			}
			bad, err := attackRun(ctx, w, spec, lr, n, 1, rounds)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%v/%v: accuracy %.4f without the attacker, %.4f with it", proto, rz, clean, bad)
			if bad < clean-margin[proto] {
				t.Errorf("%v/%v: one boundary attacker among %d took accuracy from %.4f to %.4f (margin %v)", proto, rz, n, clean, bad, margin[proto])
			}
		}
	}
}
