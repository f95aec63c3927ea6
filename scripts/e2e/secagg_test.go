package e2e

import (
	"context"
	"encoding/binary"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/scripts/internal/cohort"
	"github.com/blanket-fl/blanket/scripts/internal/wsclient"
	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/secagg"
	"github.com/blanket-fl/blanket/shared/wire"
)

// TestSecAggOverLoopback: secure summation through the real relay and
// aggregator (docs/secagg.md): 40 native volunteers shard their updates,
// the relay prepares as the helper and adds its noise, the aggregator
// prepares, charges and unshards, through PINE. One more volunteer is
// malicious: every round it sends a well-formed Shares frame whose update
// is over the norm bound (its leader's gradient share shifted by 3
// NormBound after sharding: only PINE's L2 proof can catch it). Every
// round must
// be ok with the 40 honest reports accepted and the bad one rejected, the
// model must learn (40 volunteers at epsilon 50 over 3 rounds reach well
// above the 10% of chance; 0.3 leaves a wide margin), and the charged
// epsilon must grow each round and end within the budget.
func TestSecAggOverLoopback(t *testing.T) {
	const clients, rounds = 40, 3
	cl := deployment(t, clients+1, "-protocol", "secagg", "-rounds", strconv.Itoa(rounds), "-epsilon", "50", "-check-in", "1",
		"-min-batch", "20", "-round-timeout", scaled(40*time.Second).String())
	startCohort(t, cl, cohort.Config{Clients: clients, Seed: 5}, malicious)
	// The first round may abort while the volunteers connect.
	rs := waitOK(t, cl, rounds, 5*time.Minute)
	prev := 0.0
	for _, r := range rs {
		if r.N != clients {
			t.Errorf("round %d: %d reports accepted, want the %d honest ones", r.Round, r.N, clients)
		}
		if r.EpsilonTightest == nil || *r.EpsilonTightest <= prev || *r.EpsilonTightest > 50 {
			t.Errorf("round %d: epsilon %v after %v (budget 50)", r.Round, r.EpsilonTightest, prev)
			continue
		}
		prev = *r.EpsilonTightest
	}
	// The over-norm report is counted, by reason, in every ok round.
	var hist struct {
		Rounds []struct {
			Round      int            `json:"round"`
			Status     string         `json:"status"`
			Rejections map[string]int `json:"rejections"`
		} `json:"rounds"`
	}
	if err := cl.GetJSON(context.Background(), "/api/rounds", &hist); err != nil {
		t.Fatal(err)
	}
	counted := 0
	for _, r := range hist.Rounds {
		if r.Status != "ok" {
			continue
		}
		counted++
		if r.Rejections[secagg.RejectInvalidProof.String()] != 1 {
			t.Errorf("round %d: rejections %v, want the over-norm report as %q", r.Round, r.Rejections, secagg.RejectInvalidProof)
		}
	}
	if counted < rounds {
		t.Errorf("%d ok rounds in /api/rounds, want %d", counted, rounds)
	}
	last := rs[len(rs)-1]
	if last.Accuracy == nil || *last.Accuracy < 0.3 {
		t.Errorf("accuracy after %d rounds = %v, want >= 0.3", rounds, last.Accuracy)
	}
}

// malicious is a volunteer that, in every round, shards an update
// honestly, then adds 3 NormBound to the first coordinate of its leader's
// gradient share (the first Field64 element of PINE's leader input share):
// the reconstructed update has norm about 3 times the bound, the share
// stays well-formed, both shares are sealed correctly and the Shares
// frame is well-formed, so only the norm proof rejects it.
func malicious(ctx context.Context, relay string, key envelope.PublicKey) error {
	tr, err := wsclient.Dial(ctx, relay, "")
	if err != nil {
		return err
	}
	defer tr.Close()
	// It agrees to the consent text the relay serves, as the cohort does,
	// so that only the norm proof rejects its reports.
	consent, _, err := cohort.FetchConsent(ctx, nil, strings.TrimSuffix(strings.Replace(relay, "ws://", "http://", 1), "/ws"))
	if err != nil {
		return err
	}
	src := noise.NewSeeded(99)
	for {
		f, err := tr.Recv(ctx)
		if err != nil {
			return err
		}
		a, err := wire.ParseAnnouncement(f, wire.Limits{})
		if err != nil || a.Verify(key) != nil {
			continue // acks and anything else
		}
		spec, err := roundspec.New(a.Params)
		if err != nil {
			continue
		}
		r, err := spec.SecAggRound(a.Round)
		if err != nil {
			continue
		}
		x := make([]float64, a.Params.D)
		for j := range x {
			x[j] = 1 // a large update, clipped by Shard
		}
		leader, helper, err := r.Shard(x, src)
		if err != nil {
			return err
		}
		const q = 0xffffffff00000001
		off := r.LeaderShareSize() - r.Pine().LeaderShareSize()
		k := 3 * r.Params().NormBound % q
		v := binary.LittleEndian.Uint64(leader[off:])
		if v >= q-k {
			v -= q - k
		} else {
			v += k
		}
		binary.LittleEndian.PutUint64(leader[off:], v)
		sl, err := envelope.SealShare(a.HPKEPub, a.Round, envelope.ShareLeader, consent, leader)
		if err != nil {
			return err
		}
		sh, err := envelope.SealShare(a.RelayPub, a.Round, envelope.ShareHelper, [32]byte{}, helper)
		if err != nil {
			return err
		}
		ci, _ := (&wire.CheckIn{Round: a.Round}).MarshalBinary()
		fr, err := (&wire.Shares{Round: a.Round, Leader: sl, Helper: sh}).MarshalBinary()
		if err != nil {
			return err
		}
		for _, b := range [][]byte{ci, fr} {
			if err := tr.Send(ctx, b); err != nil {
				return err
			}
		}
	}
}
