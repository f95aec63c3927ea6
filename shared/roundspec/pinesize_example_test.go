package roundspec_test

import (
	"fmt"

	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/wire"
)

// A volunteer's upload per secure-summation round at d = 7850 (MNIST):
// the Shares frame with the sealed PINE leader share (measurement and
// proofs, Field64) and the sealed helper share (four 32-byte seeds).
func ExampleSpec_SharesSizes() {
	p, _, err := roundspec.Build(7850, 200, roundspec.Options{Protocol: wire.ProtocolSecAgg, Sigma: 1e5, CheckInP: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	spec, err := roundspec.New(p)
	if err != nil {
		fmt.Println(err)
		return
	}
	l, h, err := spec.SharesSizes()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("leader %d B, helper %d B, Shares frame %d B\n", l, h, wire.SharesSize(l, h))
	// Output:
	// leader 89218 B, helper 330 B, Shares frame 89566 B
}
