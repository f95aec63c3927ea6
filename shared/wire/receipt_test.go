package wire

import (
	"bytes"
	"testing"
)

// TestSharesHelper: the helper share SharesHelper finds in a frame is the
// one MarshalBinary put there (so the browser's receipt is the relay's),
// and anything that is not a whole Shares frame is refused.
func TestSharesHelper(t *testing.T) {
	s := &Shares{Round: 9, Leader: bytes.Repeat([]byte{1}, 40), Helper: bytes.Repeat([]byte{2}, 24)}
	b, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	round, helper, ok := SharesHelper(b)
	if !ok || round != 9 || !bytes.Equal(helper, s.Helper) {
		t.Fatalf("SharesHelper = %d, %x, %v; want 9, %x, true", round, helper, ok, s.Helper)
	}
	parsed, err := ParseShares(b, 40, 24)
	if err != nil || ReportReceipt(parsed.Helper) != ReportReceipt(helper) {
		t.Fatalf("the relay's receipt differs from the sender's (%v)", err)
	}
	for _, bad := range [][]byte{nil, b[:17], b[:len(b)-1], append(append([]byte(nil), b...), 0)} {
		if _, _, ok := SharesHelper(bad); ok {
			t.Errorf("SharesHelper accepted %d bytes", len(bad))
		}
	}
	c := append([]byte(nil), b...)
	c[1] = byte(TypeReport)
	if _, _, ok := SharesHelper(c); ok {
		t.Error("SharesHelper accepted a frame of another type")
	}
}
