package wire

// Secure summation frames (protocol 4). Sizes of shares are fixed by the
// round's configuration (shared/roundspec derives them from the announced
// Params); the decoders take them as arguments and refuse anything else.
//
// Shares (type 0x08), volunteer -> relay, one per volunteer and round:
//
//	off     size  field
//	0       2     header (version, type 0x08)
//	2       8     round      u64 (>= 1)
//	10      4     leaderLen  u32 (must equal the round's sealed leader share size)
//	14      4     helperLen  u32 (must equal the round's sealed helper share size)
//	18      L     leader     the leader's input share sealed to the aggregator
//	18+L    H     helper     the helper's input share sealed to the relay
//
// SecAggBatch (type 0x09), relay -> aggregator, the round's reports:
//
//	0       2     header (type 0x09)
//	2       8     round
//	10      4     reports    u32 (reports in the batch, 1 .. quota)
//	14      4     checkedIn  u32
//	18      4     population u32
//	22      4     shareLen   u32 (sealed leader share size)
//	26      R*S   leader shares, in the helper's order
//	..      4     prepLen    u32
//	..      P     the helper's prepare shares (secagg 'P' message)
//
// SecAggPrep (type 0x0A), aggregator -> relay, the answer to a batch:
//
//	0       2     header (type 0x0A)
//	2       8     round
//	10      1     status     u8 (BatchStatus: ok, refused, invalid)
//	11      4     msgLen     u32 (0 unless ok)
//	15      M     the leader's prepare messages (secagg 'M' message)
//
// SecAggAggregate (type 0x0B), relay -> aggregator:
//
//	0       2     header (type 0x0B)
//	2       8     round
//	10      4     len        u32
//	14      A     the helper's noised aggregate share (secagg 'A' message)
const (
	TypeShares          Type = 0x08
	TypeSecAggBatch     Type = 0x09
	TypeSecAggPrep      Type = 0x0A
	TypeSecAggAggregate Type = 0x0B
)

// MaxSecAggPayload bounds any length field of a secure-summation frame
// (1 GiB): a decoder never trusts a length before checking it against the
// frame it holds.
const MaxSecAggPayload = 1 << 30

// Shares is one volunteer's report in secure summation.
type Shares struct {
	Round  uint64
	Leader []byte // sealed to the aggregator (aliases the input after ParseShares)
	Helper []byte // sealed to the relay (aliases the input after ParseShares)
}

// SharesSize is the size of a Shares frame with sealed shares of the given
// sizes.
func SharesSize(leaderLen, helperLen int) int { return 18 + leaderLen + helperLen }

// MarshalBinary encodes the frame.
func (s *Shares) MarshalBinary() ([]byte, error) {
	if s.Round < 1 || len(s.Leader) == 0 || len(s.Helper) == 0 || len(s.Leader) > MaxSecAggPayload || len(s.Helper) > MaxSecAggPayload {
		return nil, malformed(ErrValue, "shares: round %d, %d and %d bytes", s.Round, len(s.Leader), len(s.Helper))
	}
	b := make([]byte, SharesSize(len(s.Leader), len(s.Helper)))
	putHeader(b, TypeShares)
	be.PutUint64(b[2:], s.Round)
	be.PutUint32(b[10:], uint32(len(s.Leader)))
	be.PutUint32(b[14:], uint32(len(s.Helper)))
	copy(b[18:], s.Leader)
	copy(b[18+len(s.Leader):], s.Helper)
	return b, nil
}

// ParseShares decodes a Shares frame whose sealed shares must have exactly
// leaderLen and helperLen bytes.
func ParseShares(b []byte, leaderLen, helperLen int) (*Shares, error) {
	if err := header(b, TypeShares); err != nil {
		return nil, err
	}
	if err := exactLen(b, uint64(SharesSize(leaderLen, helperLen)), "shares"); err != nil {
		return nil, err
	}
	s := &Shares{Round: be.Uint64(b[2:])}
	if s.Round < 1 {
		return nil, malformed(ErrValue, "shares round must be >= 1")
	}
	if l, h := be.Uint32(b[10:]), be.Uint32(b[14:]); int64(l) != int64(leaderLen) || int64(h) != int64(helperLen) {
		return nil, malformed(ErrValue, "shares of %d and %d bytes, the round's are %d and %d", l, h, leaderLen, helperLen)
	}
	s.Leader = b[18 : 18+leaderLen]
	s.Helper = b[18+leaderLen:]
	return s, nil
}

