package experiment

import (
	"fmt"

	"github.com/blanket-fl/blanket/shared/features"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/wire"
)

// A volunteer's upload per secure-summation round (the Shares frame:
// sealed PINE leader and helper shares, roundspec.Spec.SharesSizes and
// wire.SharesSize) for the model of each feature map of the digits: d =
// 10 x features + 10, the round spec the aggregator would announce at
// make run's clip for 400 volunteers (σ does not change the sizes).
func Example_sharesSizeByFeatureMap() {
	for _, name := range features.Names {
		fm, err := features.Parse(name)
		if err != nil {
			fmt.Println(err)
			return
		}
		f, err := fm.Dim(784)
		if err != nil {
			fmt.Println(err)
			return
		}
		d := 10*f + 10
		p, _, err := roundspec.Build(d, 400, roundspec.Options{Protocol: wire.ProtocolSecAgg, Sigma: 1e5, CheckInP: 1, Clip: roundspec.DefaultSecAggClip})
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
		fmt.Printf("%-13s d %5d: Shares frame %6d B\n", name, d, wire.SharesSize(l, h))
	}
	// Output:
	// identity      d  7850: Shares frame  89566 B
	// pool2         d  1970: Shares frame  40526 B
	// pool4         d   500: Shares frame  27774 B
	// scatter       d 39700: Shares frame 349422 B
	// scatter1      d  8340: Shares frame  93614 B
	// scatter-pool  d 12970: Shares frame 131822 B
	// scatter1-pool d  2730: Shares frame  47006 B
}
