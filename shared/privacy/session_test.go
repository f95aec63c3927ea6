package privacy

import (
	"errors"
	"fmt"
	"testing"

	"github.com/blanket-fl/blanket/shared/internal/check"
)

// sessionOver adds releases one by one and returns the last report.
func sessionOver(t *testing.T, rels []Release, delta float64) Report {
	t.Helper()
	s, err := NewSession(delta)
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	for _, r := range rels {
		if s, rep, err = s.With(r); err != nil {
			t.Fatal(err)
		}
	}
	return rep
}

func roundsOf(r Release, n int) []Release {
	out := make([]Release, n)
	for i := range out {
		out[i] = r
		out[i].Round = i + 1
	}
	return out
}

// TestSessionMatchesAccount: the incremental session reports the same
// rows as the full recomputation, valid where Account's are, and with
// epsilons within the grid's slack (the session composes round by round
// on the first round's grid; T = 1, 2, 4 keep the closed forms' δ split
// identical).
func TestSessionMatchesAccount(t *testing.T) {
	cases := map[string]Release{
		"ss-topk":   {Protocol: ProtocolSSTopk, Randomizer: RandomizerLaplace, Eps0: 0.5, D: 7850, K: 157, L: 16, N: 200, NP: 67},
		"ss-simple": {Protocol: ProtocolSSSimple, Randomizer: RandomizerRGB, Buckets: 4, Eps0: 0.3, D: 5, K: 5, N: 500},
		"checkin":   {Protocol: ProtocolCheckIn, Randomizer: RandomizerGeneric, Eps0: 1, D: 1, K: 1, N: 100, Population: 1000, CheckInRate: 0.1},
		"gaussian":  {Protocol: ProtocolCentralGaussian, Randomizer: RandomizerGaussian, D: 10, K: 10, N: 100, NoiseMultiplier: 2},
		"secagg":    {Protocol: ProtocolSecAgg, Randomizer: RandomizerDiscreteGaussian, D: 10, N: 100, SecAggSigma: 40, SecAggSensitivity: 10, CheckInRate: 0.2},
	}
	const delta = 1e-5
	for name, r := range cases {
		for _, T := range []int{1, 2, 4} {
			rels := roundsOf(r, T)
			want, err := Account(rels, delta)
			if err != nil {
				t.Fatalf("%s T=%d: %v", name, T, err)
			}
			got := sessionOver(t, rels, delta)
			if len(got.Rows) != len(want.Rows) {
				t.Fatalf("%s T=%d: %d rows, Account has %d", name, T, len(got.Rows), len(want.Rows))
			}
			for i, w := range want.Rows {
				g := got.Rows[i]
				if g.Method != w.Method || g.Valid != w.Valid || g.Family != w.Family || g.Composition != w.Composition || g.Amplification != w.Amplification || g.Proven != w.Proven {
					t.Errorf("%s T=%d row %d: session %q valid=%v %s/%s/%s, Account %q valid=%v %s/%s/%s (%s)", name, T, i,
						g.Method, g.Valid, g.Family, g.Amplification, g.Composition, w.Method, w.Valid, w.Family, w.Amplification, w.Composition, g.Reason)
					continue
				}
				if w.Valid && (g.Epsilon < 0.97*w.Epsilon || g.Epsilon > 1.03*w.Epsilon+1e-9) {
					t.Errorf("%s T=%d %s: session eps %v, Account %v", name, T, w.Method, g.Epsilon, w.Epsilon)
				}
			}
			if (got.Tightest < 0) != (want.Tightest < 0) {
				t.Errorf("%s T=%d: tightest %d vs %d", name, T, got.Tightest, want.Tightest)
			}
		}
	}
}

// TestSessionImmutable: With leaves the receiver unchanged, so a
// what-if query never charges.
func TestSessionImmutable(t *testing.T) {
	r := Release{Round: 1, Protocol: ProtocolCentralGaussian, Randomizer: RandomizerGaussian, D: 10, K: 10, N: 100, NoiseMultiplier: 2}
	s0, _ := NewSession(1e-5)
	s1, rep1, err := s0.With(r)
	if err != nil {
		t.Fatal(err)
	}
	r.Round = 2
	_, rep2, err := s1.With(r)
	if err != nil {
		t.Fatal(err)
	}
	again := s1.Report()
	if s1.Rounds() != 1 || again.Rows[again.Tightest].Epsilon != rep1.Rows[rep1.Tightest].Epsilon {
		t.Errorf("receiver changed: rounds %d", s1.Rounds())
	}
	if !(rep2.Rows[rep2.Tightest].Epsilon > rep1.Rows[rep1.Tightest].Epsilon) {
		t.Errorf("two rounds %v not above one %v", rep2.Rows[rep2.Tightest].Epsilon, rep1.Rows[rep1.Tightest].Epsilon)
	}
	if _, _, err := s1.With(r); err != nil {
		t.Fatal(err)
	}
	r.Round = 1
	if _, _, err := s1.With(r); !errors.Is(err, ErrInvalidParameter) {
		t.Errorf("repeated round: err %v, want ErrInvalidParameter", err)
	}
}

