package pine

import (
	"testing"

	"github.com/blanket-fl/blanket/shared/noise"
)

// A toy validity circuit with two gadgets of different degrees exercises
// the generic FLP beyond PINE's circuits: meas[0..n) must be bits
// (ParallelSum(Mul, 3), joint randomness reduction as in SumVec) and
// meas[n..n+3) must be in {0, 1, 2} (x(x-1)(x-2), a degree-3 gadget
// called 3 times: P = 4 and the gadget polynomial needs 4P evaluation
// points, three cosets beyond the recorded wires).
type cubic struct{}

func (cubic) arity() int  { return 1 }
func (cubic) degree() int { return 3 }
func (cubic) eval(in []fp) fp {
	one, two := fpOne(), fpU(2)
	var a, b, z fp
	a.Sub(&in[0], &one)
	b.Sub(&in[0], &two)
	z.Mul(&in[0], &a)
	z.MulAssign(&b)
	return z
}

type toyCircuit struct{ n int }

func (c toyCircuit) gadgets() []gadget {
	return []gadget{parallelSum{mulGadget{}, 3}, cubic{}}
}
func (c toyCircuit) gadgetCalls() []int { return []int{chunks(c.n, 3), 3} }
func (c toyCircuit) measLen() int       { return c.n + 3 }
func (c toyCircuit) jointRandLen() int  { return 1 }
func (c toyCircuit) eval(meas, jr []fp, numShares int, g caller) (fp, error) {
	sharesInv := inv(fpU(uint64(numShares)))
	acc := psAcc{g: g, buf: make([]fp, 6)}
	r := jr[0]
	var x, y fp
	for i := range c.n {
		x.Mul(&r, &meas[i])
		y.Sub(&meas[i], &sharesInv)
		acc.add(x, y)
		r.MulAssign(&jr[0])
	}
	out, err := acc.finish()
	if err != nil {
		return fp{}, err
	}
	// The cubic gadget's constants are inside the gadget: feed the
	// reconstructed-linear input; with shares the gadget output is only
	// correct on the sum, which is what the FLP checks.
	r = jr[0]
	for k := range 3 {
		z, err := g.call(1, []fp{meas[c.n+k]})
		if err != nil {
			return fp{}, err
		}
		z.MulAssign(&r)
		out.AddAssign(&z)
		r.MulAssign(&jr[0])
	}
	return out, nil
}

func randVec(src noise.Source, n int) []fp {
	v := make([]fp, n)
	for i := range v {
		v[i] = fpU(src.Uint64() % modulus)
	}
	return v
}

func runToy(t *testing.T, f *flpParams, meas []fp, src noise.Source, corruptProof bool) bool {
	t.Helper()
	jr := randVec(src, 1)
	proof, err := f.prove(meas, randVec(src, f.proveRand), jr)
	if err != nil {
		t.Fatal(err)
	}
	if corruptProof {
		proof[len(proof)-2].AddAssign(&jr[0])
	}
	qr := randVec(src, f.queryRand)
	// Two additive shares of meas and proof.
	m1, p1 := randVec(src, len(meas)), randVec(src, len(proof))
	m0, p0 := make([]fp, len(meas)), make([]fp, len(proof))
	for i := range meas {
		m0[i].Sub(&meas[i], &m1[i])
	}
	for i := range proof {
		p0[i].Sub(&proof[i], &p1[i])
	}
	v0, err := f.query(m0, p0, qr, jr, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	v1, err := f.query(m1, p1, qr, jr, 2, &arena{})
	if err != nil {
		t.Fatal(err)
	}
	// Linearity: the shares add up to the verifier of the whole input.
	v, err := f.query(meas, proof, qr, jr, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range v0 {
		v0[i].AddAssign(&v1[i])
		if !v0[i].IsEqual(&v[i]) {
			t.Fatalf("verifier entry %d: shares do not add up to the unshared query", i)
		}
	}
	return f.decide(v0)
}

func TestFlpTwoGadgets(t *testing.T) {
	src := noise.NewSeeded(31)
	for _, n := range []int{1, 5, 17} {
		f, err := newFlp(toyCircuit{n})
		if err != nil {
			t.Fatal(err)
		}
		valid := make([]fp, n+3)
		for i := range n {
			valid[i] = fpU(src.Uint64() & 1)
		}
		valid[n], valid[n+1], valid[n+2] = fpU(2), fpU(0), fpU(1)
		if !runToy(t, f, valid, src, false) {
			t.Fatalf("n %d: valid input rejected", n)
		}
		if runToy(t, f, valid, src, true) {
			t.Fatalf("n %d: corrupted proof accepted", n)
		}
		bad := append([]fp(nil), valid...)
		bad[n+1] = fpU(3)
		if runToy(t, f, bad, src, false) {
			t.Fatalf("n %d: value 3 accepted by the cubic gadget", n)
		}
		bad = append([]fp(nil), valid...)
		bad[n/2] = fpU(2)
		if runToy(t, f, bad, src, false) {
			t.Fatalf("n %d: non-bit accepted", n)
		}
	}
}
