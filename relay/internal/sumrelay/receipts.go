package sumrelay

import "sync"

// receiptRounds is how many rounds of receipts the relay keeps.
const receiptRounds = 64

// Receipt states (GET /api/receipt).
const (
	ReceiptPending  = "pending"  // the round is not settled at the relay yet
	ReceiptIncluded = "included" // the report is in the round's sum
	ReceiptExcluded = "excluded" // it is not (Why says why)
	ReceiptUnknown  = "unknown"  // not a round this relay process settled (too old, or before a restart)
)

// Receipts keeps, for the last receiptRounds secure-summation rounds,
// the receipts (wire.ReportReceipt) of the reports the relay received, which
// of them went into the round's sum, or why the round had no sum.
type Receipts struct {
	mu      sync.Mutex
	rounds  map[uint64]*roundReceipts // settled rounds
	newest  uint64
	pending map[uint64]*roundReceipts // rounds not settled yet: received and accepted so far
}

type roundReceipts struct {
	seen     map[[32]byte]struct{} // every report the round's stream received
	included map[[32]byte]struct{} // in the sum (nil once settled without one)
	why      string                // the round ended without a sum ("" when it had one)
}

// pendingLocked returns round num's unsettled receipts, nil if the round
// is settled. Caller holds mu.
func (b *Receipts) pendingLocked(num uint64) *roundReceipts {
	if _, done := b.rounds[num]; done {
		return nil
	}
	if b.pending == nil {
		b.pending = make(map[uint64]*roundReceipts)
	}
	p := b.pending[num]
	if p == nil {
		p = &roundReceipts{seen: make(map[[32]byte]struct{}), included: make(map[[32]byte]struct{})}
		b.pending[num] = p
	}
	return p
}

// Received records that the report with receipt id reached round num's
// stream: from now on its volunteer is told included or excluded, never
// unknown.
func (b *Receipts) Received(num uint64, id [32]byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p := b.pendingLocked(num); p != nil {
		p.seen[id] = struct{}{}
	}
}

// Include records that the report with receipt id was accepted into round
// num's running aggregate (its verdict came back ok); it is in the sum if
// the round ends with one (SettleSum).
func (b *Receipts) Include(num uint64, id [32]byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p := b.pendingLocked(num); p != nil {
		p.seen[id] = struct{}{}
		p.included[id] = struct{}{}
	}
}

// SettleSum settles round num as having a sum: the reports include
// recorded for it (none after a restart: their receipts were in memory).
func (b *Receipts) SettleSum(num uint64) {
	b.settleOutcome(num, true, "")
}

// Settle records that round num had no sum, and why. A round settles once.
func (b *Receipts) Settle(num uint64, why string) {
	b.settleOutcome(num, false, why)
}

func (b *Receipts) settleOutcome(num uint64, sum bool, why string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.rounds == nil {
		b.rounds = make(map[uint64]*roundReceipts)
	}
	if _, done := b.rounds[num]; done {
		return
	}
	rr := b.pending[num]
	if rr == nil {
		rr = &roundReceipts{seen: map[[32]byte]struct{}{}, included: map[[32]byte]struct{}{}}
	}
	if !sum {
		rr.included, rr.why = nil, why
	}
	b.rounds[num] = rr
	delete(b.pending, num)
	b.newest = max(b.newest, num)
	for r := range b.rounds {
		if r+receiptRounds <= b.newest {
			delete(b.rounds, r)
		}
	}
	for r := range b.pending {
		if r+receiptRounds <= b.newest {
			delete(b.pending, r)
		}
	}
}

// Lookup answers whether receipt id is in round num's sum: included; or
// excluded, with why, for a report the relay received that is not in it;
// or unknown for a receipt of no report the relay received in that round
// (or a round it no longer remembers, or before a restart); or pending
// while the round is not settled.
func (b *Receipts) Lookup(num uint64, id [32]byte, last uint64) (state, why string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	rr, ok := b.rounds[num]
	switch {
	case !ok && num+receiptRounds > b.newest && num <= last:
		return ReceiptPending, ""
	case !ok:
		return ReceiptUnknown, ""
	}
	if _, in := rr.included[id]; in {
		return ReceiptIncluded, ""
	}
	if _, seen := rr.seen[id]; !seen {
		return ReceiptUnknown, ""
	}
	if rr.included == nil {
		return ReceiptExcluded, rr.why
	}
	return ReceiptExcluded, "your report did not pass the servers' check, or its share for the relay did not open"
}

// ReceiptWhy says in words why a secure-summation round that ended with
// outcome had no sum.
func ReceiptWhy(outcome string) string {
	switch outcome {
	case SecAggRefused:
		return "the round had no sum: the class's privacy ledger refused it (" + outcome + ")"
	case SecAggInvalid:
		return "the round had no sum: the servers found the batch invalid (" + outcome + ")"
	}
	return "the round did not finish (" + outcome + ")"
}