// TestAccountPropertyGrid is the wide property test of the accountant
// (deterministic, no sampling): one-coordinate SS-Simple rounds of a
// generic ε0-LDP randomizer with ε0 in {1e-3, 0.1, 1, 5, 20, 50}, n in
// {1, 10, 1000, 1e6}, δ in {1e-12, 1e-5, 0.1} (rotating), composed over 1, 2, 10,
// 100 and 1000 rounds by the incremental session. At every step: every
// valid row is finite and at least the exact one-round shuffled
// randomized-response floor (a lower bound for every ε0-LDP shuffle
// bound), positive whenever the floor is; the tightest proven row exists;
// and every row's ε (and the tightest) is non-decreasing in rounds, a
// row that turned invalid never coming back. Composed ε reaches the
// thousands (ε0 = 50 at n = 1: 50,000 after 1000 rounds).
func TestAccountPropertyGrid(t *testing.T) {
	if testing.Short() {
		t.Skip("wide grid")
	}
	steps := []int{1, 1, 8, 90, 900} // cumulative 1, 2, 10, 100, 1000
	deltas := []float64{1e-12, 1e-5, 0.1}
	for i, eps0 := range []float64{1e-3, 0.1, 1, 5, 20, 50} {
		for j, n := range []int{1, 10, 1000, 1000000} {
			// Every (ε0, n) at one δ, the three δ rotating (24 sessions;
			// all 72 take four times as long).
			for _, delta := range []float64{deltas[(i+j)%3]} {
				name := fmt.Sprintf("eps0=%g n=%d delta=%g", eps0, n, delta)
				floor, err := floorShuffledRR(eps0, n, delta)
				if err != nil {
					t.Fatalf("%s: floor: %v", name, err)
				}
				s, err := NewSession(delta)
				if err != nil {
					t.Fatal(err)
				}
				r := Release{Round: 1, Protocol: ProtocolSSSimple, Randomizer: RandomizerGeneric, Eps0: eps0, D: 1, K: 1, N: n}
				prev := map[string]float64{}
				dead := map[string]bool{}
				prevTight := 0.0
				for _, c := range steps {
					var rep Report
					if s, rep, err = s.WithRounds(r, c); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					r.Round += c
					T := s.Rounds()
					if rep.Tightest < 0 {
						t.Fatalf("%s T=%d: no proven row", name, T)
					}
					tight := rep.Rows[rep.Tightest].Epsilon
					if tight < prevTight*(1-1e-9) {
						t.Errorf("%s T=%d: tightest %v below the previous %v", name, T, tight, prevTight)
					}
					prevTight = tight
					for _, row := range rep.Rows {
						key := row.Method
						if T > 1 {
							key = key + "#composed"
						}
						if !row.Valid {
							if _, ok := prev[key]; ok && T > 2 {
								dead[key] = true
							}
							continue
						}
						if dead[key] {
							t.Errorf("%s T=%d: %s valid again after failing", name, T, row.Method)
						}
						if !check.Finite(row.Epsilon) || row.Epsilon < 0 {
							t.Errorf("%s T=%d: %s eps %v", name, T, row.Method, row.Epsilon)
						}
						if row.Epsilon < floor*(1-1e-9) {
							t.Errorf("%s T=%d: %s eps %v below the RR floor %v", name, T, row.Method, row.Epsilon, floor)
						}
						if floor > 0 && row.Epsilon == 0 {
							t.Errorf("%s T=%d: %s eps 0 with floor %v", name, T, row.Method, floor)
						}
						if p, ok := prev[key]; ok && row.Epsilon < p*(1-1e-9) {
							t.Errorf("%s T=%d: %s eps %v below the previous %v", name, T, row.Method, row.Epsilon, p)
						}
						prev[key] = row.Epsilon
					}
				}
				if eps0 == 50 && n == 1 && !(prevTight >= 1000) {
					t.Errorf("%s: 1000 rounds of eps0 = 50 alone give %v, want thousands", name, prevTight)
				}
			}
		}
	}
}

// TestSessionWithAllMatches: composing recorded rounds in one WithAll
// (grouped by contribution, squared) gives the rows of adding them one by
// one, within 1%; the aggregator's padded rounds with varying n group
// into one per-round PLD.
func TestSessionWithAllMatches(t *testing.T) {
	var rels []Release
	for i := 1; i <= 12; i++ {
		r := Release{Round: 2 * i, Protocol: ProtocolSSTopk, Randomizer: RandomizerLaplace, Eps0: 0.5, D: 7850, K: 157, L: 16, N: 190 + i%3, NP: 67 + i%2}
		rels = append(rels, r)
	}
	seq := sessionOver(t, rels, 1e-5)
	s0, _ := NewSession(1e-5)
	half, _, err := s0.WithAll(rels[:5])
	if err != nil {
		t.Fatal(err)
	}
	all, rep, err := half.WithAll(rels[5:])
	if err != nil {
		t.Fatal(err)
	}
	if all.Rounds() != 12 || len(rep.Rows) != len(seq.Rows) {
		t.Fatalf("rounds %d, %d rows vs %d", all.Rounds(), len(rep.Rows), len(seq.Rows))
	}
	for i, w := range seq.Rows {
		g := rep.Rows[i]
		if g.Method != w.Method || g.Valid != w.Valid {
			t.Fatalf("row %d: %q valid=%v vs %q valid=%v", i, g.Method, g.Valid, w.Method, w.Valid)
		}
		if w.Valid && (g.Epsilon < 0.99*w.Epsilon || g.Epsilon > 1.01*w.Epsilon) {
			t.Errorf("%s: WithAll %v, one by one %v", w.Method, g.Epsilon, w.Epsilon)
		}
	}
	if _, _, err := all.WithAll([]Release{rels[0]}); !errors.Is(err, ErrInvalidParameter) {
		t.Errorf("old round accepted: %v", err)
	}
	if g := groupFor(slotPLD, rels); len(g) != 2 {
		t.Errorf("%d PLD groups, want 2 (n_p 67 and 68)", len(g))
	}
}
