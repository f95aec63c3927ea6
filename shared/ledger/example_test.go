package ledger_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/blanket-fl/blanket/shared/ledger"
	"github.com/blanket-fl/blanket/shared/privacy"
)

// Charge a round before releasing it; a refused round must not be released.
func ExampleLedger_Charge() {
	dir, _ := os.MkdirTemp("", "ledger")
	defer os.RemoveAll(dir)

	// Basic composition of pure eps0-DP rounds: the sum of the eps0 (a
	// valid but loose bound; the aggregator injects privacy.Account).
	basic := func(rs []privacy.Release, _ float64) (float64, string, error) {
		var eps float64
		for _, r := range rs {
			eps += r.Eps0
		}
		return eps, "basic", nil
	}
	l, err := ledger.Open(filepath.Join(dir, "ledger.jsonl"), ledger.Options{
		TargetEpsilon: 1, TargetDelta: 1e-6, Composer: basic,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()

	for round := 1; round <= 3; round++ {
		rel := privacy.Release{
			Round: round, Protocol: privacy.ProtocolLocal, Randomizer: privacy.RandomizerLaplace,
			Eps0: 0.4, D: 10, K: 10, N: 1000,
		}
		if err := l.Charge(rel); errors.Is(err, ledger.ErrBudgetExhausted) {
			fmt.Printf("round %d refused: %v\n", round, err)
			break
		} else if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("round %d charged, release it\n", round)
	}
	eps, delta, method := l.Spent()
	fmt.Printf("spent (%.1f, %g) by %s\n", eps, delta, method)
	// Output:
	// round 1 charged, release it
	// round 2 charged, release it
	// round 3 refused: ledger: privacy budget exhausted: round 3 would bring epsilon to 1.2000000000000002 (basic) at delta 1e-06, target 1
	// spent (0.8, 1e-06) by basic
}
