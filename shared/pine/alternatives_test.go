package pine

import (
	"fmt"
	"math"
)

// Example_alternatives prints the cost of the choices docs/pine.md
// weighs at d = 7850, clip 1: the grid (num_frac_bits), the number of
// wraparound checks and the numbers of proofs. Upload is public + leader
// + helper share; "delta/clip" is Sensitivity in model units over the
// clip (the rounding overhead the noise must cover).
func Example_alternatives() {
	const d = 7850
	variant := func(name string, f, wr, proofs, proofsNE int) {
		b := math.Ceil(math.Ldexp(1, f)+math.Sqrt(d)/2) + 1
		cfg := Config{
			Dimension: d, NumFracBits: f, L2NormBound: uint64(b), Proofs: proofs,
			ProofsNormEquality: proofsNE, NumWrChecks: wr, NumWrSuccesses: wr, Alpha: 8.7,
			ID: Pine64HmacSha256Aes128ID, ChunkLength: 1, ChunkLengthNormEquality: 1,
		}
		p, err := New(cfg)
		if err != nil {
			fmt.Println(name, err)
			return
		}
		cfg.ChunkLengthNormEquality = bestChunk(d, 1)
		cfg.ChunkLength = bestChunkMain(p.bitCheckedLen, wr)
		if p, err = New(cfg); err != nil {
			fmt.Println(name, err)
			return
		}
		s := p.Soundness()
		fmt.Printf("%-22s upload %6d B, meas %5d elems, log2 err/report %6.1f, /attempt %6.1f, delta/clip %.5f\n",
			name, p.PublicShareSize()+p.LeaderShareSize()+p.HelperShareSize(), p.measLen,
			s.PerReport, s.PerAttempt, p.Sensitivity()/p.Scale())
	}
	variant("blanket f=15 100 3+2", 15, 100, 3, 2)
	variant("f=10", 10, 100, 3, 2)
	variant("f=20", 20, 100, 3, 2)
	variant("f=24", 24, 100, 3, 2)
	variant("64 wr checks", 15, 64, 3, 2)
	variant("reference 2+1 proofs", 15, 100, 2, 1)
	// Output:
	// blanket f=15 100 3+2   upload  89272 B, meas 10012 elems, log2 err/report -114.0, /attempt -100.0, delta/clip 1.00140
	// f=10                   upload  84536 B, meas  9492 elems, log2 err/report -114.0, /attempt -100.0, delta/clip 1.04492
	// f=20                   upload  93816 B, meas 10532 elems, log2 err/report -114.0, /attempt -100.0, delta/clip 1.00004
	// f=24                   upload  97432 B, meas 10948 elems, log2 err/report -114.0, /attempt -100.0, delta/clip 1.00000
	// 64 wr checks           upload  82264 B, meas  9256 elems, log2 err/report -114.0, /attempt  -64.0, delta/clip 1.00140
	// reference 2+1 proofs   upload  85648 B, meas 10012 elems, log2 err/report  -57.0, /attempt -100.0, delta/clip 1.00140
}
