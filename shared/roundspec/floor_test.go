package roundspec

import (
	"errors"
	"testing"
)

// TestFloorCheck: the effective minimum is the larger of the announced and
// the server's own (an announcement never lowers it), and a round where
// more than the stated share of reports failed is refused; the boundary
// (exactly the share) is allowed.
func TestFloorCheck(t *testing.T) {
	f := Floor{MinBatch: 10, MaxRejectedShare: 0.5}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ann, acc, rej int
		want          error
	}{
		{1, 1, 399, ErrBelowFloor},        // the n − 1 attack with a minimum batch of 1 announced
		{1, 9, 0, ErrBelowFloor},          // the announcement cannot lower the server's own floor
		{20, 15, 0, ErrBelowFloor},        // nor can the server's floor lower the announced one
		{1, 10, 0, nil},                   //
		{1, 200, 200, nil},                // exactly half rejected
		{1, 200, 201, ErrTooManyRejected}, // more than half
		{1, 12, 388, ErrTooManyRejected},  // above the floor, but most reports "failed"
		{0, 0, 0, ErrBelowFloor},
	} {
		err := f.Check(c.ann, c.acc, c.rej)
		if (c.want == nil) != (err == nil) || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("Check(%d, %d, %d) = %v, want %v", c.ann, c.acc, c.rej, err, c.want)
		}
	}
	for _, bad := range []Floor{{0, 0.5}, {1, 1}, {1, -0.1}, {1, 2}} {
		if bad.Validate() == nil {
			t.Errorf("%+v validated", bad)
		}
	}
}
