package wire

import "crypto/sha256"

// ReportReceipt is the receipt of a secure-summation report: the SHA-256
// of its helper share exactly as sealed in the Shares frame. Only the
// volunteer that sealed the share and the relay that received it hold
// these bytes (the relay forwards leader shares only, so the aggregator
// never sees a helper share), and a sealed share is fresh randomness to
// anyone else. The relay answers "was the report with this receipt in
// round r's sum?" (GET /api/receipt, docs/web.md), so a volunteer learns
// about its own report and nobody learns about anyone else's.
func ReportReceipt(helper []byte) [32]byte { return sha256.Sum256(helper) }

// SharesHelper returns the round and the helper share of a Shares frame,
// using the share sizes its own header states; ok is false if b is not a
// well-formed Shares frame.
func SharesHelper(b []byte) (round uint64, helper []byte, ok bool) {
	if header(b, TypeShares) != nil || len(b) < 18 {
		return 0, nil, false
	}
	l, h := uint64(be.Uint32(b[10:])), uint64(be.Uint32(b[14:]))
	if l == 0 || h == 0 || 18+l+h != uint64(len(b)) {
		return 0, nil, false
	}
	return be.Uint64(b[2:]), b[18+l:], true
}
