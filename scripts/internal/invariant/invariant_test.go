package invariant

import (
	"strings"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/scripts/internal/localrun"
)

func eps(v float64) *float64 { return &v }

// TestLogs: the relay's lines are parsed across split writes; a later
// close of the same round (after a restart) replaces the earlier count.
func TestLogs(t *testing.T) {
	var l Logs
	l.Write([]byte(`time=x level=INFO msg="round closed" round=3 why=deadline population=30 checkedIn=30 reports=28` + "\n" +
		`time=x level=INFO msg="batch persisted" round=3 reports=28 real=560`))
	l.Write([]byte(" dummies=23550 np=3 bytes=1\n"))
	l.Write([]byte(`time=x level=INFO msg="round closed" round=4 why=quota population=30 checkedIn=30 reports=30` + "\n"))
	l.Write([]byte(`time=x level=INFO msg="round closed" round=4 why=deadline population=30 checkedIn=30 reports=12` + "\n"))
	l.Write([]byte(`time=x level=INFO msg="batch persisted" round=4 reports=12 real=240 dummies=1 np=3 bytes=1` + "\n"))
	l.Write([]byte(`time=x level=INFO msg="batch persisted" round=4 reports=12 real=240 dummies=1 np=3 bytes=1` + "\n"))
	l.Write([]byte(`time=x level=INFO msg="round opened" round=5 population=30` + "\n"))
	reports, padded := l.RelayRounds()
	if len(reports) != 2 || reports[3] != 28 || reports[4] != 12 {
		t.Errorf("reports %v, want {3: 28, 4: 12}", reports)
	}
	if len(padded) != 2 || padded[3] != 1 || padded[4] != 2 {
		t.Errorf("padded %v, want {3: 1, 4: 2}", padded)
	}
}

// TestEpsilonWatch: any decrease below the largest ε seen is recorded.
func TestEpsilonWatch(t *testing.T) {
	var w EpsilonWatch
	now := time.Now()
	for i, e := range []float64{0, 0.5, 0.5, 1, 0.9, 1.2} {
		w.Observe(e, i, now)
	}
	d := w.Decreases()
	if len(d) != 1 || !strings.Contains(d[0], "epsilon 0.9 after 1") {
		t.Errorf("decreases %q, want the one from 1 to 0.9", d)
	}
	if last, at := w.Last(); last != 1.2 || !at.Equal(now) {
		t.Errorf("last %v at %v", last, at)
	}
}

// TestCheckRounds: each invariant, broken once, is reported once; lost
// rounds are reported apart.
func TestCheckRounds(t *testing.T) {
	good := []localrun.Round{
		{Round: 1, Status: "ok", N: 30, EpsilonTightest: eps(1)},
		{Round: 2, Status: "aborted"},
		{Round: 3, Status: "ok", N: 28, EpsilonTightest: eps(2)},
	}
	reports := map[int]int{1: 30, 2: 5, 3: 28}
	if res := CheckRounds(good, reports, map[int]int{1: 1, 3: 1}); len(res.Violations) != 0 || len(res.Lost) != 0 {
		t.Fatalf("a clean history fails: %+v", res)
	}
	for _, c := range []struct {
		name    string
		rs      []localrun.Round
		reports map[int]int
		padded  map[int]int
		want    string
	}{
		{"twice", append(good, localrun.Round{Round: 3, Status: "aborted"}), reports, nil, "round 3 recorded twice"},
		{"report lost", good, map[int]int{1: 31, 3: 28}, nil, "round 1: the relay acknowledged 31 complete reports, the aggregator aggregated 30"},
		{"epsilon flat", []localrun.Round{good[0], {Round: 3, Status: "ok", N: 28, EpsilonTightest: eps(1)}}, reports, nil, "round 3: epsilon 1 does not grow from 1"},
		{"epsilon missing", []localrun.Round{{Round: 1, Status: "ok", N: 30}}, reports, nil, "round 1: epsilon none does not grow from 0"},
		{"padded twice", good, reports, map[int]int{1: 1, 3: 2}, "round 3 padded 2 times"},
	} {
		res := CheckRounds(c.rs, c.reports, c.padded)
		if len(res.Violations) != 1 || res.Violations[0] != c.want {
			t.Errorf("%s: violations %q, want [%q]", c.name, res.Violations, c.want)
		}
	}
	res := CheckRounds(append(good, localrun.Round{Round: 4, Status: "lost", N: 30, Detail: "killed"}), reports, nil)
	if len(res.Violations) != 0 || len(res.Lost) != 1 || !strings.Contains(res.Lost[0], "round 4 lost: 30 acknowledged reports") {
		t.Errorf("a lost round: %+v", res)
	}
}

func TestCheckAcked(t *testing.T) {
	rs := []localrun.Round{
		{Round: 1, Status: "ok", N: 20, Reports: 20},
		{Round: 2, Status: "aborted", Detail: "relay restart", Reports: 3},
		{Round: 3, Status: "ok", N: 10, Reports: 10},
		{Round: 4, Status: "abandoned"},
	}
	ok := map[int]int{1: 20, 2: 3, 3: 10, 4: 0, 5: 7} // 2: below the minimum batch; 5: still open
	if v := CheckAcked(rs, ok, 10); len(v) != 0 {
		t.Fatalf("violations %v in a history that lost no acknowledged report", v)
	}
	for name, acked := range map[string]map[int]int{
		"an ok round holding fewer than acknowledged":   {1: 21},
		"an aborted round with a minimum batch of acks": {2: 10},
		"an abandoned round with acks":                  {4: 12},
		"a round never recorded before the last":        {0: 15},
	} {
		if v := CheckAcked(rs, acked, 10); len(v) != 1 {
			t.Errorf("%s: violations %v, want 1", name, v)
		}
	}
}
