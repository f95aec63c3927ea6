package sealkey

import (
	"bytes"
	"errors"
	"testing"

	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/envelope/envelopetest"
	"github.com/blanket-fl/blanket/shared/task"
)

// TestShares: a leader share opens only with the aggregator's key, for its
// round, as a leader share; a helper share (sealed to a helper key,
// envelopetest's stand-in for the relay's) does not open as a leader
// share; a leader share sealed under another consent text's hash does not
// open; every modified byte is refused.
func TestShares(t *testing.T) {
	consent := task.ConsentTextHash("the study's consent text")
	agg, err := DeriveKey([32]byte{5})
	if err != nil {
		t.Fatal(err)
	}
	relay, err := envelopetest.GenerateHelperKey()
	if err != nil {
		t.Fatal(err)
	}
	share := bytes.Repeat([]byte{7, 1, 2}, 50)
	lead, err := envelope.SealShare(agg.Public().HPKE, 4, envelope.ShareLeader, consent, share)
	if err != nil || len(lead) != envelope.ShareSealedLen(len(share)) {
		t.Fatalf("seal: %v, %d bytes", err, len(lead))
	}
	help, err := envelope.SealShare(relay.Public(), 4, envelope.ShareHelper, [32]byte{}, share)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := agg.OpenLeaderShare(4, consent, lead, len(share)); err != nil || !bytes.Equal(got, share) {
		t.Fatalf("open leader share: %v", err)
	}
	if got, err := relay.OpenHelperShare(4, help, -1); err != nil || !bytes.Equal(got, share) {
		t.Fatalf("open helper share: %v", err)
	}
	for name, f := range map[string]func() error{
		"leader share, wrong round":  func() error { _, err := agg.OpenLeaderShare(5, consent, lead, len(share)); return err },
		"helper share to the leader": func() error { _, err := agg.OpenLeaderShare(4, consent, help, len(share)); return err },
		"leader share to the helper": func() error { _, err := relay.OpenHelperShare(4, lead, len(share)); return err },
		"leader share, wrong length": func() error { _, err := agg.OpenLeaderShare(4, consent, lead, len(share)+1); return err },
		"leader share, another consent text": func() error {
			_, err := agg.OpenLeaderShare(4, task.ConsentTextHash("the study's consent text."), lead, len(share))
			return err
		},
		"leader share, no consent": func() error { _, err := agg.OpenLeaderShare(4, [32]byte{}, lead, len(share)); return err },
		"sealed values as a share": func() error {
			v, _ := envelope.SealValues(agg.Public().HPKE, 4, []float64{1})
			_, err := agg.OpenLeaderShare(4, consent, v, -1)
			return err
		},
		"leader-role share as values": func() error { _, err := agg.OpenValues(4, lead, nil); return err },
	} {
		if err := f(); err == nil {
			t.Errorf("%s: opened", name)
		}
	}
	for i := range lead {
		bad := bytes.Clone(lead)
		bad[i] ^= 0x80
		if _, err := agg.OpenLeaderShare(4, consent, bad, len(share)); !errors.Is(err, envelope.ErrOpenShare) {
			t.Fatalf("byte %d flipped: %v", i, err)
		}
	}
	if _, err := envelope.SealShare(relay.Public(), 1, 9, [32]byte{}, share); err == nil {
		t.Fatal("unknown role sealed")
	}
}
