package attack

import (
	"testing"

	"github.com/blanket-fl/blanket/shared/randomizer"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/wire"
)

// evenCuts bins Clip-Laplace's output range [0, 1] (APESRangeRatio 1) in
// m equal intervals: the privacy loss of R(1) against R(0) is linear in
// the output, ε·(2y − 1), so equal steps lose the same in every bin.
func evenCuts(m int) []float64 {
	cuts := make([]float64, m-1)
	for i := range cuts {
		cuts[i] = float64(i+1) / float64(m)
	}
	return cuts
}

// apesTop returns the spec's Clip-Laplace at the largest per-coordinate
// budget ε* (the randomizer of a volunteer at level 1 and of the relay's
// value dummies: roundspec.Spec.Blanket).
func apesTop(t *testing.T, spec *roundspec.Spec) *randomizer.ClipLaplace {
	t.Helper()
	top, ok := spec.Blanket().(*randomizer.ClipLaplace)
	if !ok {
		t.Fatalf("%v: blanket %T, want clip-laplace", spec.Params().Protocol, spec.Blanket())
	}
	if _, eps, ok := spec.APES(); !ok || top.Epsilon() != eps {
		t.Fatalf("blanket at ε %v, want the spec's ε*", top.Epsilon())
	}
	return top
}

// apesFlip: APES over d value columns, n volunteers, announced n_p = np
// (n ≤ np: the relay pads every column with np − n virtual volunteers at
// the largest level, Clip-Laplace at ε* of the centre; APES's overflow
// policy raises n_p to n and never truncates, so n > np is the round
// announced at n_p = n). The target is at level 1 (Encoder(0): the
// announced largest budget, its least noise), its update +C on every
// coordinate under H0 and −C under H1 (normalized 1 against 0: the pair at
// which Clip-Laplace's ratio reaches e^{ε*}); every other volunteer is at
// level 1 too with update −C everywhere (the clone reduction's worst case:
// the others sit at one of the target's inputs with the least noise a
// volunteer may add, so they hide the target least). The budget column
// (levels, dummies' 1) is the same under both and left out. Given the
// levels, the value columns are independent (independent noise, the
// relay's uniform shuffle separates them) and each holds the n_p values
// Model's DimLaw describes: exact for these messages.
func apesFlip(t *testing.T, d, n, np int, epsL float64, bins int) scenario {
	t.Helper()
	o := roundspec.Options{Protocol: wire.ProtocolAPES, EpsL: epsL, NP: np}
	spec := mustSpec(t, d, n, o)
	p := spec.Params()
	if int(p.NP) != np || int(p.Columns()) != d+1 {
		t.Fatalf("spec n_p %d, %d columns; want %d, %d", p.NP, p.Columns(), np, d+1)
	}
	c := p.Clip
	all := make([]int, d)
	dims := make([]uint32, d)
	for j := range all {
		all[j], dims[j] = j, uint32(j)
	}
	sc := scenario{spec: spec, target: [2][]float64{unit(d, c, all...), unit(d, -c, all...)}, maxTuples: 4 << 20}
	for range n - 1 {
		sc.others = append(sc.others, unit(d, -c, all...))
	}
	top := apesTop(t, spec)
	b := Binning{Cuts: evenCuts(bins)}
	r1, err := ClipLaplaceLaw(top, b, 1)
	if err != nil {
		t.Fatal(err)
	}
	r0, err := ClipLaplaceLaw(top, b, 0)
	if err != nil {
		t.Fatal(err)
	}
	om, err := ClipLaplaceLaw(top, b, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	h0, h1 := make([][]Msg, d), make([][]Msg, d)
	for j := range d {
		h0[j] = []Msg{{Law: r1, Count: 1}, {Law: r0, Count: n - 1}}
		h1[j] = []Msg{{Law: r0, Count: n}}
	}
	if sc.model, err = NewModel(dims, np, b, om, []Config{{Weight: 1, Dims: h0}}, []Config{{Weight: 1, Dims: h1}}); err != nil {
		t.Fatal(err)
	}
	return sc
}

// sapesFlip: S-APES with d = 2 and b = 1 (each volunteer keeps its
// coordinate with the larger |y − 1/2| and replaces the other with a
// fresh centre draw at its own level, before the shuffle), n volunteers,
// n_p = 1 raised to n (S-APES pads nothing). Neighbours as apesFlip: the
// target at level 1, +C on both coordinates under H0 and −C under H1,
// everyone else at level 1 with −C. The two value columns are dependent
// (the selection links a report's two values), so the model is their
// joint count law (SparsePairLaw, PairCounts, NewPairModel).
func sapesFlip(t *testing.T, n int, epsL float64, bins int) scenario {
	t.Helper()
	const d = 2
	o := roundspec.Options{Protocol: wire.ProtocolSAPES, EpsL: epsL, K: 1}
	spec := mustSpec(t, d, n, o)
	p := spec.Params()
	if p.NP != 1 || p.K != 1 {
		t.Fatalf("s-apes spec n_p %d, b %d; want 1, 1", p.NP, p.K)
	}
	c := p.Clip
	sc := scenario{spec: spec, target: [2][]float64{unit(d, c, 0, 1), unit(d, -c, 0, 1)}, maxTuples: 4 << 20}
	for range n - 1 {
		sc.others = append(sc.others, unit(d, -c, 0, 1))
	}
	top := apesTop(t, spec)
	b := Binning{Cuts: evenCuts(bins)}
	hi, err := SparsePairLaw(top, b, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	lo, err := SparsePairLaw(top, b, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var h [2][][][]float64
	h[0] = append(h[0], hi)
	h[1] = append(h[1], lo)
	for range n - 1 {
		h[0] = append(h[0], lo)
		h[1] = append(h[1], lo)
	}
	h0, err := PairCounts(h[0])
	if err != nil {
		t.Fatal(err)
	}
	h1, err := PairCounts(h[1])
	if err != nil {
		t.Fatal(err)
	}
	if sc.model, err = NewPairModel([2]uint32{0, 1}, n, b, h0, h1); err != nil {
		t.Fatal(err)
	}
	return sc
}

// TestAPESFamiliesAttack is TestFamiliesAttack for APES and S-APES.
func TestAPESFamiliesAttack(t *testing.T) {
	cases := []attackCase{
		{"apes d=2 n=n_p=3", func(t *testing.T) scenario {
			sc := apesFlip(t, 2, 3, 3, 4, 8)
			sc.delta, sc.trials, sc.short = 1e-2, 200_000, 20_000
			return sc
		}},
		{"apes d=2 n=1 n_p=3 padded", func(t *testing.T) scenario {
			sc := apesFlip(t, 2, 1, 3, 4, 8)
			sc.delta, sc.trials, sc.short = 1e-2, 200_000, 20_000
			return sc
		}},
		{"s-apes d=2 b=1 n=3", func(t *testing.T) scenario {
			sc := sapesFlip(t, 3, 4, 8)
			sc.delta, sc.trials, sc.short = 1e-2, 200_000, 20_000
			return sc
		}},
	}
	runCases(t, cases, 300)
}
