package sealkey_test

import (
	"fmt"

	"github.com/blanket-fl/blanket/aggregator/internal/sealkey"
	"github.com/blanket-fl/blanket/shared/envelope"
)

// A client seals a message's values to the announced key for round 12;
// only the aggregator opens them, and only for round 12.
func Example() {
	agg, err := sealkey.GenerateKey()
	if err != nil {
		fmt.Println(err)
		return
	}
	sealed, err := envelope.SealValues(agg.Public().HPKE, 12, []float64{0.25, 0.75})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(sealed) == envelope.SealedLen(2))

	vals, err := agg.OpenValues(12, sealed, make([]float64, 2))
	fmt.Println(vals, err)

	_, err = agg.OpenValues(13, sealed, nil)
	fmt.Println(err != nil)
	// Output:
	// true
	// [0.25 0.75] <nil>
	// true
}
