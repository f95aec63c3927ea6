package counts_test

import (
	"fmt"

	"github.com/blanket-fl/blanket/shared/counts"
)

// Example_sizes prints each block's PINE parameters, upload and the
// worst influence of an accepted cheater per count (docs/counts.md).
func Example_sizes() {
	ev, _ := counts.NewEval(100)
	blocks := []*counts.Block{ev}
	for _, k := range []int{2, 3, 4, 5, 10} {
		q, _ := counts.NewQuestion(k)
		blocks = append(blocks, q)
	}
	for _, b := range blocks {
		p := b.Pine()
		lo, hi := b.Influence()
		name := fmt.Sprintf("eval R=%d", b.Rows())
		if b.Kind() == counts.KindQuestion {
			name = fmt.Sprintf("question k=%d", b.Options())
		}
		fmt.Printf("%-15s d %2d  f %d  B %4.0f  upload %5d B  influence per count [%.3f, %.3f]\n",
			name, b.Dim(), p.Config().NumFracBits, b.Sensitivity(),
			p.LeaderShareSize()+p.HelperShareSize()+p.PublicShareSize(), lo, hi)
	}
	// Output:
	// eval R=100      d  2  f 1  B  283  upload 15800 B  influence per count [-20.750, 120.750]
	// question k=2    d  1  f 8  B  256  upload 15776 B  influence per count [0.000, 1.000]
	// question k=3    d  3  f 8  B  444  upload 15840 B  influence per count [-0.501, 1.001]
	// question k=4    d  3  f 8  B  444  upload 15840 B  influence per count [-0.501, 1.001]
	// question k=5    d  7  f 7  B  339  upload 15920 B  influence per count [-0.751, 1.001]
	// question k=10   d 15  f 7  B  496  upload 16976 B  influence per count [-0.875, 1.000]
}
