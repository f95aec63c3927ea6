package privacy

import (
	"fmt"
	"testing"
)

// defaultRelease is the aggregator's default round (SS-Topk, Laplace,
// d = 7850, k = 157, l = 16, n = 200 padded to n_p = 67).
func defaultRelease(round, np int) Release {
	return Release{Round: round, Protocol: ProtocolSSTopk, Randomizer: RandomizerLaplace, Eps0: 0.5, D: 7850, K: 157, L: 16, N: 200, NP: np}
}

// BenchmarkCharge300 measures one charge at round 300, side by side:
// "session" composes round 300 onto the Session of rounds 1..299 (built
// before the timer); "account" is today's full recomputation of all 300
// rounds by Account. Two workloads: every round at n_p = 67 ("same-np",
// the aggregator's padded rounds), and n_p cycling over 8 values
// ("np-cycle-8", realized padding varying; per-round PLDs cached). Run:
//
//	go test ./shared/privacy/ -run '^$' -bench Charge300 -benchtime 3x
func BenchmarkCharge300(b *testing.B) {
	for _, w := range []struct {
		name string
		np   func(round int) int
	}{
		{"same-np", func(int) int { return 67 }},
		{"np-cycle-8", func(r int) int { return 64 + r%8 }},
	} {
		rels := make([]Release, 300)
		for i := range rels {
			rels[i] = defaultRelease(i+1, w.np(i+1))
		}
		b.Run(fmt.Sprintf("%s/session", w.name), func(b *testing.B) {
			s, err := NewSession(1e-5)
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range rels[:299] {
				if s, _, err = s.With(r); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for b.Loop() {
				if _, _, err := s.With(rels[299]); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("%s/account", w.name), func(b *testing.B) {
			for b.Loop() {
				if _, err := Account(rels, 1e-5); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
