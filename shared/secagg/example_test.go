package secagg_test

import (
	"bytes"
	"fmt"

	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/secagg"
)

// One round with three volunteers, one of whom sends a share that was
// altered in transit. Production code passes noise.Secure() everywhere
// the example passes seeded sources.
func Example() {
	p, err := secagg.NewPineParams(8, 1.0, 4, 100) // d=8, clip 1, sigma 4
	if err != nil {
		fmt.Println(err)
		return
	}
	round, _ := secagg.NewRound(p, 42)
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

	verifyKey := bytes.Repeat([]byte{1}, secagg.VerifyKeySize) // shared by the servers
	helper, _ := secagg.NewHelper(round, verifyKey)
	leader, _ := secagg.NewLeader(round, verifyKey)
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
	// rejected report 2 - invalid proof
	// sensitivity 32771.0, mean has 8 coordinates
}
