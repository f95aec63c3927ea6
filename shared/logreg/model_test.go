package logreg

import (
	"errors"
	"math"
	"testing"

	"github.com/blanket-fl/blanket/shared/noise"
)

func TestMNISTLayout(t *testing.T) {
	s := MNIST
	if s.NumParams() != 7850 || MNISTParams != 7850 {
		t.Fatalf("NumParams = %d, MNISTParams = %d, want 7850", s.NumParams(), MNISTParams)
	}
	p := make([]float64, s.NumParams())
	for i := range p {
		p[i] = float64(i)
	}
	for c := 0; c < 10; c++ {
		w := s.Weights(p, c)
		if len(w) != 784 || w[0] != float64(c*784) || w[783] != float64(c*784+783) {
			t.Fatalf("class %d weights start %v end %v", c, w[0], w[len(w)-1])
		}
		if s.WeightIndex(c, 5) != c*784+5 || s.BiasIndex(c) != 7840+c {
			t.Fatalf("class %d: WeightIndex %d BiasIndex %d", c, s.WeightIndex(c, 5), s.BiasIndex(c))
		}
	}
	if b := s.Biases(p); len(b) != 10 || b[0] != 7840 {
		t.Fatalf("Biases = %v", b)
	}
}

// TestLogitsUseLayout pins the layout through the model itself: a model
// whose only non-zero parameters are params[c*F+j] = 1 and bias c = 0.5
// predicts class c exactly for inputs with feature j set.
func TestLogitsUseLayout(t *testing.T) {
	s := Shape{Features: 6, Classes: 4}
	p := make([]float64, s.NumParams())
	x := make([]float32, 0, s.Classes*s.Features)
	for c := 0; c < s.Classes; c++ {
		p[c*s.Features+c+1] = 1
		row := make([]float32, s.Features)
		row[c+1] = 1
		x = append(x, row...)
	}
	got, err := Predict(nil, s, p, x)
	if err != nil {
		t.Fatal(err)
	}
	for c, g := range got {
		if int(g) != c {
			t.Fatalf("row %d predicted %d", c, g)
		}
	}
	// A bias alone decides ties: all-zero input picks the largest bias.
	p[s.BiasIndex(2)] = 0.5
	got, err = Predict(nil, s, p, make([]float32, s.Features))
	if err != nil || got[0] != 2 {
		t.Fatalf("Predict on zero input = %v, %v; want class 2", got, err)
	}
}

func TestShapeValidate(t *testing.T) {
	for _, s := range []Shape{{0, 10}, {-1, 10}, {784, 1}, {784, 0}, {784, 257}, {1 << 30, 10}} {
		if err := s.Validate(); !errors.Is(err, ErrShape) {
			t.Errorf("Shape %+v: err = %v, want ErrShape", s, err)
		}
	}
	for _, s := range []Shape{MNIST, {1, 2}, {3, 256}} {
		if err := s.Validate(); err != nil {
			t.Errorf("Shape %+v rejected: %v", s, err)
		}
	}
}

