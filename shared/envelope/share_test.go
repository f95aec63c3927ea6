package envelope

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// testConsent stands for task.ConsentHash of a study's task (envelope does
// not import task).
var testConsent = sha256.Sum256([]byte("a consent text"))

// The share infos, byte for byte (the format docs/protocol.md states): v2
// labels, u64be(round), and the leader's 32-byte consent hash last; the
// helper's info has no consent and refuses one.
func TestShareInfoLayout(t *testing.T) {
	lead, err := ShareInfo(0x0102030405060708, ShareLeader, testConsent)
	if err != nil {
		t.Fatal(err)
	}
	want := append([]byte("blanket/v2 secagg leader round \x01\x02\x03\x04\x05\x06\x07\x08"), testConsent[:]...)
	if !bytes.Equal(lead, want) {
		t.Fatalf("leader info\n%s\nwant\n%s", hex.EncodeToString(lead), hex.EncodeToString(want))
	}
	help, err := ShareInfo(0x0102030405060708, ShareHelper, [32]byte{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "blanket/v2 secagg helper round \x01\x02\x03\x04\x05\x06\x07\x08"; string(help) != want {
		t.Fatalf("helper info %q, want %q", help, want)
	}
	if _, err := ShareInfo(1, ShareHelper, testConsent); err == nil {
		t.Fatal("a helper share accepted a consent hash it does not bind")
	}
	if _, err := SealShare(testKey(t, 2).Public().HPKE, 1, ShareHelper, testConsent, []byte{1}); err == nil {
		t.Fatal("SealShare bound a helper share to a consent hash")
	}
	if _, err := ShareInfo(1, ShareRole(9), [32]byte{}); err == nil {
		t.Fatal("unknown role accepted")
	}
}

// A leader share opens only under the consent hash it was sealed under:
// not under another text's, not under the zero hash, not as the other
// role, not in another round.
func TestShareBoundToConsent(t *testing.T) {
	k := testKey(t, 4)
	share := bytes.Repeat([]byte{0x5a}, 200)
	sealed, err := SealShare(k.Public().HPKE, 3, ShareLeader, testConsent, share)
	if err != nil {
		t.Fatal(err)
	}
	right, _ := ShareInfo(3, ShareLeader, testConsent)
	if pt, err := openRaw(k, right, sealed); err != nil || !bytes.Equal(pt, share) {
		t.Fatalf("opens to %d bytes, %v", len(pt), err)
	}
	other := testConsent
	other[31] ^= 1
	wrong := map[string][]byte{}
	wrong["another consent text"], _ = ShareInfo(3, ShareLeader, other)
	wrong["no consent"], _ = ShareInfo(3, ShareLeader, [32]byte{})
	wrong["helper role"], _ = ShareInfo(3, ShareHelper, [32]byte{})
	wrong["another round"], _ = ShareInfo(4, ShareLeader, testConsent)
	for name, inf := range wrong {
		if _, err := openRaw(k, inf, sealed); err == nil {
			t.Errorf("%s: the share opened", name)
		}
	}
}
