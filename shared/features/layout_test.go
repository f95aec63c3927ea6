package features

import "testing"

// TestLayoutOf: every named map's layout for a 28 x 28 digit multiplies
// out to its Dim, with the channels and sides the maps are documented to
// give (scatter1: 17 x 7 x 7, scatter: 81 x 7 x 7, the pooled scatterings
// 4 x 4 per channel); an input a map refuses, and a map of unknown kind,
// have none.
func TestLayoutOf(t *testing.T) {
	want := map[string]Layout{"identity": {1, 28, 28}, "pool2": {1, 14, 14}, "pool4": {1, 7, 7}, "scatter": {81, 7, 7},
		"scatter1": {17, 7, 7}, "scatter-pool": {81, 4, 4}, "scatter1-pool": {17, 4, 4}}
	for _, name := range Names {
		m, err := Parse(name)
		if err != nil {
			t.Fatal(err)
		}
		l, ok := LayoutOf(m, 784)
		d, err := m.Dim(784)
		if !ok || err != nil || l.Size() != d || l != want[name] {
			t.Errorf("%s: layout %+v (%v), dim %d (%v), want %+v", name, l, ok, d, err, want[name])
		}
		if _, ok := LayoutOf(m, 783); ok {
			t.Errorf("%s: a layout for an input of 783 values", name)
		}
	}
	if _, ok := LayoutOf(Chain{}, 784); ok {
		t.Error("a layout for an empty chain")
	}
	if _, ok := LayoutOf(odd{}, 784); ok {
		t.Error("a layout for a map of unknown kind")
	}
}

// odd is a map this package does not know.
type odd struct{}

func (odd) Dim(in int) (int, error)        { return in, nil }
func (odd) Apply(dst, src []float64) error { copy(dst, src); return nil }
