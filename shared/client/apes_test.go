package client

import (
	"math"
	"testing"

	"github.com/blanket-fl/blanket/shared/wire"
)

// TestAPESReport: under APES a volunteer at privacy level f sends its D
// coordinates and one budget message (index D) as D+1 width-1 Report
// frames, opens to its level f in the budget column, and its local
// guarantee is f·EpsL.
func TestAPESReport(t *testing.T) {
	k := testKey(t, 1)
	c, log := newTestClient(t, k, 2, 10)
	c.personal = 0.25
	relay, stop := startClient(t, c)
	defer stop()
	p := testParams(1)
	p.Protocol, p.Randomizer, p.K, p.EpsL = wire.ProtocolAPES, wire.RandomizerClipLaplace, p.D, 2*float64(p.D)
	relay.send(announce(t, k, 1, p))
	reps := relay.expectReport(1, p)
	if len(reps) != int(p.D)+1 {
		t.Fatalf("%d report frames, want %d", len(reps), p.D+1)
	}
	seen := make([]bool, p.D+1)
	for _, r := range reps {
		seen[r.Indices[0]] = true
		vals := make([]float64, 1)
		if _, err := k.OpenValues(1, r.Sealed, vals); err != nil {
			t.Fatal(err)
		}
		if r.Indices[0] == p.D && vals[0] != 0.25 {
			t.Errorf("budget column carries %v, want the level 0.25", vals[0])
		}
		if !(vals[0] >= 0 && vals[0] <= 1) {
			t.Errorf("value %v outside [0, 1]", vals[0])
		}
	}
	for j, s := range seen {
		if !s {
			t.Errorf("column %d missing", j)
		}
	}
	waitFor(t, "sent", func() bool { return log.count(EventSent) == 1 })
	if e := log.of(EventAnnouncement)[0].LocalEps; math.Abs(e-0.25*p.EpsL) > 1e-9 {
		t.Errorf("local epsilon %v, want %v", e, 0.25*p.EpsL)
	}
}
