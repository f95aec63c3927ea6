package shuffler

import (
	"testing"
	"time"

	"github.com/blanket-fl/blanket/shared/envelope/envelopetest"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/wire"
)

// TestAPESBuild: an APES round's batch has D+1 columns (index D, the budget
// column, included) each exactly n_p times after a round trip through
// wire.ParseBatch; with every report complete and n_p announced below the
// report count nothing is added; with fewer reports than n_p the dummies
// are virtual volunteers at the largest level: admissible values in the
// value columns and level 1 in the budget column — also when a pre-sealed
// pool (blanket draws, value columns only) supplies some of them.
func TestAPESBuild(t *testing.T) {
	key, err := envelopetest.DeriveKey([32]byte{2})
	if err != nil {
		t.Fatal(err)
	}
	pub := key.Public().HPKE
	p := wire.Params{Protocol: wire.ProtocolAPES, Randomizer: wire.RandomizerClipLaplace, D: 4, K: 4, L: 1, Width: 1,
		NP: 3, MinBatch: 1, EpsL: 8, Clip: 1, CheckInP: 1}
	report := func() [][]uint32 { return [][]uint32{{0}, {1}, {2}, {3}, {4}} }
	for _, tc := range []struct {
		reports, np, dummies int
		pool                 bool
	}{{4, 4, 0, false}, {2, 3, 5, false}, {1, 3, 10, true}} {
		var real []wire.BatchMessage
		for range tc.reports {
			real = append(real, realMessages(t, pub, 5, report(), 0.5)...)
		}
		r := Round{Round: 5, Params: p, HPKEPub: pub, Reports: uint32(tc.reports), CheckedIn: uint32(tc.reports), Population: 9}
		var pool *Pool
		if tc.pool {
			// As many blocks as dummies: the two budget-column ones
			// must not take one.
			if pool, err = NewPool(r, noise.NewSeeded(4), 10); err != nil {
				t.Fatal(err)
			}
			for pool.Sealed() < 10 {
				time.Sleep(time.Millisecond)
			}
		}
		b, st, err := BuildFrom(r, real, noise.NewSeeded(3), 1, pool)
		if err != nil {
			t.Fatal(err)
		}
		enc, err := b.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		pb, err := wire.ParseBatch(enc, p)
		if err != nil {
			t.Fatalf("%d reports: ParseBatch: %v", tc.reports, err)
		}
		if int(pb.NP) != tc.np || pb.D != 5 || st.DummyMessages != tc.dummies {
			t.Fatalf("%d reports: n_p %d, d %d, %d dummies (stats %+v)", tc.reports, pb.NP, pb.D, st.DummyMessages, st)
		}
		ones := 0
		for _, m := range pb.Messages {
			v, err := key.OpenValues(5, m.Sealed, nil)
			if err != nil {
				t.Fatal(err)
			}
			if v[0] < 0 || v[0] > 1 {
				t.Fatalf("value %v outside [0, 1] in column %d", v[0], m.Indices[0])
			}
			if m.Indices[0] == 4 && v[0] == 1 {
				ones++
			} else if m.Indices[0] == 4 && v[0] != 0.5 {
				t.Fatalf("budget column carries %v", v[0])
			}
		}
		if ones != tc.np-tc.reports {
			t.Errorf("%d reports: %d budget dummies at level 1, want %d", tc.reports, ones, tc.np-tc.reports)
		}
	}
}