func TestNewDatasetRejects(t *testing.T) {
	s := Shape{Features: 2, Classes: 3}
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	cases := []struct {
		name string
		x    []float32
		y    []uint8
	}{
		{"empty", nil, nil},
		{"short x", []float32{1, 2, 3}, []uint8{0, 1}},
		{"long x", []float32{1, 2, 3, 4, 5}, []uint8{0, 1}},
		{"label", []float32{1, 2, 3, 4}, []uint8{0, 3}},
		{"NaN", []float32{1, nan, 3, 4}, []uint8{0, 1}},
		{"Inf", []float32{1, 2, 3, inf}, []uint8{0, 1}},
	}
	for _, c := range cases {
		if _, err := NewDataset(s, c.x, c.y); err == nil {
			t.Errorf("%s: accepted", c.name)
		}
	}
	if _, err := NewDataset(Shape{}, []float32{1}, []uint8{0}); err == nil {
		t.Error("zero shape accepted")
	}
	d, err := NewDataset(s, []float32{1, 2, 3, 4, 5, 6}, []uint8{0, 1, 2})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := d.Slice(1, 3)
	if err != nil || sub.Len() != 2 || sub.Row(0)[0] != 3 || sub.Label(1) != 2 {
		t.Fatalf("Slice(1,3) = %+v, %v", sub, err)
	}
	perm, err := d.Subset([]int{2, 0, 2})
	if err != nil || perm.Len() != 3 || perm.Row(0)[1] != 6 || perm.Row(1)[0] != 1 || perm.Label(2) != 2 {
		t.Fatalf("Subset = %+v, %v", perm, err)
	}
	perm.x[0] = 99 // a copy: d is untouched
	if d.Row(2)[0] != 5 {
		t.Fatal("Subset shares storage with its source")
	}
	for _, idx := range [][]int{nil, {3}, {-1}, {0, 5}} {
		if _, err := d.Subset(idx); err == nil {
			t.Errorf("Subset(%v) accepted", idx)
		}
	}
	for _, r := range [][2]int{{-1, 2}, {2, 2}, {0, 4}, {3, 1}} {
		if _, err := d.Slice(r[0], r[1]); err == nil {
			t.Errorf("Slice%v accepted", r)
		}
	}
}

func TestEvalRejectsBadInput(t *testing.T) {
	s := Shape{Features: 3, Classes: 2}
	d := synth(t, s, 4, 1, 0.1)
	good := make([]float64, s.NumParams())
	bad := append([]float64(nil), good...)
	bad[2] = math.NaN()
	if _, err := Loss(good[:5], d, 0); !errors.Is(err, ErrShape) {
		t.Errorf("short params: %v", err)
	}
	if _, err := Loss(bad, d, 0); err == nil {
		t.Error("NaN params accepted")
	}
	if _, err := Loss(good, d, -1); err == nil {
		t.Error("negative l2 accepted")
	}
	if _, err := Loss(good, Dataset{}, 0); err == nil {
		t.Error("zero Dataset accepted")
	}
	if _, _, err := gradient(make([]float64, 3), good, d, 0); !errors.Is(err, ErrShape) {
		t.Errorf("short gradient destination: %v", err)
	}
	if _, _, err := gradient(good, good, d, 0); err == nil {
		t.Error("gradient destination aliasing params accepted")
	}
	if _, err := Accuracy(bad, d); err == nil {
		t.Error("Accuracy with NaN params accepted")
	}
	if _, err := Predict(nil, s, good, []float32{1, 2}); !errors.Is(err, ErrShape) {
		t.Errorf("ragged Predict input: %v", err)
	}
	if _, err := Predict(nil, s, good, []float32{1, 2, float32(math.Inf(-1))}); err == nil {
		t.Error("Predict with Inf input accepted")
	}
	if _, err := Predict(make([]uint8, 2), s, good, []float32{1, 2, 3}); !errors.Is(err, ErrShape) {
		t.Errorf("Predict destination size: %v", err)
	}
}

