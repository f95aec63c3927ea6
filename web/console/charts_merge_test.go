package console

import "testing"

// TestEpsilonChartMergesCompositionNames: the accountant names a method
// "X" for one round and "X, composed over rounds" afterwards; the chart must
// draw one line for X with a point per round, take the smaller of two
// compositions of the same base, and leave out a method far above the
// tightest.
func TestEpsilonChartMergesCompositionNames(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	rounds := []RoundView{
		{Round: 1, Status: "ok", Epsilon: []EpsilonView{
			{Method: "PLD A", Epsilon: f(10), Tightest: true},
			{Method: "Closed B", Epsilon: f(1000)},
		}},
		{Round: 2, Status: "ok", Epsilon: []EpsilonView{
			{Method: "PLD A, composed over rounds", Epsilon: f(15), Tightest: true},
			{Method: "Closed B, basic composition over rounds", Epsilon: f(2000)},
			{Method: "Closed B, advanced composition over rounds", Epsilon: f(1800)},
		}},
	}
	c := EpsilonChart(rounds, 100)
	if len(c.Series) != 1 || c.Series[0].Name != "PLD A" {
		t.Fatalf("series %+v, want one line for PLD A", c.Series)
	}
	if n := len(c.Series[0].Points); n != 2 {
		t.Errorf("PLD A has %d points, want 2", n)
	}
	if got := c.Series[0].Points[1].Value; got != 15 {
		t.Errorf("round 2 value %v, want 15", got)
	}
	if baseMethod("Closed B, advanced composition over rounds") != "Closed B" {
		t.Error("suffix not stripped")
	}
}
