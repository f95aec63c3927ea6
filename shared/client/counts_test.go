package client

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/blanket-fl/blanket/shared/envelope/envelopetest"
	"github.com/blanket-fl/blanket/shared/logreg"
	"github.com/blanket-fl/blanket/shared/noise"
	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/roundspec"
	"github.com/blanket-fl/blanket/shared/wire"
)

// TestSecAggCountsReport: on a secure-summation announcement with an
// evaluation block (R = 8 of the volunteer's 20 rows) and a 3-option
// question, the client evaluates the announced model before training
// (EventEvaluated: its own correct of evaluated, which never leaves the
// device in the clear), shards its answer, and sends one Shares frame of
// the round's size; the two servers accept it and the decoded counts are
// the volunteer's (σ = 4 per block: CountSD 0.18 rows for the evaluation,
// 0.01 for the question, so |error| < 1.5 fails with probability below
// 1e-15). Its own ε is the joint round's: the ledger's Release
// (roundspec.Spec.Release, privacy.SecAggJoint) gives the same ε. Without
// answers, a round with a question block fails with ErrNoAnswers.
func TestSecAggCountsReport(t *testing.T) {
	k := testKey(t, 1)
	helperKey, err := envelopetest.GenerateHelperKey()
	if err != nil {
		t.Fatal(err)
	}
	d := testShape.NumParams()
	p, _, err := roundspec.Build(d, 4, roundspec.Options{Protocol: wire.ProtocolSecAgg, Sigma: 4000, Clip: 0.5, MinBatch: 1})
	if err != nil {
		t.Fatal(err)
	}
	p.Counts = wire.NewCountList(wire.CountBlock{Kind: wire.CountEval, N: 8, Sigma: 4}, wire.CountBlock{Kind: wire.CountQuestion, N: 3, Sigma: 4})
	spec, err := roundspec.New(p)
	if err != nil {
		t.Fatal(err)
	}
	log := &eventLog{}
	data := testData(t, 20, noise.NewSeeded(3^0x5eed))
	c, err := New(Config{Pinned: k.Public(), Data: data, Train: logreg.FLAMEConfig(3, 0.1), Source: noise.NewSeeded(3), OnEvent: log.add, Answers: []int{2}})
	if err != nil {
		t.Fatal(err)
	}
	relay, stop := startClient(t, c)
	model := make([]float64, d)
	for i := range model {
		model[i] = math.Sin(float64(i)) // a model that gets some rows right
	}
	a := &wire.Announcement{Round: 2, Deadline: time.Now().Add(time.Minute), Params: p, HPKEPub: k.Public().HPKE,
		RelayPub: helperKey.Public(), Model: model}
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
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	ev := log.of(EventEvaluated)
	if len(ev) != 1 || ev[0].Evaluated != 8 || ev[0].Correct < 0 || ev[0].Correct > 8 || ev[0].Accuracy != float64(ev[0].Correct)/8 {
		t.Fatalf("evaluated events %+v", ev)
	}

	r, _ := spec.SecAggRound(2)
	ls, err := k.OpenLeaderShare(2, [32]byte{}, sh.Leader, r.LeaderShareSize()) // the client has no consent hash (Config.Consent zero)
	if err != nil {
		t.Fatal(err)
	}
	hs, err := helperKey.OpenHelperShare(2, sh.Helper, r.HelperShareSize())
	if err != nil {
		t.Fatal(err)
	}
	res := twoServers(t, r, ls, hs)

	got := res.Counts.Counts
	want := [][]float64{{float64(ev[0].Correct), 8}, {0, 0, 1, 0}}
	for i := range want {
		for j := range want[i] {
			if math.Abs(got[i][j]-want[i][j]) > 1.5 {
				t.Fatalf("decoded counts %v, want %v", got, want)
			}
		}
	}

	eps, _, rounds := c.Privacy()
	rel := spec.Release(2, 1, 0)
	ledger, err := secAggEpsilon(rel.SecAggSigma, rel.SecAggSensitivity, rel.CheckInRate, 1, ownDelta)
	if err != nil {
		t.Fatal(err)
	}
	sa, _ := roundspec.New(wire.Params{Protocol: p.Protocol, Randomizer: p.Randomizer, D: p.D, K: 1, L: 1, Width: 1, MinBatch: p.MinBatch, Quota: p.Quota, Clip: p.Clip, CheckInP: p.CheckInP, Sigma: p.Sigma})
	alone := sa.Release(2, 1, 0)
	if rounds != 1 || eps != ledger || len(rel.SecAggParts) != 3 || !(rel.SecAggSensitivity > alone.SecAggSensitivity) {
		t.Fatalf("own epsilon %v over %d rounds, the ledger's release gives %v (parts %d, sensitivity %v, update alone %v)",
			eps, rounds, ledger, len(rel.SecAggParts), rel.SecAggSensitivity, alone.SecAggSensitivity)
	}
	joint, err := privacy.SecAggJointReplaceOneEpsilon(rel.SecAggParts, rel.CheckInRate, 1, ownDelta)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("own epsilon %.6f, SecAggJointReplaceOneEpsilon %.6f", eps, joint)

	// Without answers the round fails, and nothing but the check-in goes out.
	c2, log2 := newTestClient(t, k, 5, 20)
	relay2, stop2 := startClient(t, c2)
	relay2.send(frame)
	if f := relay2.recv(time.Minute); f == nil {
		t.Fatal("no check-in")
	}
	deadline := time.Now().Add(time.Minute)
	for len(log2.of(EventFailed)) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if fl := log2.of(EventFailed); len(fl) != 1 || !errors.Is(fl[0].Err, ErrNoAnswers) {
		t.Fatalf("failed events %+v", fl)
	}
	if err := stop2(); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}