// TestLossMatchesReference compares Loss to the naive reference on a
// random model, for both kernels (through the workspace), with more rows
// than one evaluation chunk so the chunking is exercised.
func TestLossMatchesReference(t *testing.T) {
	s := Shape{Features: 13, Classes: 5}
	d := synth(t, s, 2*evalChunk+7, 3, 1)
	p := randomParams(s, 4, 0.5)
	want := naiveLoss(s, p, d, 0.01, 0, nil)
	got, err := Loss(p, d, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(got-want) > 1e-12*math.Abs(want) {
		t.Fatalf("Loss = %.17g, reference %.17g", got, want)
	}
	for _, k := range kernels {
		ws := newWorkspace(s, k, evalChunk)
		if ce := ws.crossEntropy(p, d); math.Abs(ce-naiveLoss(s, p, d, 0, 0, nil)) > 1e-12*want {
			t.Errorf("%s kernel: cross-entropy %.17g", k.name, ce)
		}
	}
}

// TestSoftmaxStable feeds logits around ±1e4: the naive exp overflows to
// +Inf (or underflows to 0/0), the max-subtracted form must stay exact.
func TestSoftmaxStable(t *testing.T) {
	z := []float64{1e4, 1e4 - math.Log(3), -1e4}
	lse := softmax(z)
	if want := 1e4 + math.Log(1+1.0/3); math.Abs(lse-want) > 1e-9 {
		t.Fatalf("logsumexp = %v, want %v", lse, want)
	}
	// 1e4 - log 3 is rounded at 1e4·2^-52 ≈ 2e-12, hence the tolerance.
	if math.Abs(z[0]-0.75) > 1e-11 || math.Abs(z[1]-0.25) > 1e-11 || z[2] != 0 {
		t.Fatalf("softmax = %v, want [0.75 0.25 0]", z)
	}
	// Through the model: one feature of value 1e4, weights ±1.
	s := Shape{Features: 1, Classes: 2}
	d, err := NewDataset(s, []float32{1e4}, []uint8{1})
	if err != nil {
		t.Fatal(err)
	}
	loss, err := Loss([]float64{1, -1, 0, 0}, d, 0)
	if err != nil || math.Abs(loss-2e4) > 1e-9 {
		t.Fatalf("loss = %v, %v; want 2e4", loss, err)
	}
}

func TestAccuracyMatchesPredict(t *testing.T) {
	s := Shape{Features: 9, Classes: 4}
	d := synth(t, s, 150, 5, 3)
	p := randomParams(s, 6, 0.3)
	pred, err := Predict(nil, s, p, d.x)
	if err != nil {
		t.Fatal(err)
	}
	correct := 0
	for i, c := range pred {
		if c == d.Label(i) {
			correct++
		}
	}
	acc, err := Accuracy(p, d)
	if err != nil {
		t.Fatal(err)
	}
	if want := float64(correct) / 150; acc != want {
		t.Fatalf("Accuracy = %v, Predict agrees on %v", acc, want)
	}
	if correct == 0 || correct == 150 {
		t.Fatalf("degenerate test: %d of 150 correct", correct)
	}
}

// TestKernelsAgree checks both kernels against plain loops on every row
// count from 1 to 9 (all blocking tails), odd and even class counts, and
// more than 64 rows and classes (gonum's tiling), with and without the
// shrink and proximal terms.
func TestKernelsAgree(t *testing.T) {
	src := noise.NewSeeded(7)
	r := func() float64 { return 2*noise.Uniform(src) - 1 }
	for _, nc := range []int{2, 3, 10, 70} {
		for _, rows := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 67} {
			f := 17
			w := make([]float64, nc*f)
			g := make([]float64, nc*f)
			x := make([]float64, rows*f)
			dz := make([]float64, rows*nc)
			for _, v := range [][]float64{w, g, x, dz} {
				for i := range v {
					v[i] = r()
				}
			}
			wantZ := make([]float64, rows*nc)
			for b := 0; b < rows; b++ {
				for c := 0; c < nc; c++ {
					for j := 0; j < f; j++ {
						wantZ[b*nc+c] += w[c*f+j] * x[b*f+j]
					}
				}
			}
			for _, sp := range [][2]float64{{1, 0}, {0.9, 0}, {0.9, 0.05}} {
				scale, prox := sp[0], sp[1]
				wantW := make([]float64, nc*f)
				for c := 0; c < nc; c++ {
					for j := 0; j < f; j++ {
						v := scale*w[c*f+j] + prox*g[c*f+j]
						for b := 0; b < rows; b++ {
							v += dz[b*nc+c] * x[b*f+j]
						}
						wantW[c*f+j] = v
					}
				}
				for _, k := range kernels {
					z := make([]float64, rows*nc)
					k.logits(f, nc, w, x, rows, z)
					if e := maxAbsDiff(z, wantZ); e > 1e-12 {
						t.Fatalf("%s logits C=%d rows=%d: error %g", k.name, nc, rows, e)
					}
					gotW := append([]float64(nil), w...)
					k.update(f, nc, gotW, x, rows, dz, scale, prox, g)
					if e := maxAbsDiff(gotW, wantW); e > 1e-12 {
						t.Fatalf("%s update C=%d rows=%d scale=%v prox=%v: error %g",
							k.name, nc, rows, scale, prox, e)
					}
				}
			}
		}
	}
}
