package pine_test

import (
	"fmt"

	"github.com/blanket-fl/blanket/shared/pine"
)

// The parameters Blanket uses at the MNIST size (d = 7850, clip 1), as
// docs/pine.md quotes them.
func ExampleForBlanket() {
	p, err := pine.ForBlanket(7850, 1)
	if err != nil {
		panic(err)
	}
	c := p.Config()
	s := p.Soundness()
	upload := p.PublicShareSize() + p.LeaderShareSize() + p.HelperShareSize()
	fmt.Printf("num_frac_bits %d, l2_norm_bound %d (sensitivity %.5f model units)\n",
		c.NumFracBits, c.L2NormBound, p.Sensitivity()/p.Scale())
	fmt.Printf("chunk lengths %d (main), %d (norm equality); proofs %d + %d\n",
		c.ChunkLength, c.ChunkLengthNormEquality, c.Proofs, c.ProofsNormEquality)
	fmt.Printf("wraparound checks %d of %d, alpha %.1f\n", c.NumWrSuccesses, c.NumWrChecks, c.Alpha)
	fmt.Printf("upload %d bytes (leader %d, helper %d, public %d)\n",
		upload, p.LeaderShareSize(), p.HelperShareSize(), p.PublicShareSize())
	fmt.Printf("prep share %d bytes, prep message %d bytes\n", p.PrepShareSize(), p.PrepMsgSize())
	fmt.Printf("log2 soundness: per report %.1f, per grinding attempt %.1f, honest retry %.1f\n",
		s.PerReport, s.PerAttempt, s.HonestRetry)
	// Output:
	// num_frac_bits 15, l2_norm_bound 32814 (sensitivity 1.00140 model units)
	// chunk lengths 37 (main), 125 (norm equality); proofs 3 + 2
	// wraparound checks 100 of 100, alpha 8.7
	// upload 89272 bytes (leader 89016, helper 128, public 128)
	// prep share 3920 bytes, prep message 64 bytes
	// log2 soundness: per report -114.0, per grinding attempt -100.0, honest retry -101.6
}