// SecAggBatch is what the relay forwards to the aggregator after preparing
// its own shares.
type SecAggBatch struct {
	Round                          uint64
	Reports, CheckedIn, Population uint32
	Leader                         [][]byte // sealed leader shares, one per report (alias the input)
	Prep                           []byte   // the helper's prepare shares (alias the input)
}

// MarshalBinary encodes the frame; every leader share must have the same
// length.
func (s *SecAggBatch) MarshalBinary() ([]byte, error) {
	n := len(s.Leader)
	if s.Round < 1 || n < 1 || uint64(n) != uint64(s.Reports) || len(s.Prep) > MaxSecAggPayload {
		return nil, malformed(ErrValue, "secagg batch: round %d, %d shares for %d reports", s.Round, n, s.Reports)
	}
	sl := len(s.Leader[0])
	if sl < 1 || uint64(sl)*uint64(n) > MaxSecAggPayload {
		return nil, malformed(ErrLimit, "secagg batch: %d shares of %d bytes", n, sl)
	}
	b := make([]byte, 26+n*sl+4+len(s.Prep))
	putHeader(b, TypeSecAggBatch)
	be.PutUint64(b[2:], s.Round)
	be.PutUint32(b[10:], s.Reports)
	be.PutUint32(b[14:], s.CheckedIn)
	be.PutUint32(b[18:], s.Population)
	be.PutUint32(b[22:], uint32(sl))
	off := 26
	for i, l := range s.Leader {
		if len(l) != sl {
			return nil, malformed(ErrValue, "secagg batch: share %d has %d bytes, want %d", i, len(l), sl)
		}
		off += copy(b[off:], l)
	}
	be.PutUint32(b[off:], uint32(len(s.Prep)))
	copy(b[off+4:], s.Prep)
	return b, nil
}

// ParseSecAggBatch decodes a SecAggBatch frame whose leader shares must
// have shareLen bytes each and whose report count must lie in
// [1, maxReports].
func ParseSecAggBatch(b []byte, shareLen, maxReports int) (*SecAggBatch, error) {
	if err := header(b, TypeSecAggBatch); err != nil {
		return nil, err
	}
	if len(b) < 30 {
		return nil, malformed(ErrTruncated, "secagg batch: %d bytes", len(b))
	}
	s := &SecAggBatch{Round: be.Uint64(b[2:]), Reports: be.Uint32(b[10:]), CheckedIn: be.Uint32(b[14:]), Population: be.Uint32(b[18:])}
	if s.Round < 1 {
		return nil, malformed(ErrValue, "secagg batch round must be >= 1")
	}
	if s.Reports < 1 || int64(s.Reports) > int64(maxReports) {
		return nil, malformed(ErrLimit, "secagg batch of %d reports, want 1 .. %d", s.Reports, maxReports)
	}
	if got := be.Uint32(b[22:]); int64(got) != int64(shareLen) || shareLen < 1 {
		return nil, malformed(ErrValue, "secagg batch shares of %d bytes, the round's are %d", got, shareLen)
	}
	end := 26 + uint64(s.Reports)*uint64(shareLen)
	if end+4 > uint64(len(b)) {
		return nil, malformed(ErrTruncated, "secagg batch: %d bytes, need %d for %d shares", len(b), end+4, s.Reports)
	}
	s.Leader = make([][]byte, s.Reports)
	for i := range s.Leader {
		off := 26 + i*shareLen
		s.Leader[i] = b[off : off+shareLen : off+shareLen]
	}
	pl := be.Uint32(b[end:])
	if err := exactLen(b, end+4+uint64(pl), "secagg batch"); err != nil {
		return nil, err
	}
	s.Prep = b[end+4:]
	return s, nil
}

