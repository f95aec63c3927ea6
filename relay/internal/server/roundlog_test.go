package server

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blanket-fl/blanket/shared/envelope/envelopetest"
	"github.com/blanket-fl/blanket/shared/wire"
	"github.com/blanket-fl/blanket/web"
)

// lockedBuffer is a bytes.Buffer for a logger written from goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// keyedAgg is fakeAgg that also serves the aggregator's key at /api/key.
type keyedAgg struct {
	*fakeAgg
	key []byte
}

func (a keyedAgg) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/api/key" {
		w.Write(a.key)
		return
	}
	a.fakeAgg.ServeHTTP(w, r)
}

// TestRoundLogsCarryClassAndRound: every line the relay logs about a
// round (opened, closed, batch persisted) has the class (the join code of
// the aggregator's key) and the round as attributes.
func TestRoundLogsCarryClassAndRound(t *testing.T) {
	p := wire.Params{Protocol: wire.ProtocolSSTopk, Randomizer: wire.RandomizerLaplace,
		D: 8, K: 2, L: 1, Width: 1, NP: 2, MinBatch: 2, Quota: 2, EpsL: 2, Clip: 1, CheckInP: 1}
	synctest.Test(t, func(t *testing.T) {
		var buf lockedBuffer
		key, err := envelopetest.DeriveKey([32]byte{7}) // the harness's aggregator key
		if err != nil {
			t.Fatal(err)
		}
		pub := key.Public()
		agg := keyedAgg{fakeAgg: &fakeAgg{}}
		agg.key, _ = json.Marshal(pub)
		h := newHarness(t, agg, "", func(c *Config) {
			c.Logger = slog.New(slog.NewJSONHandler(&buf, nil))
			c.KeyRefresh = time.Minute
		})
		defer h.close()
		class := web.JoinCodeOf(pub.Fingerprint())
		time.Sleep(2 * time.Second) // the key fetched (retries every RetryMax at most)
		synctest.Wait()
		clients := []*tclient{h.mustDial(), h.mustDial()}
		synctest.Wait()
		if st := h.announce(1, p, time.Minute); st != http.StatusOK {
			t.Fatalf("announce: HTTP %d", st)
		}
		for i, c := range clients {
			c.announcement()
			h.participate(c, 1, p, []uint32{uint32(2 * i), uint32(2*i + 1)}, 0.25)
		}
		synctest.Wait()
		for _, c := range clients {
			c.ws.Close()
		}
		synctest.Wait()
		buf.mu.Lock()
		logs := buf.b.String()
		buf.mu.Unlock()
		seen := map[string]bool{}
		for line := range strings.Lines(logs) {
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			msg, _ := rec["msg"].(string)
			switch msg {
			case "round opened", "round closed", "batch persisted":
				seen[msg] = true
				if rec["class"] != class || rec["round"] != 1.0 {
					t.Errorf("%q: class %v round %v, want %q and 1", msg, rec["class"], rec["round"], class)
				}
			}
		}
		if len(seen) != 3 {
			t.Errorf("logged %v of the round's lines:\n%s", seen, logs)
		}
	})
}
