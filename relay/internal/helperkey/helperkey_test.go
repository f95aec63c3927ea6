package helperkey

import (
	"bytes"
	"errors"
	"testing"

	"github.com/blanket-fl/blanket/shared/envelope"
	"github.com/blanket-fl/blanket/shared/envelope/envelopetest"
)

// TestOpenHelperShare: a helper share opens only with the relay's helper
// key, for its round, as a helper share; a leader share (sealed to a test
// aggregator key) does not; every modified byte is refused; the key
// round-trips through MarshalBinary and envelopetest's helper key of the
// same scalar agrees with it.
func TestOpenHelperShare(t *testing.T) {
	relay, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	agg, err := envelopetest.DeriveKey([32]byte{5})
	if err != nil {
		t.Fatal(err)
	}
	share := bytes.Repeat([]byte{7, 1, 2}, 50)
	help, err := envelope.SealShare(relay.Public(), 4, envelope.ShareHelper, [32]byte{}, share)
	if err != nil {
		t.Fatal(err)
	}
	lead, err := envelope.SealShare(agg.Public().HPKE, 4, envelope.ShareLeader, [32]byte{}, share)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := relay.OpenHelperShare(4, help, len(share)); err != nil || !bytes.Equal(got, share) {
		t.Fatalf("open helper share: %v", err)
	}
	for name, f := range map[string]func() error{
		"helper share, wrong round":  func() error { _, err := relay.OpenHelperShare(3, help, -1); return err },
		"helper share, wrong length": func() error { _, err := relay.OpenHelperShare(4, help, len(share)-1); return err },
		"leader share to the helper": func() error { _, err := relay.OpenHelperShare(4, lead, len(share)); return err },
		"sealed values as a share": func() error {
			v, _ := envelope.SealValues(relay.Public(), 4, []float64{1})
			_, err := relay.OpenHelperShare(4, v, -1)
			return err
		},
	} {
		if err := f(); err == nil {
			t.Errorf("%s: opened", name)
		}
	}
	for i := range help {
		bad := bytes.Clone(help)
		bad[i] ^= 0x80
		if _, err := relay.OpenHelperShare(4, bad, len(share)); !errors.Is(err, envelope.ErrOpenShare) {
			t.Fatalf("byte %d flipped: %v", i, err)
		}
	}
	raw, _ := relay.MarshalBinary()
	again, err := Unmarshal(raw)
	if err != nil || again.Public() != relay.Public() {
		t.Fatalf("helper key round trip: %v", err)
	}
	if _, err := Unmarshal(raw[:31]); !errors.Is(err, envelope.ErrKey) {
		t.Fatalf("short helper key: %v", err)
	}
	tk, err := envelopetest.UnmarshalHelperKey(raw)
	if err != nil || tk.Public() != relay.Public() {
		t.Fatalf("envelopetest helper key of the same scalar: %v", err)
	}
	if got, err := tk.OpenHelperShare(4, help, len(share)); err != nil || !bytes.Equal(got, share) {
		t.Fatalf("envelopetest opens the helper share: %v", err)
	}
}
