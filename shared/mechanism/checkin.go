package mechanism

import (
	"fmt"
	"math"

	"github.com/blanket-fl/blanket/shared/noise"
)

// CheckIn is the client side of shuffled check-in (Liu et al., "Shuffled
// Check-in", Algorithm 1): each client decides to take part in a round by
// its own coin with probability p, with no server-side sampling. The
// privacy analysis (their Theorem 1) uses the effective check-in rate
// gamma; with dropouts, gamma = p(1 - p') is to be estimated from the
// realized counts (their Section 3.3), which RoundStats records.
type CheckIn struct {
	p float64
}

// NewCheckIn returns a CheckIn with participation probability p in (0, 1].
func NewCheckIn(p float64) (CheckIn, error) {
	if math.IsNaN(p) || p <= 0 || p > 1 {
		return CheckIn{}, fmt.Errorf("mechanism: check-in probability must lie in (0, 1], got %v", p)
	}
	return CheckIn{p: p}, nil
}

// P returns the participation probability.
func (c CheckIn) P() float64 { return c.p }

// Decide flips the client's Bernoulli(p) coin from its own source. The
// draw is exact up to the 2^-53 resolution of noise.Uniform.
func (c CheckIn) Decide(src noise.Source) bool {
	return noise.Uniform(src) < c.p
}

// Simulate flips the coins of a population of clients (one shared source,
// for simulations; real clients use their own) and returns the indices of
// the clients that checked in, in increasing order, with the round's stats.
func (c CheckIn) Simulate(population int, src noise.Source) ([]int, RoundStats, error) {
	if population < 1 {
		return nil, RoundStats{}, fmt.Errorf("mechanism: population must be >= 1, got %d", population)
	}
	in := make([]int, 0, int(float64(population)*c.p*1.1)+8)
	for i := 0; i < population; i++ {
		if c.Decide(src) {
			in = append(in, i)
		}
	}
	return in, newRoundStats(population, len(in), c.p), nil
}

// RoundStats records one round's check-in: the population asked, the
// realized number of clients that took part (the n the analyzer divides
// by), the configured probability and the empirical rate.
type RoundStats struct {
	Population int
	CheckedIn  int
	P          float64
	Rate       float64 // CheckedIn / Population
}

// newRoundStats builds RoundStats from the realized count, e.g. the number
// of reports that actually reached the relay (dropouts included).
func newRoundStats(population, checkedIn int, p float64) RoundStats {
	rate := 0.0
	if population > 0 {
		rate = float64(checkedIn) / float64(population)
	}
	return RoundStats{Population: population, CheckedIn: checkedIn, P: p, Rate: rate}
}

// empiricalRate pools rounds into the empirical effective check-in rate
// gamma = sum CheckedIn / sum Population, the rate the accountant should
// use in place of p when clients drop out. It returns NaN for no rounds.
func empiricalRate(rounds []RoundStats) float64 {
	in, pop := 0, 0
	for _, r := range rounds {
		in += r.CheckedIn
		pop += r.Population
	}
	if pop == 0 {
		return math.NaN()
	}
	return float64(in) / float64(pop)
}
