package privacy

import (
	"fmt"

	"github.com/blanket-fl/blanket/shared/internal/check"
	"github.com/blanket-fl/blanket/shared/privacy/amplify"
)

// floorShuffledRR returns the exact central ε, at δ = delta, of shuffling n
// reports of binary ε0-randomized response with every other user holding
// the same bit (amplify.RRFloor: the maximum over both orders of the
// neighbouring pair). It is a LOWER bound, not a guarantee: it is the
// privacy curve of one real ε0-LDP protocol on one pair of neighbouring
// datasets (replace-one), so no shuffle amplification bound that claims to
// hold for every ε0-LDP randomizer can certify a smaller ε at the same n
// and δ. Account's numerical rows are tested against it.
func floorShuffledRR(eps0 float64, n int, delta float64) (float64, error) {
	if err := check.Positive(ErrInvalidParameter, "eps0", eps0); err != nil {
		return 0, err
	}
	if err := check.Count(ErrInvalidParameter, "n", n, 1); err != nil {
		return 0, err
	}
	if err := check.OpenUnit(ErrInvalidParameter, "delta", delta); err != nil {
		return 0, err
	}
	f, err := amplify.NewRRFloor(n, eps0)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrInvalidParameter, err)
	}
	return f.Epsilon(delta)
}
