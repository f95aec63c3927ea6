package noise

import (
	"testing"

	"github.com/blanket-fl/blanket/shared/internal/stattest"
)

// The statistical helpers live in shared/internal/stattest, shared with the
// other sampler tests.
var (
	chiSquareCritical = stattest.ChiSquareCritical
	chiSquare         = stattest.ChiSquare
	ksDistance        = stattest.KSDistance
	dkwBound          = stattest.DKWBound
	laplaceCDF        = stattest.LaplaceCDF
	normalCDF         = stattest.NormalCDF
)

// scripted is a Source replaying fixed words, for exact boundary tests.
type scripted struct {
	t     *testing.T
	words []uint64
	i     int
}

func (s *scripted) Uint64() uint64 {
	if s.i >= len(s.words) {
		s.t.Fatalf("scripted source exhausted after %d words", s.i)
		return 0
	}
	w := s.words[s.i]
	s.i++
	return w
}
