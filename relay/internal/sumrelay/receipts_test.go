package sumrelay

import (
	"crypto/sha256"
	"strings"
	"testing"
)

// TestReceipts: a settled round answers included for the receipts in its
// sum and excluded (with why) for the other reports it received, including
// the ones the servers' check rejected; a cancelled round answers excluded
// with its reason; a receipt of no report the relay received is unknown
// (issue 23: not excluded); a round not settled yet is pending, and a
// forgotten one unknown.
func TestReceipts(t *testing.T) {
	var b Receipts
	id := func(s string) [32]byte { return sha256.Sum256([]byte(s)) }
	// Round 5: a and c were accepted (b's verdict was a rejection: never
	// included), and the round ended with a sum; round 6 accepted a but
	// was cancelled.
	b.Received(5, id("b"))
	b.Include(5, id("a"))
	b.Include(5, id("c"))
	b.SettleSum(5)
	b.Received(6, id("a"))
	b.Settle(6, "the round was cancelled: below minimum batch")
	b.Include(5, id("d"))         // after the settle: ignored
	b.Settle(5, "late duplicate") // a round settles once
	for _, c := range []struct {
		round   uint64
		id      [32]byte
		state   string
		whyPart string
	}{
		{5, id("a"), ReceiptIncluded, ""},
		{5, id("c"), ReceiptIncluded, ""},
		{5, id("b"), ReceiptExcluded, "check"},
		{5, id("x"), ReceiptUnknown, ""},
		{5, id("d"), ReceiptUnknown, ""},
		{6, id("a"), ReceiptExcluded, "below minimum batch"},
		{6, id("b"), ReceiptUnknown, ""},
		{7, id("a"), ReceiptPending, ""},
		{9, id("a"), ReceiptUnknown, ""}, // never announced (last is 7)
	} {
		state, why := b.Lookup(c.round, c.id, 7)
		if state != c.state || !strings.Contains(why, c.whyPart) {
			t.Errorf("round %d: %s (%q), want %s (%q)", c.round, state, why, c.state, c.whyPart)
		}
	}
	for r := uint64(8); r < 8+receiptRounds; r++ {
		b.Settle(r, "x")
	}
	if state, _ := b.Lookup(5, id("a"), 100); state != ReceiptUnknown {
		t.Errorf("a round %d rounds old: %s, want unknown", receiptRounds, state)
	}
}
