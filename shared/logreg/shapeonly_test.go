package logreg

import "testing"

// TestShapeOnly: a Dataset of no examples carries its shape (a task
// without a public holdout) and nothing is ever evaluated on it.
func TestShapeOnly(t *testing.T) {
	s := Shape{Features: 12, Classes: 5}
	d, err := ShapeOnly(s)
	if err != nil || d.Shape() != s || d.Len() != 0 {
		t.Fatalf("ShapeOnly: %+v, %d rows: %v", d.Shape(), d.Len(), err)
	}
	params := make([]float64, s.NumParams())
	if _, err := Accuracy(params, d); err == nil {
		t.Error("accuracy on no examples")
	}
	if _, err := Loss(params, d, 0); err == nil {
		t.Error("loss on no examples")
	}
	if _, err := ShapeOnly(Shape{Features: 3, Classes: 1}); err == nil {
		t.Error("an invalid shape was accepted")
	}
}
