package attack

import (
	"testing"

	"github.com/blanket-fl/blanket/shared/randomizer"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/wire"
)

// laws returns the bins and the laws of R(1), R(0) and the blanket for a
// spec's randomizer.
func laws(t *testing.T, spec *roundspec.Spec, cuts []float64) (Binning, Law, Law, Law) {
	t.Helper()
	rz := spec.Randomizer()
	bins, err := NewBinning(rz, cuts)
	if err != nil {
		t.Fatal(err)
	}
	r1, err := MessageLaw(rz, bins, 1)
	if err != nil {
		t.Fatal(err)
	}
	r0, err := MessageLaw(rz, bins, 0)
	if err != nil {
		t.Fatal(err)
	}
	om, err := BlanketLaw(rz, bins)
	if err != nil {
		t.Fatal(err)
	}
	return bins, r1, r0, om
}

// simpleFlip: SS-Simple, every volunteer reports every coordinate and the
// relay raises n_p to n (no dummies, nothing truncated). The target's
// update is +C on every coordinate under H0 and −C under H1 (normalized 1
// against 0), everyone else's −C: under H1 the target is one more copy of
// the others and under H0 the only report centred at 1, in every one of
// the d dimensions (the worst case of the clone reduction: the others sit
// at one of the target's two inputs).
func simpleFlip(t *testing.T, o roundspec.Options, d, n int, cuts func(*roundspec.Spec) []float64) scenario {
	t.Helper()
	o.Protocol = wire.ProtocolSSSimple
	spec := mustSpec(t, d, n, o)
	c := spec.Params().Clip
	all := make([]int, d)
	for j := range all {
		all[j] = j
	}
	sc := scenario{spec: spec, target: [2][]float64{unit(d, c, all...), unit(d, -c, all...)}, maxTuples: 4 << 20}
	for range n - 1 {
		sc.others = append(sc.others, unit(d, -c, all...))
	}
	bins, r1, r0, om := laws(t, spec, cuts(spec))
	dims := make([]uint32, d)
	h0, h1 := make([][]Msg, d), make([][]Msg, d)
	for j := range d {
		dims[j] = uint32(j)
		h0[j] = []Msg{{Law: r1, Count: 1}, {Law: r0, Count: n - 1}}
		h1[j] = []Msg{{Law: r0, Count: n}}
	}
	var err error
	if sc.model, err = NewModel(dims, int(spec.Params().NP), bins, om, []Config{{Weight: 1, Dims: h0}}, []Config{{Weight: 1, Dims: h1}}); err != nil {
		t.Fatal(err)
	}
	return sc
}

// doubleFlip: SS-Double with the target alone (n = 1) and n_p = 3: its k
// coordinates are a uniform k-subset of d, drawn by its own randomness, and
// every other message is a dummy. The target's update is +C everywhere
// under H0 and −C under H1. The aggregator does not know the subset: the
// model mixes over all C(d, k) subsets, equally likely under both
// hypotheses.
func doubleFlip(t *testing.T, o roundspec.Options, d int, cuts func(*roundspec.Spec) []float64) scenario {
	t.Helper()
	o.Protocol, o.NP = wire.ProtocolSSDouble, 3
	spec := mustSpec(t, d, 1, o)
	p := spec.Params()
	k, c := int(p.K), p.Clip
	all := make([]int, d)
	dims := make([]uint32, d)
	for j := range all {
		all[j], dims[j] = j, uint32(j)
	}
	sc := scenario{spec: spec, target: [2][]float64{unit(d, c, all...), unit(d, -c, all...)}, maxTuples: 4 << 20}
	bins, r1, r0, om := laws(t, spec, cuts(spec))
	var h [2][]Config
	var subsets [][]bool
	var rec func(j, left int, cur []bool)
	rec = func(j, left int, cur []bool) {
		if j == d {
			if left == 0 {
				subsets = append(subsets, append([]bool(nil), cur...))
			}
			return
		}
		for _, in := range []bool{true, false} {
			if in && left == 0 {
				continue
			}
			cur[j] = in
			l := left
			if in {
				l--
			}
			rec(j+1, l, cur)
		}
	}
	rec(0, k, make([]bool, d))
	for hyp, x := range []Law{r1, r0} {
		for _, s := range subsets {
			cfg := Config{Weight: 1 / float64(len(subsets)), Dims: make([][]Msg, d)}
			for j, in := range s {
				if in {
					cfg.Dims[j] = []Msg{{Law: x, Count: 1}}
				}
			}
			h[hyp] = append(h[hyp], cfg)
		}
	}
	var err error
	if sc.model, err = NewModel(dims, int(p.NP), bins, om, h[0], h[1]); err != nil {
		t.Fatal(err)
	}
	return sc
}

