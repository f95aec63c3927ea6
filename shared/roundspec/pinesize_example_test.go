package roundspec_test

import (
	"fmt"

	"github.com/blanket-fl/blanket/aggregator/lab/sumvec"
	"github.com/blanket-fl/blanket/shared/envelope"
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
	// The Prio3 SumVec baseline (10 bits, the former default; the lab's
	// aggregator/lab/sumvec) at the same d.
	sp, err := sumvec.NewParams(7850, roundspec.DefaultSecAggClip, roundspec.DefaultBits, 1e3, 400)
	if err != nil {
		fmt.Println(err)
		return
	}
	r, err := sumvec.NewRound(sp, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	sl, sh := envelope.ShareSealedLen(r.LeaderShareSize()), envelope.ShareSealedLen(r.HelperShareSize())
	fmt.Printf("sumvec baseline: Shares frame %d B\n", wire.SharesSize(sl, sh))
	// Output:
	// leader 89218 B, helper 330 B, Shares frame 89566 B
	// sumvec baseline: Shares frame 1338454 B
}
