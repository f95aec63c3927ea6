package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// TestSeriesReadTheSnapshot: each scrape reads the counters as they are
// (one bookkeeping), labelled families carry the snapshot's map keys,
// counters end in _total, and the runtime's series are only in the
// registry asked for them.
func TestSeriesReadTheSnapshot(t *testing.T) {
	m := New([]string{"malformed", "duplicate"}, []string{"forwarded", "failed"}, []string{"helper_unopened"})
	src := func() Snapshot { return m.Snapshot() }
	reg := Registry(src, false)
	value := func(name, label string) float64 {
		t.Helper()
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			if f.GetName() != Prefix+name {
				continue
			}
			for _, mt := range f.GetMetric() {
				if label == "" || (len(mt.GetLabel()) == 1 && mt.GetLabel()[0].GetValue() == label) {
					if f.GetType() == dto.MetricType_COUNTER {
						return mt.GetCounter().GetValue()
					}
					return mt.GetGauge().GetValue()
				}
			}
		}
		t.Fatalf("no series %s{%s}", name, label)
		return 0
	}
	if v := value("frames_received_total", ""); v != 0 {
		t.Fatalf("received %v", v)
	}
	m.Received.Add(3)
	m.Reject("duplicate")
	m.ConnsOpen.Add(2)
	m.SecAggRound("failed")
	m.SetLast(RoundReport{Round: 7, Reports: 5})
	for _, c := range []struct {
		name, label string
		want        float64
	}{
		{"frames_received_total", "", 3}, {"frames_rejected_total", "duplicate", 1}, {"frames_rejected_total", "malformed", 0},
		{"connections", "", 2}, {"secagg_rounds_total", "failed", 1}, {"secagg_rounds_total", "forwarded", 0},
		{"last_round", "", 7}, {"last_round_reports", "", 5}, {"frames_accepted_total", "shares", 0},
	} {
		if v := value(c.name, c.label); v != c.want {
			t.Errorf("%s{%s} = %v, want %v", c.name, c.label, v, c.want)
		}
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n < len(Series) {
		t.Errorf("%d series (%v)", n, err)
	}
	for _, s := range Series {
		if (s.typ == prometheus.CounterValue) != strings.HasSuffix(s.name, "_total") {
			t.Errorf("%s: counters and only counters end in _total", s.name)
		}
	}
	names := func(runtime bool) string {
		fams, err := Registry(src, runtime).Gather()
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, f := range fams {
			b.WriteString(f.GetName() + " ")
		}
		return b.String()
	}
	if pub := names(false); strings.Contains(pub, "go_") || strings.Contains(pub, "process_") {
		t.Errorf("the public registry has runtime series: %s", pub)
	}
	if ops := names(true); !strings.Contains(ops, "go_goroutines") || !strings.Contains(ops, Prefix+"frames_received_total") {
		t.Errorf("the operator's registry lacks the runtime's or the relay's series: %s", ops)
	}
}
