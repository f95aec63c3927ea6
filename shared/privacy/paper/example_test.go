package paper_test

import (
	"fmt"

	"github.com/blanket-fl/blanket/shared/privacy/paper"
)

// FLAME's index privacy at n/n_p = 3, β = 1/50 (Theorem 5).
func ExampleStrongestIndexPrivacy() {
	nu, l, err := paper.StrongestIndexPrivacy(333, 1000, 1.0/50)
	fmt.Println(nu, l, err)
	// Output: 3.125 16 <nil>
}
