package sumvec_test

import (
	"bytes"
	"fmt"

	"github.com/blanket-fl/blanket/aggregator/lab/sumvec"
	"github.com/blanket-fl/blanket/shared/noise"
)

// One round with three volunteers, one of whom sends a share that was
// altered in transit. Production code passes noise.Secure() everywhere
// the example passes seeded sources.
func Example() {
	p, err := sumvec.NewParams(8, 1.0, 8, 4, 100) // d=8, clip 1, 8 bits, sigma 4
	if err != nil {
		fmt.Println(err)
		return
	}
	round, _ := sumvec.NewRound(p, 42)
	var leaderShares, helperShares [][]byte
	for i := range 3 {
		update := []float64{0.5, -0.5, 0.1, 0, 0, 0, 0, float64(i) / 10}
		l, h, err := round.Shard(update, noise.NewSeeded(uint64(i)))
		if err != nil {
			fmt.Println(err)
			return
		}
		leaderShares, helperShares = append(leaderShares, l), append(helperShares, h)
	}
	helperShares[2] = bytes.Clone(helperShares[2])
	helperShares[2][len(helperShares[2])-1] ^= 1

	verifyKey := bytes.Repeat([]byte{1}, sumvec.VerifyKeySize) // shared by the servers
	helper, _ := sumvec.NewHelper(round, verifyKey)
	leader, _ := sumvec.NewLeader(round, verifyKey)
	prepShares, _, _ := helper.Prepare(helperShares)
	_, _ = leader.Prepare(leaderShares)
	prepMessages, rejected, _ := leader.Combine(prepShares)
	_, _ = helper.Finish(prepMessages)

	ha, _ := helper.AggregateShare()
	_ = ha.AddNoise(noise.NewSeeded(100))
	helperAgg, _ := ha.MarshalBinary()
	la, _ := leader.AggregateShare()
	_ = la.AddNoise(noise.NewSeeded(101))
	res, err := leader.Unshard(la, helperAgg)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("accepted:", res.Count, "noise shares:", res.NoiseShares)
	for _, r := range rejected {
		fmt.Println("rejected report", r.Index, "-", r.Reason)
	}
	fmt.Printf("sensitivity %.1f, mean has %d coordinates\n", p.Sensitivity(), len(res.Mean))
	// Output:
	// accepted: 2 noise shares: 2
	// rejected report 2 - joint randomness mismatch
	// sensitivity 129.6, mean has 8 coordinates
}
