package rdp

import (
	"math"
	"testing"

	"github.com/blanket-fl/blanket/shared/privacy/amplify"
)

// TestPairRDPBinned: the binned curve is never below the exact PairRDP and
// exceeds it by at most its documented chord bound
// log(1 + (alpha s)^2/8)/(alpha-1), s = loss range / bins, on the FMT'23
// pair (n = 2000, eps0 = 1) and the check-in pair (n = 5000, rate 0.1,
// eps0 = 2), at 64 and 4096 cells.
func TestPairRDPBinned(t *testing.T) {
	orders := append([]float64{1.25, 1.5}, IntegerOrders(256)...)
	fmt23, err := amplify.FMT23Pair(2000, 1, amplify.PairOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkIn, err := checkInPair(5000, 0.1, 2, amplify.PairOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]*amplify.Pair{"fmt23": fmt23, "checkin": checkIn} {
		exact, err := PairRDP(p, orders)
		if err != nil {
			t.Fatal(err)
		}
		lmin, lmax := math.Inf(1), math.Inf(-1)
		for i, v := range p.LogP {
			if !math.IsInf(v, -1) {
				l := v - p.LogQ[i]
				lmin, lmax = math.Min(lmin, l), math.Max(lmax, l)
			}
		}
		for _, bins := range []int{64, 4096} {
			got, err := PairRDPBinned(p, orders, bins)
			if err != nil {
				t.Fatal(err)
			}
			s := (lmax - lmin) / float64(bins)
			for i, a := range orders {
				bound := math.Log1p(a*a*s*s/8) / (a - 1)
				if got.Eps[i] < exact.Eps[i]*(1-1e-12)-1e-15 || got.Eps[i] > exact.Eps[i]+bound+1e-12 {
					t.Errorf("%s bins=%d order %v: binned %v, exact %v, bound +%v", name, bins, a, got.Eps[i], exact.Eps[i], bound)
				}
			}
		}
	}
	if _, err := PairRDPBinned(fmt23, orders, 0); err == nil {
		t.Error("bins = 0 accepted")
	}
}
