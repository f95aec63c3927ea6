package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"regexp"
	"sort"
	"sync"
	"testing"
	"time"
)

// snakeKey is the casing of every JSON field and log attribute key of the
// relay, as of the aggregator's: lowercase words joined by '_'.
var snakeKey = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// keyCheck is a slog.Handler that discards records but remembers every
// attribute key that is not snake_case; the harness logs through it, so
// every relay test checks the keys of what the relay logs.
type keyCheck struct {
	mu  *sync.Mutex
	bad map[string]string // key -> message
	pre []slog.Attr
}

func newKeyCheck() *keyCheck { return &keyCheck{mu: new(sync.Mutex), bad: make(map[string]string)} }

func (k *keyCheck) Enabled(context.Context, slog.Level) bool { return true }

func (k *keyCheck) note(msg string, a slog.Attr) {
	if !snakeKey.MatchString(a.Key) {
		k.mu.Lock()
		k.bad[a.Key] = msg
		k.mu.Unlock()
	}
	if a.Value.Kind() == slog.KindGroup {
		for _, g := range a.Value.Group() {
			k.note(msg, g)
		}
	}
}

func (k *keyCheck) Handle(_ context.Context, r slog.Record) error {
	for _, a := range k.pre {
		k.note(r.Message, a)
	}
	r.Attrs(func(a slog.Attr) bool { k.note(r.Message, a); return true })
	return nil
}

func (k *keyCheck) WithAttrs(as []slog.Attr) slog.Handler {
	c := *k
	c.pre = append(append([]slog.Attr(nil), k.pre...), as...)
	return &c
}

func (k *keyCheck) WithGroup(name string) slog.Handler {
	c := *k
	c.pre = append(append([]slog.Attr(nil), k.pre...), slog.String(name, ""))
	return &c
}

// check fails t for every non-snake_case key logged so far.
func (k *keyCheck) check(t *testing.T) {
	k.mu.Lock()
	defer k.mu.Unlock()
	keys := make([]string, 0, len(k.bad))
	for key := range k.bad {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		t.Errorf("log key %q (in %q) is not snake_case", key, k.bad[key])
	}
}

// jsonKeys collects every object key of a JSON document.
func jsonKeys(v any, out map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for key, e := range x {
			out[key] = true
			jsonKeys(e, out)
		}
	case []any:
		for _, e := range x {
			jsonKeys(e, out)
		}
	}
}

// TestJSONSnakeCase: every field of the relay's JSON (GET /api/metrics with
// its last round and secure-summation counters, GET /api/round) is
// snake_case, as the aggregator's. The map keys inside (reasons, outcomes)
// are checked too; every optional field is set so that none is omitted.
func TestJSONSnakeCase(t *testing.T) {
	snap := Snapshot{
		Accepted:  map[string]uint64{"checkin": 1},
		Rejected:  map[string]uint64{ReasonOversized: 1, ReasonText: 1},
		Delivered: map[string]uint64{"accepted": 1},
		LastRound: &RoundReport{Round: 1, Outcome: "forwarded", Reason: "deadline", TargetNP: 1, RealizedNP: 2,
			Raised: true, Messages: 1, FirstReportAt: time.Unix(1, 0), ClosedAt: time.Unix(2, 0), DrainedAt: time.Unix(3, 0),
			ChargedAt: time.Unix(4, 0), EndedAt: time.Unix(5, 0)},
		RecentRounds: []RoundReport{{Round: 1}},
		SecAgg: SecAggStats{Rounds: map[string]uint64{SecAggFailed: 1}, Dropped: map[string]uint64{DropUnopened: 1},
			Rejected: map[string]uint64{"x": 1}},
	}
	for _, r := range reasons {
		snap.Rejected[r] = 1
	}
	docs := map[string]any{
		"api/metrics": snap,
		"api/round": RoundInfo{Reachable: true, Round: 1, OpenRound: 2, Deadline: time.Unix(1, 0), Paused: true,
			Stopped: "x", Volunteers: 1, Now: time.Unix(2, 0)},
	}
	for name, d := range docs {
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		keys := make(map[string]bool)
		jsonKeys(v, keys)
		if len(keys) < 5 {
			t.Fatalf("%s: only %d keys in %s", name, len(keys), b)
		}
		for key := range keys {
			if !snakeKey.MatchString(key) {
				t.Errorf("%s: key %q is not snake_case", name, key)
			}
		}
	}
}