// SecAggPrep is the aggregator's answer to a SecAggBatch.
type SecAggPrep struct {
	Round  uint64
	Status uint8  // BatchStatusOK, BatchStatusRefused or BatchStatusInvalid
	Msg    []byte // the leader's prepare messages (ok only)
}

// MarshalBinary encodes the frame.
func (s *SecAggPrep) MarshalBinary() ([]byte, error) {
	if s.Round < 1 || (s.Status == BatchStatusOK) != (len(s.Msg) > 0) || len(s.Msg) > MaxSecAggPayload || !validSecAggStatus(s.Status) {
		return nil, malformed(ErrValue, "secagg prep: round %d, status %d, %d bytes", s.Round, s.Status, len(s.Msg))
	}
	b := make([]byte, 15+len(s.Msg))
	putHeader(b, TypeSecAggPrep)
	be.PutUint64(b[2:], s.Round)
	b[10] = s.Status
	be.PutUint32(b[11:], uint32(len(s.Msg)))
	copy(b[15:], s.Msg)
	return b, nil
}

func validSecAggStatus(s uint8) bool {
	return s == BatchStatusOK || s == BatchStatusRefused || s == BatchStatusInvalid
}

// ParseSecAggPrep decodes a SecAggPrep frame.
func ParseSecAggPrep(b []byte) (*SecAggPrep, error) {
	if err := header(b, TypeSecAggPrep); err != nil {
		return nil, err
	}
	if len(b) < 15 {
		return nil, malformed(ErrTruncated, "secagg prep: %d bytes", len(b))
	}
	s := &SecAggPrep{Round: be.Uint64(b[2:]), Status: b[10]}
	if s.Round < 1 || !validSecAggStatus(s.Status) {
		return nil, malformed(ErrValue, "secagg prep: round %d, status %d", s.Round, s.Status)
	}
	if err := exactLen(b, 15+uint64(be.Uint32(b[11:])), "secagg prep"); err != nil {
		return nil, err
	}
	s.Msg = b[15:]
	if (s.Status == BatchStatusOK) != (len(s.Msg) > 0) {
		return nil, malformed(ErrValue, "secagg prep: status %d with %d message bytes", s.Status, len(s.Msg))
	}
	return s, nil
}

// SecAggAggregate carries the helper's noised aggregate share.
type SecAggAggregate struct {
	Round uint64
	Share []byte
}

// MarshalBinary encodes the frame.
func (s *SecAggAggregate) MarshalBinary() ([]byte, error) {
	if s.Round < 1 || len(s.Share) < 1 || len(s.Share) > MaxSecAggPayload {
		return nil, malformed(ErrValue, "secagg aggregate: round %d, %d bytes", s.Round, len(s.Share))
	}
	b := make([]byte, 14+len(s.Share))
	putHeader(b, TypeSecAggAggregate)
	be.PutUint64(b[2:], s.Round)
	be.PutUint32(b[10:], uint32(len(s.Share)))
	copy(b[14:], s.Share)
	return b, nil
}

// ParseSecAggAggregate decodes a SecAggAggregate frame.
func ParseSecAggAggregate(b []byte) (*SecAggAggregate, error) {
	if err := header(b, TypeSecAggAggregate); err != nil {
		return nil, err
	}
	if len(b) < 15 {
		return nil, malformed(ErrTruncated, "secagg aggregate: %d bytes", len(b))
	}
	s := &SecAggAggregate{Round: be.Uint64(b[2:])}
	if s.Round < 1 {
		return nil, malformed(ErrValue, "secagg aggregate round must be >= 1")
	}
	if err := exactLen(b, 14+uint64(be.Uint32(b[10:])), "secagg aggregate"); err != nil {
		return nil, err
	}
	s.Share = b[14:]
	return s, nil
}
