package dataset

import (
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"slices"
	"testing"
)

func TestFitStandardizer(t *testing.T) {
	// Feature 0: 1, 2, 3 (mean 2, population std sqrt(2/3)).
	// Feature 1: constant 0.25 (std 1 by convention, mean exact).
	// Feature 2: 0, 0, 1 (mean 1/3, std sqrt(2)/3).
	train := &Set{Features: 3, Classes: 2, Y: []uint8{0, 1, 0}, X: []float32{
		1, 0.25, 0,
		2, 0.25, 0,
		3, 0.25, 1,
	}}
	z, err := FitStandardizer(train)
	if err != nil {
		t.Fatal(err)
	}
	wantMean := []float64{2, 0.25, 1.0 / 3}
	wantStd := []float64{math.Sqrt(2.0 / 3), 1, math.Sqrt(2) / 3}
	for j := range 3 {
		if math.Abs(z.Mean[j]-wantMean[j]) > 1e-12 || math.Abs(z.Std[j]-wantStd[j]) > 1e-12 {
			t.Errorf("feature %d: mean %v std %v, want %v %v", j, z.Mean[j], z.Std[j], wantMean[j], wantStd[j])
		}
	}
	st, err := z.Apply(train)
	if err != nil {
		t.Fatal(err)
	}
	if train.X[0] != 1 {
		t.Error("Apply modified its input")
	}
	// On the training set: each non-constant feature has mean 0 and
	// population variance 1; the constant one is exactly 0.
	for j := range 3 {
		var m, v float64
		for i := range 3 {
			m += float64(st.Row(i)[j]) / 3
		}
		for i := range 3 {
			d := float64(st.Row(i)[j]) - m
			v += d * d / 3
		}
		wantV := 1.0
		if j == 1 {
			wantV = 0
		}
		if math.Abs(m) > 1e-6 || math.Abs(v-wantV) > 1e-6 {
			t.Errorf("standardized feature %d: mean %v variance %v", j, m, v)
		}
	}
	// A test set is mapped with the training statistics, not its own.
	test := &Set{Features: 3, Classes: 2, Y: []uint8{1}, X: []float32{5, 0.75, 1}}
	sz, err := z.Apply(test)
	if err != nil {
		t.Fatal(err)
	}
	want := []float32{float32(3 / math.Sqrt(2.0/3)), 0.5, float32((2.0 / 3) / (math.Sqrt(2) / 3))}
	for j := range want {
		if math.Abs(float64(sz.X[j]-want[j])) > 1e-6 {
			t.Errorf("test feature %d = %v, want %v", j, sz.X[j], want[j])
		}
	}
	// Transform on a row equals Apply.
	row := slices.Clone(test.X)
	if err := z.Transform(row); err != nil || !slices.Equal(row, sz.X) {
		t.Errorf("Transform = %v (%v), Apply = %v", row, err, sz.X)
	}
}

func TestStandardizerErrors(t *testing.T) {
	if _, err := FitStandardizer(&Set{Features: 2, Classes: 1}); !errors.Is(err, ErrArgument) {
		t.Errorf("empty set: %v", err)
	}
	if _, err := FitStandardizer(nil); !errors.Is(err, ErrArgument) {
		t.Errorf("nil set: %v", err)
	}
	good := &Standardizer{Mean: []float64{0, 1}, Std: []float64{1, 2}}
	for _, c := range []struct {
		name string
		z    *Standardizer
	}{
		{"nil", nil},
		{"empty", &Standardizer{}},
		{"length mismatch", &Standardizer{Mean: []float64{0, 1}, Std: []float64{1}}},
		{"zero std", &Standardizer{Mean: []float64{0}, Std: []float64{0}}},
		{"negative std", &Standardizer{Mean: []float64{0}, Std: []float64{-1}}},
		{"NaN std", &Standardizer{Mean: []float64{0}, Std: []float64{math.NaN()}}},
		{"Inf std", &Standardizer{Mean: []float64{0}, Std: []float64{math.Inf(1)}}},
		{"NaN mean", &Standardizer{Mean: []float64{math.NaN()}, Std: []float64{1}}},
	} {
		if err := c.z.Validate(); !errors.Is(err, ErrArgument) {
			t.Errorf("%s: Validate = %v", c.name, err)
		}
		if err := c.z.Transform([]float32{1}); err == nil {
			t.Errorf("%s: Transform succeeded", c.name)
		}
	}
	if err := good.Transform([]float32{1, 2, 3}); !errors.Is(err, ErrArgument) {
		t.Errorf("row of 3 with a 2-feature standardizer: %v", err)
	}
	if _, err := good.Apply(&Set{Features: 3, Classes: 1, X: []float32{1, 2, 3}, Y: []uint8{0}}); !errors.Is(err, ErrArgument) {
		t.Errorf("set of 3 features with a 2-feature standardizer: %v", err)
	}
}

// TestStandardizerBinary: a standardizer survives MarshalBinary and
// UnmarshalStandardizer exactly; a wrong length, feature count, NaN or
// non-positive deviation is refused.
func TestStandardizerBinary(t *testing.T) {
	z := &Standardizer{Mean: []float64{0, 1.5, -2}, Std: []float64{1, 0.25, 3}}
	b, err := z.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	got, err := UnmarshalStandardizer(b, 3)
	if err != nil || !reflect.DeepEqual(got, z) {
		t.Fatalf("%+v, %v", got, err)
	}
	bad := func(mod func([]byte) []byte, features int) {
		t.Helper()
		if _, err := UnmarshalStandardizer(mod(append([]byte(nil), b...)), features); err == nil {
			t.Error("accepted")
		}
	}
	bad(func(b []byte) []byte { return b[:len(b)-1] }, 3)
	bad(func(b []byte) []byte { return b }, 2)
	bad(func(b []byte) []byte { binary.BigEndian.PutUint64(b[4:], math.Float64bits(math.NaN())); return b }, 3)
	bad(func(b []byte) []byte { binary.BigEndian.PutUint64(b[4+24:], math.Float64bits(0)); return b }, 3)
}
