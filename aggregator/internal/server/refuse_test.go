package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/aggregator/internal/api"
	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/wire"
)

// TestGaussianNearTargetDelta: with the Gaussian randomizer at a delta_l
// close to the target delta (as the operator's `-randomizer gaussian
// -deltal 1e-5` at -delta 1e-5; the target here is 1.5 times round 1's
// local delta, so basic composition of the local guarantees certifies one
// round and no more), SS-Simple and SS-Double run 5 charged rounds (the
// exact composition of their Gaussian reports certifies every round),
// and SS-Topk, which no method covers past round 1, is refused like the
// end of the budget (no announcement, "privacy budget" in the status)
// while the server stays up: its round loop returns no error (Run's nil
// is "no further rounds", after which the process keeps serving the API)
// and the API answers. (Before, the loop returned "composer failed: round
// 2: no valid proven accounting method" and the process exited.)
func TestGaussianNearTargetDelta(t *testing.T) {
	for _, proto := range []wire.Protocol{wire.ProtocolSSSimple, wire.ProtocolSSDouble, wire.ProtocolSSTopk} {
		o := roundspec.Options{Protocol: proto, Randomizer: wire.RandomizerGaussian, K: 2, L: 2, NP: 4, EpsL: 2,
			DeltaL: 1e-5, Clip: 0.5, MinBatch: 2}
		p, _, err := roundspec.Build(8, 4, o)
		if err != nil {
			t.Fatalf("%v: %v", proto, err)
		}
		spec, err := roundspec.New(p)
		if err != nil {
			t.Fatal(err)
		}
		rel := spec.Release(1, 4, max(int(p.NP), 4))
		one, err := privacy.AccountLocal([]privacy.Release{rel})
		if proto == wire.ProtocolSSTopk {
			// No local row for SS-Topk (docs/privacy.md, "SS-Topk has no
			// local row"): its row without amplification charges the
			// changed dimensions' min(2kl, d)·δ0 a round.
			one, err = privacy.Bound{Delta: float64(min(2*rel.K*rel.L, rel.D)) * rel.Delta0}, nil
		}
		if err != nil || !(one.Delta > 0) {
			t.Fatalf("%v: local row of round 1: %+v, %v", proto, one, err)
		}
		h := newHarness(t, t.TempDir(), newFakeRelay(t), func(c *Config) {
			c.Params, c.Accountant, c.TargetEpsilon, c.TargetDelta, c.ExpectedN = p, nil, 1e6, 1.5*one.Delta, 4
		})
		charged := 5
		if proto == wire.ProtocolSSTopk {
			charged = 1
		}
		prev := 0.0
		for r := uint64(1); r <= uint64(charged); r++ {
			a := h.relay.next(t)
			rep := h.sendBatch(makeBatch(t, h.srv.PublicKey(), p, batchSpec{round: a.Round, reports: 4, value: constValue(0.75), np: max(p.NP, 4)}))
			st := h.srv.Status()
			if rep.Status != wire.BatchStatusOK || a.Round != r || !(st.Epsilon > prev) {
				t.Fatalf("%v round %d: reply %+v, epsilon %v after %v", proto, a.Round, rep, st.Epsilon, prev)
			}
			prev = st.Epsilon
		}
		if proto != wire.ProtocolSSTopk {
			h.stop()
			continue
		}
		h.relay.none(t, 300*time.Millisecond)
		deadline := time.Now().Add(10 * time.Second)
		for h.srv.Status().Stopped == "" && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		st := h.srv.Status()
		if !strings.HasPrefix(st.Stopped, "privacy budget") || st.Round != 1 {
			t.Fatalf("%v: status after round 1: round %d, stopped %q", proto, st.Round, st.Stopped)
		}
		select {
		case err := <-h.done:
			if err != nil {
				t.Fatalf("%v: the round loop failed: %v", proto, err)
			}
			h.done <- nil // stopped as at the end of the budget; h.stop reads it
		default:
		}
		resp, err := http.Get(h.http.URL + "/api/status")
		if err != nil {
			t.Fatal(err)
		}
		var got api.Status
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || got.Stopped != st.Stopped {
			t.Fatalf("%v: /api/status: HTTP %d, %+v, %v", proto, resp.StatusCode, got, err)
		}
		h.stop() // fails the test if Run returned an error
	}
}
