package secagg

import (
	"errors"
	"testing"
)

// runEngines prepares reps one report at a time through both engines,
// exactly as the two state machines do (PrepInit on arrival, 'P' entry,
// Decide, 'M' entry through its encoding, Next, Fold), and returns both
// running aggregates and the leader's verdicts.
func runEngines(t *testing.T, r *Round, reps []report) (lead, help *Aggregate, verdicts []Entry) {
	t.Helper()
	le, err := NewEngine(r, true, testVK)
	if err != nil {
		t.Fatal(err)
	}
	he, err := NewEngine(r, false, testVK)
	if err != nil {
		t.Fatal(err)
	}
	lead, help = le.NewAggregate(), he.NewAggregate()
	for i, rep := range reps {
		hp := he.PrepInit(rep.helper)
		// The 'P' entry crosses the network in a 'P' message.
		pmsg, err := r.MarshalPrep([]Entry{hp.Entry})
		if err != nil {
			t.Fatal(err)
		}
		pe, err := r.ParsePrep(pmsg)
		if err != nil || len(pe) != 1 {
			t.Fatalf("report %d: P round trip: %v", i, err)
		}
		lp := le.PrepInit(rep.leader)
		m, out := le.Decide(lp, pe[0])
		if (out != nil) != (m.Reason == Accepted) {
			t.Fatalf("report %d: output share %v with verdict %v", i, out != nil, m.Reason)
		}
		if out != nil {
			if err := lead.Fold(out); err != nil {
				t.Fatal(err)
			}
		}
		mmsg, err := r.MarshalVerdicts([]Entry{m})
		if err != nil {
			t.Fatal(err)
		}
		me, err := r.ParseVerdicts(mmsg)
		if err != nil || len(me) != 1 {
			t.Fatalf("report %d: M round trip: %v", i, err)
		}
		hout, err := he.Next(hp, me[0])
		if err != nil {
			t.Fatalf("report %d: helper next: %v", i, err)
		}
		if hout != nil {
			if err := help.Fold(hout); err != nil {
				t.Fatal(err)
			}
		}
		verdicts = append(verdicts, m)
	}
	return lead, help, verdicts
}

// TestEngineMatchesBatch: preparing one report at a time gives exactly
// the batch API's verdicts and sum (honest reports, an over-norm one,
// a tampered helper share), and the persisted running aggregate resumes
// to the same sum.
func TestEngineMatchesBatch(t *testing.T) {
	r := testRound(t, 20, 0, 16, 9)
	honest := honestReports(t, r, 5, 3)
	bad := overNormReport(t, r, 11)
	tampered := honest[4]
	tampered.helper = append([]byte(nil), tampered.helper...)
	tampered.helper[len(tampered.helper)-1] ^= 1
	reps := []report{honest[0], honest[1], bad, honest[2], honest[3], tampered}

	lead, help, verdicts := runEngines(t, r, reps)
	o := prepare(t, r, reps)
	if lead.Count() != o.leaderS.Accepted() || help.Count() != lead.Count() || lead.Count() != 4 {
		t.Fatalf("engine accepted %d/%d, batch %d, want 4", lead.Count(), help.Count(), o.leaderS.Accepted())
	}
	batchRej := map[int]Reason{}
	for _, rj := range o.lrej {
		batchRej[rj.Index] = rj.Reason
	}
	for i, v := range verdicts {
		if v.Reason != batchRej[i] {
			t.Errorf("report %d: engine verdict %v, batch %v", i, v.Reason, batchRej[i])
		}
	}

	// The leader's running aggregate survives a restart.
	b, err := lead.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	back, err := r.ParseAggregate(b)
	if err != nil {
		t.Fatal(err)
	}
	own, err := back.Share()
	if err != nil {
		t.Fatal(err)
	}
	hs, err := help.Share()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := help.Share(); !errors.Is(err, ErrProtocol) {
		t.Fatalf("second Share: %v, want ErrProtocol", err)
	}
	ha, err := hs.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Unshard(own, ha)
	if err != nil {
		t.Fatal(err)
	}
	want := sumOf(20, honest[:4])
	for i := range want {
		if res.Sum[i] != want[i] {
			t.Fatalf("sum[%d] = %d, want %d", i, res.Sum[i], want[i])
		}
	}
}

// TestEngineNextRefusesContradictions: the helper refuses a leader entry
// accepting what it rejected, with another nonce, or with a prep message
// that does not match.
func TestEngineNextRefusesContradictions(t *testing.T) {
	r := testRound(t, 8, 0, 8, 2)
	reps := honestReports(t, r, 2, 5)
	le, _ := NewEngine(r, true, testVK)
	he, _ := NewEngine(r, false, testVK)
	hp := he.PrepInit(reps[0].helper)
	lp := le.PrepInit(reps[0].leader)
	m, _ := le.Decide(lp, hp.Entry)
	if m.Reason != Accepted {
		t.Fatalf("honest report %v", m.Reason)
	}
	other := he.PrepInit(reps[1].helper)
	if _, err := he.Next(other, m); !errors.Is(err, ErrProtocol) {
		t.Errorf("another nonce: %v", err)
	}
	rejected := he.PrepInit(reps[0].helper[:10])
	if _, err := he.Next(rejected, m); !errors.Is(err, ErrProtocol) {
		t.Errorf("accepting a rejected report: %v", err)
	}
	forged := m
	forged.Payload = make([]byte, len(m.Payload))
	if _, err := he.Next(hp, forged); !errors.Is(err, ErrProtocol) {
		t.Errorf("forged prep message: %v", err)
	}
	if out, err := he.Next(hp, m); err != nil || out == nil {
		t.Errorf("genuine entry: %v", err)
	}
}

func TestParseAggregateStrict(t *testing.T) {
	r := testRound(t, 8, 0, 8, 2)
	e, _ := NewEngine(r, true, testVK)
	b, err := e.NewAggregate().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]byte{b[:len(b)-1], append(append([]byte(nil), b...), 0), nil} {
		if _, err := r.ParseAggregate(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("%d bytes: %v", len(bad), err)
		}
	}
	other := testRound(t, 8, 0, 8, 3)
	if _, err := other.ParseAggregate(b); !errors.Is(err, ErrMalformed) {
		t.Errorf("another round's aggregate: %v", err)
	}
}
