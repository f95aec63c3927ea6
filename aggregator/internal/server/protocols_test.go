package server

import (
	"math"
	"testing"

	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/wire"
)

// TestEveryProtocolRandomizerRuns: every protocol and randomizer the
// aggregator can announce runs five charged rounds end to end with the real
// accountant (privacy.Account): each batch is charged, decrypted and
// applied, and the charged epsilon is finite and grows every round. (An
// earlier build crashed on ss-double with the gaussian randomizer after
// its first round: "composer failed".)
func TestEveryProtocolRandomizerRuns(t *testing.T) {
	for _, proto := range roundspec.ShuffleProtocols() {
		rzs := []wire.Randomizer{wire.RandomizerLaplace, wire.RandomizerRGB, wire.RandomizerGaussian}
		if proto.Wire().IsAPES() {
			rzs = []wire.Randomizer{wire.RandomizerClipLaplace} // 0.75 is a value and a level
		}
		for _, rz := range rzs {
			o := roundspec.Options{Protocol: proto.Wire(), Randomizer: rz, K: 2, L: 2, NP: 4, EpsL: 2, Clip: 0.5, MinBatch: 2}
			if rz == wire.RandomizerRGB {
				o.Buckets = 4
			}
			if proto.Wire() == wire.ProtocolSAPES {
				o.NP = 0 // S-APES pads nothing: n_p = 1, raised to the 4 reports
			}
			p, _, err := roundspec.Build(8, 4, o)
			if err != nil {
				t.Fatalf("%v/%v: %v", proto.Wire(), rz, err)
			}
			name := p.Protocol.String() + "/" + p.Randomizer.String()
			h := newHarness(t, t.TempDir(), newFakeRelay(t), func(c *Config) {
				// δ 1e-4: SS-Topk with the Gaussian randomizer is charged
				// 2kl·δ0 a round (docs/privacy.md, "SS-Topk has no local
				// row"), 2e-6 here, so five rounds reach 1e-5.
				c.Params, c.Accountant, c.TargetEpsilon, c.TargetDelta, c.ExpectedN = p, nil, 1e6, 1e-4, 4
			})
			prev := 0.0
			for r := uint64(1); r <= 5; r++ {
				a := h.relay.next(t)
				if a.Round != r || a.Params != p {
					t.Fatalf("%s: announcement %d with %+v", name, a.Round, a.Params)
				}
				// 0.75 is admissible for every randomizer (on R_{γ,b}'s
				// grid for b = 4).
				rep := h.sendBatch(makeBatch(t, h.srv.PublicKey(), p, batchSpec{round: r, reports: 4, value: constValue(0.75), np: max(p.NP, 4)}))
				if rep.Status != wire.BatchStatusOK || rep.RejectedValue != 0 || rep.RejectedOpen != 0 {
					t.Fatalf("%s round %d: reply %+v", name, r, rep)
				}
				st := h.srv.Status()
				if !(st.Epsilon > prev) || math.IsInf(st.Epsilon, 0) {
					t.Fatalf("%s round %d: epsilon %v after %v", name, r, st.Epsilon, prev)
				}
				prev = st.Epsilon
			}
			h.stop()
		}
	}
}
