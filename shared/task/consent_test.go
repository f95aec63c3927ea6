package task

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// The hash is SHA-256 over the documented encoding, exactly (a known
// answer computed independently here), and it tells texts apart that a
// careless encoding would not (a prefix, a trailing space, another
// domain).
func TestConsentHash(t *testing.T) {
	text := "Your answers stay on this device."
	want := sha256.Sum256(append([]byte("blanket/v1 consent\x00\x00\x00\x00\x00\x00\x00\x00\x21"), text...))
	if got := ConsentTextHash(text); got != want {
		t.Fatalf("ConsentTextHash = %x, want %x", got, want)
	}
	tk := &Task{Consent: text}
	if ConsentHash(tk) != want {
		t.Fatal("ConsentHash(t) differs from ConsentTextHash(t.Consent)")
	}
	seen := map[[32]byte]string{}
	for _, s := range []string{"", text, text + " ", text[:10], "blanket/v1 consent"} {
		h := ConsentTextHash(s)
		if o, dup := seen[h]; dup {
			t.Fatalf("%q and %q hash alike", o, s)
		}
		seen[h] = s
	}
	if sha256.Sum256([]byte(text)) == want {
		t.Fatal("the consent hash is the plain SHA-256 of the text: no domain separation")
	}
	if v := ConsentVersion(want); v != hex.EncodeToString(want[:])[:8] {
		t.Fatalf("ConsentVersion = %q", v)
	}
}

// The built-in digits task has a consent text of its own (the page shows
// it), not a placeholder.
func TestDigitsConsent(t *testing.T) {
	d, err := Digits()
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Consent) < 100 || ConsentHash(d) == ConsentTextHash("") {
		t.Fatalf("digits consent text %q", d.Consent)
	}
}
