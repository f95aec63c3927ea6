package client

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/shared/envelope/envelopetest"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/secagg"
	"github.com/blanket-fl/blanket/shared/wire"
)

// TestSecAggReport: on a secure-summation announcement the client sends a
// CheckIn and one Shares frame of the round's exact size; the leader share
// opens only with the aggregator's key and the helper share only with the
// relay's helper key (the one the aggregator signed into the
// announcement); the two servers' preparation accepts the report and the
// unsharded sum is the client's clipped, quantized update (no noise in this
// test). Its own epsilon is the servers' guarantee at the check-in rate,
// finite and positive; a personal level does not apply.
func TestSecAggReport(t *testing.T) {
	k := testKey(t, 1)
	helperKey, err := envelopetest.GenerateHelperKey()
	if err != nil {
		t.Fatal(err)
	}
	d := testShape.NumParams()
	p, _, err := roundspec.Build(d, 4, roundspec.Options{Protocol: wire.ProtocolSecAgg, Sigma: 10, Clip: 0.5, MinBatch: 1})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := roundspec.New(p)
	if err != nil {
		t.Fatal(err)
	}
	c, log := newTestClient(t, k, 3, 20)
	c.consent = [32]byte{0xc0, 0x45, 0xe7} // Config.Consent: the study's consent hash
	relay, stop := startClient(t, c)
	a := &wire.Announcement{Round: 2, Deadline: time.Now().Add(time.Minute), Params: p, HPKEPub: k.Public().HPKE,
		RelayPub: helperKey.Public(), Model: make([]float64, d)}
	if err := a.Sign(k); err != nil {
		t.Fatal(err)
	}
	frame, err := a.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	relay.send(frame)
	if f := relay.recv(time.Minute); f == nil {
		t.Fatal("no check-in")
	} else if ci, err := wire.ParseCheckIn(f); err != nil || ci.Round != 2 {
		t.Fatalf("check-in %x: %v", f, err)
	}
	f := relay.recv(time.Minute)
	lead, help, err := spec.SharesSizes()
	if err != nil {
		t.Fatal(err)
	}
	sh, err := wire.ParseShares(f, lead, help)
	if err != nil {
		t.Fatalf("shares frame of %d bytes: %v", len(f), err)
	}
	r, _ := spec.SecAggRound(2)
	ls, err := k.OpenLeaderShare(2, c.consent, sh.Leader, r.LeaderShareSize())
	if err != nil {
		t.Fatal(err)
	}
	hs, err := helperKey.OpenHelperShare(2, sh.Helper, r.HelperShareSize())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.OpenLeaderShare(2, c.consent, sh.Helper, -1); err == nil {
		t.Fatal("the aggregator opened the helper's share")
	}
	if _, err := k.OpenLeaderShare(2, [32]byte{}, sh.Leader, -1); err == nil {
		t.Fatal("the leader's share opened without the volunteer's consent hash")
	}
	res := twoServers(t, r, ls, hs)

	// The sum is the clipped update (norm <= C) plus two servers' noise
	// of sd sigma/Scale per coordinate: its norm is below C + 8 sd sqrt(2d)
	// except with negligible probability (seeds fixed).
	sp, _ := spec.SecAgg()
	sd := sp.Sigma / sp.Scale
	norm := 0.0
	for _, v := range res.Mean {
		norm += v * v
	}
	if res.Count != 1 || math.IsNaN(norm) || math.Sqrt(norm) > p.Clip+8*sd*math.Sqrt(2*float64(d)) {
		t.Fatalf("unsharded count %d, mean norm %v (clip %v, noise sd %v)", res.Count, math.Sqrt(norm), p.Clip, sd)
	}
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	eps, _, rounds := c.Privacy()
	if rounds != 1 || !(eps > 0) || math.IsInf(eps, 0) {
		t.Fatalf("own epsilon %v over %d rounds", eps, rounds)
	}
	sent := log.of(EventSent)
	if len(sent) != 1 || sent[0].Messages != 1 || sent[0].FrameBytes != wire.SharesSize(lead, help) {
		t.Fatalf("sent events %+v", sent)
	}
	// The round's cost on the device, phase by phase: training, the
	// shard, the two seals, each measured (the accountant may take less
	// than the clock's resolution).
	if w := sent[0].Work; !(w.Train > 0 && w.Encode > 0 && w.Seal > 0 && w.Account >= 0) {
		t.Fatalf("work %+v: a phase not measured", w)
	}
}

// twoServers runs one report's opened shares (ls for the leader, hs for
// the helper) through both servers of round r: prepare, combine, finish,
// each server's noise (seeded 8 and 9) and the unshard; every step must
// accept it.
func twoServers(t *testing.T, r *secagg.Round, ls, hs []byte) *secagg.Result {
	t.Helper()
	vk, _ := secagg.DeriveVerifyKey([]byte("a relay-aggregator token"), 2)
	leader, err := secagg.NewLeader(r, vk)
	if err != nil {
		t.Fatal(err)
	}
	helper, _ := secagg.NewHelper(r, vk)
	pmsg, rej, err := helper.Prepare([][]byte{hs})
	if err != nil || len(rej) != 0 {
		t.Fatalf("helper prepare: %v %v", rej, err)
	}
	if rej, err := leader.Prepare([][]byte{ls}); err != nil || len(rej) != 0 {
		t.Fatalf("leader prepare: %v %v", rej, err)
	}
	mmsg, rej, err := leader.Combine(pmsg)
	if err != nil || len(rej) != 0 || leader.Accepted() != 1 {
		t.Fatalf("combine: %v %v", rej, err)
	}
	if rej, err := helper.Finish(mmsg); err != nil || len(rej) != 0 {
		t.Fatalf("finish: %v %v", rej, err)
	}
	hagg, _ := helper.AggregateShare()
	if err := hagg.AddNoise(noise.NewSeeded(8)); err != nil {
		t.Fatal(err)
	}
	amsg, err := hagg.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	own, _ := leader.AggregateShare()
	if err := own.AddNoise(noise.NewSeeded(9)); err != nil {
		t.Fatal(err)
	}
	res, err := leader.Unshard(own, amsg)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