// gaussCuts bins Gaussian values (σ the noise's) inside the clamped
// support [−2σ, 1 + 2σ].
func gaussCuts(spec *roundspec.Spec) []float64 {
	g, ok := spec.Randomizer().Unwrap().(*randomizer.Gaussian)
	if !ok {
		return nil
	}
	s := g.Sigma()
	return []float64{-1.5 * s, -0.5 * s, 0.5, 1 + 0.5*s, 1 + 1.5*s}
}

// gridCuts: R_{γ,b} is binned on its grid (NewBinning ignores cuts).
func gridCuts(*roundspec.Spec) []float64 { return nil }

// TestFamiliesAttack attacks, beside each family of rows the ledger can
// charge for a shuffle round, the shipped encoder and relay round at small
// n_p with the neighbours above, and fails if the lower bound exceeds the
// charge or any valid proven row (run). Every case states its size; each
// fails a correct charge with probability ≤ 2·10⁻⁴ and, at full size,
// detects with probability ≥ 0.9 any charge more than 10% under the exact
// ε of its binned view (run's sizing check).
func TestFamiliesAttack(t *testing.T) {
	rgb := roundspec.Options{Randomizer: wire.RandomizerRGB, Buckets: 2}
	lap := roundspec.Options{Randomizer: wire.RandomizerLaplace}
	cases := []attackCase{
		// SS-Simple, Laplace (local row, PLD/RDP FMT'21, FMT'23 and
		// variation-ratio Laplace rows, FLAME closed forms).
		{"ss-simple laplace d=2 n=3", func(t *testing.T) scenario {
			o := lap
			o.EpsL = 4
			sc := simpleFlip(t, o, 2, 3, laplaceCuts(4))
			sc.delta, sc.trials, sc.short = 1e-2, 200_000, 20_000
			return sc
		}},
		// SS-Simple, R_{γ,b} (variation-ratio R_{γ,b}, Lemma 1).
		{"ss-simple rgb d=2 n=3", func(t *testing.T) scenario {
			o := rgb
			o.EpsL = 4
			sc := simpleFlip(t, o, 2, 3, gridCuts)
			sc.delta, sc.trials, sc.short = 1e-2, 500_000, 20_000
			return sc
		}},
		// SS-Double (local row, shuffle rows at n_p).
		{"ss-double laplace d=3 k=2 n=1", func(t *testing.T) scenario {
			o := lap
			o.K, o.EpsL = 2, 4
			sc := doubleFlip(t, o, 3, laplaceCuts(2))
			sc.delta, sc.trials, sc.short = 1e-2, 500_000, 20_000
			return sc
		}},
		// Gaussian (local Gaussian exact row; SS-Topk's unamplified row
		// with δ0).
		{"ss-simple gaussian d=2 n=2", func(t *testing.T) scenario {
			o := roundspec.Options{Randomizer: wire.RandomizerGaussian, EpsL: 4, DeltaL: 1e-3}
			sc := simpleFlip(t, o, 2, 2, gaussCuts)
			sc.delta, sc.trials, sc.short = 3e-2, 400_000, 20_000
			return sc
		}},
	}
	runCases(t, cases, 100)
}

type attackCase struct {
	name string
	make func(t *testing.T) scenario
}

func runCases(t *testing.T, cases []attackCase, seed uint64) {
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sc := c.make(t)
			sc.name = c.name
			run(t, sc, seed+uint64(i))
		})
	}
}

// TestTopkFamiliesAttack is TestFamiliesAttack for SS-Topk with the
// overflowing neighbours of topkOverflow (l = 1, n_p = 4 of n = 10): the
// shuffle rows with R_{γ,b} (variation-ratio R_{γ,b}, FMT'21, FMT'23,
// Lemma 1) and, with the Gaussian randomizer (δ0 > 0, no shuffle row),
// the unamplified padded-shuffle row. (Laplace: TestTopkLocalRowAttack.)
func TestTopkFamiliesAttack(t *testing.T) {
	rgb := roundspec.Options{Randomizer: wire.RandomizerRGB, Buckets: 2}
	cases := []attackCase{
		// SS-Topk, R_{γ,b}, with overflow (shuffle rows, the unamplified row).
		{"ss-topk rgb l=1 overflow", func(t *testing.T) scenario {
			o := rgb
			o.EpsL = 2
			sc := topkOverflow(t, o, 15, 10, gridCuts)
			sc.delta, sc.trials, sc.short = 3e-3, 300_000, 30_000
			return sc
		}},
		{"ss-topk gaussian l=1 overflow", func(t *testing.T) scenario {
			o := roundspec.Options{Randomizer: wire.RandomizerGaussian, EpsL: 4, DeltaL: 1e-4}
			sc := topkOverflow(t, o, 15, 10, gaussCuts)
			sc.delta, sc.trials, sc.short = 3e-2, 300_000, 30_000
			return sc
		}},
	}
	runCases(t, cases, 200)
}
