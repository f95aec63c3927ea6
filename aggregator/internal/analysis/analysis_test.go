package analysis

import (
	"errors"
	"reflect"
	"testing"

	"github.com/blanket-fl/blanket/aggregator/internal/sealkey"
	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/privacy"
	"github.com/blanket-fl/blanket/shared/wire"
)

// params is a small SS-Topk round: d = 8, k = 2, width 1, n_p = 4, so a
// batch has 32 messages and a report 2.
func params() wire.Params {
	return wire.Params{Protocol: wire.ProtocolSSTopk, Randomizer: wire.RandomizerLaplace, D: 8, K: 2, L: 2, Width: 1,
		NP: 4, MinBatch: 2, EpsL: 2, Clip: 0.5, CheckInP: 1}
}

// simple is SS-Simple on the same model: every report holds all 8
// dimensions, so n <= n_p = 4.
func simple() wire.Params {
	return wire.Params{Protocol: wire.ProtocolSSSimple, Randomizer: wire.RandomizerLaplace, D: 8, K: 8, L: 1, Width: 1,
		NP: 4, MinBatch: 2, Quota: 4, EpsL: 2, Clip: 0.5, CheckInP: 1}
}

// batch seals value at every message of a batch of p for round 1 with n
// declared reports.
func batch(t *testing.T, pub envelope.PublicKey, p wire.Params, reports uint32, value float64) *wire.Batch {
	t.Helper()
	b := &wire.Batch{Round: 1, D: p.D, Width: p.Width, NP: p.NP, Reports: reports, CheckedIn: reports + 1, Population: reports + 3}
	for i := range p.BatchMessages(p.NP) {
		sealed, err := envelope.SealValues(pub.HPKE, 1, []float64{value})
		if err != nil {
			t.Fatal(err)
		}
		b.Messages = append(b.Messages, wire.BatchMessage{Indices: []uint32{uint32(i % int(p.D))}, Sealed: sealed})
	}
	return b
}

func frame(t *testing.T, b *wire.Batch) []byte {
	t.Helper()
	f, err := b.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func setup(t *testing.T, p wire.Params) (*sealkey.PrivateKey, *Protocol) {
	t.Helper()
	key, err := sealkey.DeriveKey([32]byte{7})
	if err != nil {
		t.Fatal(err)
	}
	proto, err := NewProtocol(p)
	if err != nil {
		t.Fatal(err)
	}
	return key, proto
}

// TestAnalyzeChargesBeforeOpening: a batch is opened only after its
// release was charged, with the batch's n and n_p; a failed charge opens
// nothing and is returned as is.
func TestAnalyzeChargesBeforeOpening(t *testing.T) {
	p := params()
	key, proto := setup(t, p)
	f := frame(t, batch(t, key.Public(), p, 3, 0.5))
	refused := errors.New("refused")
	var got []privacy.Release
	res, err := Analyze(key, func(r privacy.Release) error { got = append(got, r); return refused }, proto, p, 1, f, 1)
	if !errors.Is(err, refused) || res.Charged || res.Opened || res.Update != nil || len(got) != 1 {
		t.Fatalf("refused charge: %+v, %v, %d charges", res, err, len(got))
	}
	if !reflect.DeepEqual(got[0], proto.Release(1, 3, 4)) {
		t.Fatalf("charged %+v, want the release of n = 3, n_p = 4", got[0])
	}
	res, err = Analyze(key, func(privacy.Release) error { return nil }, proto, p, 1, f, 2)
	if err != nil || !res.Charged || !res.Opened || len(res.Update) != int(p.D) {
		t.Fatalf("accepted charge: %+v, %v", res, err)
	}
	if res.Counts != (Counts{Accepted: len(res.Batch.Messages)}) {
		t.Fatalf("counts %+v of %d messages", res.Counts, len(res.Batch.Messages))
	}
}

// TestAnalyzeRejectsImpossibleBatches: a batch whose declared report
// count no honest relay can send (zero, below the minimum batch, more
// reports than the batch's messages hold, which for SS-Simple is n above
// n_p), or that repeats a sealed message, is rejected with its reason
// before the charge.
func TestAnalyzeRejectsImpossibleBatches(t *testing.T) {
	noCharge := func(privacy.Release) error { t.Error("charged a rejected batch"); return nil }
	for name, c := range map[string]struct {
		p      wire.Params
		mod    func(*wire.Batch)
		reason string
	}{
		"zero reports":             {params(), func(b *wire.Batch) { b.Reports, b.CheckedIn = 0, 0 }, ReasonMalformed},
		"below min batch":          {params(), func(b *wire.Batch) { b.Reports = 1 }, ReasonMalformed},
		"more reports than fit":    {params(), func(b *wire.Batch) { b.Reports, b.CheckedIn = 9, 9 }, ReasonMalformed},
		"ss-simple n above n_p":    {simple(), func(b *wire.Batch) { b.Reports, b.CheckedIn = 5, 5 }, ReasonMalformed},
		"duplicate sealed message": {params(), func(b *wire.Batch) { b.Messages[9].Sealed = b.Messages[1].Sealed }, ReasonDuplicateSeal},
	} {
		key, proto := setup(t, c.p)
		b := batch(t, key.Public(), c.p, 3, 0.5)
		c.mod(b)
		_, err := Analyze(key, noCharge, proto, c.p, 1, frame(t, b), 1)
		var rej *Rejected
		if !errors.As(err, &rej) || rej.Reason != c.reason {
			t.Errorf("%s: %v, want rejected (%s)", name, err, c.reason)
		}
	}
	// The largest possible counts pass: SS-Simple n = n_p = 4, SS-Topk
	// n = d n_p / (k l) = 8 (a report is k l = 4 messages).
	for _, c := range []struct {
		p wire.Params
		n uint32
	}{{simple(), 4}, {params(), 8}} {
		key, _ := setup(t, c.p)
		b := batch(t, key.Public(), c.p, c.n, 0.5)
		if _, err := Check(frame(t, b), c.p); err != nil {
			t.Errorf("%v n = %d: %v", c.p.Protocol, c.n, err)
		}
	}
}
