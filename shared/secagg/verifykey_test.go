package secagg

import (
	"bytes"
	"testing"
)

// TestDeriveVerifyKey: the same secret and round give the same key (the
// two servers agree), another round or secret another key, and short
// secrets or round 0 are refused.
func TestDeriveVerifyKey(t *testing.T) {
	s := []byte("0123456789abcdef-token")
	a, err := DeriveVerifyKey(s, 3)
	if err != nil || len(a) != VerifyKeySize {
		t.Fatalf("%x %v", a, err)
	}
	b, _ := DeriveVerifyKey(bytes.Clone(s), 3)
	c, _ := DeriveVerifyKey(s, 4)
	d, _ := DeriveVerifyKey(append(bytes.Clone(s), 'x'), 3)
	if !bytes.Equal(a, b) || bytes.Equal(a, c) || bytes.Equal(a, d) {
		t.Fatal("verify keys do not separate rounds and secrets")
	}
	if _, err := DeriveVerifyKey(s[:15], 1); err == nil {
		t.Fatal("a short secret accepted")
	}
	if _, err := DeriveVerifyKey(s, 0); err == nil {
		t.Fatal("round 0 accepted")
	}
}
